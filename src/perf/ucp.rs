//! [`PerfWorker`] on rucx's protocol layer: a `rucx_ucp` worker and its one
//! endpoint to the peer, driven through the raw (pointer) tier; for
//! one-sided tests also the exposed buffer (a [`MemMap`]) and the peer's
//! remote key.

use super::error::{PerfError, Result};
use super::worker::{AtomicKind, Exposed, PerfWorker, Started};
use rucx_ucp::{AmParams, Context, Ep, MemMap, Op, Posted, ReqId, Worker};

mod am;
mod endpoints;
mod exposed;
mod handed;
mod layout;
mod remote;
mod threads;
use am::{AmInbox, PERF_AM_ID};
use endpoints::EpSetup;
use remote::{atomic_op, atomic_value, target, Remote};
pub use threads::ThreadWorker;

/// A ucp worker with one endpoint.
#[derive(Debug)]
pub struct UcpWorker {
    remote: Option<Remote>,
    // Fields drop in order: the map and the worker before the context.
    exposed: Option<MemMap>,
    worker: Worker,
    ep: Option<Ep>,
    setup: EpSetup,
    ctx: Context,
    am: AmInbox,
    /// `-D iov`: the entry sizes of sent and of received messages.
    iov: (Option<Vec<usize>>, Option<Vec<usize>>),
}

impl UcpWorker {
    /// A context from the `RUCX_*` environment and a worker on it.
    pub fn new() -> Result<UcpWorker> {
        let ctx = crate::Context::new()
            .map_err(|e| PerfError::transport("create context", e))?
            .into_inner();
        UcpWorker::on(ctx)
    }

    /// A worker on `ctx`, with the perftest's active message handler.
    fn on(ctx: Context) -> Result<UcpWorker> {
        let mut worker = ctx
            .create_worker()
            .map_err(|e| PerfError::transport("create worker", e))?;
        let am = AmInbox::default();
        am.install(&mut worker);
        Ok(UcpWorker {
            remote: None,
            exposed: None,
            worker,
            ep: None,
            setup: EpSetup::default(),
            ctx,
            am,
            iov: (None, None),
        })
    }

    /// A send of `-D iov`: `len` bytes at `ptr` as entries of the sizes.
    ///
    /// # Safety
    /// As [`PerfWorker::tag_send`] (the bytes are packed before it returns).
    #[cold]
    unsafe fn send_iov(
        &mut self,
        (ptr, len): (*const u8, usize),
        post: impl FnOnce(&mut Worker, layout::SendIov) -> rucx_ucp::Result<Posted<layout::SendIov>>,
    ) -> Result<Started<ReqId>> {
        let sizes = self.iov.0.as_deref().unwrap_or(&[]);
        // SAFETY: forwarded from this function's contract.
        let d = unsafe { layout::SendIov::new(ptr, len, sizes) };
        post(&mut self.worker, d)
            .map(forget_dt)
            .map_err(|e| op_error("iov send", e))
    }

    /// A receive of `-D iov` into `len` bytes at `ptr`.
    ///
    /// # Safety
    /// As [`PerfWorker::tag_recv`].
    #[cold]
    unsafe fn recv_iov(
        &mut self,
        (ptr, len): (*mut u8, usize),
        post: impl FnOnce(&mut Worker, layout::RecvIov) -> rucx_ucp::Result<Posted<layout::RecvIov>>,
    ) -> Result<Started<ReqId>> {
        let sizes = self.iov.1.as_deref().unwrap_or(&[]);
        // SAFETY: forwarded from this function's contract.
        let d = unsafe { layout::RecvIov::new(ptr, len, sizes) };
        post(&mut self.worker, d)
            .map(forget_dt)
            .map_err(|e| op_error("iov receive", e))
    }

    fn ep(&self) -> Result<Ep> {
        self.ep
            .ok_or_else(|| PerfError::Params("the worker is not connected".into()))
    }
}

/// An endpoint failure means the peer went away; anything else is a
/// failure of the operation.
fn op_error(op: &'static str, e: rucx_ucp::Error) -> PerfError {
    match e {
        rucx_ucp::Error::EndpointFailed { cause } => PerfError::PeerGone(format!("{op}: {cause}")),
        e => PerfError::transport(op, e),
    }
}

/// [`started`] of a datatype post: the value only describes the caller's
/// memory, so it is dropped.
fn forget_dt<D>(p: Posted<D>) -> Started<ReqId> {
    started(match p {
        Posted::Done(info, _) => Posted::Done(info, ()),
        Posted::InFlight(id) => Posted::InFlight(id),
    })
}

