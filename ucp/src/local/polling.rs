//! Futures of a [`LocalWorker`]'s operations that are not requests:
//! [`LocalPolling`] (connecting, flushing, closing) and
//! [`LocalAccepting`] (a [`LocalListener`]'s connection requests). Each
//! poll steps the operation, and if it is not over progresses the worker
//! and steps it again; a pending one is woken after the next progress
//! that did something (a `LocalDriver`'s, or another future's).

use super::LocalWorker;
use crate::shared::polling::Incoming;
use crate::worker::Listener;
use crate::{Ep, EpParams, Result, Worker};
use std::future::Future;
use std::pin::Pin;
use std::task::{Context as TaskContext, Poll};

/// One step of an operation that is not a request: `Some` once it ended.
type Step<T> = Box<dyn FnMut(&mut Worker) -> Option<Result<T>>>;

/// An operation of a [`LocalWorker`] that is not a request (connecting,
/// flushing, closing): a [`Future`] of its result.
#[must_use = "the operation only advances while it is polled"]
pub struct LocalPolling<T> {
    w: LocalWorker,
    step: Step<T>,
    done: Option<Result<T>>,
}

/// The future of [`LocalWorker::flush`] and [`LocalWorker::ep_flush`].
pub type LocalFlush = LocalPolling<()>;

impl<T> std::fmt::Debug for LocalPolling<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LocalPolling").finish_non_exhaustive()
    }
}

impl<T> Unpin for LocalPolling<T> {}

impl<T> LocalPolling<T> {
    /// An operation started with `start` and then stepped by `step`, or
    /// ended with `start`'s error (also the error of a start from inside
    /// [`LocalWorker::with`]).
    pub(super) fn start<S: 'static>(
        w: &LocalWorker,
        start: impl FnOnce(&mut Worker) -> Result<S>,
        mut step: impl FnMut(&mut Worker, &mut S) -> Option<Result<T>> + 'static,
    ) -> LocalPolling<T> {
        let started = w.inner.borrow_for_post().and_then(|mut wk| start(&mut wk));
        w.kick();
        match started {
            Ok(mut s) => LocalPolling {
                w: w.clone(),
                step: Box::new(move |wk| step(wk, &mut s)),
                done: None,
            },
            Err(e) => LocalPolling {
                w: w.clone(),
                step: Box::new(|_| None),
                done: Some(Err(e)),
            },
        }
    }
}

impl<T> Future for LocalPolling<T> {
    type Output = Result<T>;

    fn poll(self: Pin<&mut Self>, cx: &mut TaskContext<'_>) -> Poll<Result<T>> {
        let this = self.get_mut();
        if let Some(r) = this.done.take() {
            return Poll::Ready(r);
        }
        let step = &mut this.step;
        this.w.poll_step(cx, |wk| step(wk))
    }
}

/// A listener of a [`LocalWorker`] ([`LocalWorker::listen`]): connection
/// requests queue until [`LocalListener::accept`] takes them. Closed when
/// dropped (or, if dropped inside [`LocalWorker::with`], with the worker).
#[derive(Debug)]
pub struct LocalListener {
    pub(super) w: LocalWorker,
    pub(super) l: Listener,
    pub(super) incoming: Incoming,
}

impl LocalListener {
    /// The address it listens on.
    pub fn addr(&self) -> Result<std::net::SocketAddr> {
        let w = self.w.inner.borrow_for_post()?;
        w.listener_addr(self.l)
    }

    /// The next connection request, accepted into an endpoint with
    /// `params`.
    pub fn accept(&self, params: EpParams) -> LocalAccepting<'_> {
        LocalAccepting {
            lis: self,
            params: Some(params),
        }
    }
}

impl Drop for LocalListener {
    fn drop(&mut self) {
        match self.w.inner.try_borrow() {
            Some(mut w) => {
                let _ = w.listener_close(self.l);
            }
            None => tracing::warn!("a local listener dropped inside `with` stays open"),
        }
    }
}

/// The future of [`LocalListener::accept`]: the endpoint of the next
/// client.
#[must_use = "nothing is accepted unless it is polled"]
pub struct LocalAccepting<'a> {
    lis: &'a LocalListener,
    params: Option<EpParams>,
}

impl std::fmt::Debug for LocalAccepting<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LocalAccepting").finish_non_exhaustive()
    }
}

impl Future for LocalAccepting<'_> {
    type Output = Result<Ep>;

    fn poll(self: Pin<&mut Self>, cx: &mut TaskContext<'_>) -> Poll<Result<Ep>> {
        let this = self.get_mut();
        let (lis, params) = (this.lis, &mut this.params);
        lis.w.poll_step(cx, |w| {
            let req = lis.incoming.lock().pop_front()?;
            Some(w.accept(req, params.take().unwrap_or_default()))
        })
    }
}
