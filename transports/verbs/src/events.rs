//! Asynchronous events and the context's wake-up fd.
//!
//! A device has one async event fd for all its contexts, so events are
//! read by whichever context polls first and routed by queue pair number
//! to the context that owns the queue pair, whose eventfd is then
//! signalled (it may be asleep: the device's fd, drained by another
//! context, would not wake it). A context sleeps on one epoll fd that
//! holds its completion channel, its connection manager channel, its
//! eventfd and the device's async fd.

use std::collections::{HashMap, VecDeque};
use std::mem::MaybeUninit;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::ptr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use rdma_sys as sys;
use rucx_rdma::{AsyncEvent, AsyncEventKind, QpId};
use uct::ucs::Result;

use crate::ffi::{os_err, Ctx};

/// Where a device's asynchronous events go.
#[derive(Debug, Default)]
pub(crate) struct AsyncRouter {
    /// Queue pair number → (context token, queue pair id).
    owners: HashMap<u32, (u64, QpId)>,
    /// Events waiting for each context, and the eventfd that says so.
    queues: HashMap<u64, (VecDeque<AsyncEvent>, RawFd)>,
    /// Per context: whether its queue holds events, readable without the
    /// router's lock (see [`AsyncRouter::new_context`]).
    flags: HashMap<u64, Arc<AtomicBool>>,
    next_token: u64,
}

impl AsyncRouter {
    /// A token for a new context, which `notify` (an eventfd the context
    /// keeps open until [`AsyncRouter::drop_context`]) tells of events,
    /// and a flag that is set while events wait for it: a context whose
    /// flag is clear and that reads no fd itself need not take the lock.
    pub(crate) fn new_context(&mut self, notify: RawFd) -> (u64, Arc<AtomicBool>) {
        self.next_token += 1;
        self.queues
            .insert(self.next_token, (VecDeque::new(), notify));
        let flag = Arc::new(AtomicBool::new(false));
        self.flags.insert(self.next_token, flag.clone());
        (self.next_token, flag)
    }

    /// Forgets a context and its queue pairs.
    pub(crate) fn drop_context(&mut self, token: u64) {
        self.queues.remove(&token);
        self.flags.remove(&token);
        self.owners.retain(|_, (t, _)| *t != token);
    }

    /// Routes events of queue pair `num` to `(token, qp)`.
    pub(crate) fn add_qp(&mut self, num: u32, token: u64, qp: QpId) {
        self.owners.insert(num, (token, qp));
    }

    /// Stops routing events of queue pair `num`.
    pub(crate) fn remove_qp(&mut self, num: u32) {
        self.owners.remove(&num);
    }

    /// The next event for context `token`; the last one resets its
    /// eventfd.
    pub(crate) fn pop(&mut self, token: u64) -> Option<AsyncEvent> {
        let (q, fd) = self.queues.get_mut(&token)?;
        let ev = q.pop_front();
        if ev.is_some() && q.is_empty() {
            if let Some(f) = self.flags.get(&token) {
                f.store(false, Ordering::Relaxed);
            }
            let mut v = 0u64;
            // SAFETY: the context keeps its non-blocking eventfd open while
            // registered; reading 8 bytes into `v` resets it.
            unsafe { libc::read(*fd, (&mut v as *mut u64).cast(), 8) };
        }
        ev
    }

    /// Whether events wait for context `token`.
    pub(crate) fn has_events(&self, token: u64) -> bool {
        self.queues.get(&token).is_some_and(|(q, _)| !q.is_empty())
    }

    fn push_qp(&mut self, num: u32, kind: AsyncEventKind, detail: String) {
        if let Some(&(token, qp)) = self.owners.get(&num) {
            if let Some((q, fd)) = self.queues.get_mut(&token) {
                q.push_back(AsyncEvent {
                    qp,
                    kind,
                    detail,
                    terminate: None,
                });
                if let Some(f) = self.flags.get(&token) {
                    f.store(true, Ordering::Relaxed);
                }
                let one = 1u64;
                // SAFETY: as in `pop`; adding 1 makes the eventfd readable.
                unsafe { libc::write(*fd, (&one as *const u64).cast(), 8) };
            }
        }
    }

