//! The progress thread: drives a shared worker's transports while the
//! application does not, and sleeps on its event fd when nothing happens.

use super::{Inner, SharedWorker};
use crate::uct::Armed;
use crate::{Error, Result};
use std::sync::atomic::Ordering;
use std::sync::{Arc, Weak};
use std::time::Duration;

/// Progress calls in a row before the thread lets others take the lock.
const BURST: usize = 64;

/// How long the thread sleeps at most while futures of operations that
/// are not requests wait (a connecting client's socket is not in the event
/// set).
const OTHERS_TICK: Duration = Duration::from_millis(1);

impl SharedWorker {
    /// Starts the progress thread (once; later calls do nothing). It ends
    /// when the last handle of the worker is dropped.
    pub fn start_progress_thread(&self) -> Result<()> {
        let mut t = self.inner.thread.lock();
        if t.is_some() {
            return Ok(());
        }
        if self.inner.signal.is_none() {
            return Err(Error::Unsupported("the worker has no waker".into()));
        }
        // The thread must sleep on the fd: make the event set now, so that
        // a failure shows here.
        self.with(|w| w.event_fd())?;
        let weak = Arc::downgrade(&self.inner);
        let h = std::thread::Builder::new()
            .name("rucx-progress".into())
            .spawn(move || run(weak))
            .map_err(|e| Error::Unsupported(format!("progress thread: {e}")))?;
        *t = Some(h);
        Ok(())
    }

    /// Whether this worker has a progress thread.
    pub fn has_progress_thread(&self) -> bool {
        self.inner.thread.lock().is_some()
    }
}

/// What the thread does next.
enum Next {
    Again,
    Sleep(std::os::fd::RawFd, Duration),
    Stop,
}

fn run(weak: Weak<Inner>) {
    loop {
        // A strong handle only while the thread works: the worker is
        // dropped when the application drops its handles.
        let Some(inner) = weak.upgrade() else {
            return;
        };
        if inner.stop.load(Ordering::SeqCst) {
            return;
        }
        let w = SharedWorker { inner };
        match turn(&w) {
            Next::Again => {}
            Next::Stop => return,
            Next::Sleep(fd, t) => {
                drop(w);
                // Without a strong handle: dropping the worker sets `stop`
                // and signals the fd before it closes it, after joining
                // this thread.
                if let Err(e) = crate::ucs::progress::wait_readable(fd, t) {
                    tracing::warn!("progress thread: {e}");
                    std::thread::sleep(t);
                }
                let Some(inner) = weak.upgrade() else {
                    return;
                };
                inner.sleeping.open();
                let w = SharedWorker { inner };
                let mut g = w.lock();
                if let Err(e) = g.worker().after_sleep() {
                    tracing::warn!("progress thread: {e}");
                }
                // Connects, closes and flushes poll sockets of their own
                // (not in the event set): let them look.
                let others = g.others_wait();
                g.unlock_quiet(others);
            }
        }
    }
}

/// Progress until idle (at most [`BURST`] calls), then arm: sleep if
/// nothing is pending.
fn turn(w: &SharedWorker) -> Next {
    let mut g = w.lock();
    let mut n = 0;
    for i in 0..BURST {
        if i > 0 {
            // Posting threads go first: they wait for the lock while this
            // thread only looks for more work.
            g.bump();
        }
        let k = g.worker().progress();
        n += k;
        if k == 0 {
            break;
        }
    }
    if n > 0 {
        g.unlock_quiet(true);
        return Next::Again;
    }
    // Set before arming, under the lock: a post after this section sees it
    // and signals the fd.
    w.inner.sleeping.closing();
    let armed = g.worker().arm();
    let next = match armed {
        Ok(Armed::Sleep) => {
            let limit = g.others_wait().then_some(OTHERS_TICK);
            let t = g.worker().sleep_limit(limit);
            match g.worker().event_fd() {
                Ok(fd) => Next::Sleep(fd, t),
                Err(e) => {
                    tracing::warn!("progress thread ends: {e}");
                    Next::Stop
                }
            }
        }
        Ok(Armed::Busy) => Next::Again,
        Err(e) => {
            tracing::warn!("progress thread: arm: {e}");
            Next::Again
        }
    };
    if !matches!(next, Next::Sleep(..)) {
        w.inner.sleeping.open();
    }
    g.unlock_quiet(false);
    next
}
