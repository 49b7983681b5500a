//! [`VerbsContext`]: one worker's completion queues, shared receive
//! queues, queue pairs and connections on a device.

use std::collections::{HashMap, VecDeque};
use std::net::SocketAddr;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Instant;

use rucx_rdma::{
    AsyncEvent, CmEvent, ConnParam, ConnReqId, CqId, DeviceAttr, QpId, QpInit, QpState, RecvWr,
    SendWr, SrqId, SrqInit, Verbs, Wc,
};
use uct::ucs::hash::FxHashMap;
use uct::ucs::{Error, Result};
use uct::Armed;

use crate::cm::{Cm, QpSlot};
use crate::deferred::Deferred;
use crate::device::DevShared;
use crate::events::{eventfd, Waker};
use crate::qpstate;
use crate::res::{Channel, Cq, Qp, QpCap, QpSpec, Srq};
use crate::wc::RawWc;
use crate::wr;

mod look;
mod wait;
use wait::poll_raw;

/// Completions read from the device per `ibv_poll_cq` call.
const POLL_BATCH: usize = 16;

/// A completion queue and what `arm` found in it.
#[derive(Debug)]
struct CqSlot {
    cq: Arc<Cq>,
    /// Notification requested and not yet delivered.
    armed: bool,
    /// Armed while the queue was empty: the next completion raises an
    /// event.
    quiet_armed: bool,
    /// A completion was polled since `quiet_armed`: its event is on its
    /// way to the channel (rxe writes it from a tasklet, after the
    /// completion is visible), and would wake a sleeper for nothing.
    event_due: bool,
    /// Completions `arm` polled to learn that some were pending; handed
    /// out first by `poll_cq`.
    stash: VecDeque<RawWc>,
}

/// One worker's verbs objects on a device.
#[derive(Debug)]
pub struct VerbsContext {
    // Field order is drop order: connections and queue pairs before the
    // queues they use, the channel last (each also holds its parents).
    cm: Cm,
    qps: FxHashMap<QpId, QpSlot>,
    by_num: FxHashMap<u32, QpId>,
    srqs: HashMap<SrqId, Arc<Srq>>,
    cqs: FxHashMap<CqId, CqSlot>,
    channel: Arc<Channel>,
    waker: Waker,
    /// Signalled when the device's router queues an event for us.
    _notify: OwnedFd,
    dev: Arc<DevShared>,
    /// Queue pairs with sends waiting for their connection.
    waiting: Vec<QpId>,
    /// Accepted queue pairs whose connection is not established yet.
    accepting: Vec<QpId>,
    /// Accepted queue pairs that completed work before their connection
    /// was established: the connection manager's `Established` is on its
    /// way (the initiator sends its RTU before any data).
    est_due: Vec<QpId>,
    /// This context's token in the device's async event router.
    token: u64,
    /// Set by the router while events wait for this context.
    routed: Arc<AtomicBool>,
    next_id: u32,
    /// When `poll_cm` and `poll_async` next read their channels while
    /// nothing is being connected (`arm` reads both before it lets the
    /// context sleep, and failures read the async fd at once).
    quiet: [look::Look; 2],
}

impl VerbsContext {
    pub(crate) fn open(dev: &Arc<DevShared>) -> Result<VerbsContext> {
        let channel = Channel::create(&dev.ctx)?;
        let cm = Cm::new(&dev.ctx.name)?;
        let notify = eventfd()?;
        let waker = Waker::new(&[
            channel.fd(),
            cm.fd(),
            notify.as_raw_fd(),
            dev.ctx.async_fd(),
        ])?;
        let (token, routed) = dev.router.lock().new_context(notify.as_raw_fd());
        Ok(VerbsContext {
            cm,
            qps: FxHashMap::default(),
            by_num: FxHashMap::default(),
            srqs: HashMap::new(),
            cqs: FxHashMap::default(),
            channel,
            waker,
            _notify: notify,
            dev: dev.clone(),
            waiting: Vec::new(),
            accepting: Vec::new(),
            est_due: Vec::new(),
            token,
            routed,
            next_id: 0,
            quiet: [
                look::Look::new(Instant::now()),
                look::Look::new(Instant::now()),
            ],
        })
    }

