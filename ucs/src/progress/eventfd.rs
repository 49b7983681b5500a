//! [`EventFd`]: a counter fd one thread signals and another waits on.

use crate::{Error, Result};
use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd, RawFd};

/// A non-blocking Linux eventfd.
///
/// [`EventFd::signal`] makes it readable (wakes an [`EventSet`](super::EventSet)
/// watching it); [`EventFd::drain`] makes it unreadable again. Signals
/// coalesce: many signals before a drain are one wakeup.
#[derive(Debug)]
pub struct EventFd {
    fd: OwnedFd,
}

impl EventFd {
    /// A new eventfd, non-blocking and close-on-exec.
    pub fn new() -> Result<EventFd> {
        // SAFETY: eventfd takes no pointers.
        let fd = unsafe { libc::eventfd(0, libc::EFD_NONBLOCK | libc::EFD_CLOEXEC) };
        if fd < 0 {
            return Err(Error::last_os("eventfd"));
        }
        // SAFETY: `fd` was just returned by eventfd and is owned by nothing
        // else.
        Ok(EventFd {
            fd: unsafe { OwnedFd::from_raw_fd(fd) },
        })
    }

    /// Makes the fd readable. Safe to call from any thread, any number of
    /// times.
    pub fn signal(&self) -> Result<()> {
        let one: u64 = 1;
        loop {
            // SAFETY: writes 8 bytes from `one`, which is 8 bytes and lives
            // across the call.
            let n = unsafe {
                libc::write(
                    self.fd.as_raw_fd(),
                    (&one as *const u64).cast(),
                    std::mem::size_of::<u64>(),
                )
            };
            if n >= 0 {
                return Ok(());
            }
            let e = io::Error::last_os_error();
            match e.kind() {
                io::ErrorKind::Interrupted => continue,
                // The counter is at its maximum: it is readable already.
                io::ErrorKind::WouldBlock => return Ok(()),
                _ => return Err(Error::io("eventfd write", e)),
            }
        }
    }

    /// Resets the fd to unreadable; `true` if it had been signaled.
    pub fn drain(&self) -> Result<bool> {
        let mut count: u64 = 0;
        loop {
            // SAFETY: reads at most 8 bytes into `count`, which is 8 bytes
            // and lives across the call.
            let n = unsafe {
                libc::read(
                    self.fd.as_raw_fd(),
                    (&mut count as *mut u64).cast(),
                    std::mem::size_of::<u64>(),
                )
            };
            if n >= 0 {
                return Ok(true);
            }
            let e = io::Error::last_os_error();
            match e.kind() {
                io::ErrorKind::Interrupted => continue,
                io::ErrorKind::WouldBlock => return Ok(false),
                _ => return Err(Error::io("eventfd read", e)),
            }
        }
    }
}

impl AsRawFd for EventFd {
    fn as_raw_fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }
}

impl AsFd for EventFd {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }
}
