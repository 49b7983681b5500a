//! The RC transport: reliable-connected queue pairs of any [`Provider`] as
//! a uct transport named `rc_<provider>` (`rc_iwarp` over the userspace
//! iWARP engine).
//!
//! # What it does
//!
//! * One memory domain per device of the provider (named after the device,
//!   e.g. `iwarp_lo`), registering memory regions in one protection domain;
//!   packed keys carry the steering tag (`md.rs`).
//! * An iface listens through the provider's connection manager on its
//!   device's address. Between two ifaces there is one connection (a
//!   queue pair each side), used in both directions and shared by every
//!   endpoint between them (`conn.rs`): `ep_create` reuses the connection
//!   to the remote iface if there is one (opened by either side), else
//!   connects with private data naming the buffer size, the windows each
//!   side committed and may grow to, and the initiator's listening
//!   address (`wire.rs`). When
//!   both sides connect at once, both keep the connection opened by the
//!   smaller address, and an endpoint that already sent on the other one
//!   moves over after a zero-length READ proves its messages arrived, so
//!   ordering holds. All connections from one peer iface deliver under one
//!   [`uct::SrcId`]. Sharing one TCP stream matters: replies then carry
//!   the acknowledgements of requests.
//! * Active messages are SENDs: `am_short` inline (copied at post time),
//!   `am_bcopy` from a registered copy buffer, `am_zcopy` with the caller's
//!   memory in the gather list. Every SEND needs a credit (iWARP has no
//!   receiver-not-ready retry). Receives come from one shared receive
//!   queue per iface, fed by a pool of registered buffers that grows in
//!   chunks up to `RUCX_RC_RX_POOL_MAX` (`rxpool.rs`); each connection's
//!   peer gets a window of credits committed in that pool: small at
//!   first (`RUCX_RC_RX_WINDOW`), doubled up to `RUCX_RC_RX_QUEUE_LEN`
//!   each time the peer spends its last credit (`credits.rs`). Credits
//!   come back in the header of every message the other way, or in a
//!   grant message of their own. A connection the pool cannot take fails
//!   alone: `ep_create` refuses it, or the peer's request is rejected.
//!   Without a credit, a send queue entry or a copy buffer the operation
//!   is refused (`NoResource`) and `pending_add` reports the endpoint
//!   when it can take more.
//! * `put_zcopy` is an RDMA WRITE from the caller's memory; `get_zcopy` an
//!   RDMA READ per iov entry into the caller's memory, registered for that
//!   READ alone with remote write rights (a Read Response is written by
//!   the peer, as iWARP requires); both complete when the provider
//!   completes them (a WRITE once sent, a READ once its data is in).
//!   `flush` posts a zero-length READ, which completes only after every
//!   earlier WRITE was placed at the target.
//! * Atomics (`amo.rs`), where the device has them
//!   ([`DeviceAttr::atomics`](crate::DeviceAttr::atomics)): 64-bit
//!   fetch-and-add and compare-and-swap work requests; a posted add is a
//!   fetch-and-add into a copy buffer. The memory domain says so
//!   ([`uct::MemoryDomain::atomic_caps`]) and registers memory with
//!   remote atomic rights.
//! * Failures: a rejected or broken connection, a Terminate from the peer
//!   (for example for a forged or stale key) or bytes that break this
//!   protocol fail that endpoint (`ep_failed`) or end that source
//!   (`src_failed`); operations in flight complete with the error.
//!
//! # What it does not do
//!
//! No atomics on a device without them (the iWARP provider has none; the
//! protocol layer emulates them), no 32-bit atomics nor `and`, `or`,
//! `xor`, `swap` (verbs have only 64-bit fetch-and-add and
//! compare-and-swap), no closing of idle connections (nor of the connection that lost
//! a simultaneous connect), no shrinking of a window that grew, nor of
//! the receive pool (a receive posted on a shared queue cannot be taken
//! back), no threads: over the userspace iWARP engine a peer's WRITE or
//! READ into this process's memory is served when this iface's `progress`
//! runs (a NIC, or the kernel's soft-RoCE, serves them and device atomics
//! on its own: only accepting a connection takes `progress`).

mod amo;
mod bufs;
mod config;
mod conn;
mod credits;
mod iface;
mod md;
mod ops;
mod progress;
mod rxpool;
uct::ucs::internal_mod!(
    /// The connection handshake and header codecs: public for fuzz targets
    /// (the `fuzzing` feature, or `--cfg fuzzing`), internal otherwise.
    wire
);

pub use config::{RcConfig, RC_TABLE};

use crate::provider::Provider;
use uct::ucs::config::ConfigTable;
use uct::ucs::Result;
use uct::{Component, MemoryDomain};

/// The RC transport over one provider: a uct component.
#[derive(Debug)]
pub struct RcComponent {
    provider: &'static dyn Provider,
}

impl RcComponent {
    /// The component for `provider`.
    pub const fn new(provider: &'static dyn Provider) -> RcComponent {
        RcComponent { provider }
    }
}

impl Component for RcComponent {
    fn name(&self) -> &'static str {
        "rc"
    }

    /// One memory domain per device the provider finds; none (not an
    /// error) when it finds none. A bad `RUCX_RC_*` value is an error.
    fn md_open(&self) -> Result<Vec<Box<dyn MemoryDomain>>> {
        let config = RcConfig::from_env()?;
        let mut out: Vec<Box<dyn MemoryDomain>> = Vec::new();
        for dev in self.provider.devices()? {
            match md::RcMd::open(self.provider, &dev.name, &config) {
                Ok(md) => out.push(Box::new(md)),
                Err(e) => tracing::debug!(dev = %dev.name, error = %e, "rc: device not opened"),
            }
        }
        Ok(out)
    }

    /// `rc` stands for every RC transport, whatever its provider.
    fn tl_aliases(&self, _tl_name: &str) -> &'static [&'static str] {
        &["rc"]
    }

    fn config_tables(&self) -> Vec<&'static ConfigTable> {
        md::tables(self.provider)
    }
}
