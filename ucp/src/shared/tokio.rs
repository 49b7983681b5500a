//! A driver for tokio: progresses a [`SharedWorker`] while the tasks that
//! await its futures sleep (the `tokio` feature).
//!
//! Every future of a shared worker progresses it once when polled; what
//! completes a request while its task sleeps is someone else's progress.
//! [`Driver`] (or [`drive`], [`spawn`]) is that someone on a tokio runtime,
//! a task that does what the progress thread does, with awaits where the
//! thread blocks:
//!
//! 1. progress until idle, in bursts of at most 64 calls under the lock,
//!    yielding to the runtime (`yield_now`) after each burst that did
//!    something, so that the tasks it woke run;
//! 2. once idle, keep polling (try-lock, one call per turn, a yield every
//!    16) for [`Driver::spin`] (default [`DEFAULT_SPIN`]): a reply that
//!    arrives within it is found without a sleep and a wake-up;
//! 3. then, under the lock, set the worker's `sleeping` flag and
//!    [`Worker::arm`](crate::Worker::arm) it: `Busy` means progress again;
//!    `Sleep` means await readiness of the worker's event fd through
//!    [`AsyncFd`], for at most
//!    what the worker allows (`sleep_limit`: 500 ms, the next keepalive
//!    round; 1 ms while futures of connects, closes or flushes wait, whose
//!    sockets are not in the event set), then clear the flag, run
//!    `after_sleep` and wake those futures.
//!
//! Waking the driver after a post. A task (or thread) that posts a send
//! or a receive while the driver sleeps must wake it, since what it posted
//! may need progress (a send that queued, a rendezvous). The driver uses
//! the progress thread's protocol: the `sleeping` flag, set under the lock
//! before `arm`, and the worker's [`Waker`](crate::Waker) eventfd, which is
//! a member of the event set: every unlock after a post sees the flag and
//! signals the eventfd, which makes the event fd readable, which tokio's
//! reactor reports as readiness of the driver's `AsyncFd`. A post either
//! takes the lock before the driver's arm (and the progress after the
//! sleep sees it; the signal also makes `arm` say `Busy`), or after it
//! (and sees the flag). Waking the driver's task directly would need a
//! second mechanism for the same thing; the eventfd write costs one system
//! call per post made while the driver sleeps, and none while it spins.
//! One flag means one sleeper: a worker with a progress thread needs no
//! driver ([`Driver::run`] returns at once), and a second driver of the
//! same worker is refused.
//!
//! Yielding. `tokio::task::yield_now` defers the driver until the
//! runtime has polled its reactor, which costs an `epoll_wait` with no
//! timeout whenever no other task is ready: about one system call per
//! message that completes a request. A task that wakes itself instead
//! (`wake_by_ref`, then `Pending`) costs none, but keeps the run queue
//! from emptying, and a current-thread runtime then polls its `block_on`
//! future and its reactor only every 61 task polls (`event_interval`): in
//! an 8-byte shared-memory ping-pong (`examples/async_lat.rs`) some runs
//! took 34 to 61 µs per message that way instead of 0.35 to 0.5 µs. The
//! driver yields with `yield_now`.
//!
//! The event fd. The driver registers a duplicate of the worker's epoll
//! fd (`dup`) with the reactor, not the worker's own: the duplicate names
//! the same epoll instance, stays open until the driver deregisters it and
//! closes it, and so never names another file, whenever the worker is
//! dropped. Tokio registers fds edge-triggered; an epoll instance reports
//! one edge per event of any fd in its set, and the driver clears the
//! readiness it saw (tokio's clear only drops that readiness, not a newer
//! one) before it progresses, so no event after its arm is lost.
//!
//! Lifetime. The driver holds the worker only weakly, and strongly only
//! within a turn: it ends (with `Ok`) once the application's handles and
//! futures are gone, at the latest after its sleep limit (dropping the
//! worker also signals the eventfd, which wakes it at once). To stop it
//! earlier, drop its future or abort its task: it holds no lock across an
//! await, and its drop clears the `sleeping` flag.
//!
//! The runtime must have I/O and time enabled (`Builder::enable_all`, or
//! `#[tokio::main]`); a current-thread runtime suits a latency-bound
//! application, whose tasks and driver then share one thread.
#![allow(unsafe_code)]

