//! TEST DOUBLE, not a transport: an RDMA provider named `amo` that is the
//! userspace iWARP provider plus the 64-bit atomics iWARP lacks, executed
//! in this process at post time.
//!
//! Its devices are the iWARP provider's, reporting `atomics: true`. It
//! keeps a table of the regions registered through it (steering tag →
//! range and rights), and a FetchAdd or CmpSwap work request is executed
//! on the spot: the steering tag must name a live region of this process
//! with remote atomic rights covering the aligned word, the operation is
//! a CPU atomic on that word, the old value goes to the request's 8-byte
//! sink, and a completion (or a remote access error) is queued for the
//! queue pair's send completion queue. Everything else is the iWARP
//! provider's. The target's process is this one, so "remote" memory is
//! found in the table; that is what makes it a double, good for checking
//! the RC transport's atomic path and the protocol layer's choices
//! without a NIC, and for nothing else (no ordering against RDMA WRITEs in
//! flight, no target-side queue pair state). [`BREAK_AT`] makes one
//! atomic fail as a broken connection would, for the failure paths.

use rucx::cause::WcStatus;
use rucx::ucp::uct::{Access, Armed, Result};
use rucx_rdma::verbs::{
    AsyncEvent, CmEvent, ConnParam, ConnReqId, CqId, DeviceAttr, DeviceInfo, Mr, PdId, QpId,
    QpInit, QpState, RecvWr, SendOp, SendWr, SrqId, SrqInit, Wc, WcOpcode,
};
use rucx_rdma::{Device, Provider, RcComponent, Verbs};
use std::collections::HashMap;
use std::net::SocketAddr;
use std::os::fd::RawFd;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

/// The double's provider.
pub(crate) static PROVIDER: AmoProvider = AmoProvider;
/// The RC transport over it: `rc_amo`.
pub(crate) static COMPONENT: RcComponent = RcComponent::new(&PROVIDER);

/// Atomics the double executed successfully, process-wide: how tests
/// tell a device atomic from an emulated one.
pub(crate) static EXECUTED: AtomicUsize = AtomicUsize::new(0);

/// When [`EXECUTED`] reaches this count, the next atomic the double is
/// given is not executed and completes with `FatalErr` (the connection
/// broke), once; `usize::MAX`: never.
pub(crate) static BREAK_AT: AtomicUsize = AtomicUsize::new(usize::MAX);

/// A region registered through the double: (address, length, rights).
type Region = (u64, u64, Access);

/// Regions by steering tag, of every device of the double.
static REGIONS: Mutex<Option<HashMap<u32, Region>>> = Mutex::new(None);

/// The double's provider.
#[derive(Debug)]
pub(crate) struct AmoProvider;

impl Provider for AmoProvider {
    fn name(&self) -> &'static str {
        "amo"
    }

    fn devices(&self) -> Result<Vec<DeviceInfo>> {
        rucx_iwarp::PROVIDER.devices()
    }

    fn open_device(&self, name: &str) -> Result<Arc<dyn Device>> {
        let inner = rucx_iwarp::PROVIDER.open_device(name)?;
        let mut attr = inner.attr().clone();
        attr.atomics = true;
        Ok(Arc::new(AmoDevice { inner, attr }))
    }
}

#[derive(Debug)]
struct AmoDevice {
    inner: Arc<dyn Device>,
    attr: DeviceAttr,
}

impl Device for AmoDevice {
    fn attr(&self) -> &DeviceAttr {
        &self.attr
    }

    fn alloc_pd(&self) -> Result<PdId> {
        self.inner.alloc_pd()
    }

    fn dealloc_pd(&self, pd: PdId) -> Result<()> {
        self.inner.dealloc_pd(pd)
    }

    unsafe fn reg_mr(&self, pd: PdId, addr: *mut u8, len: usize, access: Access) -> Result<Mr> {
        // SAFETY: forwarded under the caller's contract.
        let mr = unsafe { self.inner.reg_mr(pd, addr, len, access) }?;
        let mut t = REGIONS.lock().unwrap_or_else(|e| e.into_inner());
        t.get_or_insert_with(HashMap::new)
            .insert(mr.rkey, (mr.addr, mr.len, access));
        Ok(mr)
    }

