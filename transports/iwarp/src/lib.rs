//! Userspace iWARP for rucx: the iWARP wire protocol over ordinary
//! non-blocking TCP sockets, as an RDMA provider (the `rucx-rdma`
//! [`Provider`](rucx_rdma::Provider), [`Device`](rucx_rdma::Device) and
//! [`Verbs`](rucx_rdma::Verbs) traits).
//!
//! # What it does
//!
//! * Speaks MPA (RFC 5044) with RFC 6581's enhanced connection setup
//!   (IRD/ORD word, peer-to-peer mode with a ready-to-receive message),
//!   DDP (RFC 5041) and RDMAP (RFC 5040): SEND (with Invalidate and with
//!   Solicited Event), RDMA WRITE, RDMA READ with ORD/IRD limits, and
//!   Terminate, generated and parsed. FPDUs carry CRC32c when either side
//!   asks, and never markers; each FPDU fits one TCP segment (MULPDU from
//!   the connection's current MSS, read again before each message longer
//!   than one FPDU, as Linux raises it while the window opens). The wire
//!   behaviour follows Linux siw's, so the two interoperate (siw as
//!   initiator uses no peer-to-peer mode; as responder we honour whatever
//!   it asks).
//! * Connections use Reno congestion control unless told otherwise
//!   (`RUCX_IWARP_CONGESTION`), as iWARP NICs' own TCP does, whatever the
//!   system's default is; kernel buffer sizes are configurable too.
//! * Every connection has TCP keepalive (`RUCX_IWARP_KEEPIDLE`,
//!   `KEEPINTVL`, `KEEPCNT`) and a user timeout (`RUCX_IWARP_USER_TIMEOUT`),
//!   so that a peer that disappears, idle or with data in flight, ends the
//!   connection (a socket error, as a reset does) in bounded time.
//! * One device per network interface that is up (`iwarp_<netdev>`), on
//!   its IPv4 or IPv6 address: the first family of `RUCX_IWARP_AF_PRIO`
//!   (default `inet,inet6`) the interface has an address of; a device
//!   connects only to peers of its family. IPv6 link-local addresses are
//!   not used; protection
//!   domains and a region table shared by every context of the device;
//!   STags `(slot + 1) << 8 | key` whose key byte changes on every reuse.
//! * Shared receive queues: a queue pair attached to one takes the
//!   receive of each incoming SEND from it (the one posted last), so one
//!   pool of buffers serves every connection of a context.
//! * A queue pair holds its send batch (headers, inline copies, iovecs)
//!   only while it has FPDUs to write; idle ones hold none.
//! * Data moves without copies where it can: sends and Read Responses are
//!   written with `sendmsg` straight from the source memory; payloads are
//!   read with `readv` straight into the target region, READ sink or
//!   receive buffer.
//! * Everything a peer sends is checked before memory is touched: STag,
//!   protection domain, rights and bounds of tagged segments; MSN, MO and
//!   room of untagged ones; a bad one ends the connection with the
//!   Terminate RFC 5040 §7 and siw prescribe.
//!
//! # What it does not do
//!
//! No markers, no MPA revision 0, no RFC 7306 atomics or immediate data,
//! no memory windows, no IPv6 link-local addresses. Shared receive queues
//! take one scatter entry per receive. No threads by default: a
//! context moves only inside [`Verbs::progress`](rucx_rdma::Verbs::progress)
//! (and `poll_cq`, `post_send`); with `RUCX_IWARP_THREAD=y` each context
//! has an engine thread that moves it whenever the worker does not
//! (`engine_thread`), so peers' WRITEs and READs are served as a NIC
//! would serve them. Completion order across kinds follows
//! siw: a SEND or WRITE completes when its last byte is handed to the
//! socket, a READ when its data is placed, so a SEND posted after a READ
//! may complete first; local protection errors complete at once.
//!
//! # Map
//!
//! * `wire`: the sans-IO codecs (MPA frames, FPDUs, DDP, RDMAP,
//!   Terminate, CRC32c);
//! * `config`: `RUCX_IWARP_*`;
//! * `provider`, `device`, `mr`: devices, protection domains, regions;
//! * `shared`: a device's limits and what its contexts share;
//! * `engine`: contexts, queue pairs, connection setup, send and receive
//!   paths.

pub mod config;
mod device;
mod engine;
mod engine_duty;
mod engine_thread;
mod mr;
mod provider;
mod shared;
mod stag;
uct::ucs::internal_mod!(
    /// Wire codecs (MPA, DDP, RDMAP, Terminate, CRC): public for fuzz
    /// targets and tests (the `fuzzing` feature, or `--cfg fuzzing`),
    /// internal otherwise.
    wire
);

pub use config::{IwarpConfig, IWARP_TABLE};
pub use device::IwarpDevice;
pub use provider::{IwarpProvider, PROVIDER};

/// The RC transport over this provider (`rc_iwarp`), for the transport
/// registry.
pub static COMPONENT: rucx_rdma::RcComponent = rucx_rdma::RcComponent::new(&PROVIDER);
