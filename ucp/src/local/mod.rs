//! Futures on a worker that one thread uses (UCX's thread mode single),
//! for single-threaded async runtimes.
//!
//! A [`LocalWorker`] is a [`Worker`] behind an `Rc<RefCell>`: its handles
//! are neither `Send` nor `Sync`, so every post, poll and progress runs on
//! the thread that made it, and none takes a lock. Its futures
//! ([`LocalFuture`]) have the semantics of a [`SharedWorker`]'s
//! ([`crate::OpFuture`]): owned buffers, completion through the waker of
//! the task that awaits, a poll that progresses the worker (and may spin
//! for a moment, [`LocalWorker::set_poll_spin`]), and cancel safety: a
//! dropped receive is canceled, a dropped send, put or get runs on, and
//! the buffer stays with the worker until the transport is done with it.
//!
//! What it is for: a task on a current-thread tokio runtime or a
//! `LocalSet` (with `tokio::LocalDriver`, feature `tokio`, progressing the worker while
//! the tasks sleep), or any executor that polls on one thread. A worker
//! that several threads use is a [`SharedWorker`]; the lock it takes on
//! every post and poll is what a local worker saves (on tokio, about a
//! tenth of an 8-byte shared-memory ping-pong's latency,
//! `examples/async_lat.rs`).
//!
//! Active messages too: [`LocalWorker::am_send`], and
//! [`LocalWorker::am_receiver`] for receiving them as futures.
//!
//! Operations that are not requests are futures too ([`LocalPolling`]):
//! connecting to a listener, flushing, closing an endpoint; and a
//! [`LocalListener`]'s accepts ([`LocalAccepting`]). Atomics are
//! [`LocalFuture`]s. What has no future here (memory mapping, rkeys)
//! goes through [`LocalWorker::with`].
//!
//! [`SharedWorker`]: crate::SharedWorker

mod am;
mod futures;
mod ops;
mod polling;
#[cfg(feature = "tokio")]
pub mod tokio;

pub use am::{LocalAmNext, LocalAmReceiver};
pub use futures::LocalFuture;
use futures::St;
pub use polling::{LocalAccepting, LocalFlush, LocalListener, LocalPolling};

use crate::request::{IoBuf, IoBufMut, Posted, ReqId};
use crate::shared::handoff::PostResult;
use crate::shared::ops::{get_post, put_post, stream_send_post};
use crate::{Ep, Op, Result, Rkey, Worker};
use std::cell::{Cell, RefCell};
use std::rc::Rc;
use std::task::Waker;
use std::time::Duration;

/// Progress calls between two looks at the clock in a polled future's spin.
const SPIN_CHECK: u32 = 64;

/// A worker used by one thread, with futures: see the module
/// documentation. Clones are handles to the same worker.
///
/// ```
/// # fn main() -> rucx_ucp::Result<()> {
/// use rucx_ucp::uct::{self_tl, Registry};
/// use std::task::{Context, Poll, Waker};
/// let ctx = rucx_ucp::Context::from_env(&Registry::new().with(&self_tl::COMPONENT))?;
/// let w = ctx.create_worker()?.into_local();
/// let ep = w.connect(&w.address())?;
/// let mut recv = w.tag_recv(vec![0u8; 5], 9, u64::MAX)?;
/// let _sent = w.tag_send(ep, b"hello".to_vec(), 9)?;
/// // Any executor polls it; here by hand.
/// let mut cx = Context::from_waker(Waker::noop());
/// let (info, buf) = loop {
///     if let Poll::Ready(r) = std::pin::Pin::new(&mut recv).poll(&mut cx) {
///         break r.map_err(|e| e.error)?;
///     }
/// };
/// assert_eq!((info.length, &buf[..]), (5, &b"hello"[..]));
/// # use std::future::Future;
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct LocalWorker {
    inner: Rc<Inner>,
}

impl std::fmt::Debug for LocalWorker {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LocalWorker")
            .field("completed", &self.inner.completed.get())
            .finish_non_exhaustive()
    }
}

