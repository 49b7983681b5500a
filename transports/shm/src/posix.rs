//! The `posix` transport: active messages through a receive FIFO in a
//! shared memory segment, in the manner of UCX's `mm` transports.
//!
//! Every iface creates one segment ([`crate::segment`]) holding a table of
//! senders and its receive FIFO ([`crate::Fifo`]) with one descriptor per
//! element. A peer's endpoint maps that segment, claims a sender slot and
//! pushes messages: up to `elem_size - 8` bytes inline in the element (the
//! receiver polls one cache line), longer ones up to `RUCX_MM_SEG_SIZE` in
//! the element's descriptor. A full FIFO refuses the send
//! ([`Posted::NoResource`](uct::Posted)) and the endpoint's pending queue
//! takes over. A receiver about to sleep arms its FIFO; the next sender
//! wakes it through a datagram socket, the iface's event fd.
//!
//! Failures: a receiver watches its senders (slot closed, or the sender's
//! process gone by pid and start time) and reports each as a failed source
//! after the messages it published; a sender watches its receivers' processes
//! and fails their endpoints. Segments are mapped, never truncated by a
//! peer's death, so a survivor does not take SIGBUS.
//!
//! What it does not do: zero-copy (that is the `cma` transport's, on the
//! same memory domain), a shared pool of descriptors that a handler could
//! keep (each element owns one; handlers copy what they keep), or wake a
//! sender blocked on a full FIFO (a worker with pending sends does not
//! sleep: `arm` reports busy).

mod addr;
mod iface;
mod peer;
mod rx;
mod shared;
#[cfg(test)]
mod tests;
mod wake;

use uct::ucs;
use uct::ucs::config::MemUnits;
use uct::ucs::{Error, Result};
use uct::{Caps, ConnectMode, IfaceAttr, PerfModel};

pub(crate) use iface::PosixIface;

use crate::fifo::FifoConfig;

/// Bandwidth of one memcpy out of the cache of another core, bytes per
/// second, for the performance model (`cargo test -p rucx-shm --release
/// --test memcpy -- --ignored --nocapture` prints this host's figures).
const MEMCPY_BANDWIDTH: f64 = 10e9;

/// Transport name.
pub(crate) const TL_NAME: &str = "posix";
/// Device name.
pub(crate) const DEV_NAME: &str = "memory";

ucs::config_table! {
    /// Options of the shared-memory FIFO transport (`posix`), from
    /// `RUCX_MM_*`.
    pub struct MmConfig in MM_TABLE ("mm", "MM_") {
        /// Elements in a receive FIFO (a power of two): how many messages
        /// senders may post before the receiver takes them.
        FIFO_SIZE fifo_size: u32 = "64",
        /// Bytes of a FIFO element, 8 of them its control word; shorter
        /// messages travel inline in the element.
        FIFO_ELEM_SIZE fifo_elem_size: MemUnits = "128",
        /// Largest am_bcopy message: each FIFO element owns a descriptor of
        /// this size (a multiple of 64) in the receiver's segment.
        SEG_SIZE seg_size: MemUnits = "8k",
        /// Part of the FIFO the receiver takes before it tells senders how
        /// far it has read (0 < factor <= 1).
        FIFO_RELEASE_FACTOR release_factor: f64 = "0.125",
        /// Most messages taken out of the FIFO in one progress call.
        FIFO_MAX_POLL max_poll: u32 = "16",
        /// Most processes that may send to one iface at a time (at most
        /// 32768); a further peer's endpoint fails and the next transport
        /// that reaches it is used instead.
        MAX_SENDERS max_senders: u32 = "32768",
    }
}

impl MmConfig {
    /// The FIFO shape this configuration asks for, checked.
    pub(crate) fn fifo(&self) -> Result<FifoConfig> {
        let bytes = |what: &str, v: MemUnits| {
            v.bytes()
                .and_then(|b| usize::try_from(b).ok())
                .ok_or_else(|| Error::InvalidParam(format!("RUCX_MM_{what}: a size is needed")))
        };
        let capacity = self.fifo_size as usize;
        if !(self.release_factor > 0.0 && self.release_factor <= 1.0) {
            return Err(Error::InvalidParam(format!(
                "RUCX_MM_FIFO_RELEASE_FACTOR={} is not in (0, 1]",
                self.release_factor
            )));
        }
        let release_every = ((capacity as f64 * self.release_factor) as usize).clamp(1, capacity);
        let cfg = FifoConfig {
            elem_size: bytes("FIFO_ELEM_SIZE", self.fifo_elem_size)?,
            capacity,
            release_every,
            desc_size: bytes("SEG_SIZE", self.seg_size)?,
        };
        cfg.region_size()
            .map_err(|e| Error::InvalidParam(format!("RUCX_MM_*: {e}")))?;
        if cfg.elem_size < 16 + 8 {
            return Err(Error::InvalidParam(
                "RUCX_MM_FIFO_ELEM_SIZE: at least 32 bytes (the am_short header is 8)".into(),
            ));
        }
        Ok(cfg)
    }
}

/// What the iface offers for a FIFO of shape `fifo`.
fn iface_attr(fifo: &FifoConfig) -> IfaceAttr {
    let inline = fifo.elem_size - 8;
    IfaceAttr {
        // The operation bits are derived from the iface's families.
        caps: Caps::CONNECT_TO_IFACE | Caps::PEER_FAILURE | Caps::EVENT_FD,
        max_short: inline - 8,
        max_bcopy: inline.max(fifo.desc_size),
        max_zcopy: 0,
        max_hdr: 0,
        max_iov: 1,
        max_put_zcopy: 0,
        max_get_zcopy: 0,
        // UCX's mm model: a cache line to travel (80 ns), a few stores to
        // post (10 ns). The two copies of every byte (into the receiver's
        // segment, out by its handler) are the protocol layer's `s/M`
        // terms; the segment itself moves bytes between the cores at about
        // memcpy speed. (Half of it, as before, counted the copies twice:
        // multi-fragment eager cost 2.7 times what it measured, so 16 KiB
        // went by rendezvous at 4.4 us where eager takes 2.5 us.)
        model: PerfModel {
            latency: 80e-9,
            overhead: 10e-9,
            bandwidth: MEMCPY_BANDWIDTH,
        },
        connect: ConnectMode::ToIface,
    }
}

/// Opens a posix iface.
pub(crate) fn open_iface(
    params: &uct::IfaceParams,
    mm: &MmConfig,
    posix: &crate::segment::PosixConfig,
) -> Result<Box<dyn uct::Iface>> {
    Ok(Box::new(PosixIface::open(params, mm, posix)?))
}