    /// A port or the device failed: every queue pair of it is fatal.
    fn push_all(&mut self, detail: &str) {
        let all: Vec<u32> = self.owners.keys().copied().collect();
        for num in all {
            self.push_qp(num, AsyncEventKind::QpFatal, detail.to_string());
        }
    }

    /// Reads every event waiting on the device's async fd (non-blocking)
    /// and routes it. `port` is the port of the device in use.
    pub(crate) fn drain(&mut self, ctx: &Ctx, port: u8) {
        loop {
            let mut ev = MaybeUninit::<sys::ibv_async_event>::uninit();
            // SAFETY: the context is open and its async fd non-blocking;
            // `ev` is written on success.
            if unsafe { sys::ibv_get_async_event(ctx.as_raw(), ev.as_mut_ptr()) } != 0 {
                return;
            }
            let p = ev.as_mut_ptr();
            // SAFETY: written by the call. The type is read as the integer
            // the C enum is, never as rdma-sys's Rust enum (a value that
            // enum does not list would be undefined behaviour).
            let kind = unsafe { ptr::addr_of!((*p).event_type).cast::<u32>().read() };
            // SAFETY: as above; which member is meant depends on `kind`,
            // and only the matching one is used below.
            let elem_qp = unsafe { (*p).element.qp };
            // SAFETY: as above.
            let elem_port = unsafe { (*p).element.port_num };
            self.route(kind, elem_qp, elem_port, port);
            // SAFETY: acknowledged once; nothing of it is used afterwards.
            unsafe { sys::ibv_ack_async_event(p) };
        }
    }

    fn route(&mut self, kind: u32, qp: *mut sys::ibv_qp, ev_port: i32, port: u8) {
        // Values of enum ibv_event_type.
        const QP_FATAL: u32 = 1;
        const QP_REQ_ERR: u32 = 2;
        const QP_ACCESS_ERR: u32 = 3;
        const DEVICE_FATAL: u32 = 8;
        const PORT_ERR: u32 = 10;
        let qp_num = || {
            // SAFETY: QP events carry a live queue pair (the event holds
            // it until acknowledged).
            (!qp.is_null()).then(|| unsafe { (*qp).qp_num })
        };
        match kind {
            QP_FATAL | QP_REQ_ERR | QP_ACCESS_ERR => {
                let (k, what) = match kind {
                    QP_FATAL => (AsyncEventKind::QpFatal, "QP fatal error"),
                    QP_REQ_ERR => (AsyncEventKind::QpReqErr, "invalid request from the peer"),
                    _ => (AsyncEventKind::QpAccessErr, "remote access error"),
                };
                if let Some(num) = qp_num() {
                    self.push_qp(num, k, format!("verbs: {what} (QP {num})"));
                }
            }
            PORT_ERR if ev_port == i32::from(port) => {
                self.push_all(&format!("verbs: port {port} went down"));
            }
            DEVICE_FATAL => self.push_all("verbs: device fatal error"),
            other => tracing::debug!(event = other, "verbs: asynchronous event"),
        }
    }
}

