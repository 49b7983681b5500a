//! What sleeping on a context's fd needs: reading completion
//! notifications, arming (`Verbs::arm`), and the work that decides when a
//! caller may sleep: sends kept until their connection is up, and
//! connections whose `Established` is due.

use std::mem::MaybeUninit;

use rdma_sys as sys;
use rucx_rdma::{QpId, QpState, Wc};
use uct::ucs::Result;
use uct::Armed;

use super::{VerbsContext, POLL_BATCH};
use crate::ffi::rc_err;
use crate::res::Cq;
use crate::wc::RawWc;

/// Polls up to `want` (at most [`POLL_BATCH`]) completions of `cq` from
/// the device and hands each to `each`; returns how many. Nothing is
/// initialized ahead (this runs on every progress call).
pub(super) fn poll_raw(cq: &Cq, want: usize, mut each: impl FnMut(RawWc)) -> usize {
    let mut wcs = [const { MaybeUninit::<sys::ibv_wc>::uninit() }; POLL_BATCH];
    let want = want.min(POLL_BATCH);
    // SAFETY: the queue is live; `wcs` has room for `want` entries, of
    // which the call writes the first `n`.
    let n = unsafe { sys::ibv_poll_cq(cq.as_raw(), want as i32, wcs.as_mut_ptr().cast()) };
    if n < 0 {
        tracing::debug!(rc = n, "verbs: ibv_poll_cq failed");
        return 0;
    }
    let n = (n as usize).min(want);
    for w in &wcs[..n] {
        // SAFETY: one of the `n` entries the device wrote.
        each(RawWc::of(unsafe { w.assume_init_ref() }));
    }
    n
}

impl VerbsContext {
    /// Reads every notification waiting on the completion channel; the
    /// queues they name must be armed again.
    pub(super) fn drain_channel(&mut self) {
        loop {
            let mut cq = std::ptr::null_mut();
            let mut cq_ctx = std::ptr::null_mut();
            // SAFETY: the channel is live and non-blocking; the out-
            // pointers are written on success.
            if unsafe { sys::ibv_get_cq_event(self.channel.as_raw(), &mut cq, &mut cq_ctx) } != 0 {
                return;
            }
            // SAFETY: `cq` is one of this channel's queues, live (a queue
            // is destroyed only through this context); one event to ack.
            unsafe { sys::ibv_ack_cq_events(cq, 1) };
            if let Some(s) = self.cqs.values_mut().find(|s| s.cq.as_raw() == cq) {
                s.armed = false;
                s.quiet_armed = false;
                s.event_due = false;
            }
        }
    }

    /// `Verbs::arm`: requests a notification on every completion queue
    /// not armed yet, then looks once more; a completion, connection event
    /// or asynchronous event already waiting, or one that is due, makes
    /// it [`Armed::Busy`].
    pub(super) fn arm_all(&mut self) -> Result<Armed> {
        self.drain_channel();
        let mut busy = false;
        for slot in self.cqs.values_mut() {
            // Armed while empty, event not read yet: any completion found
            // now raises that event.
            let was_quiet = slot.armed && slot.quiet_armed;
            if !slot.armed {
                // SAFETY: the queue is live; notify on any completion.
                let rc = unsafe { sys::ibv_req_notify_cq(slot.cq.as_raw(), 0) };
                if rc != 0 {
                    return Err(rc_err("ibv_req_notify_cq", rc));
                }
                slot.armed = true;
            }
            // A completion that arrived before the request raises no
            // event: look for one (kept for poll_cq).
            if slot.stash.is_empty() {
                let stash = &mut slot.stash;
                if poll_raw(&slot.cq, 1, |w| stash.push_back(w)) == 1 {
                    slot.event_due |= was_quiet;
                }
            }
            slot.quiet_armed = was_quiet || slot.stash.is_empty();
            // An event still to come would make the fd readable: not yet
            // time to sleep (the caller progresses and arms again).
            busy |= !slot.stash.is_empty() || slot.event_due;
        }
        // Read what waits on the connection manager's channel, which would
        // wake us at once (an event may come after the last `poll_cm`).
        self.cm.pump(&mut self.qps);
        if !self.waiting.is_empty() {
            self.release_deferred();
        }
        busy |= self.cqs.values().any(|s| !s.stash.is_empty());
        // Connections whose `Established` is due (still connecting).
        let qps = &self.qps;
        let connecting = |q: &QpId| qps.get(q).is_some_and(|s| s.state == QpState::Connecting);
        self.accepting.retain(connecting);
        self.est_due.retain(connecting);
        busy |= !self.est_due.is_empty();
        let mut router = self.dev.router.lock();
        // Route what waits on the device's fd, which would wake us at once.
        router.drain(&self.dev.ctx, self.dev.port);
        busy |= self.cm.has_events() || router.has_events(self.token);
        Ok(if busy { Armed::Busy } else { Armed::Sleep })
    }
}

impl VerbsContext {
    /// Posts the kept sends of queue pairs now in RTS, and completes those
    /// of queue pairs that failed first with a flush.
    pub(super) fn release_deferred(&mut self) {
        let mut waiting = std::mem::take(&mut self.waiting);
        waiting.retain(|qp| {
            let Some(slot) = self.qps.get_mut(qp) else {
                return false;
            };
            match (slot.state, slot.ready) {
                (QpState::Error, _) => {}
                (QpState::Rts, _) | (QpState::Connecting, true) => {
                    while let Some(d) = slot.deferred.front() {
                        // SAFETY: the memory of a kept send stays valid
                        // under the original post's contract.
                        if let Err(e) = unsafe { d.post(&slot.qp) } {
                            // The queue pair broke between RTS and now:
                            // the rest complete flushed, as it would.
                            tracing::debug!(qp = qp.0, error = %e, "verbs: kept send not posted");
                            break;
                        }
                        slot.deferred.pop_front();
                    }
                }
                _ => return true,
            }
            let num = slot.qp.num();
            if let Some(cq) = self.cqs.get_mut(&slot.send_cq) {
                cq.stash
                    .extend(slot.deferred.drain(..).map(|d| d.flushed(num)));
            }
            slot.deferred.clear();
            false
        });
        waiting.append(&mut self.waiting);
        self.waiting = waiting;
    }
}

impl VerbsContext {
    /// Completions on accepted queue pairs whose connection is not yet
    /// established: the initiator's RTU went before its data, and only
    /// the connection manager's pace holds `Established` back. Tells it
    /// (`rdma_notify` with COMM_EST, as the kernel does for queue pairs
    /// the connection manager created), and remembers that its event is
    /// due, so that `arm` does not let a caller sleep just before it.
    pub(super) fn traffic_before_established(&mut self, wcs: &[Wc]) {
        for w in wcs {
            let Some(qp) = w.qp else { continue };
            let Some(i) = self.accepting.iter().position(|&q| q == qp) else {
                continue;
            };
            self.accepting.swap_remove(i);
            if self
                .qps
                .get(&qp)
                .is_some_and(|s| s.state == QpState::Connecting)
            {
                self.cm.notify_established(qp);
                self.est_due.push(qp);
            }
        }
    }
}
