//! A peer iface this iface sends to: its mapped segment, our slot in its
//! sender table, a producer on its FIFO.

use std::os::unix::net::SocketAddr;
use std::ptr::NonNull;
use std::sync::Arc;

use uct::ucs::{Error, Result};

use super::addr::IfaceAddr;
use super::shared::{Shared, FIFO_OFF};
use super::wake::WakeTx;
use crate::fifo::{Fifo, FifoError, Producer, Push};
use crate::proc_id::ProcessId;
use crate::segment::Segment;

/// An attached peer.
#[derive(Debug)]
pub(super) struct Peer {
    producer: Producer<Arc<Fifo>>,
    /// What a sender needs of the peer; shared with the endpoints' own
    /// senders ([`PeerSender`]), so it lives as long as the last of them.
    link: Arc<Link>,
    pub(super) addr: IfaceAddr,
    /// Endpoints using this peer.
    pub(super) refs: u32,
    /// Why the peer is unusable (its process died, its iface closed).
    pub(super) failed: Option<String>,
    /// The iface watches its process's exit (and counts it among the
    /// watchers of that process).
    pub(super) watched: bool,
}

/// The peer's mapped segment and our slot in its sender table. Fields
/// drop in order: the FIFO handle before the mapping it points into.
#[derive(Debug)]
struct Link {
    fifo: Arc<Fifo>,
    shared: Shared,
    _seg: Segment,
    wake_to: SocketAddr,
    /// Our slot in the peer's sender table: the source id of our messages.
    slot: u16,
}

impl Link {
    /// What a push did: wakes the peer if it sleeps; `Ok(false)` when the
    /// FIFO was full.
    #[inline(always)]
    fn pushed(&self, wake: &WakeTx, pushed: std::result::Result<Push, FifoError>) -> Result<bool> {
        match pushed {
            Ok(Push::Sent { wake: true }) => {
                wake.wake(&self.wake_to);
                Ok(true)
            }
            Ok(Push::Sent { wake: false }) => Ok(true),
            Ok(Push::Full) => Ok(false),
            Err(e) => Err(Error::InvalidParam(format!("posix: {e}"))),
        }
    }
}

impl Drop for Link {
    /// Gives the sender slot back: the receiver frees it once it has taken
    /// our last message (and every sender of ours is gone).
    fn drop(&mut self) {
        self.shared.close(self.slot);
    }
}

/// One endpoint's short messages to a peer, sent from any thread
/// ([`uct::AmOps::short_sender`]): a producer of its own on the peer's
/// FIFO, which takes several producers at once. Fields drop in order: the
/// producer before the link whose mapping it points into.
#[derive(Debug)]
pub(super) struct PeerSender {
    producer: Producer<Arc<Fifo>>,
    link: Arc<Link>,
    wake: Arc<WakeTx>,
    max_short: usize,
}

impl uct::ShortSender for PeerSender {
    fn am_short(&mut self, id: u8, header: u64, payload: &[u8]) -> Result<bool> {
        uct::limits::check_short(payload.len(), self.max_short)?;
        let pushed = self
            .producer
            .try_push_short(id, self.link.slot, header, payload);
        self.link.pushed(&self.wake, pushed)
    }
}