/// A non-blocking eventfd, for [`AsyncRouter::new_context`].
pub(crate) fn eventfd() -> Result<OwnedFd> {
    // SAFETY: no pointers; returns a new fd or -1.
    let fd = unsafe { libc::eventfd(0, libc::EFD_NONBLOCK | libc::EFD_CLOEXEC) };
    if fd < 0 {
        return Err(os_err("eventfd"));
    }
    // SAFETY: a fresh fd that nothing else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// An epoll fd over the fds a context waits on.
#[derive(Debug)]
pub(crate) struct Waker {
    epfd: OwnedFd,
}

impl Waker {
    /// Watches `fds` for input.
    pub(crate) fn new(fds: &[RawFd]) -> Result<Waker> {
        // SAFETY: no pointers; returns a new fd or -1.
        let fd = unsafe { libc::epoll_create1(libc::EPOLL_CLOEXEC) };
        if fd < 0 {
            return Err(os_err("epoll_create1"));
        }
        // SAFETY: a fresh fd that nothing else owns.
        let epfd = unsafe { OwnedFd::from_raw_fd(fd) };
        for &f in fds {
            let mut ev = libc::epoll_event {
                events: libc::EPOLLIN as u32,
                u64: f as u64,
            };
            // SAFETY: both fds are open; `ev` is initialized.
            if unsafe { libc::epoll_ctl(epfd.as_raw_fd(), libc::EPOLL_CTL_ADD, f, &mut ev) } < 0 {
                return Err(os_err("epoll_ctl"));
            }
        }
        Ok(Waker { epfd })
    }

    /// The fd to sleep on.
    pub(crate) fn fd(&self) -> RawFd {
        self.epfd.as_raw_fd()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn events_reach_the_context_that_owns_the_qp() {
        let mut r = AsyncRouter::default();
        let (fa, fb) = (eventfd().unwrap(), eventfd().unwrap());
        let ((a, flag_a), (b, flag_b)) =
            (r.new_context(fa.as_raw_fd()), r.new_context(fb.as_raw_fd()));
        let wb = Waker::new(&[fb.as_raw_fd()]).unwrap();
        r.add_qp(100, a, QpId(1));
        r.add_qp(200, b, QpId(1));
        r.push_qp(200, AsyncEventKind::QpAccessErr, "x".into());
        assert!(r.pop(a).is_none());
        let flags = || {
            (
                flag_a.load(Ordering::Relaxed),
                flag_b.load(Ordering::Relaxed),
            )
        };
        assert_eq!(flags(), (false, true), "b's flag says an event waits");
        let mut e = libc::epoll_event { events: 0, u64: 0 };
        // SAFETY: valid epoll fd and buffer of one event.
        assert_eq!(
            unsafe { libc::epoll_wait(wb.fd(), &mut e, 1, 0) },
            1,
            "b is woken"
        );
        let ev = r.pop(b).unwrap();
        // SAFETY: as above.
        assert_eq!(
            unsafe { libc::epoll_wait(wb.fd(), &mut e, 1, 0) },
            0,
            "and reset"
        );
        assert_eq!(flags(), (false, false), "so is b's flag");
        assert_eq!((ev.qp, ev.kind), (QpId(1), AsyncEventKind::QpAccessErr));
        // A port going down is fatal for every queue pair.
        r.route(10, ptr::null_mut(), 1, 1);
        assert_eq!(r.pop(a).unwrap().kind, AsyncEventKind::QpFatal);
        assert!(r.has_events(b));
        // Another port's is not.
        r.pop(b);
        r.route(10, ptr::null_mut(), 2, 1);
        assert!(!r.has_events(a) && !r.has_events(b));
        r.remove_qp(100);
        r.drop_context(b);
        r.route(8, ptr::null_mut(), 0, 1);
        assert!(r.pop(a).is_none() && r.pop(b).is_none());
    }

    #[test]
    fn waker_wakes_on_input() {
        let mut p = [0; 2];
        // SAFETY: `p` has room for the two fds.
        assert_eq!(unsafe { libc::pipe(p.as_mut_ptr()) }, 0);
        let w = Waker::new(&[p[0]]).unwrap();
        let mut ev = libc::epoll_event { events: 0, u64: 0 };
        // SAFETY: valid epoll fd and buffer of one event.
        assert_eq!(unsafe { libc::epoll_wait(w.fd(), &mut ev, 1, 0) }, 0);
        // SAFETY: writing one byte from a valid buffer.
        assert_eq!(unsafe { libc::write(p[1], [1u8].as_ptr().cast(), 1) }, 1);
        // SAFETY: as above.
        assert_eq!(unsafe { libc::epoll_wait(w.fd(), &mut ev, 1, 0) }, 1);
        // SAFETY: closing the pipe's fds, owned here.
        unsafe {
            libc::close(p[0]);
            libc::close(p[1]);
        }
    }
}
