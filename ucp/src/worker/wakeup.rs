//! Sleeping until a worker has work: one fd for all ifaces, and a
//! [`Waker`] that another thread signals.

use super::Worker;
use crate::ucs::progress::{EventFd, EventSet, Interest, Readiness};
use crate::{Error, Result};
use std::os::fd::{AsRawFd, RawFd};
use std::sync::Arc;
use std::time::Duration;

pub use crate::uct::Armed;

/// Longest single sleep of [`Worker::wait_event`].
pub const MAX_SLEEP: Duration = Duration::from_millis(500);

/// The worker's epoll set, created on first use.
#[derive(Debug, Default)]
pub(crate) struct Wakeup {
    set: Option<EventSet>,
    events: Vec<(u64, Readiness)>,
    /// The eventfd of the worker's [`Waker`]s, once one was asked for.
    signal: Option<Arc<EventFd>>,
}

/// The event set's key of the waker's eventfd (ifaces use their index).
const SIGNAL_KEY: u64 = u64::MAX;
/// The event set's key of listener `i`'s socket: `LISTENER_KEY - i`.
const LISTENER_KEY: u64 = u64::MAX - 1;

/// Wakes a worker from another thread, as UCX's `ucp_worker_signal`:
/// [`Waker::wake`] makes the worker's event fd readable, so that a
/// [`Worker::wait_event`] in progress returns and the next
/// [`Worker::arm`] says `Busy`. Cheap to clone; `Send` and `Sync`. Wakes
/// coalesce: several before the worker looks count as one.
#[derive(Debug, Clone)]
pub struct Waker(Arc<EventFd>);

impl Waker {
    /// Wakes the worker (or makes its next `arm` return `Busy`). Any
    /// thread, any number of times.
    pub fn wake(&self) -> Result<()> {
        self.0.signal().map_err(Error::transport)
    }
}

impl Worker {
    fn wake_set(&mut self) -> Result<&mut EventSet> {
        if self.wake.set.is_none() {
            let set = EventSet::new().map_err(Error::transport)?;
            for (i, iface) in self.ifaces.iter().enumerate() {
                if let Some(fd) = iface.event_fd() {
                    set.add(fd, i as u64, Interest::READABLE)
                        .map_err(Error::transport)?;
                }
            }
            if let Some(s) = &self.wake.signal {
                set.add(s.as_raw_fd(), SIGNAL_KEY, Interest::READABLE)
                    .map_err(Error::transport)?;
            }
            for (i, l) in self.listeners.iter().enumerate() {
                if let Some(l) = l {
                    set.add(l.cm.fd(), LISTENER_KEY - i as u64, Interest::READABLE)
                        .map_err(Error::transport)?;
                }
            }
            self.wake.set = Some(set);
        }
        match self.wake.set.as_mut() {
            Some(s) => Ok(s),
            None => Err(Error::Unsupported("event set".into())),
        }
    }

    /// A handle that wakes this worker from any thread (see [`Waker`]).
    pub fn waker(&mut self) -> Result<Waker> {
        if let Some(s) = &self.wake.signal {
            return Ok(Waker(Arc::clone(s)));
        }
        let fd = Arc::new(EventFd::new().map_err(Error::transport)?);
        if let Some(set) = &self.wake.set {
            set.add(fd.as_raw_fd(), SIGNAL_KEY, Interest::READABLE)
                .map_err(Error::transport)?;
        }
        self.wake.signal = Some(Arc::clone(&fd));
        Ok(Waker(fd))
    }

    /// Watches listener `i`'s socket `fd`, if the event set exists (else
    /// it is added when the set is made).
    pub(crate) fn watch_listener(&mut self, i: usize, fd: RawFd) -> Result<()> {
        if let Some(set) = &self.wake.set {
            set.add(fd, LISTENER_KEY - i as u64, Interest::READABLE)
                .map_err(Error::transport)?;
        }
        Ok(())
    }

    /// Stops watching a listener's socket `fd`.
    pub(crate) fn unwatch_listener(&mut self, fd: RawFd) {
        if let Some(set) = &self.wake.set {
            let _ = set.remove(fd);
        }
    }

    /// Whether a [`Waker`] woke the worker since it last looked (and no
    /// more: the wake is consumed).
    fn woken(&mut self) -> Result<bool> {
        match &self.wake.signal {
            Some(s) => s.drain().map_err(Error::transport),
            None => Ok(false),
        }
    }

    /// One file descriptor that becomes readable when the worker may have
    /// work; call [`Worker::arm`] before sleeping on it.
    pub fn event_fd(&mut self) -> Result<RawFd> {
        Ok(self.wake_set()?.as_raw_fd())
    }

    /// Prepares to sleep: `Busy` if work is already pending (progress
    /// instead of sleeping), `Sleep` if the event fd will signal new work.
    pub fn arm(&mut self) -> Result<Armed> {
        if !self.core.done.completions.is_empty()
            || self.has_deliveries()
            || self.core.has_commands()
            || self.woken()?
        {
            return Ok(Armed::Busy);
        }
        self.wake_set()?;
        for iface in self.ifaces.iter_mut() {
            if iface.arm().map_err(Error::transport)? == Armed::Busy {
                return Ok(Armed::Busy);
            }
        }
        Ok(Armed::Sleep)
    }

    /// Sleeps until an iface signals work, a [`Waker`] wakes the worker or
    /// `timeout` passes, unless work is already pending. Returns at once if
    /// `arm` says busy.
    ///
    /// It also returns after at most [`MAX_SLEEP`]: some failures are only
    /// found by looking (a shared-memory peer that died sends nothing), so
    /// a caller that waits in a loop and progresses in between never sleeps
    /// through them.
    pub fn wait_event(&mut self, timeout: Option<Duration>) -> Result<()> {
        if self.arm()? == Armed::Busy {
            return Ok(());
        }
        let timeout = Some(self.sleep_limit(timeout));
        let mut events = std::mem::take(&mut self.wake.events);
        let r = self.wake_set()?.wait(timeout, &mut events);
        self.wake.events = events;
        self.after_sleep()?;
        r.map_err(Error::transport)?;
        Ok(())
    }

    /// How long a sleep of at most `timeout` may last: [`MAX_SLEEP`] at
    /// most, and not past the next keepalive round.
    pub(crate) fn sleep_limit(&self, timeout: Option<Duration>) -> Duration {
        let mut t = timeout.map_or(MAX_SLEEP, |t| t.min(MAX_SLEEP));
        if let Some(due) = self.keepalive.until_due() {
            t = t.min(due);
        }
        t
    }

    /// What a sleep on the event fd leaves to do once it ended (by an
    /// event or the time limit): drain the [`Waker`]'s signal, look at
    /// listeners and every iface on the next progress.
    pub(crate) fn after_sleep(&mut self) -> Result<()> {
        self.woken()?;
        self.listen_now = true;
        self.heat.iter_mut().for_each(|h| h.warm());
        self.hot_stale = true;
        Ok(())
    }
}
