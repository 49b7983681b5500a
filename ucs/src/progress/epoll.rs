//! [`EventSet`]: one epoll instance that gathers many event fds.

use crate::{Error, Result};
use std::io;
use std::ops::BitOr;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd, RawFd};
use std::time::Duration;

/// Which events to watch on an fd.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Interest(u32);

impl Interest {
    /// Data to read (`EPOLLIN`).
    pub const READABLE: Interest = Interest(libc::EPOLLIN as u32);
    /// Room to write (`EPOLLOUT`).
    pub const WRITABLE: Interest = Interest(libc::EPOLLOUT as u32);
    /// Edge-triggered: report a change once, not while it lasts
    /// (`EPOLLET`).
    pub const EDGE: Interest = Interest(libc::EPOLLET as u32);
    /// The peer shut its writing side (`EPOLLRDHUP`).
    pub const READ_HANGUP: Interest = Interest(libc::EPOLLRDHUP as u32);

    /// The `epoll_event.events` bits.
    pub fn bits(self) -> u32 {
        self.0
    }
}

impl BitOr for Interest {
    type Output = Interest;

    fn bitor(self, rhs: Interest) -> Interest {
        Interest(self.0 | rhs.0)
    }
}

/// What an fd is ready for, as reported by [`EventSet::wait`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Readiness(u32);

impl Readiness {
    /// Readiness from `epoll_event.events` bits.
    pub fn from_bits(bits: u32) -> Readiness {
        Readiness(bits)
    }

    /// The raw bits.
    pub fn bits(self) -> u32 {
        self.0
    }

    /// Data (or urgent data) can be read.
    pub fn is_readable(self) -> bool {
        self.0 & (libc::EPOLLIN | libc::EPOLLPRI) as u32 != 0
    }

    /// Data can be written.
    pub fn is_writable(self) -> bool {
        self.0 & libc::EPOLLOUT as u32 != 0
    }

    /// An error is pending on the fd (`EPOLLERR`).
    pub fn is_error(self) -> bool {
        self.0 & libc::EPOLLERR as u32 != 0
    }

    /// The peer hung up, fully or its writing side (`EPOLLHUP`,
    /// `EPOLLRDHUP`).
    pub fn is_hangup(self) -> bool {
        self.0 & (libc::EPOLLHUP | libc::EPOLLRDHUP) as u32 != 0
    }
}

/// An epoll set: fds registered with a `u64` token each, waited on together.
#[derive(Debug)]
pub struct EventSet {
    fd: OwnedFd,
    events: Vec<libc::epoll_event>,
}

impl EventSet {
    /// A new set that returns up to 64 events per wait.
    pub fn new() -> Result<EventSet> {
        EventSet::with_capacity(64)
    }

    /// A new set that returns up to `max_events` (at least 1) per wait.
    pub fn with_capacity(max_events: usize) -> Result<EventSet> {
        // SAFETY: epoll_create1 takes no pointers.
        let fd = unsafe { libc::epoll_create1(libc::EPOLL_CLOEXEC) };
        if fd < 0 {
            return Err(Error::last_os("epoll_create1"));
        }
        // SAFETY: `fd` was just returned by epoll_create1 and is owned by
        // nothing else.
        let fd = unsafe { OwnedFd::from_raw_fd(fd) };
        let n = max_events.clamp(1, i32::MAX as usize);
        Ok(EventSet {
            fd,
            events: vec![libc::epoll_event { events: 0, u64: 0 }; n],
        })
    }

    fn ctl(&self, op: libc::c_int, fd: RawFd, token: u64, interest: Interest) -> io::Result<()> {
        let mut ev = libc::epoll_event {
            events: interest.0,
            u64: token,
        };
        // SAFETY: `ev` is a valid epoll_event that outlives the call; the
        // kernel copies it and keeps no pointer. A bad `fd` only makes the
        // call fail.
        let rc = unsafe { libc::epoll_ctl(self.fd.as_raw_fd(), op, fd, &mut ev) };
        if rc < 0 {
            Err(io::Error::last_os_error())
        } else {
            Ok(())
        }
    }

