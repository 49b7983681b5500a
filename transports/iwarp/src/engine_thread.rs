//! A context with an engine thread of its own (`RUCX_IWARP_THREAD=y`),
//! which moves the connections whenever the worker does not, as a NIC
//! would: peers' RDMA WRITEs are placed and their READs answered while the
//! application computes.
//!
//! The [`Context`] sits behind a mutex that every verbs call and the
//! thread take. The thread sleeps until the context's epoll set (its
//! sockets and timer) has something, and then:
//!
//! * if the worker progressed since the thread last looked, and has not
//!   gone to sleep ([`Verbs::arm`]), it leaves the work to the worker and
//!   looks again after [`BACK_OFF`], so that a worker that progresses
//!   never shares its traffic with the thread (at most one look per
//!   `BACK_OFF`);
//! * otherwise it progresses the context, and signals the worker's event
//!   fd (an eventfd of this wrapper's, not the epoll set, whose readiness
//!   the thread consumes) when completions or events wait for the worker.
//!
//! A worker that sleeps on its event fd is therefore woken by completions,
//! not by traffic that needs none (a peer's WRITE, or READ answered).
//! The flags that decide who progresses, and a loom model of this
//! hand-over, are in `engine_duty.rs`.

use std::os::fd::{AsRawFd, RawFd};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use parking_lot::Mutex;
use rucx_rdma::{
    AsyncEvent, CmEvent, ConnParam, ConnReqId, CqId, DeviceAttr, QpId, QpInit, QpState, RecvWr,
    SendWr, SrqId, SrqInit, Verbs, Wc,
};
use std::net::SocketAddr;
use uct::ucs::progress::{EventFd, EventSet, Interest};
use uct::ucs::Result;
use uct::Armed;

use crate::engine::Context;
use crate::engine_duty::Duty;

/// How long the thread leaves the work to a worker that progresses.
pub(crate) const BACK_OFF: Duration = Duration::from_millis(1);

/// Token of the context's epoll set in the thread's set.
const TOKEN_CONTEXT: u64 = 1;
/// Token of the kick eventfd in the thread's set.
const TOKEN_KICK: u64 = 2;

/// What the thread and the verbs calls share.
#[derive(Debug)]
struct Engine {
    ctx: Mutex<Context>,
    /// Whether the worker moves the connections (its verbs calls that
    /// progress, `progress` and `poll_cq`) or sleeps.
    duty: Duty,
    /// Ends the thread.
    stop: AtomicBool,
    /// Wakes the thread (stop, or the worker going to sleep).
    kick: EventFd,
    /// The worker's event fd: signaled when outputs wait for it.
    notify: EventFd,
}

/// A [`Context`] with its engine thread.
#[derive(Debug)]
pub(crate) struct Threaded {
    engine: Arc<Engine>,
    attr: DeviceAttr,
    thread: Option<JoinHandle<()>>,
}

impl Threaded {
    /// Starts the engine thread of `ctx`.
    pub(crate) fn start(ctx: Context) -> Result<Threaded> {
        let attr = ctx.attr().clone();
        let ctx_fd = ctx.event_fd().ok_or_else(|| {
            uct::ucs::Error::Unsupported("iwarp: the context has no event fd".into())
        })?;
        let engine = Arc::new(Engine {
            ctx: Mutex::new(ctx),
            duty: Duty::default(),
            stop: AtomicBool::new(false),
            kick: EventFd::new()?,
            notify: EventFd::new()?,
        });
        let set = EventSet::with_capacity(2)?;
        set.add(ctx_fd, TOKEN_CONTEXT, Interest::READABLE)?;
        set.add(engine.kick.as_raw_fd(), TOKEN_KICK, Interest::READABLE)?;
        let kick_only = EventSet::with_capacity(1)?;
        kick_only.add(engine.kick.as_raw_fd(), TOKEN_KICK, Interest::READABLE)?;
        let e = Arc::clone(&engine);
        let thread = std::thread::Builder::new()
            .name("rucx-iwarp".into())
            .spawn(move || run(&e, set, kick_only))
            .map_err(|err| uct::ucs::Error::io("iwarp: start the engine thread", err))?;
        Ok(Threaded {
            engine,
            attr,
            thread: Some(thread),
        })
    }

    /// The context, locked, for a verbs call.
    fn ctx(&self) -> parking_lot::MutexGuard<'_, Context> {
        self.engine.ctx.lock()
    }

    /// The context, locked, for a call that progresses it: the worker is
    /// awake and moving.
    fn ctx_active(&self) -> parking_lot::MutexGuard<'_, Context> {
        // Only the worker's calls (`&mut self`) get here.
        self.engine.duty.worker_moves();
        self.engine.ctx.lock()
    }
}

