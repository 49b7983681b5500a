//! A driver for tokio: progresses a [`LocalWorker`] while the tasks that
//! await its futures sleep (the `tokio` feature), on the worker's thread:
//! a current-thread runtime, or a `LocalSet` (`spawn_local`).
//!
//! It does what [`crate::tokio::Driver`] does for a shared worker, without
//! a lock: progress in bursts, yielding to the runtime after each burst
//! that did something; once idle, poll for [`LocalDriver::spin`]; then arm
//! the worker and await its event fd (a duplicate registered through
//! [`AsyncFd`]) for at most the worker's sleep limit. A post while the
//! driver sleeps wakes the driver's task directly (no system call): every
//! task of the worker runs on this thread, so the post happens while the
//! driver awaits, and the driver's waker is there to be woken.
//!
//! The driver holds the worker weakly and ends once the application's
//! handles and futures are gone (at the latest after its sleep limit).
#![allow(unsafe_code)]

use super::{wake_all, Inner, LocalWorker};
use crate::shared::tokio::Pace;
use crate::uct::Armed;
use crate::{Error, Result};
use ::tokio::io::unix::AsyncFd;
use ::tokio::io::Interest;
use std::future::Future;
use std::os::fd::{BorrowedFd, OwnedFd};
use std::rc::{Rc, Weak};
use std::task::Poll;
use std::time::Duration;

/// Progress calls in a row before the driver yields to the runtime.
const BURST: usize = 64;

/// Drives a [`LocalWorker`] on the current thread's tokio runtime: see
/// the module documentation.
///
/// ```no_run
/// # async fn f(w: rucx_ucp::LocalWorker) -> rucx_ucp::Result<()> {
/// let driver = tokio::task::spawn_local(rucx_ucp::local::tokio::LocalDriver::new(&w).run());
/// // ... await w's futures ...
/// drop(w);
/// driver.await.expect("driver task")?;
/// # Ok(()) }
/// ```
#[derive(Debug, Clone)]
pub struct LocalDriver {
    w: Weak<Inner>,
    spin: Duration,
    poll_spin: Duration,
}

impl LocalDriver {
    /// A driver of `w` (which it holds weakly), with the spins of
    /// [`crate::tokio::Driver`]'s defaults.
    pub fn new(w: &LocalWorker) -> LocalDriver {
        LocalDriver {
            w: Rc::downgrade(&w.inner),
            spin: crate::tokio::DEFAULT_SPIN,
            poll_spin: crate::tokio::DEFAULT_POLL_SPIN,
        }
    }

    /// How long to keep polling once the worker is idle before sleeping on
    /// its event fd (zero: sleep at once).
    pub fn spin(mut self, spin: Duration) -> LocalDriver {
        self.spin = spin;
        self
    }

    /// How long a future of the worker progresses it before it returns
    /// `Pending` ([`LocalWorker::set_poll_spin`]), set when the driver
    /// starts.
    pub fn poll_spin(mut self, spin: Duration) -> LocalDriver {
        self.poll_spin = spin;
        self
    }

    /// Drives the worker until its other handles are gone (`Ok`). Fails
    /// if the worker has no event fd or the runtime's reactor fails.
    ///
    /// # Panics
    /// Outside a tokio runtime with I/O and time enabled.
    pub async fn run(self) -> Result<()> {
        let fd = {
            let Some(inner) = self.w.upgrade() else {
                return Ok(());
            };
            let w = LocalWorker { inner };
            w.set_poll_spin(self.poll_spin);
            w.with(|wk| -> Result<OwnedFd> {
                let raw = wk.event_fd()?;
                // SAFETY: the worker owns `raw` and keeps it open while it
                // is borrowed; the duplicate is ours.
                let fd = unsafe { BorrowedFd::borrow_raw(raw) };
                fd.try_clone_to_owned()
                    .map_err(|e| Error::transport(crate::ucs::Error::io("dup the event fd", e)))
            })?
        };
        // SAFETY: `fd` is an open fd the AsyncFd owns (a duplicate of the
        // worker's), closed only when the AsyncFd drops, after tokio
        // deregistered it.
        let afd =
            unsafe { AsyncFd::register_with_interest(fd, Interest::READABLE) }.map_err(|e| {
                let (_fd, e) = e.into_parts();
                Error::transport(crate::ucs::Error::io("register the event fd", e))
            })?;
        let _awake = Awake(Weak::clone(&self.w));
        self.turns(&afd).await
    }