    /// Whether this call of `poll_cm` (`which` 0) or `poll_async` (1)
    /// reads its channel ([`look::Look::due`]).
    fn look(&mut self, which: usize) -> bool {
        self.quiet[which].due(Instant::now)
    }

    fn new_id(&mut self) -> u32 {
        self.next_id = self.next_id.wrapping_add(1);
        self.next_id
    }

    fn slot(&self, qp: QpId) -> Result<&QpSlot> {
        self.qps
            .get(&qp)
            .ok_or_else(|| Error::InvalidParam(format!("verbs: no QP {}", qp.0)))
    }

    fn cq(&self, cq: CqId) -> Result<&Arc<Cq>> {
        self.cqs
            .get(&cq)
            .map(|s| &s.cq)
            .ok_or_else(|| Error::InvalidParam(format!("verbs: no CQ {}", cq.0)))
    }
}

impl Drop for VerbsContext {
    fn drop(&mut self) {
        self.dev.router.lock().drop_context(self.token);
    }
}

impl Verbs for VerbsContext {
    fn attr(&self) -> &DeviceAttr {
        &self.dev.attr
    }

    fn create_cq(&mut self, depth: u32) -> Result<CqId> {
        let cq = Cq::create(&self.dev.ctx, &self.channel, depth)?;
        let id = CqId(self.new_id());
        let slot = CqSlot {
            cq,
            armed: false,
            quiet_armed: false,
            event_due: false,
            stash: VecDeque::with_capacity(1),
        };
        self.cqs.insert(id, slot);
        Ok(id)
    }

    fn destroy_cq(&mut self, cq: CqId) -> Result<()> {
        let slot = self
            .cqs
            .get(&cq)
            .ok_or_else(|| Error::InvalidParam(format!("verbs: no CQ {}", cq.0)))?;
        if Arc::strong_count(&slot.cq) > 1 {
            return Err(Error::InvalidParam(
                "verbs: destroy_cq: queue pairs use it".into(),
            ));
        }
        self.cqs.remove(&cq);
        Ok(())
    }

    fn create_qp(&mut self, init: &QpInit) -> Result<QpId> {
        let pd = self.dev.pd(init.pd)?;
        let send_cq = self.cq(init.send_cq)?.clone();
        let recv_cq = self.cq(init.recv_cq)?.clone();
        let srq = match init.srq {
            Some(s) => Some(
                self.srqs
                    .get(&s)
                    .cloned()
                    .ok_or_else(|| Error::InvalidParam(format!("verbs: no SRQ {}", s.0)))?,
            ),
            None => None,
        };
        let spec = QpSpec {
            pd: &pd,
            send_cq: &send_cq,
            recv_cq: &recv_cq,
            srq: srq.as_ref(),
            cap: QpCap {
                max_send_wr: init.max_send_wr,
                max_recv_wr: if srq.is_some() { 0 } else { init.max_recv_wr },
                max_send_sge: init.max_send_sge,
                max_recv_sge: if srq.is_some() { 0 } else { init.max_recv_sge },
                max_inline: init.max_inline,
            },
            sq_sig_all: init.sq_sig_all,
        };
        let qp = Qp::create(&spec)?;
        qpstate::to_init(&qp, self.dev.port)?;
        let id = QpId(self.new_id());
        self.dev.router.lock().add_qp(qp.num(), self.token, id);
        self.by_num.insert(qp.num(), id);
        self.qps.insert(
            id,
            QpSlot {
                qp,
                state: QpState::Init,
                srq: init.srq.is_some(),
                ready: false,
                send_cq: init.send_cq,
                deferred: VecDeque::new(),
            },
        );
        Ok(id)
    }

