//! [`TimerFd`]: a one-shot timer file descriptor, so that a context asleep
//! on its epoll set wakes for a deadline (an MPA exchange timing out).

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::time::Duration;

use uct::ucs::{Error, Result};

/// A monotonic, non-blocking timer fd.
#[derive(Debug)]
pub(crate) struct TimerFd {
    fd: OwnedFd,
}

impl TimerFd {
    pub(crate) fn new() -> Result<TimerFd> {
        let flags = libc::TFD_NONBLOCK | libc::TFD_CLOEXEC;
        // SAFETY: timerfd_create takes no pointers.
        let fd = unsafe { libc::timerfd_create(libc::CLOCK_MONOTONIC, flags) };
        if fd < 0 {
            return Err(Error::last_os("timerfd_create"));
        }
        // SAFETY: `fd` was just returned by timerfd_create and nobody else
        // owns it.
        Ok(TimerFd {
            fd: unsafe { OwnedFd::from_raw_fd(fd) },
        })
    }

    /// Fires once after `after` (at least 1 ns, as 0 would disarm).
    pub(crate) fn set(&self, after: Duration) -> Result<()> {
        let after = after.max(Duration::from_nanos(1));
        let spec = libc::itimerspec {
            it_interval: libc::timespec {
                tv_sec: 0,
                tv_nsec: 0,
            },
            it_value: libc::timespec {
                tv_sec: after.as_secs().min(i64::MAX as u64) as libc::time_t,
                tv_nsec: libc::c_long::from(after.subsec_nanos() as i32),
            },
        };
        // SAFETY: `spec` is alive for the call; the old value is not asked
        // for (null).
        let rc =
            unsafe { libc::timerfd_settime(self.fd.as_raw_fd(), 0, &spec, std::ptr::null_mut()) };
        if rc < 0 {
            return Err(Error::last_os("timerfd_settime"));
        }
        Ok(())
    }

    /// Clears an expiry, so the fd is no longer readable.
    pub(crate) fn clear(&self) {
        let mut n = 0u64;
        // SAFETY: reads at most 8 bytes into `n`, alive for the call.
        let rc = unsafe {
            libc::read(
                self.fd.as_raw_fd(),
                (&mut n as *mut u64).cast(),
                std::mem::size_of::<u64>(),
            )
        };
        if rc < 0 {
            let e = io::Error::last_os_error();
            if e.kind() != io::ErrorKind::WouldBlock {
                tracing::warn!("iwarp: timerfd read: {e}");
            }
        }
    }
}

impl AsRawFd for TimerFd {
    fn as_raw_fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fires_once() {
        let t = TimerFd::new().unwrap();
        t.set(Duration::from_millis(1)).unwrap();
        std::thread::sleep(Duration::from_millis(5));
        let mut p = libc::pollfd {
            fd: t.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: one pollfd, alive for the call.
        assert_eq!(unsafe { libc::poll(&mut p, 1, 0) }, 1);
        t.clear();
        // SAFETY: as above.
        assert_eq!(unsafe { libc::poll(&mut p, 1, 0) }, 0);
    }
}