struct Inner {
    worker: RefCell<Worker>,
    /// Futures of requests in flight, by request.
    waiters: RefCell<Vec<(ReqId, Waker)>>,
    /// Futures of flushes: woken after every progress that did something.
    others: RefCell<Vec<Waker>>,
    /// The worker's completed count when the waiters were last looked at.
    completed: Cell<u64>,
    /// How long a polled future progresses before it returns `Pending`.
    poll_spin: Cell<Duration>,
    /// Requests whose futures were dropped while the worker was borrowed:
    /// disposed of at the next borrow (`true`: cancel it).
    orphans: RefCell<Vec<(ReqId, bool)>>,
    /// A driver sleeps on the event fd (or is about to): a post wakes it.
    sleeping: Cell<bool>,
    /// The sleeping driver's waker.
    driver: RefCell<Option<Waker>>,
}

impl Worker {
    /// This worker, with futures, for the thread that uses it (see
    /// [`LocalWorker`]).
    pub fn into_local(self) -> LocalWorker {
        LocalWorker {
            inner: Rc::new(Inner {
                worker: RefCell::new(self),
                waiters: RefCell::default(),
                others: RefCell::default(),
                completed: Cell::new(0),
                poll_spin: Cell::new(Duration::ZERO),
                orphans: RefCell::default(),
                sleeping: Cell::new(false),
                driver: RefCell::default(),
            }),
        }
    }
}

impl LocalWorker {
    /// Runs `f` on the worker, for everything without a future here
    /// (memory mapping, rkeys, active messages, closing).
    ///
    /// # Panics
    /// When called from inside `f` of another `with` of the same worker.
    pub fn with<R>(&self, f: impl FnOnce(&mut Worker) -> R) -> R {
        let r = f(&mut self.inner.borrow());
        self.kick();
        r
    }

    /// Progresses the worker once and wakes the futures whose requests
    /// completed; the count of events progressed (0 if the worker is
    /// borrowed, from inside [`LocalWorker::with`]).
    pub fn progress(&self) -> usize {
        let Some(mut w) = self.inner.try_borrow() else {
            return 0;
        };
        let n = w.progress();
        let wake = self.inner.completions(&mut w, n > 0);
        drop(w);
        wake_all(wake);
        n
    }

    /// This worker's address (see [`Worker::address`]).
    ///
    /// # Panics
    /// When called from inside [`LocalWorker::with`].
    pub fn address(&self) -> Vec<u8> {
        self.with(|w| w.address())
    }

    /// An endpoint to the worker at `remote` (see [`Worker::connect`]).
    pub fn connect(&self, remote: &[u8]) -> Result<Ep> {
        let ep = self.inner.borrow_for_post()?.connect(remote);
        self.kick();
        ep
    }

    /// How long a polled future of this worker keeps progressing it before
    /// it returns `Pending`, when it is the only future that waits (zero,
    /// the default: one progress call per poll); see
    /// [`SharedWorker::set_poll_spin`](crate::SharedWorker::set_poll_spin).
    pub fn set_poll_spin(&self, spin: Duration) {
        self.inner.poll_spin.set(spin);
    }

    /// Sends `buf` with `tag` on `ep` (see [`Worker::tag_send`]).
    pub fn tag_send<B: IoBuf>(&self, ep: Ep, buf: B, tag: u64) -> Result<LocalFuture<B>> {
        self.post(false, |w| w.tag_send(ep, buf, tag, Op::new()))
    }

    /// Sends `buf` with `tag` on `ep`, completing once a receive matched it.
    pub fn tag_send_sync<B: IoBuf>(&self, ep: Ep, buf: B, tag: u64) -> Result<LocalFuture<B>> {
        self.post(false, |w| w.tag_send(ep, buf, tag, Op::new().sync()))
    }