impl Peer {
    /// Maps the segment of the iface at `addr` and claims a sender slot.
    pub(super) fn attach(addr: IfaceAddr, me: ProcessId) -> Result<Peer> {
        let len = usize::try_from(addr.seg_len)
            .map_err(|_| Error::InvalidAddr("posix: segment too large".into()))?;
        let region = addr
            .fifo
            .region_size()
            .map_err(|e| Error::InvalidAddr(format!("posix: peer FIFO: {e}")))?;
        let (seg, (shared, fifo, slot)) =
            Segment::attach_with(addr.owner, addr.fd, len, |seg, reserver| {
                let base = seg.as_ptr();
                // SAFETY: the mapping is `len >= segment_len(region)` bytes
                // (checked when the address was decoded and by the attach),
                // page aligned, and lives in `_seg`, which outlives `shared`
                // (field order). The header and table are only accessed
                // atomically; `region` is a multiple of 64.
                let shared = unsafe { Shared::new(base, region) };
                // Map the first page by a write, alone (see `shared`).
                shared.touch();
                if !shared.check() {
                    return Err(Error::Unreachable(format!(
                        "posix: segment of process {} holds no open iface",
                        addr.owner.pid
                    )));
                }
                // SAFETY: FIFO_OFF < len, so the pointer stays in the mapping.
                let fifo_ptr = unsafe { NonNull::new_unchecked(base.as_ptr().add(FIFO_OFF)) };
                // SAFETY: the region lies inside the mapping, which outlives
                // the FIFO (field order); this process touches it only
                // through `Fifo`.
                let fifo = unsafe { Fifo::attach_raw(fifo_ptr, region, addr.fifo) }
                    .map_err(|e| Error::InvalidAddr(format!("posix: peer FIFO: {e}")))?;
                let slot = shared
                    .claim(me, &|off, n| reserver.reserve(off, n))?
                    .ok_or_else(|| {
                        Error::NoMemory(format!(
                            "posix: process {} has no free sender slot",
                            addr.owner.pid
                        ))
                    })?;
                Ok((shared, fifo, slot))
            })?;
        let fifo = Arc::new(fifo);
        Ok(Peer {
            producer: Producer::new(Arc::clone(&fifo)),
            link: Arc::new(Link {
                fifo,
                shared,
                _seg: seg,
                wake_to: WakeTx::target(addr.owner, addr.iface_id)?,
                slot,
            }),
            addr,
            refs: 0,
            failed: None,
            watched: false,
        })
    }

    /// Pushes one message; `Ok(false)` when the FIFO is full.
    pub(super) fn push(&mut self, wake: &WakeTx, am_id: u8, parts: &[&[u8]]) -> Result<bool> {
        let pushed = self.producer.try_push_from(am_id, self.link.slot, parts);
        self.link.pushed(wake, pushed)
    }

    /// Pushes one short message (an 8-byte header and `payload`);
    /// `Ok(false)` when the FIFO is full.
    #[inline]
    pub(super) fn push_short(
        &mut self,
        wake: &WakeTx,
        am_id: u8,
        header: u64,
        payload: &[u8],
    ) -> Result<bool> {
        let pushed = self
            .producer
            .try_push_short(am_id, self.link.slot, header, payload);
        self.link.pushed(wake, pushed)
    }

    /// A sender of short messages to this peer for another thread.
    pub(super) fn sender(&self, wake: &Arc<WakeTx>, max_short: usize) -> PeerSender {
        PeerSender {
            producer: Producer::new(Arc::clone(&self.link.fifo)),
            link: Arc::clone(&self.link),
            wake: Arc::clone(wake),
            max_short,
        }
    }

    /// The mapping of the peer's segment: first byte and length.
    #[cfg(test)]
    pub(super) fn mapping(&self) -> (*const u8, usize) {
        (
            self.link._seg.as_ptr().as_ptr().cast_const(),
            self.link._seg.len(),
        )
    }

    /// Whether a push would find room.
    pub(super) fn has_room(&mut self) -> bool {
        self.producer.has_room()
    }

    /// Checks that the peer still runs (`alive` answers for its process,
    /// so that one look serves every peer of a process) and its iface is
    /// open; records why not.
    pub(super) fn check(&mut self, alive: &mut dyn FnMut(ProcessId) -> bool) -> bool {
        if self.failed.is_none() {
            if !alive(self.addr.owner) {
                self.failed = Some(format!("process {} exited", self.addr.owner.pid));
            } else if !self.link.shared.check() {
                self.failed = Some(format!("process {} closed its iface", self.addr.owner.pid));
            }
        }
        self.failed.is_none()
    }
}
