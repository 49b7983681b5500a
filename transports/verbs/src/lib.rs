//! RDMA NICs for rucx: libibverbs and librdmacm (through `rdma-sys`) as an
//! RDMA provider (the `rucx-rdma` [`Provider`](rucx_rdma::Provider),
//! [`Device`](rucx_rdma::Device) and [`Verbs`](rucx_rdma::Verbs) traits),
//! meant to carry the RC transport over InfiniBand, RoCE and iWARP NICs
//! as `rc_verbs`.
//!
//! # Building
//!
//! Everything here is behind this crate's `sys` feature, which the root
//! package's `verbs` feature turns on: `rdma-sys` runs bindgen on
//! rdma-core's headers at build time (libibverbs-dev, librdmacm-dev,
//! libclang-dev). The crate is a workspace member, so that
//! `cargo clippy --workspace --features verbs` lints it, and a member is
//! built by every `--workspace` command whatever `default-members` says;
//! without `sys` it is therefore empty, and the default commands
//! (`cargo build/test/clippy --workspace`) need no rdma-core.
//!
//! # What it does
//!
//! * Discovery ([`discover`]): every device of `ibv_get_device_list` with
//!   its capabilities, ports (link layer, state, active MTU) and GID
//!   table entries (type, RoCE v2 included, and network interface). No
//!   device, or no kernel RDMA support at all, is an empty list: a
//!   machine without RDMA lists no `rc_verbs` resource and pays one look
//!   at sysfs.
//! * The provider offers one device per active port whose network
//!   interface has an IP address (IPv4 first) and is not a loopback
//!   interface, named `<device>:<port>` (`rxed:1`, `mlx5_0:1`): the
//!   connection manager needs that address.
//! * A device ([`VerbsDevice`]) holds protection domains and memory
//!   regions (access rights mapped to IBV_ACCESS_*) for all its contexts;
//!   its largest inline send is probed with a throw-away queue pair.
//! * A context ([`VerbsContext`], one per worker): completion queues on
//!   one completion channel, shared receive queues, RC queue pairs,
//!   connections through one librdmacm event channel (listen, connect,
//!   accept and reject with private data, disconnect), SEND (inline
//!   whenever the data fits the queue pair's inline size), SEND with
//!   Invalidate, RDMA WRITE, RDMA READ, 64-bit fetch-and-add and
//!   compare-and-swap, receives on a queue pair or a shared queue,
//!   completions with their statuses mapped to the trait's (retries
//!   exceeded and other broken-connection statuses are
//!   [`WcStatus::FatalErr`](rucx_rdma::WcStatus::FatalErr), with the exact
//!   status in a debug log line), and asynchronous events (QP fatal,
//!   request and access errors; the port going down or a device fatal
//!   error is fatal for every queue pair).
//! * Queue pairs exist before their connection (as the trait has it), so
//!   they are not the connection manager's: the connection carries their
//!   number, and the provider moves them to INIT at creation, to RTR and
//!   RTS with the attributes `rdma_init_qp_attr` gives, to ERR when the
//!   connection ends. Sends posted before RTS wait in the provider
//!   (`deferred`) and go out once it is reached.
//! * One fd to sleep on per context: an epoll set of the completion
//!   channel, the connection manager's channel, the device's async fd
//!   and an eventfd for asynchronous events routed to this context.
//!   `arm` requests a notification on every queue, then polls each once
//!   (a completion found is kept for `poll_cq`) and answers
//!   [`Armed::Busy`](uct::Armed::Busy) when anything is pending.
//!
//! # What it does not do
//!
//! Nothing has run on a NIC: the machines this is built on have no RDMA
//! hardware and no kernel RDMA, so every path that needs a device is
//! tested only inside a guest with soft-RoCE (`tests/device.rs`,
//! `tests/device_queues.rs`, `tests/rc_conformance.rs`, run by
//! `tests/verbs_guest/suite.sh`; they say `skipped: no RDMA device`
//! elsewhere). No port on a loopback interface is offered: the kernel's
//! connection manager cannot resolve a route there (soft-RoCE's `rxe0` on
//! `lo`). iWARP NICs are listed but
//! untested: their connection manager may want queue pairs it owns. No
//! UD, XRC, memory windows, on-demand paging, immediate data or
//! solicited-only notification; at most 32 scatter/gather entries per
//! request; private data limited to 56 bytes (InfiniBand's request limit,
//! which RoCE shares).
//!
//! # Map
//!
//! * `ffi`: owned libibverbs handles (device list, device context) and
//!   error helpers;
//! * [`discover`]: devices, ports, GIDs, capabilities;
//! * `res`: owned protection domains, regions, completion channels and
//!   queues, shared receive queues, queue pairs, each holding its parents;
//! * `device`: [`VerbsDevice`], protection domains and regions by id;
//! * `provider`: [`VerbsProvider`];
//! * `context`: [`VerbsContext`], the `Verbs` implementation (`context::wait`:
//!   arming, completion notifications, kept sends);
//! * `wr`, `wc`: work requests and completions; `deferred`: sends
//!   posted before their connection is up;
//! * `cm`: connections (librdmacm) and their events; `qpstate`: queue
//!   pair state changes; `addr`: socket addresses;
//! * `events`: asynchronous events and the context's wake-up fd.

#[cfg(feature = "sys")]
mod addr;
#[cfg(feature = "sys")]
mod cm;
#[cfg(feature = "sys")]
mod context;
#[cfg(feature = "sys")]
mod deferred;
#[cfg(feature = "sys")]
mod device;
#[cfg(feature = "sys")]
pub mod discover;
#[cfg(feature = "sys")]
mod events;
#[cfg(feature = "sys")]
mod ffi;
#[cfg(feature = "sys")]
mod provider;
#[cfg(feature = "sys")]
mod qpstate;
#[cfg(feature = "sys")]
mod res;
#[cfg(feature = "sys")]
mod wc;
#[cfg(feature = "sys")]
mod wr;

#[cfg(feature = "sys")]
pub use context::VerbsContext;
#[cfg(feature = "sys")]
pub use device::VerbsDevice;
#[cfg(feature = "sys")]
pub use provider::{VerbsProvider, PROVIDER};

/// The RC transport over this provider (`rc_verbs`), for the transport
/// registry.
#[cfg(feature = "sys")]
pub static COMPONENT: rucx_rdma::RcComponent = rucx_rdma::RcComponent::new(&PROVIDER);
