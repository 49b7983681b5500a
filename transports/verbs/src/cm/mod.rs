//! Connections through librdmacm: one event channel per context, a
//! listener, and one connection manager id per connecting or connected
//! queue pair. The queue pairs are the provider's own (created before
//! their connection), so the connection carries their number and the
//! provider moves them through INIT, RTR and RTS (`qpstate`).
//!
//! Events are read from the channel without blocking, copied, and
//! acknowledged at once, so that destroying an id never waits.

use std::collections::{HashMap, HashSet, VecDeque};
use std::net::{IpAddr, SocketAddr};
use std::ptr::{self, NonNull};

use rdma_sys as sys;
use rucx_rdma::{CmEvent, ConnParam, ConnReqId, CqId, QpId, QpState};
use uct::ucs::hash::FxHashMap;
use uct::ucs::{Error, Result};

mod event;

use crate::addr;
use crate::deferred::Deferred;
use crate::ffi::{os_err, set_nonblocking};
use crate::qpstate::{self, Depths};
use crate::res::{zeroed, Qp};

/// How long address and route resolution may take.
const RESOLVE_MS: i32 = 2000;
/// Transport and receiver-not-ready retries a connection asks for (7 is
/// "infinite" for RNR).
const RETRIES: u8 = 7;
/// A reject whose reason is the peer's own (IB CM reason 28, "consumer
/// defined"): a reject by the peer's application, with its private data.
const REJ_CONSUMER_DEFINED: i32 = 28;

/// A connection manager id, destroyed on drop.
#[derive(Debug)]
struct CmId(NonNull<sys::rdma_cm_id>);

impl CmId {
    fn raw(&self) -> *mut sys::rdma_cm_id {
        self.0.as_ptr()
    }
}

impl Drop for CmId {
    fn drop(&mut self) {
        // SAFETY: created by rdma_create_id (or delivered by a connect
        // request), destroyed once; every event of it was acknowledged.
        unsafe { sys::rdma_destroy_id(self.raw()) };
    }
}

/// What an id is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Owner {
    Listener,
    Request(ConnReqId),
    Qp(QpId),
}

/// A queue pair and its state, as the context keeps them.
#[derive(Debug)]
pub(crate) struct QpSlot {
    pub(crate) qp: Qp,
    pub(crate) state: QpState,
    /// It takes receives from a shared receive queue.
    pub(crate) srq: bool,
    /// The device has it in RTS (an accepting side gets there before its
    /// connection is established): sends go straight to the device.
    pub(crate) ready: bool,
    /// Where its send completions go.
    pub(crate) send_cq: CqId,
    /// Sends posted before it was ready, oldest first.
    pub(crate) deferred: VecDeque<Deferred>,
}

/// One context's connection manager state.
#[derive(Debug)]
pub(crate) struct Cm {
    channel: NonNull<sys::rdma_event_channel>,
    /// Our device, to check that a resolved address is on it.
    device: String,
    listener: Option<CmId>,
    owners: HashMap<usize, Owner>,
    by_qp: HashMap<QpId, CmId>,
    requests: HashMap<ConnReqId, CmId>,
    next_req: u32,
    /// Parameters of connects waiting for their route.
    connecting: HashMap<QpId, ConnParam>,
    /// Parameters accepts went with, for their `Established`.
    accepted: HashMap<QpId, ConnParam>,
    /// Connections whose end was reported (once each).
    ended: HashSet<QpId>,
    out: VecDeque<CmEvent>,
}

// SAFETY: the channel and ids are used only through `&mut self` of the
// owning context, which moves between threads but is used by one at a time.
unsafe impl Send for Cm {}

impl Cm {
    /// Creates the event channel (non-blocking) for device `device`.
    pub(crate) fn new(device: &str) -> Result<Cm> {
        // SAFETY: no arguments; returns a channel or NULL.
        let ch = unsafe { sys::rdma_create_event_channel() };
        let channel = NonNull::new(ch).ok_or_else(|| os_err("rdma_create_event_channel"))?;
        let cm = Cm {
            channel,
            device: device.to_string(),
            listener: None,
            owners: HashMap::new(),
            by_qp: HashMap::new(),
            requests: HashMap::new(),
            next_req: 0,
            connecting: HashMap::new(),
            accepted: HashMap::new(),
            ended: HashSet::new(),
            out: VecDeque::new(),
        };
        set_nonblocking(cm.fd(), "rdma_cm event channel")?;
        Ok(cm)
    }

    /// The channel's fd (readable when an event is waiting).
    pub(crate) fn fd(&self) -> libc::c_int {
        // SAFETY: the channel is live; `fd` is a plain field.
        unsafe { (*self.channel.as_ptr()).fd }
    }

    /// Whether events are queued for `poll`.
    pub(crate) fn has_events(&self) -> bool {
        !self.out.is_empty()
    }

