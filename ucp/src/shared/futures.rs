//! Futures of a [`SharedWorker`]'s operations, runtime-agnostic: each
//! `poll` progresses the worker once and leaves its waker to be woken from
//! the progress that completes it (any thread's, the progress thread's, or
//! a driver's such as [`crate::tokio::drive`]).
//!
//! Cancel safety: an owned buffer is never freed while a transport may
//! still read or write it. A dropped [`OpFuture`] of a receive cancels the
//! receive; one of a send, put or get lets it run; either way the buffer
//! stays with the worker until the transport is done with it.

use super::handoff::{PostResult, Slot};
use super::{Locked, SharedWorker};
use crate::request::{Info, Posted, ReqId};
use crate::OpError;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::task::{Context as TaskContext, Poll};
use std::time::{Duration, Instant};

/// What an owned operation gives back: its result and the buffer.
pub type OpResult<B> = std::result::Result<(Info, B), OpError<B>>;

/// An operation posted on a [`SharedWorker`] with an owned buffer: a
/// [`Future`] of its result and buffer, or [`OpFuture::wait`] to block.
#[must_use = "dropping an operation's future lets it run (a receive is canceled) without its result"]
pub struct OpFuture<B: Send + 'static> {
    st: St<B>,
}

enum St<B> {
    /// Done at posting: no handle of the worker needed.
    Ready(OpResult<B>),
    /// Handed to the thread that held the lock, maybe not posted yet.
    Queued {
        w: SharedWorker,
        slot: Arc<Slot<PostResult<B>>>,
        cancel: bool,
    },
    InFlight {
        w: SharedWorker,
        id: ReqId,
        cancel: bool,
    },
    Taken,
}

impl<B: Send + 'static> std::fmt::Debug for OpFuture<B> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let st = match &self.st {
            St::Ready(_) => "ready",
            St::Queued { .. } => "queued",
            St::InFlight { .. } => "in flight",
            St::Taken => "taken",
        };
        f.debug_struct("OpFuture").field("state", &st).finish()
    }
}

// The future is never pinned structurally: the buffer sits in `St` by value
// and moves freely (the transport uses its heap memory, not the value).
impl<B: Send + 'static> Unpin for OpFuture<B> {}

impl<B: Send + 'static> OpFuture<B> {
    /// The future of what `posted` says; `cancel`: a drop before
    /// completion cancels the operation (receives).
    pub(crate) fn new(w: &SharedWorker, posted: Posted<B>, cancel: bool) -> OpFuture<B> {
        let st = match posted {
            Posted::Done(info, b) => St::Ready(Ok((info, b))),
            Posted::InFlight(id) => St::InFlight {
                w: w.clone(),
                id,
                cancel,
            },
        };
        OpFuture { st }
    }

    /// The future of a post handed to the lock's holder, whose result
    /// `slot` gets.
    pub(crate) fn queued(
        w: &SharedWorker,
        slot: Arc<Slot<PostResult<B>>>,
        cancel: bool,
    ) -> OpFuture<B> {
        OpFuture {
            st: St::Queued {
                w: w.clone(),
                slot,
                cancel,
            },
        }
    }

    /// Takes a handed post's result into the state, once it ran; false
    /// while it waits (then `waker`, if any, is woken when it ran).
    #[inline]
    fn settle(&mut self, waker: Option<&std::task::Waker>) -> bool {
        let St::Queued { w, slot, cancel } = &self.st else {
            return true;
        };
        let r = match waker {
            Some(wk) => slot.take_or_wait(wk),
            None => slot.take(),
        };
        let Some(r) = r else {
            return false;
        };
        self.st = match r {
            Ok(Posted::Done(info, b)) => St::Ready(Ok((info, b))),
            Ok(Posted::InFlight(id)) => St::InFlight {
                w: w.clone(),
                id,
                cancel: *cancel,
            },
            Err(e) => St::Ready(Err(e)),
        };
        true
    }

    /// Whether the operation completed (without progressing the worker).
    pub fn is_done(&mut self) -> bool {
        if !self.settle(None) {
            return false;
        }
        let St::InFlight { w, id, .. } = &self.st else {
            return true;
        };
        let mut g = w.lock();
        let r = g.worker().take::<B>(*id);
        if r.is_some() {
            g.forget(*id);
        }
        g.unlock(false);
        match r {
            Some(r) => {
                self.st = St::Ready(r);
                true
            }
            None => false,
        }
    }

    /// Blocks until the operation completes, progressing the worker while
    /// no other thread does; gives the result and the buffer.
    pub fn wait(mut self) -> OpResult<B> {
        let mut taken = 0u32;
        // The completed count when this thread last looked at its request.
        let mut seen = None;
        loop {
            match &self.st {
                St::Queued { w, .. } => {
                    let w = w.clone();
                    if !self.settle(None) {
                        // Its holder runs it; help if the lock is free.
                        if w.progress() == 0 {
                            std::hint::spin_loop();
                        }
                    }
                    continue;
                }
                St::InFlight { .. } => {}
                _ => {
                    if let St::Ready(r) = std::mem::replace(&mut self.st, St::Taken) {
                        return r;
                    }
                    unreachable!("a waited future is ready or in flight");
                }
            }
            let St::InFlight { w, id, cancel } = std::mem::replace(&mut self.st, St::Taken) else {
                unreachable!("matched in flight");
            };
            // The count before the look: a completion after it moves it,
            // and the request is looked at again, waiting for the lock.
            // Until then, progress only while no other thread does: idle
            // progress spins, as a blocking wait on a `Worker` does; a
            // thread that keeps finding the lock taken yields now and
            // then, in case its holder waits for a core.
            let count = w.completed_count();
            let must = seen.replace(count) != Some(count);
            match look::<B>(&w, id, must) {
                Look::Done(r) => return r,
                Look::Taken => {
                    taken += 1;
                    if taken % 16 == 0 {
                        std::thread::yield_now();
                    } else {
                        std::hint::spin_loop();
                    }
                }
                Look::Idle => std::hint::spin_loop(),
                Look::Progressed => {}
            }
            self.st = St::InFlight { w, id, cancel };
        }
    }
}

