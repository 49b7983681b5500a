//! The progress engine's parts.
//!
//! Map:
//! * [`EventSet`]: one epoll set gathering every iface's event fd, so one
//!   fd wakes a worker; [`EventFd`]: a wakeup any thread can signal;
//! * [`TimerQueue`]: deadlines (keepalive, retransmit, timeouts), earliest
//!   first, with cancellation; it never reads a clock, the caller passes
//!   `now`.
//!
//! How a worker puts them together, per `progress()`: poll the ifaces;
//! `expire(now)` the timers and handle their tokens. To sleep: arm the
//! ifaces, then `wait` on the event set with `time_until_next(now)` as the
//! timeout. Nothing here starts a thread.
//!
//! Errors of system calls are [`Error::Io`](crate::Error::Io) naming the
//! call (`"epoll_wait"`, `"eventfd write"`, ...).

mod epoll;
mod eventfd;
mod timer;

pub use epoll::{wait_readable, EventSet, Interest, Readiness};
pub use eventfd::EventFd;
pub use timer::{TimerId, TimerQueue};

#[cfg(test)]
mod tests;