use super::{Inner, Locked, SharedWorker};
use crate::uct::Armed;
use crate::{Error, Result};
use ::tokio::io::unix::AsyncFd;
use ::tokio::io::Interest;
use std::os::fd::{BorrowedFd, OwnedFd};
use std::sync::atomic::Ordering;
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

/// Progress calls in a row before the driver yields to the runtime.
const BURST: usize = 64;

/// Idle polls between two yields while the driver spins.
const SPIN_YIELD: u32 = 16;

/// How long the driver sleeps at most while futures of operations that
/// are not requests wait (a connecting client's socket is not in the event
/// set).
const OTHERS_TICK: Duration = Duration::from_millis(1);

/// How long a [`Driver`] keeps polling an idle worker before it sleeps,
/// unless [`Driver::spin`] says otherwise.
pub const DEFAULT_SPIN: Duration = Duration::from_micros(50);

/// How long a polled future of a driven worker progresses it before it
/// returns `Pending`, unless [`Driver::poll_spin`] says otherwise
/// ([`SharedWorker::set_poll_spin`]).
pub const DEFAULT_POLL_SPIN: Duration = Duration::from_micros(5);

/// Drives a [`SharedWorker`] on the current tokio runtime: see the module
/// documentation.
///
/// ```no_run
/// # async fn f(w: rucx_ucp::SharedWorker) -> rucx_ucp::Result<()> {
/// use std::time::Duration;
/// let driver = rucx_ucp::tokio::Driver::new(&w).spin(Duration::from_micros(20));
/// let task = tokio::spawn(driver.run());
/// // ... await w's futures ...
/// drop(w);
/// task.await.expect("driver task")?;
/// # Ok(()) }
/// ```
#[derive(Debug, Clone)]
pub struct Driver {
    w: Weak<Inner>,
    spin: Duration,
    poll_spin: Duration,
}

impl Driver {
    /// A driver of `w` (which it holds weakly).
    pub fn new(w: &SharedWorker) -> Driver {
        Driver {
            w: Arc::downgrade(&w.inner),
            spin: DEFAULT_SPIN,
            poll_spin: DEFAULT_POLL_SPIN,
        }
    }

    /// How long to keep polling once the worker is idle before sleeping on
    /// its event fd (zero: sleep at once). Longer spins answer faster and
    /// burn a core meanwhile.
    pub fn spin(mut self, spin: Duration) -> Driver {
        self.spin = spin;
        self
    }

    /// How long a future of the worker, polled while no other future of it
    /// waits, progresses the worker before it returns `Pending` (zero: one
    /// progress call): set on the worker when the driver starts
    /// ([`SharedWorker::set_poll_spin`]). It saves the wake-up and the
    /// runtime's turn when a reply comes within it, and holds the task's
    /// thread meanwhile.
    pub fn poll_spin(mut self, spin: Duration) -> Driver {
        self.poll_spin = spin;
        self
    }

    /// Drives the worker until its other handles are gone (`Ok`). Fails
    /// if the worker has no [`Waker`](crate::Waker) or event fd, already
    /// has a driver, or the runtime's reactor fails; returns `Ok` at once
    /// if the worker has a progress thread.
    ///
    /// # Panics
    /// Outside a tokio runtime with I/O and time enabled.
    pub async fn run(self) -> Result<()> {
        let Some(fd) = self.start()? else {
            return Ok(());
        };
        let _reg = Registered(Weak::clone(&self.w));
        drop(fd.w);
        // SAFETY: `fd.fd` is an open fd the AsyncFd owns (a duplicate of
        // the worker's), closed only when the AsyncFd drops, after tokio
        // deregistered it.
        let afd =
            unsafe { AsyncFd::register_with_interest(fd.fd, Interest::READABLE) }.map_err(|e| {
                let (_fd, e) = e.into_parts();
                Error::transport(crate::ucs::Error::io("register the event fd", e))
            })?;
        self.turns(&afd).await
    }