/// What one look at a waited request found.
enum Look<B> {
    Done(OpResult<B>),
    /// Another thread held the lock.
    Taken,
    /// Not done; progress did nothing.
    Idle,
    /// Not done; progress did something.
    Progressed,
}

/// Request `id`'s result, taken, with the worker progressed once first if
/// it was not done; and what that progress did.
#[inline]
fn take_or_progress<B: Send + 'static>(
    g: &mut Locked<'_>,
    id: ReqId,
) -> (Option<OpResult<B>>, usize) {
    if let Some(r) = g.worker().take_if_done::<B>(id) {
        return (Some(r), 0);
    }
    let n = g.worker().progress();
    (g.worker().take_if_done::<B>(id), n)
}

/// Takes request `id`'s result, progressing the worker once if it is not
/// done; with `must`, waits for the lock, else only tries it.
fn look<B: Send + 'static>(w: &SharedWorker, id: ReqId, must: bool) -> Look<B> {
    let g = if must { Some(w.lock()) } else { w.try_lock() };
    let Some(mut g) = g else {
        return Look::Taken;
    };
    let (r, n) = take_or_progress::<B>(&mut g, id);
    if r.is_some() {
        g.forget(id);
    }
    g.unlock(n > 0);
    match r {
        Some(r) => Look::Done(r),
        None if n == 0 => Look::Idle,
        None => Look::Progressed,
    }
}

impl<B: Send + 'static> Future for OpFuture<B> {
    type Output = OpResult<B>;

    fn poll(self: Pin<&mut Self>, cx: &mut TaskContext<'_>) -> Poll<OpResult<B>> {
        let this = self.get_mut();
        if !this.settle(Some(cx.waker())) {
            if let St::Queued { w, .. } = &this.st {
                w.progress();
            }
            if !this.settle(Some(cx.waker())) {
                return Poll::Pending;
            }
        }
        let (w, id) = match &this.st {
            St::Ready(_) => match std::mem::replace(&mut this.st, St::Taken) {
                St::Ready(r) => return Poll::Ready(r),
                _ => unreachable!("matched ready"),
            },
            St::Taken => panic!("OpFuture polled after it completed"),
            St::Queued { .. } => unreachable!("settled above"),
            St::InFlight { w, id, .. } => (w, *id),
        };
        let mut g = w.lock();
        let (mut r, mut n) = take_or_progress::<B>(&mut g, id);
        if r.is_none() {
            let spin = w.inner.poll_spin.load(Ordering::Relaxed);
            if spin > 0 && g.no_waiters() {
                (r, n) = spin_for::<B>(&mut g, id, n, Duration::from_nanos(spin));
            }
        }
        match r {
            Some(r) => {
                g.forget(id);
                g.unlock(n > 0);
                this.st = St::Taken;
                Poll::Ready(r)
            }
            None => {
                g.wait_for(id, cx.waker());
                g.unlock(n > 0);
                Poll::Pending
            }
        }
    }
}

/// Progresses the worker until request `id` completes or `spin` passed,
/// letting a thread that waits for the lock in every
/// [`SPIN_BUMP`] calls; the result, and the count of progressed events
/// (`n` before).
fn spin_for<B: Send + 'static>(
    g: &mut Locked<'_>,
    id: ReqId,
    mut n: usize,
    spin: Duration,
) -> (Option<OpResult<B>>, usize) {
    // The clock is read from the first bump on: a reply within a few
    // calls costs no clock read.
    let mut start = None;
    let mut calls = 0u32;
    loop {
        n += g.worker().progress();
        if let Some(r) = g.worker().take_if_done::<B>(id) {
            return (Some(r), n);
        }
        calls += 1;
        if calls % SPIN_BUMP == 0 {
            if start.get_or_insert_with(Instant::now).elapsed() >= spin {
                return (None, n);
            }
            g.bump();
        }
    }
}

/// Progress calls between two looks at the clock in a polled future's spin.
const SPIN_BUMP: u32 = 8;

impl<B: Send + 'static> Drop for OpFuture<B> {
    fn drop(&mut self) {
        if let St::Queued { w, slot, cancel } = &self.st {
            // Not run yet: the job disposes of what it posts. Run: the
            // result is ours to drop as any other.
            let Some(r) = slot.abandon() else {
                return;
            };
            self.st = match r {
                Ok(Posted::InFlight(id)) => St::InFlight {
                    w: w.clone(),
                    id,
                    cancel: *cancel,
                },
                _ => return,
            };
        }
        let St::InFlight { w, id, cancel } = &self.st else {
            return;
        };
        let (id, cancel) = (*id, *cancel);
        let mut g = w.lock();
        g.forget(id);
        let wk = g.worker();
        let done = wk.take::<B>(id);
        if done.is_none() {
            if cancel {
                wk.request_cancel(id);
            }
            // The worker keeps the buffer until the transport is done.
            wk.request_release(id);
        }
        g.unlock(false);
        drop(done);
    }
}
