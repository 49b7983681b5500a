//! Futures of a [`SharedWorker`]'s operations that are not requests:
//! [`Polling`] (connecting, flushing, closing) and [`Accepting`] (a
//! [`SharedListener`]'s connection requests). Each poll takes the lock,
//! steps the operation and progresses the worker once; a pending one is
//! woken after the next progress that did something.

use super::{Locked, SharedWorker};
use crate::worker::{ConnRequest, Listener};
use crate::{Ep, EpParams, Result, Worker};
use std::collections::VecDeque;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context as TaskContext, Poll};

/// One step of an operation that is not a request: `Some` once it ended.
type Step<T> = Box<dyn FnMut(&mut Worker) -> Option<Result<T>> + Send>;

/// An operation of a [`SharedWorker`] that is not a request (connecting,
/// flushing, closing): a [`Future`], or [`Polling::wait`] to block.
#[must_use = "the operation only advances while it is polled or waited for"]
pub struct Polling<T> {
    w: SharedWorker,
    step: Step<T>,
    done: Option<Result<T>>,
}

impl<T> std::fmt::Debug for Polling<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Polling").finish_non_exhaustive()
    }
}

impl<T> Unpin for Polling<T> {}

impl<T> Polling<T> {
    pub(crate) fn new(w: SharedWorker, step: Step<T>) -> Polling<T> {
        Polling {
            w,
            step,
            done: None,
        }
    }

    /// Already ended with `r` (an error at the start).
    pub(crate) fn ended(w: SharedWorker, r: Result<T>) -> Polling<T> {
        Polling {
            w,
            step: Box::new(|_| None),
            done: Some(r),
        }
    }

    /// One step and one progress; `Some` once it ended.
    fn turn(&mut self, waker: Option<&std::task::Waker>) -> Option<Result<T>> {
        if let Some(r) = self.done.take() {
            return Some(r);
        }
        let mut g: Locked<'_> = self.w.lock();
        let mut r = (self.step)(g.worker());
        let mut n = 0;
        if r.is_none() {
            n = g.worker().progress();
            r = (self.step)(g.worker());
        }
        if r.is_none() {
            if let Some(wk) = waker {
                g.wait_any(wk);
            }
        }
        g.unlock(n > 0);
        r
    }

    /// Blocks until the operation ends.
    pub fn wait(mut self) -> Result<T> {
        loop {
            if let Some(r) = self.turn(None) {
                return r;
            }
            std::thread::yield_now();
        }
    }
}

impl<T> Future for Polling<T> {
    type Output = Result<T>;

    fn poll(self: Pin<&mut Self>, cx: &mut TaskContext<'_>) -> Poll<Result<T>> {
        match self.get_mut().turn(Some(cx.waker())) {
            Some(r) => Poll::Ready(r),
            None => Poll::Pending,
        }
    }
}

/// Connection requests a listener's handler queued.
pub(crate) type Incoming = Arc<parking_lot::Mutex<VecDeque<ConnRequest>>>;

/// A listener of a [`SharedWorker`]: connection requests queue until
/// [`SharedListener::accept`] takes them. Closed when dropped.
#[derive(Debug)]
pub struct SharedListener {
    pub(crate) w: SharedWorker,
    pub(crate) l: Listener,
    pub(crate) incoming: Incoming,
}

impl SharedListener {
    /// The address it listens on.
    pub fn addr(&self) -> Result<std::net::SocketAddr> {
        self.w.with(|w| w.listener_addr(self.l))
    }

    /// The next connection request, accepted into an endpoint with
    /// `params`.
    pub fn accept(&self, params: EpParams) -> Accepting<'_> {
        Accepting {
            lis: self,
            params: Some(params),
        }
    }
}

impl Drop for SharedListener {
    fn drop(&mut self) {
        let l = self.l;
        let _ = self.w.with(|w| w.listener_close(l));
    }
}

/// The future of [`SharedListener::accept`] (or [`Accepting::wait`]).
#[must_use = "nothing is accepted unless it is polled or waited for"]
pub struct Accepting<'a> {
    lis: &'a SharedListener,
    params: Option<EpParams>,
}

impl std::fmt::Debug for Accepting<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Accepting").finish_non_exhaustive()
    }
}

impl Accepting<'_> {
    fn turn(&mut self, waker: Option<&std::task::Waker>) -> Option<Result<Ep>> {
        let mut g = self.lis.w.lock();
        let mut req = self.lis.incoming.lock().pop_front();
        let mut n = 0;
        if req.is_none() {
            n = g.worker().progress();
            req = self.lis.incoming.lock().pop_front();
        }
        let r = match req {
            Some(req) => Some(
                g.worker()
                    .accept(req, self.params.take().unwrap_or_default()),
            ),
            None => {
                if let Some(wk) = waker {
                    g.wait_any(wk);
                }
                None
            }
        };
        g.unlock(n > 0);
        r
    }

    /// Blocks until a client connects; its endpoint.
    pub fn wait(mut self) -> Result<Ep> {
        loop {
            if let Some(r) = self.turn(None) {
                return r;
            }
            std::thread::sleep(std::time::Duration::from_micros(50));
        }
    }
}

impl Future for Accepting<'_> {
    type Output = Result<Ep>;

    fn poll(self: Pin<&mut Self>, cx: &mut TaskContext<'_>) -> Poll<Result<Ep>> {
        match self.get_mut().turn(Some(cx.waker())) {
            Some(r) => Poll::Ready(r),
            None => Poll::Pending,
        }
    }
}
