//! RDMA NICs for rucx: libibverbs and librdmacm (through `rdma-sys`) as an
//! RDMA provider (the `rucx-rdma` [`Provider`](rucx_rdma::Provider),
//! [`Device`](rucx_rdma::Device) and [`Verbs`](rucx_rdma::Verbs) traits),
//! so that the RC transport runs on InfiniBand, RoCE and iWARP NICs as
//! `rc_verbs`.
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
//!   interface has an IP address (IPv4 first), named `<device>:<port>`
//!   (`rxe0:1`, `mlx5_0:1`): the connection manager needs that address.
//!
//! # What it does not do
//!
//! Nothing has run on a device yet: the machines this is built on have no
//! RDMA hardware and no kernel RDMA, so every path that needs a device is
//! tested only inside a guest with soft-RoCE (see the tests marked so).
//! A device opens (protection domains, memory regions with access rights
//! mapped to IBV_ACCESS_*, the largest inline send probed with a
//! throw-away queue pair), but its contexts (completion queues, queue
//! pairs, connections) cannot be opened yet.
//!
//! # Map
//!
//! * `ffi`: owned libibverbs handles (device list, device context) and
//!   error helpers;
//! * [`discover`]: devices, ports, GIDs, capabilities;
//! * `res`: owned protection domains, regions, completion channels and
//!   queues, shared receive queues, queue pairs, each holding its parents;
//! * `device`: [`VerbsDevice`], protection domains and regions by id;
//! * `provider`: [`VerbsProvider`].

#[cfg(feature = "sys")]
#[allow(dead_code)] // The port is used by the contexts, which come next.
mod device;
#[cfg(feature = "sys")]
pub mod discover;
#[cfg(feature = "sys")]
#[allow(dead_code)] // The async fd is read by the contexts, which come next.
mod ffi;
#[cfg(feature = "sys")]
mod provider;
#[cfg(feature = "sys")]
// Completion queues, shared receive queues and queue pairs are used by
// the per-worker contexts, which come next.
#[allow(dead_code)]
mod res;

#[cfg(feature = "sys")]
pub use device::VerbsDevice;
#[cfg(feature = "sys")]
pub use provider::{VerbsProvider, PROVIDER};

/// The RC transport over this provider (`rc_verbs`), for the transport
/// registry.
#[cfg(feature = "sys")]
pub static COMPONENT: rucx_rdma::RcComponent = rucx_rdma::RcComponent::new(&PROVIDER);