    /// Receives a message matching `(tag, mask)` into `buf`; a drop before
    /// completion cancels the receive.
    pub fn tag_recv<B: IoBufMut>(&self, buf: B, tag: u64, mask: u64) -> Result<LocalFuture<B>> {
        self.post(true, |w| w.tag_recv(buf, tag, mask, Op::new()))
    }

    /// Sends `buf` on `ep`'s stream.
    pub fn stream_send<B: IoBuf>(&self, ep: Ep, buf: B) -> Result<LocalFuture<B>> {
        self.post_raw(false, |w| stream_send_post(w, ep, buf))
    }

    /// Receives at least one byte of `ep`'s stream into `buf`; a drop
    /// before completion cancels it.
    pub fn stream_recv<B: IoBufMut>(&self, ep: Ep, buf: B) -> Result<LocalFuture<B>> {
        self.post(true, |w| w.stream_recv(ep, buf, Op::new()))
    }

    /// Writes `buf` to `remote_addr` of the peer's memory named by `rkey`.
    pub fn put<B: IoBuf>(
        &self,
        ep: Ep,
        buf: B,
        remote_addr: u64,
        rkey: &Rkey,
    ) -> Result<LocalFuture<B>> {
        self.post_raw(false, |w| put_post(w, ep, buf, remote_addr, rkey))
    }

    /// Reads `buf.len()` bytes at `remote_addr` of the peer's memory named
    /// by `rkey` into `buf`.
    pub fn get<B: IoBufMut>(
        &self,
        ep: Ep,
        buf: B,
        remote_addr: u64,
        rkey: &Rkey,
    ) -> Result<LocalFuture<B>> {
        self.post_raw(false, |w| get_post(w, ep, buf, remote_addr, rkey))
    }

    /// Posts through the owned tier with the worker borrowed; the future
    /// of what it posted (a failed post drops the buffer, as the owned
    /// tier does).
    fn post<B: Send + 'static>(
        &self,
        cancel: bool,
        f: impl FnOnce(&mut Worker) -> Result<Posted<B>>,
    ) -> Result<LocalFuture<B>> {
        let p = f(&mut *self.inner.borrow_for_post()?)?;
        self.kick();
        Ok(self.future(p, cancel))
    }

    /// Posts through the raw tier with the worker borrowed; a failed post
    /// fails the future, which gives the buffer back.
    fn post_raw<B: Send + 'static>(
        &self,
        cancel: bool,
        f: impl FnOnce(&mut Worker) -> PostResult<B>,
    ) -> Result<LocalFuture<B>> {
        let p = f(&mut *self.inner.borrow_for_post()?);
        self.kick();
        Ok(match p {
            Ok(p) => self.future(p, cancel),
            Err(e) => LocalFuture {
                st: St::Ready(Err(e)),
            },
        })
    }

    fn future<B: Send + 'static>(&self, p: Posted<B>, cancel: bool) -> LocalFuture<B> {
        let st = match p {
            Posted::Done(info, b) => St::Ready(Ok((info, b))),
            Posted::InFlight(id) => St::InFlight {
                w: self.clone(),
                id,
                cancel,
            },
        };
        LocalFuture { st }
    }

    /// One poll of an operation that is not a request: `step` (with the
    /// worker), and if it is not over, a progress and `step` again; a
    /// pending one is woken after the next progress that did something.
    fn poll_step<T>(
        &self,
        cx: &mut std::task::Context<'_>,
        mut step: impl FnMut(&mut Worker) -> Option<T>,
    ) -> std::task::Poll<T> {
        let inner = &self.inner;
        let Some(mut wk) = inner.try_borrow() else {
            // Polled from inside `with`: look again soon.
            cx.waker().wake_by_ref();
            return std::task::Poll::Pending;
        };
        let mut n = 0;
        let mut r = step(&mut wk);
        if r.is_none() {
            n = wk.progress();
            r = step(&mut wk);
        }
        if r.is_none() {
            let mut others = inner.others.borrow_mut();
            if !others.iter().any(|k| k.will_wake(cx.waker())) {
                others.push(cx.waker().clone());
            }
        }
        let wake = inner.completions(&mut wk, n > 0);
        drop(wk);
        wake_all(wake);
        match r {
            Some(r) => std::task::Poll::Ready(r),
            None => std::task::Poll::Pending,
        }
    }

    /// Wakes a sleeping driver: what was posted may need progress.
    #[inline]
    fn kick(&self) {
        if self.inner.sleeping.replace(false) {
            if let Some(d) = self.inner.driver.borrow_mut().take() {
                d.wake();
            }
        }
    }
}

