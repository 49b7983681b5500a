//! TCP transport for rucx: active messages over non-blocking TCP sockets.
//!
//! # What it does
//!
//! One [`uct::Component`] ([`COMPONENT`], named `tcp`) with one memory
//! domain listing a resource per IPv4 network interface that is up
//! (loopback included). An iface listens on its interface's address; an
//! endpoint is a TCP connection to a remote iface (connect-to-iface, like
//! UCX): the endpoint only sends on it, the remote iface accepts it and only
//! receives on it, reporting its messages under one [`uct::SrcId`].
//!
//! * Framing: a 12-byte handshake (magic, version), then frames of a 5-byte
//!   header (`am_id`, little-endian `u32` length) and the payload; see
//!   `wire.rs`. A frame longer than the iface's largest frame, an id at or
//!   above [`uct::AM_ID_MAX`] or a bad handshake fails that connection only.
//! * Sending: `am_short`/`am_bcopy` write at once (`send`, or `sendmsg` from
//!   the caller's parts above 2 KiB) and keep what the socket did not take
//!   in the endpoint's buffer (`Done`); later copy sends are appended to that
//!   buffer while it has room, otherwise `NoResource`. `am_zcopy` writes
//!   from the caller's memory and, if the socket takes part, finishes from
//!   `progress` (`InFlight`). `EPOLLOUT` is watched only while something is
//!   buffered.
//! * Receiving: every connection reads into its own buffer (grown up to the
//!   largest frame when needed) and hands complete frames to the sink
//!   without copying them again.
//! * Failure: a peer that closes, resets or breaks the protocol fails only
//!   its own endpoint (`ep_failed`) or source (`src_failed`); no peer
//!   behaviour panics, blocks or stops the iface. `SIGPIPE` is never raised.
//! * Sleeping: the iface owns an epoll set (level-triggered) of all its
//!   sockets; [`uct::Iface::event_fd`] returns it.
//!
//! Limits (defaults; `RUCX_TCP_*` in [`TcpConfig`]): `max_short` 8184
//! bytes, `max_bcopy` 64 KiB (`TX_SEG_SIZE`), `max_zcopy` 1 MiB
//! (`MAX_ZCOPY`), `max_hdr` 128, `max_iov` 16. Both sides must use the
//! same limits: a receiver refuses frames above its own.
//!
//! # What it does not do
//!
//! No IPv6, no put/get emulation, no connect-to-endpoint mode, no receive
//! into caller memory, no threads: nothing moves unless `progress` runs.
//!
//! # Map
//!
//! * `component.rs`: [`COMPONENT`], the memory domain, [`open_iface`];
//! * `config.rs`: [`TcpConfig`] / [`TCP_TABLE`] and the derived limits;
//! * `iface.rs`: the iface state, opening it, socket options, the model;
//! * `ops.rs`: the [`uct::Iface`] operations;
//! * `progress.rs`: epoll events, accepting, failures, reports to the sink;
//! * `ep.rs`: an endpoint's socket and backlog (sending);
//! * `rx.rs`: an accepted connection's buffer and frame parser (receiving);
//! * `wire.rs`: handshake and frame header;
//! * `addr.rs`: device/iface addresses, host id, reachability;
//! * `netif.rs`: network interfaces and link speed;
//! * `slots.rs`: the index table behind endpoint and source ids;
//! * `sys.rs`: the libc calls.

// The layer names, usable as `uct::...` in every module.
extern crate rucx_uct as uct;

mod addr;
mod component;
mod config;
mod conn;
mod iface;
mod lifecycle;
mod netif;
mod ops;
mod progress;
mod rx;
mod slots;
mod sys;
mod tx;
mod wire;

#[cfg(test)]
mod tests;

pub use component::{open_iface, TcpComponent, COMPONENT};
pub use config::{PortRange, TcpConfig, TCP_TABLE};