impl Drop for Threaded {
    fn drop(&mut self) {
        self.engine.stop.store(true, Ordering::SeqCst);
        let _ = self.engine.kick.signal();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// The thread: sleeps until the context has something, then progresses
/// it unless the worker does.
fn run(e: &Engine, mut set: EventSet, mut kick_only: EventSet) {
    let mut ready = Vec::with_capacity(2);
    let mut seen = e.duty.seen();
    while !e.stop.load(Ordering::SeqCst) {
        if let Err(err) = set.wait(None, &mut ready) {
            tracing::warn!("iwarp engine thread: {err}");
            std::thread::sleep(BACK_OFF);
            continue;
        }
        let _ = e.kick.drain();
        if e.stop.load(Ordering::SeqCst) {
            break;
        }
        let work = if !e.duty.thread_takes(&mut seen) {
            0
        } else {
            let mut ctx = e.ctx.lock();
            let n = ctx.progress();
            if ctx.has_outputs() {
                let _ = e.notify.signal();
            }
            if let Err(err) = ctx.arm_deadlines() {
                tracing::warn!("iwarp engine thread: {err}");
            }
            n
        };
        if work == 0 {
            // Left to the worker, or readiness that progress did not
            // take: look again after a while (or when kicked).
            let _ = kick_only.wait(Some(BACK_OFF), &mut ready);
        }
    }
}

impl Verbs for Threaded {
    fn attr(&self) -> &DeviceAttr {
        &self.attr
    }

    fn create_cq(&mut self, depth: u32) -> Result<CqId> {
        self.ctx().create_cq(depth)
    }

    fn destroy_cq(&mut self, cq: CqId) -> Result<()> {
        self.ctx().destroy_cq(cq)
    }

    fn create_qp(&mut self, init: &QpInit) -> Result<QpId> {
        self.ctx().create_qp(init)
    }

    fn destroy_qp(&mut self, qp: QpId) -> Result<()> {
        self.ctx().destroy_qp(qp)
    }

    fn create_srq(&mut self, init: &SrqInit) -> Result<SrqId> {
        self.ctx().create_srq(init)
    }

    fn destroy_srq(&mut self, srq: SrqId) -> Result<()> {
        self.ctx().destroy_srq(srq)
    }

    unsafe fn post_srq_recv(&mut self, srq: SrqId, wr: &RecvWr<'_>) -> Result<()> {
        // SAFETY: the caller's contract, passed on.
        unsafe { self.ctx().post_srq_recv(srq, wr) }
    }

    fn qp_state(&self, qp: QpId) -> Option<QpState> {
        self.ctx().qp_state(qp)
    }

    fn listen(&mut self, addr: SocketAddr) -> Result<SocketAddr> {
        self.ctx().listen(addr)
    }

    fn connect(&mut self, qp: QpId, dest: SocketAddr, param: &ConnParam) -> Result<()> {
        self.ctx().connect(qp, dest, param)
    }

    fn accept(&mut self, req: ConnReqId, qp: QpId, param: &ConnParam) -> Result<()> {
        self.ctx().accept(req, qp, param)
    }

    fn reject(&mut self, req: ConnReqId, private_data: &[u8]) -> Result<()> {
        self.ctx().reject(req, private_data)
    }

    fn disconnect(&mut self, qp: QpId) -> Result<()> {
        self.ctx().disconnect(qp)
    }

    fn poll_cm(&mut self) -> Option<CmEvent> {
        self.ctx().poll_cm()
    }

    fn poll_async(&mut self) -> Option<AsyncEvent> {
        self.ctx().poll_async()
    }

    fn poll_async_now(&mut self) -> Option<AsyncEvent> {
        self.ctx().poll_async_now()
    }

    unsafe fn post_send(&mut self, qp: QpId, wr: &SendWr<'_>) -> Result<()> {
        // SAFETY: the caller's contract, passed on: the engine thread
        // reads the memory only until the request completes, as the
        // context would.
        unsafe { self.ctx().post_send(qp, wr) }
    }

    unsafe fn post_recv(&mut self, qp: QpId, wr: &RecvWr<'_>) -> Result<()> {
        // SAFETY: as post_send.
        unsafe { self.ctx().post_recv(qp, wr) }
    }

    fn poll_cq(&mut self, cq: CqId, out: &mut [Wc]) -> usize {
        self.ctx_active().poll_cq(cq, out)
    }

    fn progress(&mut self) -> usize {
        self.ctx_active().progress()
    }

    fn event_fd(&self) -> Option<RawFd> {
        Some(self.engine.notify.as_raw_fd())
    }

    fn arm(&mut self) -> Result<Armed> {
        let mut ctx = self.ctx();
        // Under the lock: outputs the thread makes from now on come with
        // a signal after this drain.
        self.engine.notify.drain()?;
        match ctx.arm()? {
            Armed::Busy => Ok(Armed::Busy),
            Armed::Sleep => {
                drop(ctx);
                // The thread takes over at once, not after its back-off.
                self.engine.duty.worker_sleeps();
                self.engine.kick.signal()?;
                Ok(Armed::Sleep)
            }
        }
    }
}
