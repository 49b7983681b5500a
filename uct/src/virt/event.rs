//! The eventfd of a virtual iface (only with `VirtConfig::event_fd`).

use crate::{Error, Result};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

/// A non-blocking eventfd used as a flag: readable after `signal`, until
/// `clear`.
#[derive(Debug)]
pub(super) struct EventFd(OwnedFd);

impl EventFd {
    pub(super) fn new() -> Result<EventFd> {
        // SAFETY: eventfd takes no pointers; the result is checked below.
        let fd = unsafe { libc::eventfd(0, libc::EFD_NONBLOCK | libc::EFD_CLOEXEC) };
        if fd < 0 {
            return Err(Error::last_os("virt: eventfd"));
        }
        // SAFETY: `fd` was just created and nothing else owns it.
        Ok(EventFd(unsafe { OwnedFd::from_raw_fd(fd) }))
    }

    pub(super) fn raw(&self) -> RawFd {
        self.0.as_raw_fd()
    }

    /// Makes the fd readable. EAGAIN means the counter is full, hence
    /// readable already, so errors are ignored.
    pub(super) fn signal(&self) {
        let one: u64 = 1;
        // SAFETY: writes the 8 bytes of a live local to our own fd.
        let _ = unsafe { libc::write(self.raw(), (&one as *const u64).cast(), 8) };
    }

    /// Makes the fd unreadable. EAGAIN (already zero) is the idle case.
    pub(super) fn clear(&self) {
        let mut v: u64 = 0;
        // SAFETY: reads at most 8 bytes into a live local from our own fd.
        let _ = unsafe { libc::read(self.raw(), (&mut v as *mut u64).cast(), 8) };
    }
}

/// Whether `fd` is readable now (for tests).
#[cfg(test)]
pub(super) fn readable(fd: RawFd) -> bool {
    let mut p = libc::pollfd {
        fd,
        events: libc::POLLIN,
        revents: 0,
    };
    // SAFETY: one valid pollfd on the stack, count 1, no wait.
    let rc = unsafe { libc::poll(&mut p, 1, 0) };
    rc == 1 && p.revents & libc::POLLIN != 0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn signal_then_clear() {
        let e = EventFd::new().unwrap();
        assert!(!readable(e.raw()));
        e.signal();
        e.signal();
        assert!(readable(e.raw()));
        e.clear();
        assert!(!readable(e.raw()));
    }
}