    /// Checks that the worker can be driven and claims it; the duplicate
    /// of its event fd.
    fn start(&self) -> Result<Option<Start>> {
        let Some(inner) = self.w.upgrade() else {
            return Ok(None);
        };
        let w = SharedWorker { inner };
        if w.has_progress_thread() {
            tracing::debug!("tokio driver: the worker has a progress thread");
            return Ok(None);
        }
        if w.inner.signal.is_none() {
            return Err(Error::Unsupported("the worker has no waker".into()));
        }
        let fd = w.with(|wk| -> Result<OwnedFd> {
            let raw = wk.event_fd()?;
            // SAFETY: the worker owns `raw` and keeps it open while the
            // lock is held; the duplicate is ours.
            let fd = unsafe { BorrowedFd::borrow_raw(raw) };
            fd.try_clone_to_owned()
                .map_err(|e| Error::transport(crate::ucs::Error::io("dup the event fd", e)))
        })?;
        if w.inner.driven.swap(true, Ordering::AcqRel) {
            return Err(Error::Unsupported("the worker already has a driver".into()));
        }
        w.set_poll_spin(self.poll_spin);
        Ok(Some(Start { w: w.inner, fd }))
    }

    async fn turns(&self, afd: &AsyncFd<OwnedFd>) -> Result<()> {
        let mut pace = Pace::default();
        loop {
            let Some(inner) = self.w.upgrade() else {
                return Ok(());
            };
            let w = SharedWorker { inner };
            let spinning = pace.spinning(self.spin);
            match turn(&w, !spinning) {
                Next::Progressed => {
                    pace.progressed();
                    drop(w);
                    ::tokio::task::yield_now().await;
                }
                Next::Idle => {
                    drop(w);
                    if pace.idle(spinning) {
                        ::tokio::task::yield_now().await;
                    }
                }
                Next::Sleep(t) => {
                    drop(w);
                    match ::tokio::time::timeout(t, afd.readable()).await {
                        Ok(Ok(mut ready)) => ready.clear_ready(),
                        Ok(Err(e)) => {
                            self.awake();
                            return Err(Error::transport(crate::ucs::Error::io(
                                "wait for the event fd",
                                e,
                            )));
                        }
                        Err(_elapsed) => {}
                    }
                    let Some(inner) = self.w.upgrade() else {
                        return Ok(());
                    };
                    inner.sleeping.open();
                    let w = SharedWorker { inner };
                    let mut g = w.lock();
                    if let Err(e) = g.worker().after_sleep() {
                        tracing::warn!("tokio driver: {e}");
                    }
                    // Connects, closes and flushes poll sockets of their
                    // own: let them look.
                    let others = g.others_wait();
                    g.unlock_quiet(others);
                    pace.slept();
                }
            }
        }
    }

    /// Clears the `sleeping` flag (the driver does not sleep any more).
    fn awake(&self) {
        if let Some(inner) = self.w.upgrade() {
            inner.sleeping.open();
        }
    }
}

/// When a driver spins and when it may sleep: it spins for its spin time
/// after the worker went idle, yielding now and then; a driver that woke
/// from a sleep to nothing sleeps again without spinning.
#[derive(Debug, Default)]
pub(crate) struct Pace {
    /// Idle since then; `None` while the worker has work.
    idle: Option<Instant>,
    /// Woke from a sleep and found nothing yet.
    spun: bool,
    polls: u32,
}

