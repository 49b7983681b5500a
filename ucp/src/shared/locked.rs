//! The lock of a [`SharedWorker`], held ([`Locked`]): what a holder does
//! before it lets go (uncork the ifaces, publish the completed count, run
//! the posts handed to it) and after (wake the futures whose requests
//! completed, and the progress thread if it sleeps).

use super::{Inner, State};
use crate::request::ReqId;
use crate::Worker;
use parking_lot::MutexGuard;
use std::sync::atomic::Ordering;
use std::task::Waker as TaskWaker;

/// The lock, held; [`Locked::unlock`] (or drop) releases it and then
/// wakes the futures whose requests completed meanwhile.
pub(crate) struct Locked<'a> {
    pub(super) inner: &'a Inner,
    pub(super) st: Option<MutexGuard<'a, State>>,
    /// The ifaces are corked (handed posts ran): uncorked before release.
    pub(super) corked: bool,
    /// Wakers of handed posts that ran, woken after release.
    pub(super) late: Vec<TaskWaker>,
}

impl<'a> Locked<'a> {
    /// The lock `st` of `inner`, held; runs the handed posts first.
    #[inline]
    pub(super) fn new(inner: &'a Inner, st: MutexGuard<'a, State>) -> Locked<'a> {
        let mut g = Locked {
            inner,
            st: Some(st),
            corked: false,
            late: Vec::new(),
        };
        if inner.hands {
            g.drain();
        }
        g
    }
}

impl Locked<'_> {
    pub(super) fn state(&mut self) -> &mut State {
        match self.st.as_mut() {
            Some(s) => s,
            None => unreachable!("the lock is held until unlock"),
        }
    }

    pub(crate) fn worker(&mut self) -> &mut Worker {
        &mut self.state().worker
    }

    /// Lets a thread that waits for the lock have it for a while (fairly),
    /// then takes it back: for a long run of progress calls.
    pub(crate) fn bump(&mut self) {
        if let Some(st) = self.st.as_mut() {
            MutexGuard::bump(st);
        }
        self.drain();
    }

    /// Registers `waker` for request `id`'s completion.
    pub(crate) fn wait_for(&mut self, id: ReqId, waker: &TaskWaker) {
        let ws = &mut self.state().waiters;
        match ws.iter_mut().find(|(i, _)| *i == id) {
            Some((_, w)) => w.clone_from(waker),
            None => ws.push((id, waker.clone())),
        }
    }

    /// Whether no future waits for a request.
    pub(crate) fn no_waiters(&mut self) -> bool {
        self.state().waiters.is_empty()
    }

    /// Forgets the waker of request `id`.
    pub(crate) fn forget(&mut self, id: ReqId) {
        self.state().waiters.retain(|(i, _)| *i != id);
    }

    /// Registers `waker` to be woken after progress that did something.
    pub(crate) fn wait_any(&mut self, waker: &TaskWaker) {
        let ws = &mut self.state().others;
        if !ws.iter().any(|w| w.will_wake(waker)) {
            ws.push(waker.clone());
        }
    }

    /// Releases the lock, then wakes the waiters of completed requests,
    /// and those of other operations if `progressed`; and the progress
    /// thread if it sleeps (what was posted may need it).
    pub(crate) fn unlock(mut self, progressed: bool) {
        self.release(progressed, true);
    }

    /// [`Locked::unlock`] without waking the progress thread: for the
    /// progress thread itself.
    pub(crate) fn unlock_quiet(mut self, progressed: bool) {
        self.release(progressed, false);
    }

    /// Whether futures of operations other than requests wait.
    pub(crate) fn others_wait(&mut self) -> bool {
        !self.state().others.is_empty()
    }

    /// The common case inline: nothing completed, corked, handed or left
    /// to wake.
    #[inline]
    fn release(&mut self, progressed: bool, kick: bool) {
        let quiet = match &self.st {
            None => return,
            Some(st) => {
                !self.corked
                    && !self.inner.hands
                    && self.late.is_empty()
                    && (!progressed || st.others.is_empty())
                    && st.worker.completed_count() == self.inner.completed.load(Ordering::Relaxed)
            }
        };
        if !quiet {
            return self.release_slow(progressed, kick);
        }
        self.st = None;
        if kick && self.inner.sleeping.must_signal() {
            self.signal();
        }
    }

    #[cold]
    fn signal(&self) {
        if let Some(s) = &self.inner.signal {
            let _ = s.wake();
        }
    }

    fn release_slow(&mut self, progressed: bool, kick: bool) {
        let Some(mut st) = self.st.take() else {
            return;
        };
        let mut progressed = progressed;
        let mut wake = std::mem::take(&mut self.late);
        loop {
            if std::mem::take(&mut self.corked) {
                progressed |= st.worker.uncork() > 0;
            }
            let count = st.worker.completed_count();
            if count != self.inner.completed.load(Ordering::Relaxed) {
                self.inner.completed.store(count, Ordering::Release);
                let State {
                    worker, waiters, ..
                } = &mut *st;
                waiters.retain(|(id, w)| {
                    let active = worker.request_is_active(*id);
                    if !active {
                        wake.push(w.clone());
                    }
                    active
                });
            }
            if (progressed || !wake.is_empty()) && !st.others.is_empty() {
                wake.append(&mut st.others);
            }
            drop(st);
            // Posts handed while the lock was held: run them if no other
            // thread took the lock (which then runs them).
            if !self.inner.hands || self.inner.handoffs.is_idle() {
                break;
            }
            let Some(next) = self.inner.state.try_lock() else {
                break;
            };
            self.st = Some(next);
            self.drain();
            wake.append(&mut self.late);
            progressed = false;
            st = match self.st.take() {
                Some(st) => st,
                None => break,
            };
        }
        if kick && self.inner.sleeping.must_signal() {
            self.signal();
        }
        for w in wake {
            w.wake();
        }
    }
}

impl Drop for Locked<'_> {
    fn drop(&mut self) {
        self.release(false, true);
    }
}