fn started(p: Posted<()>) -> Started<ReqId> {
    match p {
        Posted::Done(info, ()) => Started::Done(info.length),
        Posted::InFlight(id) => Started::InFlight(id),
    }
}

impl PerfWorker for UcpWorker {
    type Req = ReqId;

    fn address(&mut self) -> Result<Vec<u8>> {
        Ok(self.worker.address())
    }

    fn connect(&mut self, remote: &[u8]) -> Result<()> {
        self.connect_impl(remote)
    }

    fn listen(&mut self, ip: std::net::IpAddr) -> Result<u16> {
        self.listen_impl(ip)
    }

    fn connect_to(&mut self, addr: std::net::SocketAddr) -> Result<()> {
        self.connect_to_impl(addr)
    }

    fn connect_poll(&mut self) -> Result<bool> {
        self.connect_poll_impl()
    }

    fn enable_err_handling(&mut self) -> Result<()> {
        self.enable_err_handling_impl();
        Ok(())
    }

    fn set_iov(&mut self, send: Option<Vec<usize>>, recv: Option<Vec<usize>>) -> Result<()> {
        self.iov = (send, recv);
        Ok(())
    }

    #[inline]
    fn progress(&mut self) -> usize {
        self.worker.progress()
    }

    #[inline]
    fn completed_count(&self) -> Option<u64> {
        Some(self.worker.completed_count())
    }

    fn check_peer(&mut self) -> Result<()> {
        self.setup.reported()?;
        match self.ep {
            None => Ok(()),
            Some(ep) => self
                .worker
                .ep_status(ep)
                .map_err(|e| PerfError::PeerGone(e.to_string())),
        }
    }

    #[inline]
    unsafe fn tag_send(
        &mut self,
        ptr: *const u8,
        len: usize,
        tag: u64,
        sync: bool,
    ) -> Result<Started<ReqId>> {
        let ep = self.ep()?;
        let op = if sync { Op::new().sync() } else { Op::new() };
        if self.iov.0.is_some() {
            // SAFETY: PerfWorker::tag_send's contract.
            return unsafe { self.send_iov((ptr, len), |w, d| w.tag_send_dt(ep, d, tag, op)) };
        }
        // SAFETY: PerfWorker::tag_send has the same contract as
        // tag_send_raw: the bytes stay valid until completion is seen.
        unsafe { self.worker.tag_send_raw(ep, ptr, len, tag, op) }
            .map(started)
            .map_err(|e| op_error("tag send", e))
    }

    #[inline]
    unsafe fn tag_recv(
        &mut self,
        ptr: *mut u8,
        len: usize,
        tag: u64,
        mask: u64,
    ) -> Result<Started<ReqId>> {
        if self.iov.1.is_some() {
            // SAFETY: PerfWorker::tag_recv's contract.
            return unsafe {
                self.recv_iov((ptr, len), |w, d| {
                    w.tag_recv_dt(d, tag, mask, Op::default())
                })
            };
        }
        // SAFETY: PerfWorker::tag_recv has the same contract as
        // tag_recv_raw.
        unsafe { self.worker.tag_recv_raw(ptr, len, tag, mask, Op::default()) }
            .map(started)
            .map_err(|e| op_error("tag receive", e))
    }

    #[inline]
    unsafe fn stream_send(&mut self, ptr: *const u8, len: usize) -> Result<Started<ReqId>> {
        let ep = self.ep()?;
        if self.iov.0.is_some() {
            // SAFETY: PerfWorker::stream_send's contract.
            return unsafe { self.send_iov((ptr, len), |w, d| w.stream_send_dt(ep, d, Op::new())) };
        }
        // SAFETY: PerfWorker::stream_send has the contract of
        // stream_send_raw.
        unsafe { self.worker.stream_send_raw(ep, ptr, len, Op::new()) }
            .map(started)
            .map_err(|e| op_error("stream send", e))
    }

    #[inline]
    unsafe fn stream_recv(&mut self, ptr: *mut u8, len: usize) -> Result<Started<ReqId>> {
        let ep = self.ep()?;
        if self.iov.1.is_some() {
            // SAFETY: PerfWorker::stream_recv's contract.
            return unsafe {
                self.recv_iov((ptr, len), |w, d| w.stream_recv_all_dt(ep, d, Op::new()))
            };
        }
        // SAFETY: PerfWorker::stream_recv has the contract of
        // stream_recv_raw.
        unsafe { self.worker.stream_recv_raw(ep, ptr, len, true, Op::new()) }
            .map(started)
            .map_err(|e| op_error("stream receive", e))
    }

