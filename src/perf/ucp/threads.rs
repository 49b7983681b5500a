//! `-T` and `--busy-target`: a connected [`UcpWorker`] turned into a
//! [`SharedWorker`] (UCX's thread mode multi) and one [`ThreadWorker`] per
//! thread, each with its share of it.
//!
//! Endpoints made from worker addresses are one per pair of workers, so
//! the threads share the worker's one endpoint to the peer, and split the
//! tag space instead: thread `i` sends and receives with the perftest tag
//! plus `i`, so that no receive of one thread matches a message of
//! another. Each thread exposes a buffer of its own and reaches the peer
//! thread's with its own remote key. Every operation takes the worker's
//! lock for the post (the raw tier, as [`UcpWorker`] uses it); progress
//! only tries the lock, so that a thread whose peer thread is ahead does
//! not queue behind the one driving the transports.
//!
//! A busy thread ([`UcpWorker::into_threads`] with `busy`) never progresses
//! the worker: its [`PerfWorker::progress`] runs a slice of computation
//! instead, and the worker's progress thread serves the peer's operations.

use super::endpoints::Reported;
use super::handed::{Parked, ThreadReq};
use super::remote::{atomic_op, atomic_value, Remote};
use super::{exposed, op_error, started, UcpWorker};
use crate::perf::error::{PerfError, Result};
use crate::perf::worker::{AtomicKind, Exposed, PerfWorker, Started, ThreadedWorker};
use rucx_ucp::{Context, Ep, MemMap, Op, SharedWorker};
use std::hint::black_box;

/// Steps of one slice of a busy thread's computation (a few microseconds).
const BUSY_STEPS: u32 = 2048;

/// One thread's share of a shared worker: the endpoint, its tag, its
/// exposed buffer and the peer thread's.
#[derive(Debug)]
pub struct ThreadWorker {
    remote: Option<Remote>,
    // Fields drop in order: the map and the worker before the context.
    exposed: Option<MemMap>,
    w: SharedWorker,
    ep: Ep,
    /// Added to every tag: the thread's index.
    tag_offset: u64,
    /// Posts handed to the thread that held the lock.
    parked: Parked,
    reported: Option<Reported>,
    /// Never progress the worker; compute instead.
    busy: bool,
    /// The state of the computation (kept so that it is not optimised
    /// away).
    acc: u64,
    ctx: Context,
}

impl ThreadedWorker for UcpWorker {
    type Thread = ThreadWorker;

    fn into_threads(self, n: usize, busy: bool) -> Result<Vec<ThreadWorker>> {
        let UcpWorker {
            remote,
            exposed,
            worker,
            ep,
            setup,
            ctx,
            ..
        } = self;
        let ep = ep.ok_or_else(|| PerfError::Params("the worker is not connected".into()))?;
        let reported = setup.reported_handle();
        let w = worker.into_shared();
        if busy {
            w.start_progress_thread()
                .map_err(|e| PerfError::transport("start the progress thread", e))?;
        }
        let mut first = Some((remote, exposed));
        Ok((0..n)
            .map(|i| {
                let (remote, exposed) = first.take().unwrap_or((None, None));
                ThreadWorker {
                    remote,
                    exposed,
                    w: w.clone(),
                    ep,
                    tag_offset: i as u64,
                    parked: Parked::default(),
                    reported: reported.clone(),
                    busy,
                    acc: i as u64 + 1,
                    ctx: ctx.clone(),
                }
            })
            .collect())
    }

    fn sibling(&self) -> Result<UcpWorker> {
        UcpWorker::on(self.ctx.clone())
    }
}

impl ThreadWorker {
    fn target(&self, offset: u64) -> Result<(&Remote, u64)> {
        let r = self.remote.as_ref().ok_or_else(|| {
            PerfError::Params("the peer's buffer is not known (set_remote)".into())
        })?;
        Ok((r, r.addr.wrapping_add(offset)))
    }

    /// A slice of computation that touches no memory but its own state.
    #[inline(never)]
    fn compute(&mut self) {
        let mut x = black_box(self.acc) | 1;
        for _ in 0..BUSY_STEPS {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
        }
        self.acc = black_box(x);
    }
}

impl PerfWorker for ThreadWorker {
    type Req = ThreadReq;

    fn address(&mut self) -> Result<Vec<u8>> {
        Ok(self.w.address())
    }

    fn connect(&mut self, _remote: &[u8]) -> Result<()> {
        Err(PerfError::Params(
            "a thread's worker is connected before the threads start".into(),
        ))
    }

    #[inline]
    fn progress(&mut self) -> usize {
        if self.busy {
            self.compute();
            return 0;
        }
        self.w.progress()
    }

    #[inline]
    fn completed_count(&self) -> Option<u64> {
        if self.parked.look_all() {
            return None;
        }
        Some(self.w.completed_count())
    }

    fn check_peer(&mut self) -> Result<()> {
        if let Some(e) = self.reported.as_ref().and_then(|r| r.lock().ok()?.clone()) {
            return Err(PerfError::PeerGone(format!(
                "the endpoint's error handler reported: {e}"
            )));
        }
        let ep = self.ep;
        self.w
            .with(|w| w.ep_status(ep))
            .map_err(|e| PerfError::PeerGone(e.to_string()))
    }