    fn dereg_mr(&self, mr: &Mr) -> Result<()> {
        let mut t = REGIONS.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(m) = t.as_mut() {
            m.remove(&mr.rkey);
        }
        drop(t);
        self.inner.dereg_mr(mr)
    }

    fn open_context(&self) -> Result<Box<dyn Verbs>> {
        Ok(Box::new(AmoVerbs {
            inner: self.inner.open_context()?,
            attr: self.attr.clone(),
            send_cq: HashMap::new(),
            done: Vec::new(),
        }))
    }
}

#[derive(Debug)]
struct AmoVerbs {
    inner: Box<dyn Verbs>,
    attr: DeviceAttr,
    /// The send completion queue of each queue pair.
    send_cq: HashMap<QpId, CqId>,
    /// Completions of executed atomics, not yet polled.
    done: Vec<(CqId, Wc)>,
}

/// Executes one atomic on a registered word of this process; its old
/// value, or the status of the refusal.
fn execute(op: SendOp) -> std::result::Result<u64, WcStatus> {
    let (addr, rkey) = match op {
        SendOp::FetchAdd {
            remote_addr, rkey, ..
        }
        | SendOp::CmpSwap {
            remote_addr, rkey, ..
        } => (remote_addr, rkey),
        _ => return Err(WcStatus::RemInvReqErr),
    };
    let t = REGIONS.lock().unwrap_or_else(|e| e.into_inner());
    let Some(&(start, len, access)) = t.as_ref().and_then(|m| m.get(&rkey)) else {
        return Err(WcStatus::RemAccessErr);
    };
    let inside = addr >= start && addr.checked_add(8).is_some_and(|e| e <= start + len);
    if !inside || addr % 8 != 0 || !access.contains(Access::REMOTE_ATOMIC) {
        return Err(WcStatus::RemAccessErr);
    }
    // SAFETY: the word lies inside a live registration with remote atomic
    // rights (checked; the table's lock keeps it from being deregistered
    // meanwhile), aligned; its owner accesses such words only atomically.
    let w = unsafe { AtomicU64::from_ptr(addr as *mut u64) };
    Ok(match op {
        SendOp::FetchAdd { add, .. } => w.fetch_add(add, Ordering::SeqCst),
        SendOp::CmpSwap { compare, swap, .. } => w
            .compare_exchange(compare, swap, Ordering::SeqCst, Ordering::SeqCst)
            .unwrap_or_else(|x| x),
        _ => return Err(WcStatus::RemInvReqErr),
    })
}

impl Verbs for AmoVerbs {
    fn attr(&self) -> &DeviceAttr {
        &self.attr
    }
    fn create_cq(&mut self, depth: u32) -> Result<CqId> {
        self.inner.create_cq(depth)
    }
    fn destroy_cq(&mut self, cq: CqId) -> Result<()> {
        self.inner.destroy_cq(cq)
    }
    fn create_qp(&mut self, init: &QpInit) -> Result<QpId> {
        let qp = self.inner.create_qp(init)?;
        self.send_cq.insert(qp, init.send_cq);
        Ok(qp)
    }
    fn destroy_qp(&mut self, qp: QpId) -> Result<()> {
        self.send_cq.remove(&qp);
        self.inner.destroy_qp(qp)
    }
    fn create_srq(&mut self, init: &SrqInit) -> Result<SrqId> {
        self.inner.create_srq(init)
    }
    fn destroy_srq(&mut self, srq: SrqId) -> Result<()> {
        self.inner.destroy_srq(srq)
    }
    unsafe fn post_srq_recv(&mut self, srq: SrqId, wr: &RecvWr<'_>) -> Result<()> {
        // SAFETY: forwarded under the caller's contract.
        unsafe { self.inner.post_srq_recv(srq, wr) }
    }
    fn qp_state(&self, qp: QpId) -> Option<QpState> {
        self.inner.qp_state(qp)
    }
    fn listen(&mut self, addr: SocketAddr) -> Result<SocketAddr> {
        self.inner.listen(addr)
    }
    fn connect(&mut self, qp: QpId, dest: SocketAddr, param: &ConnParam) -> Result<()> {
        self.inner.connect(qp, dest, param)
    }
    fn accept(&mut self, req: ConnReqId, qp: QpId, param: &ConnParam) -> Result<()> {
        self.inner.accept(req, qp, param)
    }
    fn reject(&mut self, req: ConnReqId, private_data: &[u8]) -> Result<()> {
        self.inner.reject(req, private_data)
    }
    fn disconnect(&mut self, qp: QpId) -> Result<()> {
        self.inner.disconnect(qp)
    }
    fn poll_cm(&mut self) -> Option<CmEvent> {
        self.inner.poll_cm()
    }
    fn poll_async(&mut self) -> Option<AsyncEvent> {
        self.inner.poll_async()
    }