    #[inline]
    unsafe fn am_send(&mut self, ptr: *const u8, len: usize) -> Result<Started<ReqId>> {
        let ep = self.ep()?;
        if self.iov.0.is_some() {
            // SAFETY: PerfWorker::am_send's contract.
            return unsafe {
                self.send_iov((ptr, len), |w, d| {
                    w.am_send_dt(ep, PERF_AM_ID, &[], d, AmParams::new(), Op::new())
                })
            };
        }
        // SAFETY: PerfWorker::am_send has the contract of am_send_raw.
        unsafe {
            self.worker
                .am_send_raw(ep, PERF_AM_ID, &[], (ptr, len), AmParams::new(), Op::new())
        }
        .map(started)
        .map_err(|e| op_error("active message send", e))
    }

    #[inline]
    fn am_take(&mut self, out: &mut [u8]) -> Result<Option<usize>> {
        self.am
            .take(out, &mut self.worker)
            .map_err(|e| op_error("active message data", e))
    }

    fn am_expect(&mut self, len: usize, keep: bool) -> Result<()> {
        self.am.expect(len, keep);
        Ok(())
    }

    #[inline(always)]
    fn release(&mut self, req: ReqId) -> bool {
        self.worker.request_release(req);
        true
    }

    #[inline]
    fn released_finished(&self) -> u64 {
        self.worker.released_completed()
    }

    #[inline]
    fn released_error(&mut self) -> Option<PerfError> {
        let e = self.worker.take_released_error()?;
        Some(op_error("operation", e))
    }

    #[inline(always)]
    fn test(&mut self, req: ReqId) -> Option<Result<usize>> {
        self.worker.request_test(req).map(|r| {
            r.map(|info| info.length)
                .map_err(|e| op_error("operation", e))
        })
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
        let ep = self.ep()?;
        let rkey = self
            .worker
            .rkey_unpack(ep, rkey)
            .map_err(|e| PerfError::transport("unpack the peer's remote key", e))?;
        self.remote = Some(Remote {
            addr,
            rkey: rkey.into(),
        });
        Ok(())
    }

    #[inline]
    unsafe fn put(&mut self, ptr: *const u8, len: usize, offset: u64) -> Result<Started<ReqId>> {
        let (ep, r) = target(self.ep, &self.remote)?;
        let addr = r.addr.wrapping_add(offset);
        // SAFETY: PerfWorker::put has the contract of put_raw: the bytes
        // stay valid and unchanged until completion is seen.
        unsafe { self.worker.put_raw(ep, ptr, len, addr, &r.rkey, Op::new()) }
            .map(started)
            .map_err(|e| op_error("put", e))
    }

    #[inline]
    unsafe fn get(&mut self, ptr: *mut u8, len: usize, offset: u64) -> Result<Started<ReqId>> {
        let (ep, r) = target(self.ep, &self.remote)?;
        let addr = r.addr.wrapping_add(offset);
        // SAFETY: PerfWorker::get has the contract of get_raw.
        unsafe { self.worker.get_raw(ep, ptr, len, addr, &r.rkey, Op::new()) }
            .map(started)
            .map_err(|e| op_error("get", e))
    }

    #[inline]
    fn atomic_post(
        &mut self,
        op: AtomicKind,
        width: usize,
        value: u64,
        offset: u64,
    ) -> Result<Started<ReqId>> {
        let value = atomic_value(width, value)?;
        let (ep, r) = target(self.ep, &self.remote)?;
        let addr = r.addr.wrapping_add(offset);
        self.worker
            .atomic_post(ep, atomic_op(op), value, addr, &r.rkey, Op::new())
            .map(started)
            .map_err(|e| op_error("atomic operation", e))
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
    ) -> Result<Started<ReqId>> {
        let value = atomic_value(width, value)?;
        let (ep, r) = target(self.ep, &self.remote)?;
        let addr = r.addr.wrapping_add(offset);
        // SAFETY: PerfWorker::atomic_fetch has the contract of
        // atomic_fetch_raw (8 writable bytes until completion); the result
        // is written unaligned.
        unsafe {
            self.worker.atomic_fetch_raw(
                ep,
                atomic_op(op),
                value,
                compare,
                result.cast::<u64>(),
                addr,
                &r.rkey,
                Op::new(),
            )
        }
        .map(started)
        .map_err(|e| op_error("fetching atomic operation", e))
    }
}