    #[inline]
    unsafe fn tag_send(
        &mut self,
        ptr: *const u8,
        len: usize,
        tag: u64,
        sync: bool,
    ) -> Result<Started<ThreadReq>> {
        let (ep, tag) = (self.ep, tag.wrapping_add(self.tag_offset));
        if !sync && len > 0 {
            // SAFETY: PerfWorker::tag_send's contract: `len` readable bytes
            // at `ptr` (copied by the send).
            let data = unsafe { std::slice::from_raw_parts(ptr, len) };
            if self.w.try_tag_send_short(ep, data, tag) {
                return Ok(Started::Done(len));
            }
        }
        let op = if sync { Op::new().sync() } else { Op::new() };
        // An address, which may cross to the thread that runs the post.
        let at = ptr as usize;
        // SAFETY: PerfWorker::tag_send has the same contract as
        // tag_send_raw: the bytes stay valid until completion is seen,
        // which for a handed post is after it ran.
        self.parked.post(&self.w, "tag send", move |w| unsafe {
            w.tag_send_raw(ep, at as *const u8, len, tag, op)
        })
    }

    #[inline]
    unsafe fn tag_recv(
        &mut self,
        ptr: *mut u8,
        len: usize,
        tag: u64,
        mask: u64,
    ) -> Result<Started<ThreadReq>> {
        let tag = tag.wrapping_add(self.tag_offset);
        let at = ptr as usize;
        // SAFETY: PerfWorker::tag_recv has the contract of tag_recv_raw.
        self.parked.post(&self.w, "tag receive", move |w| unsafe {
            w.tag_recv_raw(at as *mut u8, len, tag, mask, Op::default())
        })
    }

    #[inline]
    fn test(&mut self, req: ThreadReq) -> Option<Result<usize>> {
        self.parked
            .test(&self.w, req)
            .map(|r| r.map_err(|e| op_error("operation", e)))
    }

    fn expose(&mut self, len: usize) -> Result<Exposed> {
        exposed::expose(&self.ctx, &mut self.exposed, len)
    }

    #[inline]
    fn exposed_byte(&mut self, offset: usize) -> Result<u8> {
        exposed::byte(exposed::map(&self.exposed)?, offset)
    }

    fn exposed_read(&mut self, offset: usize, out: &mut [u8]) -> Result<()> {
        exposed::read(exposed::map(&self.exposed)?, offset, out)
    }

    fn exposed_write(&mut self, offset: usize, data: &[u8]) -> Result<()> {
        exposed::write(exposed::map(&self.exposed)?, offset, data)
    }

    fn set_remote(&mut self, addr: u64, rkey: &[u8]) -> Result<()> {
        let ep = self.ep;
        let rkey = self
            .w
            .with(|w| w.rkey_unpack(ep, rkey))
            .map_err(|e| PerfError::transport("unpack the peer's remote key", e))?;
        self.remote = Some(Remote {
            addr,
            rkey: rkey.into(),
        });
        Ok(())
    }

    #[inline]
    unsafe fn put(
        &mut self,
        ptr: *const u8,
        len: usize,
        offset: u64,
    ) -> Result<Started<ThreadReq>> {
        let ep = self.ep;
        let (r, addr) = self.target(offset)?;
        let (rkey, at) = (r.rkey.clone(), ptr as usize);
        // SAFETY: PerfWorker::put has the contract of put_raw.
        self.parked.post(&self.w, "put", move |w| unsafe {
            w.put_raw(ep, at as *const u8, len, addr, &rkey, Op::new())
        })
    }

    #[inline]
    unsafe fn get(&mut self, ptr: *mut u8, len: usize, offset: u64) -> Result<Started<ThreadReq>> {
        let ep = self.ep;
        let (r, addr) = self.target(offset)?;
        let (rkey, at) = (r.rkey.clone(), ptr as usize);
        // SAFETY: PerfWorker::get has the contract of get_raw.
        self.parked.post(&self.w, "get", move |w| unsafe {
            w.get_raw(ep, at as *mut u8, len, addr, &rkey, Op::new())
        })
    }

    #[inline]
    fn atomic_post(
        &mut self,
        op: AtomicKind,
        width: usize,
        value: u64,
        offset: u64,
    ) -> Result<Started<ThreadReq>> {
        let value = atomic_value(width, value)?;
        let ep = self.ep;
        let (r, addr) = self.target(offset)?;
        let rkey = r.rkey.clone();
        self.parked.post(&self.w, "atomic operation", move |w| {
            w.atomic_post(ep, atomic_op(op), value, addr, &rkey, Op::new())
        })
    }

    #[inline]
    unsafe fn atomic_fetch(
        &mut self,
        op: AtomicKind,
        width: usize,
        value: u64,
        compare: u64,
        result: *mut u8,
        offset: u64,
    ) -> Result<Started<ThreadReq>> {
        let value = atomic_value(width, value)?;
        let ep = self.ep;
        let (r, addr) = self.target(offset)?;
        // SAFETY: PerfWorker::atomic_fetch has the contract of
        // atomic_fetch_raw (8 writable bytes until completion).
        self.w
            .with(|w| unsafe {
                w.atomic_fetch_raw(
                    ep,
                    atomic_op(op),
                    value,
                    compare,
                    result.cast::<u64>(),
                    addr,
                    &r.rkey,
                    Op::new(),
                )
            })
            .map(started)
            .map(|s| match s {
                Started::Done(n) => Started::Done(n),
                Started::InFlight(id) => Started::InFlight(ThreadReq::Id(id)),
            })
            .map_err(|e| op_error("fetching atomic operation", e))
    }
}
