//! The receiving side of a posix iface: its segment, the FIFO consumer,
//! and the bookkeeping of senders (who a source is, when it is gone).

use std::collections::HashMap;
use std::ptr::NonNull;
use std::sync::Arc;
use std::time::{Duration, Instant};

use uct::ucs::{Error, Result};
use uct::{AmSink, SrcId};

use super::shared::{Shared, CLOSED, FIFO_OFF, LIVE, MAX_SENDERS};
use crate::fifo::{Consumer, Fifo, FifoConfig};
use crate::proc_id::ProcessId;
use crate::segment::{PosixConfig, Segment};

/// How long the consumer waits at a hole (a claimed, unpublished element)
/// before it gives up on it, once some sender is known to have died.
const HOLE_TIMEOUT: Duration = Duration::from_secs(1);

/// What the receiver knows of one sender slot.
#[derive(Debug, Clone, Copy, Default)]
struct Src {
    /// Generation of the slot when its first message was taken: set while
    /// the source has delivered something and not yet been reported gone.
    generation: Option<u32>,
    /// The sender closed or died: report it once the read position reaches
    /// this (every message it published is below).
    gone_at: Option<u64>,
    /// It died (rather than closed).
    died: bool,
}

/// The iface's own segment and FIFO. Fields drop in order: the consumer
/// before the mapping.
#[derive(Debug)]
pub(super) struct Rx {
    consumer: Consumer<Arc<Fifo>>,
    fifo: Arc<Fifo>,
    shared: Shared,
    seg: Segment,
    /// Per sender slot, grown to the highest slot seen.
    srcs: Vec<Src>,
    /// Liveness of each sending process during one check.
    alive_scratch: HashMap<ProcessId, bool>,
    /// Slots with `gone_at` set, to report once read.
    gone: Vec<u16>,
    seen_closes: u64,
    /// A sender died since the consumer last moved.
    death_seen: bool,
    stuck_since: Option<Instant>,
}

impl Rx {
    /// Creates the segment and an empty FIFO in it, accepting up to
    /// `max_senders` senders at a time.
    pub(super) fn create(
        fifo_cfg: FifoConfig,
        posix: &PosixConfig,
        max_senders: usize,
    ) -> Result<Rx> {
        let region = fifo_cfg
            .region_size()
            .map_err(|e| Error::InvalidParam(format!("posix: {e}")))?;
        let seg = Segment::create_with_hole(
            Shared::segment_len(region),
            Shared::table_hole(region),
            posix,
        )?;
        let base = seg.as_ptr();
        // SAFETY: the mapping is `segment_len(region)` bytes, page aligned,
        // and outlives `shared` and the FIFO (field order); `region` is a
        // multiple of 64 (descriptors and elements are).
        let shared = unsafe { Shared::new(base, region) };
        // SAFETY: FIFO_OFF < the mapping's length.
        let fifo_ptr = unsafe { NonNull::new_unchecked(base.as_ptr().add(FIFO_OFF)) };
        // SAFETY: the region is inside the fresh mapping, which no peer knows
        // of yet, and this process touches it only through the `Fifo`.
        let fifo = unsafe { Fifo::from_raw(fifo_ptr, region, fifo_cfg) }
            .map_err(|e| Error::InvalidParam(format!("posix: {e}")))?;
        shared.init(max_senders);
        let fifo = Arc::new(fifo);
        let consumer = Consumer::new(Arc::clone(&fifo))
            .map_err(|e| Error::InvalidParam(format!("posix: {e}")))?;
        Ok(Rx {
            consumer,
            fifo,
            shared,
            seg,
            srcs: Vec::new(),
            alive_scratch: HashMap::new(),
            gone: Vec::new(),
            seen_closes: 0,
            death_seen: false,
            stuck_since: None,
        })
    }

    /// Descriptor and length of the segment, for the iface address.
    pub(super) fn segment(&self) -> (u32, u64) {
        (self.seg.fd().unwrap_or(u32::MAX), self.seg.len() as u64)
    }

    /// Takes up to `max` messages and hands them to `sink`.
    pub(super) fn poll(&mut self, sink: &mut dyn AmSink, max: usize) -> usize {
        let mut n = 0;
        while n < max {
            let srcs = &mut self.srcs;
            let shared = &self.shared;
            let got = self.consumer.poll_msg(|m| {
                let slot = usize::from(m.src);
                let Some(src) = src_mut(srcs, slot) else {
                    tracing::warn!("posix: message from sender slot {slot} dropped");
                    return;
                };
                let generation = match src.generation {
                    Some(g) => g,
                    None => {
                        let e = shared.entry(m.src);
                        if e.state != LIVE && e.state != CLOSED {
                            tracing::warn!("posix: message from free sender slot {slot} dropped");
                            return;
                        }
                        src.generation = Some(e.generation);
                        e.generation
                    }
                };
                sink.am(m.am_id, src_id(m.src, generation), m.data);
            });
            match got {
                Ok(Some(())) => n += 1,
                Ok(None) => break,
                Err(e) => {
                    tracing::warn!("posix: {e}");
                    n += 1;
                }
            }
        }
        if n > 0 {
            self.stuck_since = None;
        }
        n
    }