    /// Whether events are queued, or connections wait for their route or
    /// their establishment after an accept: then the channel is worth
    /// reading on every poll.
    pub(crate) fn settling(&self) -> bool {
        !self.out.is_empty() || !self.connecting.is_empty() || !self.accepted.is_empty()
    }

    fn create_id(&mut self, owner: Owner) -> Result<CmId> {
        let mut id = ptr::null_mut();
        // SAFETY: the channel is live; `id` is an out-pointer; no context
        // pointer is used (ids are looked up in `owners`).
        let rc = unsafe {
            sys::rdma_create_id(
                self.channel.as_ptr(),
                &mut id,
                ptr::null_mut(),
                sys::rdma_port_space::RDMA_PS_TCP,
            )
        };
        let id = NonNull::new(id)
            .filter(|_| rc == 0)
            .ok_or_else(|| os_err("rdma_create_id"))?;
        self.owners.insert(id.as_ptr() as usize, owner);
        Ok(CmId(id))
    }

    fn drop_id(&mut self, id: CmId) {
        self.owners.remove(&(id.raw() as usize));
    }

    /// Listens on `at`; returns the bound address.
    pub(crate) fn listen(&mut self, at: SocketAddr) -> Result<SocketAddr> {
        if self.listener.is_some() {
            return Err(Error::InvalidParam("verbs: already listening".into()));
        }
        let id = self.create_id(Owner::Listener)?;
        let mut sa = addr::to_raw(at);
        // SAFETY: live id; `sa` holds a sockaddr of its family.
        if unsafe { sys::rdma_bind_addr(id.raw(), (&mut sa as *mut libc::sockaddr_storage).cast()) }
            != 0
        {
            let e = os_err(format!("rdma_bind_addr {at}"));
            self.drop_id(id);
            return Err(e);
        }
        // SAFETY: live, bound id.
        if unsafe { sys::rdma_listen(id.raw(), 128) } != 0 {
            let e = os_err(format!("rdma_listen {at}"));
            self.drop_id(id);
            return Err(e);
        }
        // SAFETY: the id is bound: its route holds the local address.
        let bound = unsafe { addr::from_raw(sys::rdma_get_local_addr(&*id.raw())) };
        self.listener = Some(id);
        bound.ok_or_else(|| Error::InvalidAddr(format!("verbs: listener on {at} has no address")))
    }

    /// Starts connecting `qp` from `src` to `dest`: address and route
    /// resolution, then the request (in `poll`).
    pub(crate) fn connect(
        &mut self,
        qp: QpId,
        src: IpAddr,
        dest: SocketAddr,
        param: &ConnParam,
    ) -> Result<()> {
        if self.by_qp.contains_key(&qp) {
            return Err(Error::InvalidParam(format!(
                "verbs: QP {} is connected",
                qp.0
            )));
        }
        let id = self.create_id(Owner::Qp(qp))?;
        let mut s = addr::to_raw(addr::any_port(src));
        let mut d = addr::to_raw(dest);
        // SAFETY: live id; both addresses are sockaddrs of their family.
        let rc = unsafe {
            sys::rdma_resolve_addr(
                id.raw(),
                (&mut s as *mut libc::sockaddr_storage).cast(),
                (&mut d as *mut libc::sockaddr_storage).cast(),
                RESOLVE_MS,
            )
        };
        if rc != 0 {
            let e = os_err(format!("rdma_resolve_addr {dest}"));
            self.drop_id(id);
            return Err(e);
        }
        self.connecting.insert(qp, param.clone());
        self.by_qp.insert(qp, id);
        Ok(())
    }

    /// Accepts request `req` on `qp`: RTR and RTS first, then the reply.
    pub(crate) fn accept(
        &mut self,
        req: ConnReqId,
        slot: &mut QpSlot,
        qp: QpId,
        param: &ConnParam,
    ) -> Result<()> {
        let id = self.requests.remove(&req).ok_or_else(|| {
            Error::InvalidParam(format!("verbs: no connection request {}", req.0))
        })?;
        self.owners.insert(id.raw() as usize, Owner::Qp(qp));
        let depths = Depths {
            ird: Some(param.ird),
            ord: Some(param.ord),
        };
        // SAFETY: the id received the peer's request.
        let moved = unsafe { qpstate::to_rts(&slot.qp, id.raw(), depths) };
        let r = moved.and_then(|()| {
            let mut cp = conn_param(param, slot);
            // SAFETY: live id; `cp` points at `param.private_data` for the
            // call, which copies it.
            match unsafe { sys::rdma_accept(id.raw(), &mut cp) } {
                0 => Ok(()),
                _ => Err(os_err("rdma_accept")),
            }
        });
        if let Err(e) = r {
            // SAFETY: live id; rejecting an unanswered request is allowed.
            unsafe { sys::rdma_reject(id.raw(), ptr::null(), 0) };
            self.drop_id(id);
            // It may be half way to RTS: no use for another connection.
            if let Err(e) = qpstate::to_err(&slot.qp) {
                tracing::debug!(qp = qp.0, error = %e, "verbs: QP not moved to error");
            }
            slot.state = QpState::Error;
            return Err(e);
        }
        slot.state = QpState::Connecting;
        slot.ready = true;
        self.accepted.insert(qp, param.clone());
        self.by_qp.insert(qp, id);
        Ok(())
    }