    unsafe fn post_send(&mut self, qp: QpId, wr: &SendWr<'_>) -> Result<()> {
        let opcode = match wr.op {
            SendOp::FetchAdd { .. } => WcOpcode::FetchAdd,
            SendOp::CmpSwap { .. } => WcOpcode::CmpSwap,
            // SAFETY: forwarded under the caller's contract.
            _ => return unsafe { self.inner.post_send(qp, wr) },
        };
        let Some(&cq) = self.send_cq.get(&qp) else {
            return Err(rucx::ucp::uct::Error::InvalidParam(
                "amo double: no such qp".into(),
            ));
        };
        let sink = match wr.sges {
            [s] if s.len >= 8 => s.addr,
            _ => {
                return Err(rucx::ucp::uct::Error::InvalidParam(
                    "amo double: an atomic needs one 8-byte sink".into(),
                ))
            }
        };
        let broken = BREAK_AT
            .compare_exchange(
                EXECUTED.load(Ordering::SeqCst),
                usize::MAX,
                Ordering::SeqCst,
                Ordering::SeqCst,
            )
            .is_ok();
        let result = if broken {
            Err(WcStatus::FatalErr)
        } else {
            execute(wr.op)
        };
        let status = match result {
            Ok(old) => {
                // SAFETY: the sink's 8 bytes stay valid until this
                // request's completion is polled (post_send's contract).
                unsafe {
                    (sink as *mut u8)
                        .cast::<[u8; 8]>()
                        .write_unaligned(old.to_ne_bytes())
                };
                EXECUTED.fetch_add(1, Ordering::SeqCst);
                WcStatus::Success
            }
            Err(s) => s,
        };
        let wc = Wc {
            wr_id: wr.wr_id,
            status,
            opcode,
            byte_len: 8,
            qp: Some(qp),
            ..Wc::default()
        };
        self.done.push((cq, wc));
        Ok(())
    }

    unsafe fn post_recv(&mut self, qp: QpId, wr: &RecvWr<'_>) -> Result<()> {
        // SAFETY: forwarded under the caller's contract.
        unsafe { self.inner.post_recv(qp, wr) }
    }

    fn poll_cq(&mut self, cq: CqId, out: &mut [Wc]) -> usize {
        let mut n = 0;
        let mut i = 0;
        while i < self.done.len() && n < out.len() {
            if self.done[i].0 == cq {
                out[n] = self.done.remove(i).1;
                n += 1;
            } else {
                i += 1;
            }
        }
        n + self.inner.poll_cq(cq, &mut out[n..])
    }

    fn progress(&mut self) -> usize {
        self.inner.progress()
    }
    fn event_fd(&self) -> Option<RawFd> {
        self.inner.event_fd()
    }
    fn arm(&mut self) -> Result<Armed> {
        if !self.done.is_empty() {
            return Ok(Armed::Busy);
        }
        self.inner.arm()
    }
}