    /// Notices closed slots (cheap unless a sender closed) and reports
    /// sources whose last message has been taken.
    pub(super) fn reap_closed(&mut self, sink: &mut dyn AmSink) -> usize {
        let closes = self.shared.closes();
        if closes != self.seen_closes {
            self.seen_closes = closes;
            for slot in 0..self.shared.used() {
                if self.shared.entry(slot).state == CLOSED {
                    self.mark_gone(slot, false);
                }
            }
        }
        self.report_gone(sink)
    }

    /// Checks every live sender's process; a dead one is gone like a
    /// closed one. Also gives up on a hole a dead sender left.
    pub(super) fn check_senders(&mut self, sink: &mut dyn AmSink) -> usize {
        // Many slots may belong to one process (one per iface of it): each
        // process is looked up once per check.
        let mut alive = std::mem::take(&mut self.alive_scratch);
        alive.clear();
        for slot in 0..self.shared.used() {
            let e = self.shared.entry(slot);
            if e.state != LIVE && e.state != CLOSED {
                continue;
            }
            let ok = e
                .process
                .is_some_and(|p| *alive.entry(p).or_insert_with(|| p.is_alive()));
            if !ok {
                self.mark_gone(slot, true);
            }
        }
        self.alive_scratch = alive;
        if self.consumer.is_stuck() {
            let since = *self.stuck_since.get_or_insert_with(Instant::now);
            if self.death_seen && since.elapsed() >= HOLE_TIMEOUT && self.consumer.skip_stuck() {
                tracing::warn!("posix: skipped a FIFO element a dead sender claimed");
                self.stuck_since = None;
            }
        } else {
            self.stuck_since = None;
        }
        self.report_gone(sink)
    }

    fn mark_gone(&mut self, slot: u16, died: bool) {
        let Some(src) = src_mut(&mut self.srcs, usize::from(slot)) else {
            return;
        };
        if src.gone_at.is_none() {
            src.gone_at = Some(self.fifo.claimed());
            src.died = died;
            self.death_seen |= died;
            self.gone.push(slot);
        }
    }

    fn report_gone(&mut self, sink: &mut dyn AmSink) -> usize {
        if self.gone.is_empty() {
            return 0;
        }
        let read = self.consumer.position();
        let mut n = 0;
        let srcs = &mut self.srcs;
        let shared = &self.shared;
        self.gone.retain(|&slot| {
            let src = &mut srcs[usize::from(slot)];
            let Some(at) = src.gone_at else {
                return false;
            };
            if (read.wrapping_sub(at) as i64) < 0 {
                return true;
            }
            if let Some(g) = src.generation {
                let why = if src.died { "exited" } else { "closed" };
                sink.src_failed(
                    src_id(slot, g),
                    Error::ConnectionLost {
                        peer: format!("posix sender slot {slot}"),
                        reason: format!("the sending process {why}"),
                    },
                );
                n += 1;
            }
            *src = Src::default();
            shared.free(slot);
            false
        });
        n
    }

    /// Wants to sleep: `true` if armed (nothing claimed and unread).
    pub(super) fn arm(&mut self) -> bool {
        self.shared.closes() == self.seen_closes && self.gone.is_empty() && self.consumer.arm()
    }

    /// Tells senders this iface is closing: they fail their endpoints.
    pub(super) fn close(&self) {
        self.shared.close_segment();
    }
}

/// Source id of a sender slot in a generation: slot numbers are reused,
/// generations keep the ids of successive senders apart.
fn src_id(slot: u16, generation: u32) -> SrcId {
    SrcId(u32::from(slot) | (generation & 0xffff) << 16)
}

/// The record of sender slot `slot`, growing the table to it; `None` for a
/// slot no sender can have.
fn src_mut(srcs: &mut Vec<Src>, slot: usize) -> Option<&mut Src> {
    if slot >= MAX_SENDERS {
        return None;
    }
    if slot >= srcs.len() {
        srcs.resize(slot + 1, Src::default());
    }
    srcs.get_mut(slot)
}