impl Inner {
    /// The worker, borrowed, with the requests of futures dropped while it
    /// was borrowed disposed of first (a receive among them must not take
    /// a message meant for a later one).
    fn borrow(&self) -> std::cell::RefMut<'_, Worker> {
        let mut w = self.worker.borrow_mut();
        self.dispose_orphans(&mut w);
        w
    }

    /// [`Inner::borrow`] for a post: an error while it is borrowed (a post
    /// from inside [`LocalWorker::with`]).
    fn borrow_for_post(&self) -> Result<std::cell::RefMut<'_, Worker>> {
        self.try_borrow().ok_or_else(|| {
            crate::Error::InvalidParam(
                "a local worker's operation posted from inside its own `with`".into(),
            )
        })
    }

    /// [`Inner::borrow`], or `None` while it is borrowed (from inside
    /// [`LocalWorker::with`]).
    fn try_borrow(&self) -> Option<std::cell::RefMut<'_, Worker>> {
        let mut w = self.worker.try_borrow_mut().ok()?;
        self.dispose_orphans(&mut w);
        Some(w)
    }

    /// Disposes of the requests of futures dropped while the worker was
    /// borrowed, if there are any (a look at a length on every borrow).
    #[inline]
    fn dispose_orphans(&self, w: &mut Worker) {
        if !self.orphans.borrow().is_empty() {
            self.dispose_orphans_now(w);
        }
    }

    #[cold]
    #[inline(never)]
    fn dispose_orphans_now(&self, w: &mut Worker) {
        let orphans = std::mem::take(&mut *self.orphans.borrow_mut());
        for (id, cancel) in orphans {
            dispose(w, id, cancel);
        }
    }

    /// Disposes of orphaned requests; the wakers of the futures whose
    /// requests completed since the last look, and those of flushes if
    /// `progressed`.
    #[inline]
    fn completions(&self, w: &mut Worker, progressed: bool) -> Vec<Waker> {
        self.dispose_orphans(w);
        let mut wake = Vec::new();
        let count = w.completed_count();
        if count != self.completed.get() {
            self.completed.set(count);
            let mut waiters = self.waiters.borrow_mut();
            if !waiters.is_empty() {
                waiters.retain(|(id, k)| {
                    let active = w.request_is_active(*id);
                    if !active {
                        wake.push(k.clone());
                    }
                    active
                });
            }
        }
        if progressed || !wake.is_empty() {
            let mut others = self.others.borrow_mut();
            if !others.is_empty() {
                wake.append(&mut others);
            }
        }
        wake
    }

    #[inline]
    fn forget(&self, id: ReqId) {
        let mut ws = self.waiters.borrow_mut();
        if !ws.is_empty() {
            ws.retain(|(i, _)| *i != id);
        }
    }
}

/// Wakes `wake`, with no borrow of the worker alive.
#[inline]
fn wake_all(wake: Vec<Waker>) {
    if wake.is_empty() {
        return;
    }
    for k in wake {
        k.wake();
    }
}

/// Lets go of request `id`, whose future is gone: a receive (`cancel`)
/// is canceled; the worker keeps the buffer until the transport is done.
fn dispose(w: &mut Worker, id: ReqId, cancel: bool) {
    if cancel && w.request_is_active(id) {
        w.request_cancel(id);
    }
    w.request_release(id);
}

#[cfg(test)]
mod tests;