    fn destroy_qp(&mut self, qp: QpId) -> Result<()> {
        let slot = self
            .qps
            .remove(&qp)
            .ok_or_else(|| Error::InvalidParam(format!("verbs: no QP {}", qp.0)))?;
        self.cm.forget(qp);
        self.waiting.retain(|&q| q != qp);
        let num = slot.qp.num();
        self.by_num.remove(&num);
        self.dev.router.lock().remove_qp(num);
        drop(slot);
        Ok(())
    }

    fn create_srq(&mut self, init: &SrqInit) -> Result<SrqId> {
        let pd = self.dev.pd(init.pd)?;
        let srq = Srq::create(&pd, init.max_wr, init.max_sge)?;
        let id = SrqId(self.new_id());
        self.srqs.insert(id, srq);
        Ok(id)
    }

    fn destroy_srq(&mut self, srq: SrqId) -> Result<()> {
        let s = self
            .srqs
            .get(&srq)
            .ok_or_else(|| Error::InvalidParam(format!("verbs: no SRQ {}", srq.0)))?;
        if Arc::strong_count(s) > 1 {
            return Err(Error::InvalidParam(
                "verbs: destroy_srq: queue pairs use it".into(),
            ));
        }
        self.srqs.remove(&srq);
        Ok(())
    }

    unsafe fn post_srq_recv(&mut self, srq: SrqId, wr: &RecvWr<'_>) -> Result<()> {
        let s = self
            .srqs
            .get(&srq)
            .ok_or_else(|| Error::InvalidParam(format!("verbs: no SRQ {}", srq.0)))?;
        // SAFETY: the caller keeps the memory valid until completion or
        // until the shared receive queue is destroyed.
        unsafe { wr::post_srq_recv(s, wr) }
    }

    fn qp_state(&self, qp: QpId) -> Option<QpState> {
        self.qps.get(&qp).map(|s| s.state)
    }

    fn listen(&mut self, addr: SocketAddr) -> Result<SocketAddr> {
        self.cm.listen(addr)
    }

    fn connect(&mut self, qp: QpId, dest: SocketAddr, param: &ConnParam) -> Result<()> {
        if self.slot(qp)?.state != QpState::Init {
            return Err(Error::InvalidParam(format!(
                "verbs: QP {} is not new",
                qp.0
            )));
        }
        self.cm.connect(qp, self.dev.attr.addr, dest, param)?;
        if let Some(s) = self.qps.get_mut(&qp) {
            s.state = QpState::Connecting;
        }
        Ok(())
    }

    fn accept(&mut self, req: ConnReqId, qp: QpId, param: &ConnParam) -> Result<()> {
        let slot = self
            .qps
            .get_mut(&qp)
            .ok_or_else(|| Error::InvalidParam(format!("verbs: no QP {}", qp.0)))?;
        if slot.state != QpState::Init {
            return Err(Error::InvalidParam(format!(
                "verbs: QP {} is not new",
                qp.0
            )));
        }
        self.cm.accept(req, slot, qp, param)?;
        self.accepting.push(qp);
        Ok(())
    }

    fn reject(&mut self, req: ConnReqId, private_data: &[u8]) -> Result<()> {
        self.cm.reject(req, private_data)
    }

    fn disconnect(&mut self, qp: QpId) -> Result<()> {
        let slot = self
            .qps
            .get_mut(&qp)
            .ok_or_else(|| Error::InvalidParam(format!("verbs: no QP {}", qp.0)))?;
        self.cm.disconnect(qp);
        let moved = qpstate::to_err(&slot.qp);
        slot.state = QpState::Error;
        if !self.waiting.is_empty() {
            self.release_deferred();
        }
        moved
    }

    fn poll_cm(&mut self) -> Option<CmEvent> {
        // Not `accepting`: a connection accepted but never used (the one
        // given up when both sides connect at once) would stay there, and
        // the accept's `Established` is covered by `Cm::settling`.
        let settling = self.cm.settling() || !self.waiting.is_empty();
        if !settling && !self.look(0) {
            return None;
        }
        let ev = self.cm.poll(&mut self.qps);
        if !self.waiting.is_empty() {
            self.release_deferred();
        }
        ev
    }