impl Pace {
    /// Whether the driver still spins (may not sleep yet).
    pub(crate) fn spinning(&self, spin: Duration) -> bool {
        !self.spun && self.idle.is_none_or(|t| t.elapsed() < spin)
    }

    /// A turn progressed something.
    pub(crate) fn progressed(&mut self) {
        self.idle = None;
        self.spun = false;
    }

    /// A turn found nothing to do: whether to yield to the runtime now
    /// (always once it does not spin; every [`SPIN_YIELD`] polls while it
    /// does).
    pub(crate) fn idle(&mut self, spinning: bool) -> bool {
        if !spinning {
            return true;
        }
        self.idle.get_or_insert_with(Instant::now);
        self.polls = self.polls.wrapping_add(1);
        if self.polls % SPIN_YIELD == 0 {
            return true;
        }
        std::hint::spin_loop();
        false
    }

    /// The driver woke from a sleep.
    pub(crate) fn slept(&mut self) {
        self.spun = true;
        self.idle = None;
    }
}

/// A claimed worker and the duplicate of its event fd.
struct Start {
    w: Arc<Inner>,
    fd: OwnedFd,
}

/// The claim of a worker by a driver: released, and the `sleeping` flag
/// cleared, when the driver ends or is dropped.
struct Registered(Weak<Inner>);

impl Drop for Registered {
    fn drop(&mut self) {
        if let Some(inner) = self.0.upgrade() {
            inner.sleeping.open();
            inner.driven.store(false, Ordering::Release);
        }
    }
}

/// Drives `w` until its other handles are gone (see [`Driver`]): it holds
/// `w` weakly, so the caller keeps handles of its own.
///
/// # Panics
/// Outside a tokio runtime with I/O and time enabled.
pub async fn drive(w: SharedWorker) -> Result<()> {
    let d = Driver::new(&w);
    drop(w);
    d.run().await
}

/// Spawns the driver of `w` ([`Driver::new`] with the default spin) on
/// the current runtime.
///
/// # Panics
/// Outside a tokio runtime.
pub fn spawn(w: &SharedWorker) -> ::tokio::task::JoinHandle<Result<()>> {
    ::tokio::spawn(Driver::new(w).run())
}

/// What the driver does after a turn.
enum Next {
    /// Something progressed: yield, then go on.
    Progressed,
    /// Nothing to do, and the driver may not sleep yet (or the lock was
    /// taken, or `arm` said `Busy`).
    Idle,
    /// Armed: sleep on the event fd at most this long.
    Sleep(Duration),
}

/// Progress until idle (at most [`BURST`] calls); if it did nothing and
/// `sleep`, arm. Only tries the lock while spinning.
fn turn(w: &SharedWorker, sleep: bool) -> Next {
    let st = if sleep {
        w.inner.state.lock()
    } else {
        match w.inner.state.try_lock() {
            Some(st) => st,
            None => return Next::Idle,
        }
    };
    let mut g = Locked::new(&w.inner, st);
    let mut n = 0;
    for _ in 0..BURST {
        let k = g.worker().progress();
        n += k;
        if k == 0 {
            break;
        }
    }
    if n > 0 {
        g.unlock_quiet(true);
        return Next::Progressed;
    }
    if !sleep {
        g.unlock_quiet(false);
        return Next::Idle;
    }
    // Set before arming, under the lock: a post after this section sees
    // it and signals the event fd.
    w.inner.sleeping.closing();
    let next = match g.worker().arm() {
        Ok(Armed::Sleep) => {
            let limit = g.others_wait().then_some(OTHERS_TICK);
            Next::Sleep(g.worker().sleep_limit(limit))
        }
        Ok(Armed::Busy) => Next::Idle,
        Err(e) => {
            tracing::warn!("tokio driver: arm: {e}");
            Next::Idle
        }
    };
    if !matches!(next, Next::Sleep(_)) {
        w.inner.sleeping.open();
    }
    g.unlock_quiet(false);
    next
}