    async fn turns(&self, afd: &AsyncFd<OwnedFd>) -> Result<()> {
        let mut pace = Pace::default();
        loop {
            let Some(inner) = self.w.upgrade() else {
                return Ok(());
            };
            let spinning = pace.spinning(self.spin);
            match turn(&inner, !spinning) {
                Next::Progressed => {
                    pace.progressed();
                    drop(inner);
                    ::tokio::task::yield_now().await;
                }
                Next::Idle => {
                    drop(inner);
                    if pace.idle(spinning) {
                        ::tokio::task::yield_now().await;
                    }
                }
                Next::Sleep(t) => {
                    let weak = Rc::downgrade(&inner);
                    drop(inner);
                    sleep(&weak, afd, t).await?;
                    let Some(inner) = self.w.upgrade() else {
                        return Ok(());
                    };
                    inner.sleeping.set(false);
                    let Some(mut wk) = inner.try_borrow() else {
                        continue;
                    };
                    if let Err(e) = wk.after_sleep() {
                        tracing::warn!("tokio local driver: {e}");
                    }
                    // Flushes look at their sockets after a sleep.
                    let wake = inner.completions(&mut wk, true);
                    drop(wk);
                    wake_all(wake);
                    pace.slept();
                }
            }
        }
    }
}

/// Clears the `sleeping` mark when the driver ends or is dropped.
struct Awake(Weak<Inner>);

impl Drop for Awake {
    fn drop(&mut self) {
        if let Some(inner) = self.0.upgrade() {
            inner.sleeping.set(false);
            inner.driver.borrow_mut().take();
        }
    }
}

/// What the driver does after a turn.
enum Next {
    Progressed,
    Idle,
    Sleep(Duration),
}

/// Progress until idle (at most [`BURST`] calls); if it did nothing and
/// `sleep`, arm.
fn turn(inner: &Inner, sleep: bool) -> Next {
    let Some(mut wk) = inner.try_borrow() else {
        return Next::Idle;
    };
    let mut n = 0;
    for _ in 0..BURST {
        let k = wk.progress();
        n += k;
        if k == 0 {
            break;
        }
    }
    if n > 0 {
        let wake = inner.completions(&mut wk, true);
        drop(wk);
        wake_all(wake);
        return Next::Progressed;
    }
    if !sleep {
        return Next::Idle;
    }
    match wk.arm() {
        Ok(Armed::Sleep) => {
            let limit = (!inner.others.borrow().is_empty()).then_some(Duration::from_millis(1));
            inner.sleeping.set(true);
            Next::Sleep(wk.sleep_limit(limit))
        }
        Ok(Armed::Busy) => Next::Idle,
        Err(e) => {
            tracing::warn!("tokio local driver: arm: {e}");
            Next::Idle
        }
    }
}

/// Sleeps until the event fd is readable, a post kicks the driver, or `t`
/// passed.
async fn sleep(w: &Weak<Inner>, afd: &AsyncFd<OwnedFd>, t: Duration) -> Result<()> {
    let mut timer = std::pin::pin!(::tokio::time::sleep(t));
    std::future::poll_fn(|cx| {
        let Some(inner) = w.upgrade() else {
            return Poll::Ready(Ok(()));
        };
        if !inner.sleeping.get() {
            return Poll::Ready(Ok(()));
        }
        match afd.poll_read_ready(cx) {
            Poll::Ready(Ok(mut ready)) => {
                ready.clear_ready();
                return Poll::Ready(Ok(()));
            }
            Poll::Ready(Err(e)) => {
                return Poll::Ready(Err(Error::transport(crate::ucs::Error::io(
                    "wait for the event fd",
                    e,
                ))));
            }
            Poll::Pending => {}
        }
        if timer.as_mut().poll(cx).is_ready() {
            return Poll::Ready(Ok(()));
        }
        *inner.driver.borrow_mut() = Some(cx.waker().clone());
        Poll::Pending
    })
    .await
}

/// Spawns the driver of `w` on the current `LocalSet` (or current-thread
/// runtime, through `spawn_local`).
///
/// # Panics
/// Outside a `LocalSet` of a tokio runtime.
pub fn spawn_local(w: &LocalWorker) -> ::tokio::task::JoinHandle<Result<()>> {
    ::tokio::task::spawn_local(LocalDriver::new(w).run())
}
