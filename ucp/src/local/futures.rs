//! The futures of a [`LocalWorker`]: [`LocalFuture`] (an operation with an
//! owned buffer).

use super::{dispose, wake_all, LocalWorker, SPIN_CHECK};
use crate::request::ReqId;
use crate::shared::OpResult;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context as TaskContext, Poll};
use std::time::Instant;

/// An operation posted on a [`LocalWorker`] with an owned buffer: a
/// [`Future`] of its result and buffer.
#[must_use = "dropping an operation's future lets it run (a receive is canceled) without its result"]
pub struct LocalFuture<B: Send + 'static> {
    pub(super) st: St<B>,
}

pub(super) enum St<B> {
    Ready(OpResult<B>),
    InFlight {
        w: LocalWorker,
        id: ReqId,
        cancel: bool,
    },
    Taken,
}

impl<B: Send + 'static> std::fmt::Debug for LocalFuture<B> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let st = match &self.st {
            St::Ready(_) => "ready",
            St::InFlight { .. } => "in flight",
            St::Taken => "taken",
        };
        f.debug_struct("LocalFuture").field("state", &st).finish()
    }
}

// Never pinned structurally, as OpFuture.
impl<B: Send + 'static> Unpin for LocalFuture<B> {}

impl<B: Send + 'static> Future for LocalFuture<B> {
    type Output = OpResult<B>;

    fn poll(self: Pin<&mut Self>, cx: &mut TaskContext<'_>) -> Poll<OpResult<B>> {
        let this = self.get_mut();
        let (w, id) = match &this.st {
            St::InFlight { w, id, .. } => (w, *id),
            St::Ready(_) => match std::mem::replace(&mut this.st, St::Taken) {
                St::Ready(r) => return Poll::Ready(r),
                _ => unreachable!("matched ready"),
            },
            St::Taken => panic!("LocalFuture polled after it completed"),
        };
        let inner = &w.inner;
        let Some(mut wk) = inner.try_borrow() else {
            // Polled from inside `with`: look again soon.
            cx.waker().wake_by_ref();
            return Poll::Pending;
        };
        let mut n = 0;
        let mut r = wk.take_if_done::<B>(id);
        if r.is_none() {
            n = wk.progress();
            r = wk.take_if_done::<B>(id);
        }
        let spin = inner.poll_spin.get();
        if r.is_none() && !spin.is_zero() && inner.waiters.borrow().is_empty() {
            // The clock is read from the first check on: a reply within
            // a few calls costs no clock read.
            let mut start = None;
            let mut calls = 0u32;
            while r.is_none() {
                n += wk.progress();
                r = wk.take_if_done::<B>(id);
                calls += 1;
                if calls % SPIN_CHECK == 0
                    && start.get_or_insert_with(Instant::now).elapsed() >= spin
                {
                    break;
                }
            }
        }
        if r.is_some() {
            inner.forget(id);
        } else {
            let mut ws = inner.waiters.borrow_mut();
            match ws.iter_mut().find(|(i, _)| *i == id) {
                Some((_, k)) => k.clone_from(cx.waker()),
                None => ws.push((id, cx.waker().clone())),
            }
        }
        let wake = inner.completions(&mut wk, n > 0);
        drop(wk);
        wake_all(wake);
        match r {
            Some(r) => {
                this.st = St::Taken;
                Poll::Ready(r)
            }
            None => Poll::Pending,
        }
    }
}

impl<B: Send + 'static> Drop for LocalFuture<B> {
    fn drop(&mut self) {
        let St::InFlight { w, id, cancel } = &self.st else {
            return;
        };
        let (id, cancel) = (*id, *cancel);
        w.inner.forget(id);
        let Ok(mut wk) = w.inner.worker.try_borrow_mut() else {
            w.inner.orphans.borrow_mut().push((id, cancel));
            return;
        };
        let done = wk.take::<B>(id);
        if done.is_none() {
            dispose(&mut wk, id, cancel);
        }
        drop(wk);
        drop(done);
    }
}