    /// Watches `fd` for `interest`; events on it carry `token`.
    pub fn add(&self, fd: RawFd, token: u64, interest: Interest) -> Result<()> {
        self.ctl(libc::EPOLL_CTL_ADD, fd, token, interest)
            .map_err(|e| Error::io(format!("epoll_ctl(ADD, fd {fd})"), e))
    }

    /// Changes the interest and token of a watched `fd`.
    pub fn modify(&self, fd: RawFd, token: u64, interest: Interest) -> Result<()> {
        self.ctl(libc::EPOLL_CTL_MOD, fd, token, interest)
            .map_err(|e| Error::io(format!("epoll_ctl(MOD, fd {fd})"), e))
    }

    /// Stops watching `fd`.
    pub fn remove(&self, fd: RawFd) -> Result<()> {
        self.ctl(libc::EPOLL_CTL_DEL, fd, 0, Interest(0))
            .map_err(|e| Error::io(format!("epoll_ctl(DEL, fd {fd})"), e))
    }

    /// Waits until a watched fd is ready or `timeout` passes (`None`: no
    /// limit; `Some(ZERO)`: just poll). `out` is cleared and gets one
    /// `(token, readiness)` per ready fd; returns how many.
    ///
    /// The timeout is rounded up to whole milliseconds, so a short wait does
    /// not turn into a busy loop. A signal interrupting the wait returns
    /// `Ok(0)`, like a timeout: callers wait in a loop anyway.
    pub fn wait(
        &mut self,
        timeout: Option<Duration>,
        out: &mut Vec<(u64, Readiness)>,
    ) -> Result<usize> {
        out.clear();
        let ms: libc::c_int = match timeout {
            None => -1,
            Some(d) => {
                let ms = d.as_nanos().div_ceil(1_000_000);
                libc::c_int::try_from(ms).unwrap_or(libc::c_int::MAX)
            }
        };
        let max = libc::c_int::try_from(self.events.len()).unwrap_or(libc::c_int::MAX);
        // SAFETY: `events` holds `max` writable epoll_event entries and is not
        // touched while the kernel writes them.
        let n = unsafe { libc::epoll_wait(self.fd.as_raw_fd(), self.events.as_mut_ptr(), max, ms) };
        if n < 0 {
            let e = io::Error::last_os_error();
            if e.kind() == io::ErrorKind::Interrupted {
                return Ok(0);
            }
            return Err(Error::io("epoll_wait", e));
        }
        for ev in &self.events[..n as usize] {
            // Copies out of the (packed on x86-64) struct.
            let (bits, token) = (ev.events, ev.u64);
            out.push((token, Readiness(bits)));
        }
        Ok(out.len())
    }
}

impl AsRawFd for EventSet {
    fn as_raw_fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }
}

impl AsFd for EventSet {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }
}

/// Sleeps until `fd` is readable or `timeout` passes (rounded up to whole
/// milliseconds, as [`EventSet::wait`]); `Ok(true)` if it is readable. A
/// signal ends the sleep like the timeout. For a thread that sleeps on an
/// event set's fd without holding the set.
pub fn wait_readable(fd: std::os::fd::RawFd, timeout: Duration) -> Result<bool> {
    let ms =
        libc::c_int::try_from(timeout.as_nanos().div_ceil(1_000_000)).unwrap_or(libc::c_int::MAX);
    let mut p = libc::pollfd {
        fd,
        events: libc::POLLIN,
        revents: 0,
    };
    // SAFETY: one valid pollfd, read and written by the kernel during the
    // call only.
    let n = unsafe { libc::poll(&mut p, 1, ms) };
    if n < 0 {
        let e = io::Error::last_os_error();
        if e.kind() == io::ErrorKind::Interrupted {
            return Ok(false);
        }
        return Err(Error::io("poll", e));
    }
    Ok(n > 0 && p.revents & libc::POLLIN != 0)
}