    /// Rejects request `req` with `private_data`.
    pub(crate) fn reject(&mut self, req: ConnReqId, private_data: &[u8]) -> Result<()> {
        let id = self.requests.remove(&req).ok_or_else(|| {
            Error::InvalidParam(format!("verbs: no connection request {}", req.0))
        })?;
        let len = private_data.len().min(u8::MAX as usize) as u8;
        // SAFETY: live id of an unanswered request; the data is copied.
        let rc = unsafe { sys::rdma_reject(id.raw(), private_data.as_ptr().cast(), len) };
        self.drop_id(id);
        if rc != 0 {
            return Err(os_err("rdma_reject"));
        }
        Ok(())
    }

    /// Disconnects `qp` (`rdma_disconnect`); the caller moves it to ERR.
    pub(crate) fn disconnect(&mut self, qp: QpId) {
        if let Some(id) = self.by_qp.get(&qp) {
            // SAFETY: live id. Failure (not connected yet) leaves nothing
            // to undo.
            unsafe { sys::rdma_disconnect(id.raw()) };
        }
    }

    /// Tells the connection manager that `qp`, accepted, has traffic:
    /// the connection is established (`rdma_notify` with COMM_EST), and
    /// its `Established` event follows.
    pub(crate) fn notify_established(&mut self, qp: QpId) {
        if let Some(id) = self.by_qp.get(&qp) {
            // SAFETY: live id of an accepted connection.
            let rc = unsafe { sys::rdma_notify(id.raw(), sys::ibv_event_type::IBV_EVENT_COMM_EST) };
            if rc != 0 {
                let e = std::io::Error::last_os_error();
                tracing::debug!(qp = qp.0, error = %e, "verbs: rdma_notify");
            }
        }
    }

    /// Forgets `qp`'s connection (destroys its id), when it is destroyed.
    pub(crate) fn forget(&mut self, qp: QpId) {
        if let Some(id) = self.by_qp.remove(&qp) {
            self.drop_id(id);
        }
        self.connecting.remove(&qp);
        self.accepted.remove(&qp);
        self.ended.remove(&qp);
    }

    /// The next event, reading the channel as needed.
    pub(crate) fn poll(&mut self, qps: &mut FxHashMap<QpId, QpSlot>) -> Option<CmEvent> {
        while self.out.is_empty() && self.read_one(qps) {}
        self.out.pop_front()
    }

    /// Reads and handles every event waiting on the channel, so that its
    /// fd is not readable afterwards (what `arm` needs before it says
    /// "sleep"); the events for the caller are queued for `poll`.
    pub(crate) fn pump(&mut self, qps: &mut FxHashMap<QpId, QpSlot>) {
        while self.read_one(qps) {}
    }

    /// Reads and handles one event from the channel; false if none waits.
    fn read_one(&mut self, qps: &mut FxHashMap<QpId, QpSlot>) -> bool {
        let mut ev = ptr::null_mut();
        // SAFETY: the channel is live and non-blocking; `ev` is an
        // out-pointer.
        if unsafe { sys::rdma_get_cm_event(self.channel.as_ptr(), &mut ev) } != 0 {
            return false;
        }
        // SAFETY: a delivered event, valid until acknowledged; copied
        // before that.
        let copied = unsafe { event::Copied::of(ev) };
        // SAFETY: acknowledged once, after copying.
        unsafe { sys::rdma_ack_cm_event(ev) };
        self.handle(copied, qps);
        true
    }
}

/// The `rdma_conn_param` of `param` for the queue pair of `slot`,
/// pointing at `param.private_data`. A queue pair on a shared receive
/// queue says so, and asks for no end-to-end flow control (which counts
/// receives of its own queue).
pub(crate) fn conn_param(param: &ConnParam, slot: &QpSlot) -> sys::rdma_conn_param {
    let mut cp: sys::rdma_conn_param = zeroed();
    cp.private_data = param.private_data.as_ptr().cast();
    cp.private_data_len = param.private_data.len().min(u8::MAX as usize) as u8;
    cp.responder_resources = param.ird.min(255) as u8;
    cp.initiator_depth = param.ord.min(255) as u8;
    cp.flow_control = u8::from(!slot.srq);
    cp.retry_count = RETRIES;
    cp.rnr_retry_count = RETRIES;
    cp.srq = u8::from(slot.srq);
    cp.qp_num = slot.qp.num();
    cp
}

impl Drop for Cm {
    fn drop(&mut self) {
        // Ids before their channel.
        self.listener = None;
        self.by_qp.clear();
        self.requests.clear();
        // SAFETY: created once, destroyed once, with no id left on it.
        unsafe { sys::rdma_destroy_event_channel(self.channel.as_ptr()) };
    }
}
