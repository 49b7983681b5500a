//! TCP transport for rucx: active messages over non-blocking TCP sockets,
//! and `put_zcopy` emulated over them.
//!
//! # What it does
//!
//! One [`uct::Component`] ([`COMPONENT`], named `tcp`) with one memory
//! domain listing a resource per network interface that is up (loopback
//! included) and has an IPv4 or IPv6 address of a family in
//! `RUCX_TCP_AF_PRIO` (default `inet,inet6`, as UCX's `UCX_TCP_AF_PRIO`).
//! An iface listens on its interface's first address of the first family
//! of that list the interface has, and endpoints connect to a remote
//! iface's address (connect-to-iface). IPv6 link-local addresses are not
//! used (no scope id travels in the addresses).
//!
//! * Connections: one full-duplex TCP connection per pair of ifaces, shared
//!   by all endpoints between them in both directions: an endpoint reuses
//!   the connection the peer opened to us, so that replies ride the same
//!   socket (and its ACKs) as requests. The connecting side sends a hello
//!   naming its own listening address; the accepting side answers
//!   `ACCEPT`, or `REJECT` when both sides connected at once and its own
//!   connection wins (the one opened by the smaller address). Frames wait
//!   in the connection's buffer until it is accepted, so nothing is ever
//!   sent on a connection that loses, and messages keep their order.
//!   Connections stay until the iface is closed or they fail. All messages
//!   from one peer iface arrive under one [`uct::SrcId`].
//! * Reachability follows `uct::ip_addr`: an IPv4 iface never tries an
//!   IPv6 peer, nor the other way round; a peer of this host and network
//!   namespace (same host id) is reached over the kernel's loopback from
//!   any device, which [`uct::Iface::loops_back`] says, so that the
//!   protocol layer does not split rendezvous data over two devices that
//!   share that one path.
//! * Framing: frames of a 5-byte header (`am_id`, little-endian `u32`
//!   length) and the payload; see `wire.rs`. A bad hello, a frame longer
//!   than the iface's largest frame, or an unknown id fails that connection
//!   only.
//! * Sending: `am_short`/`am_bcopy` write at once (`send`, or `sendmsg` from
//!   the caller's parts above 2 KiB) and keep what the socket did not take
//!   in the connection's buffer (`Done`); later copy sends are appended to
//!   that buffer while it has room, otherwise `NoResource`. Until a peer
//!   in another process accepts the connection every send is `NoResource`
//!   (the pending queue holds it, as UCX's tcp does), so that a send
//!   reported done has reached the kernel and outlives its process; to an
//!   iface of this process, which ends with it anyway, copy sends are
//!   buffered until then, so that one thread can drive both ends. `am_zcopy`
//!   writes from the caller's memory and, if the socket takes part,
//!   finishes from `progress` (`InFlight`). `EPOLLOUT` is watched only
//!   while something is buffered.
//! * Batching (`RUCX_TCP_TX_BATCH`, on by default): a copy send of at most
//!   1 KiB to a connection that already wrote to its socket since the
//!   iface's last `progress` answers `NoResource`, and the pending queue
//!   holds it; `progress` hands it back, and the protocol layer resumes
//!   what waited with the iface corked ([`uct::Iface::cork`]), so a burst
//!   leaves in one `sendmsg`. While corked, small copy sends join the
//!   backlog at once (`Done`) and `uncork` (or the next `progress`)
//!   writes them.
//! * Receiving: every connection reads into its own buffer (grown up to the
//!   largest frame when needed) and hands complete frames to the sink
//!   without copying them again. A message of 16 KiB or more whose data is
//!   not all here yet is first offered to the sink
//!   (`AmSink::am_begin`): if the sink names a place (a receive posted for
//!   it), the rest of the data is received straight from the socket into
//!   that place and reported with `am_end`, saving a copy.
//! * Connection buffers cost what is used: a connection starts with no
//!   receive buffer and no send backlog; the receive buffer is allocated
//!   (never zeroed) at the first read, small at first and a segment
//!   (`RUCX_TCP_RX_SEG_SIZE`) once data streams; the backlog only when the
//!   socket does not take a send. A busy connection keeps them from message
//!   to message; the handshake's buffer goes when the connection opens, and
//!   `progress` gives back the buffers of connections quiet for 100-200 ms
//!   by sweeping only the connections that hold some (`idle.rs`). Peers,
//!   endpoints and connections are found by hash map or slot index; with
//!   nothing arriving, `progress` is one `epoll_wait` whatever the number
//!   of connections.
//! * Memory: the memory domain registers memory in a process-wide table
//!   (nothing is pinned: TCP copies through the kernel) and packs keys
//!   that name the registration and the process (host id, pid, a random
//!   nonce). `rkey_unpack` checks only a key's format; the target checks
//!   the rest when a put arrives, so a key from another process (say, an
//!   earlier one on the same port), of an ended registration, outside
//!   the range or without remote write rights writes nothing.
//! * Put (`put_zcopy`), as UCX's tcp emulates it: a PUT frame carries the
//!   destination, the key's fields and the data, written from the caller's
//!   iov like `am_zcopy`. The target receives the data straight from the
//!   socket into the registered memory (what its buffer already holds is
//!   copied), checking the registration again for each piece, and answers
//!   PUT_ACK once the last byte is in. The put completes on that answer
//!   (`InFlight` until then), so a completed put is in the target's
//!   memory: a message sent after it, on any connection, finds the data
//!   there. A refused put completes with `RemoteAccess` (range, rights)
//!   or `InvalidParam` (key not live, or of another process), and the
//!   connection stays usable; `flush` waits for the answers; a failed
//!   connection fails its puts. At most 1024 puts wait for answers per
//!   connection (`NoResource` beyond).
//! * Failure: a peer that closes, resets or breaks the protocol fails only
//!   its own connection: `ep_failed` for the endpoints on it, `src_failed`
//!   for its source; no peer behaviour panics, blocks or stops the iface.
//!   `SIGPIPE` is never raised. A connection not accepted within
//!   `RUCX_TCP_CONN_TIMEOUT` fails. A peer that disappears is noticed in
//!   bounded time: TCP keepalive (`RUCX_TCP_KEEPIDLE`, `KEEPINTVL`,
//!   `KEEPCNT`: 10 s + 3 x 2 s by default) finds an idle one, and the
//!   user timeout (`RUCX_TCP_USER_TIMEOUT`, 30 s) one that leaves sent
//!   data unacknowledged; the kernel's `ETIMEDOUT` then fails the
//!   connection like any socket error (`ConnectionLost`).
//! * Sleeping: the iface owns an epoll set (level-triggered) of all its
//!   sockets; [`uct::Iface::event_fd`] returns it.
//!
//! Limits (defaults; `RUCX_TCP_*` in [`TcpConfig`]): `max_short` 8184
//! bytes, `max_bcopy` 64 KiB (`TX_SEG_SIZE`), `max_zcopy` and
//! `max_put_zcopy` 1 MiB (`MAX_ZCOPY`), `max_hdr` 128, `max_iov` 16. Both
//! sides must use the same limits: a receiver refuses frames above its
//! own.
//!
//! # What it does not do
//!
//! No IPv6 link-local addresses; no `get_zcopy` (rendezvous over TCP pushes with puts), no
//! short or bcopy puts, no atomics; no closing of idle connections; no threads: nothing
//! moves unless `progress` runs (a put's data lands and is answered
//! during the target's `progress`). A put refused midway (its
//! registration ended while the data was arriving) leaves what was
//! already written.
//!
//! # Map
//!
//! * `component.rs`: [`COMPONENT`], the memory domain, [`open_iface`];
//! * `mem.rs`: the registration table and the key operations;
//! * `name.rs`: the name of the component, memory domain and transport;
//! * `rkey.rs`: the packed key layout and its owner;
//! * `config.rs`: [`TcpConfig`] / [`TCP_TABLE`] and the derived limits;
//! * `iface.rs`: the iface state, opening it, socket options, the model;
//! * `ops.rs`: the [`uct::Iface`] operations;
//! * `rma.rs`: puts: posting, acknowledgements both ways, flushes;
//! * `progress.rs`: epoll events, reading and writing, reports to the sink;
//! * `lifecycle.rs`: connect, accept, hello/accept/reject, failure;
//! * `idle.rs`: giving the buffers of quiet connections back;
//! * `conn.rs`: a connection's socket, state and queues;
//! * `tx.rs`: a connection's send backlog;
//! * `rx.rs`: a connection's receive buffer and frame parser;
//! * `rx_put.rs`: the data of a peer's put, into registered memory;
//! * `wire.rs`: frame header, control frames, the hello (`wire/hello.rs`),
//!   put frames (`wire/put.rs`);
//! * `slots.rs`: the index table behind endpoint and source ids;
//! * `sys.rs`: the libc calls.

mod component;
mod config;
mod conn;
mod idle;
mod iface;
mod lifecycle;
mod local;
mod mem;
mod name;
mod ops;
mod peers;
mod progress;
mod rkey;
mod rma;
mod rx;
mod rx_am;
mod rx_put;
mod slots;
// The socket helpers live in ucs, shared with the other network transports.
use uct::ucs::sock as sys;
mod tx;
mod wire;

#[cfg(test)]
mod tests;

pub use component::{open_iface, TcpComponent, COMPONENT};
pub use config::{PortRange, TcpConfig, TCP_TABLE};
