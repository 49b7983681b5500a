//! A Linux eventfd: the wakeup of one `self` iface.

use crate::{Error, Result};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

/// A non-blocking eventfd counter.
#[derive(Debug)]
pub(super) struct EventFd(OwnedFd);

impl EventFd {
    pub(super) fn new() -> Result<EventFd> {
        // SAFETY: eventfd takes no pointers; the result is checked below.
        let fd = unsafe { libc::eventfd(0, libc::EFD_NONBLOCK | libc::EFD_CLOEXEC) };
        if fd < 0 {
            return Err(Error::last_os("eventfd"));
        }
        // SAFETY: `fd` is a freshly created descriptor that nothing else owns.
        Ok(EventFd(unsafe { OwnedFd::from_raw_fd(fd) }))
    }

    pub(super) fn raw(&self) -> RawFd {
        self.0.as_raw_fd()
    }

    /// Makes the fd readable. A full counter (EAGAIN) is already readable,
    /// so every failure can be ignored.
    pub(super) fn signal(&self) {
        let one: u64 = 1;
        // SAFETY: writes 8 bytes from a live local u64 to our own fd.
        let _ = unsafe { libc::write(self.raw(), (&one as *const u64).cast(), 8) };
    }

    /// Resets the counter so the fd is no longer readable. EAGAIN (already
    /// zero) is the normal idle case.
    pub(super) fn clear(&self) {
        let mut v: u64 = 0;
        // SAFETY: reads at most 8 bytes into a live local u64 from our own fd.
        let _ = unsafe { libc::read(self.raw(), (&mut v as *mut u64).cast(), 8) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn readable(fd: RawFd) -> bool {
        let mut p = libc::pollfd {
            fd,
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: one valid pollfd, zero timeout.
        let rc = unsafe { libc::poll(&mut p, 1, 0) };
        rc == 1 && p.revents & libc::POLLIN != 0
    }

    #[test]
    fn signal_and_clear() {
        let e = EventFd::new().unwrap();
        assert!(!readable(e.raw()));
        e.signal();
        e.signal();
        assert!(readable(e.raw()));
        e.clear();
        assert!(!readable(e.raw()));
        e.clear();
        assert!(!readable(e.raw()));
    }
}