    fn poll_async(&mut self) -> Option<AsyncEvent> {
        let look = self.look(1);
        // Relaxed: the flag is set under the router's lock, which the pop
        // below takes; seen late, the event waits for the next call.
        if !look && !self.routed.load(Ordering::Relaxed) {
            return None;
        }
        let mut r = self.dev.router.lock();
        if look {
            r.drain(&self.dev.ctx, self.dev.port);
        }
        r.pop(self.token)
    }

    fn poll_async_now(&mut self) -> Option<AsyncEvent> {
        let mut r = self.dev.router.lock();
        r.drain(&self.dev.ctx, self.dev.port);
        r.pop(self.token)
    }

    /// A send posted before the queue pair is in RTS is kept and posted
    /// when it gets there (or completed flushed if it fails first).
    unsafe fn post_send(&mut self, qp: QpId, wr: &SendWr<'_>) -> Result<()> {
        let slot = self
            .qps
            .get_mut(&qp)
            .ok_or_else(|| Error::InvalidParam(format!("verbs: no QP {}", qp.0)))?;
        let early = matches!(slot.state, QpState::Init | QpState::Connecting) && !slot.ready;
        if !early {
            // SAFETY: the caller keeps the gather memory valid until
            // completion (or the send goes inline).
            return unsafe { wr::post_send(&slot.qp, wr) };
        }
        // Refuse now what the device would refuse later.
        wr::check(wr, &slot.qp.cap)?;
        if slot.deferred.len() >= slot.qp.cap.max_send_wr as usize {
            return Err(Error::NoMemory(format!(
                "verbs: send queue of QP {} full",
                qp.0
            )));
        }
        if slot.deferred.is_empty() {
            self.waiting.push(qp);
        }
        // SAFETY: the caller's contract for post_send, which `Deferred`
        // keeps (inline data is copied now).
        slot.deferred.push_back(unsafe { Deferred::of(wr) });
        Ok(())
    }

    unsafe fn post_recv(&mut self, qp: QpId, wr: &RecvWr<'_>) -> Result<()> {
        let slot = self.slot(qp)?;
        if slot.srq {
            return Err(Error::InvalidParam(format!(
                "verbs: QP {} takes its receives from a shared receive queue",
                qp.0
            )));
        }
        // SAFETY: the caller keeps the scatter memory valid until
        // completion or the queue pair's destruction.
        unsafe { wr::post_recv(&slot.qp, wr) }
    }

    fn poll_cq(&mut self, cq: CqId, out: &mut [Wc]) -> usize {
        let Some(slot) = self.cqs.get_mut(&cq) else {
            return 0;
        };
        let by_num = &self.by_num;
        let mut n = 0;
        while n < out.len() {
            if let Some(w) = slot.stash.pop_front() {
                out[n] = w.to_wc(by_num.get(&w.qp_num).copied());
                n += 1;
                continue;
            }
            let mut i = n;
            let k = poll_raw(&slot.cq, out.len() - n, |w| {
                out[i] = w.to_wc(by_num.get(&w.qp_num).copied());
                i += 1;
            });
            slot.event_due |= k > 0 && slot.quiet_armed;
            n = i;
            if k == 0 {
                break;
            }
        }
        if !self.accepting.is_empty() {
            self.traffic_before_established(&out[..n]);
        }
        n
    }

    /// Nothing to drive: the device moves data by itself.
    fn progress(&mut self) -> usize {
        0
    }

    fn event_fd(&self) -> Option<RawFd> {
        Some(self.waker.fd())
    }

    /// Requests a notification on every completion queue not armed yet,
    /// then looks once more: a completion, connection event or
    /// asynchronous event already waiting makes it [`Armed::Busy`].
    fn arm(&mut self) -> Result<Armed> {
        self.arm_all()
    }
}
