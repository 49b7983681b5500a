//! [`PerfWorker`] on rucx's protocol layer: a `rucx_ucp` worker and its one
//! endpoint to the peer, driven through the raw (pointer) tier.

use super::error::{PerfError, Result};
use super::worker::{PerfWorker, Started};
use rucx_ucp::{Context, Ep, Op, Posted, ReqId, Worker};

/// A ucp worker with one endpoint.
#[derive(Debug)]
pub struct UcpWorker {
    // Declared before the context: dropped first.
    worker: Worker,
    ep: Option<Ep>,
    _ctx: Context,
}

impl UcpWorker {
    /// A context from the `RUCX_*` environment and a worker on it.
    pub fn new() -> Result<UcpWorker> {
        let ctx = Context::new().map_err(|e| PerfError::transport("create context", e))?;
        let worker = ctx
            .create_worker()
            .map_err(|e| PerfError::transport("create worker", e))?;
        Ok(UcpWorker {
            worker,
            ep: None,
            _ctx: ctx,
        })
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
        rucx_ucp::Error::Endpoint(cause) => PerfError::PeerGone(format!("{op}: {cause}")),
        e => PerfError::transport(op, e),
    }
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
        let ep = self
            .worker
            .connect(remote)
            .map_err(|e| PerfError::transport("connect to the peer's worker", e))?;
        self.ep = Some(ep);
        Ok(())
    }

    #[inline]
    fn progress(&mut self) -> usize {
        self.worker.progress()
    }

    fn check_peer(&mut self) -> Result<()> {
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
        // SAFETY: PerfWorker::tag_recv has the same contract as
        // tag_recv_raw.
        unsafe { self.worker.tag_recv_raw(ptr, len, tag, mask, Op::default()) }
            .map(started)
            .map_err(|e| op_error("tag receive", e))
    }

    #[inline]
    fn test(&mut self, req: ReqId) -> Option<Result<usize>> {
        self.worker.request_test(req).map(|r| {
            r.map(|info| info.length)
                .map_err(|e| op_error("tag operation", e))
        })
    }
}
