//! Connection manager events: copied out of `rdma_cm_event` and turned
//! into the trait's [`CmEvent`]s, moving queue pairs as connections
//! progress.

use std::net::{Ipv4Addr, SocketAddr};
use std::ptr::NonNull;
use uct::ucs::hash::FxHashMap;

use rdma_sys as sys;
use rucx_rdma::{CmEvent, ConnParam, ConnReqId, QpId, QpState};

use super::{conn_param, Cm, CmId, Owner, QpSlot, REJ_CONSUMER_DEFINED, RESOLVE_MS};
use crate::addr;
use crate::ffi::device_name;
use crate::qpstate::{self, Depths};

/// What an event says, copied before it is acknowledged.
#[derive(Debug)]
pub(super) struct Copied {
    kind: u32,
    status: i32,
    id: *mut sys::rdma_cm_id,
    param: ConnParam,
    peer: Option<SocketAddr>,
    /// The device an address resolved to.
    device: Option<String>,
}

impl Copied {
    /// Copies event `ev`.
    ///
    /// # Safety
    ///
    /// `ev` is an event from `rdma_get_cm_event`, not yet acknowledged.
    pub(super) unsafe fn of(ev: *mut sys::rdma_cm_event) -> Copied {
        use sys::rdma_cm_event_type as t;
        // SAFETY: the caller gives a live event.
        let e = unsafe { &*ev };
        let with_conn = matches!(
            e.event,
            t::RDMA_CM_EVENT_CONNECT_REQUEST
                | t::RDMA_CM_EVENT_CONNECT_RESPONSE
                | t::RDMA_CM_EVENT_ESTABLISHED
                | t::RDMA_CM_EVENT_REJECTED
        );
        let mut param = ConnParam::default();
        if with_conn {
            // SAFETY: these events carry connection parameters (the
            // `conn` member); the private data, if any, is valid until the
            // event is acknowledged and copied here.
            unsafe {
                let c = &e.param.conn;
                if !c.private_data.is_null() && c.private_data_len > 0 {
                    param.private_data = std::slice::from_raw_parts(
                        c.private_data.cast::<u8>(),
                        usize::from(c.private_data_len),
                    )
                    .to_vec();
                }
                param.ord = u32::from(c.initiator_depth);
                param.ird = u32::from(c.responder_resources);
            }
        }
        let peer = (e.event == t::RDMA_CM_EVENT_CONNECT_REQUEST)
            // SAFETY: a connect request's id has the peer's address.
            .then(|| unsafe { addr::from_raw(sys::rdma_get_peer_addr(&*e.id)) })
            .flatten();
        let device = (e.event == t::RDMA_CM_EVENT_ADDR_RESOLVED)
            .then(|| {
                // SAFETY: a resolved id is bound to a device context.
                let verbs = unsafe { (*e.id).verbs };
                // SAFETY: checked non-NULL; `device` is set by libibverbs.
                (!verbs.is_null()).then(|| device_name(unsafe { (*verbs).device }))
            })
            .flatten();
        Copied {
            kind: e.event,
            status: e.status,
            id: e.id,
            param,
            peer,
            device,
        }
    }
}

impl Cm {
    /// Moves `qp` to error and reports that connecting failed.
    fn fail(&mut self, qps: &mut FxHashMap<QpId, QpSlot>, qp: QpId, reason: String) {
        self.fail_quietly(qps, qp);
        self.out.push_back(CmEvent::ConnectError { qp, reason });
    }

    /// Handles one event.
    pub(super) fn handle(&mut self, ev: Copied, qps: &mut FxHashMap<QpId, QpSlot>) {
        use sys::rdma_cm_event_type as t;
        if ev.kind == t::RDMA_CM_EVENT_CONNECT_REQUEST {
            let Some(id) = NonNull::new(ev.id) else {
                return;
            };
            let req = ConnReqId(self.next_req);
            self.next_req = self.next_req.wrapping_add(1);
            self.owners
                .insert(id.as_ptr() as usize, Owner::Request(req));
            self.requests.insert(req, CmId(id));
            let peer = ev
                .peer
                .unwrap_or_else(|| SocketAddr::new(Ipv4Addr::UNSPECIFIED.into(), 0));
            self.out.push_back(CmEvent::ConnectRequest {
                req,
                peer,
                param: ev.param,
            });
            return;
        }
        match self.owners.get(&(ev.id as usize)).copied() {
            Some(Owner::Qp(qp)) => self.handle_qp(ev, qp, qps),
            Some(Owner::Request(req)) => {
                // The peer gave up on a request not answered yet.
                if matches!(
                    ev.kind,
                    t::RDMA_CM_EVENT_DISCONNECTED
                        | t::RDMA_CM_EVENT_CONNECT_ERROR
                        | t::RDMA_CM_EVENT_DEVICE_REMOVAL
                ) {
                    if let Some(id) = self.requests.remove(&req) {
                        self.drop_id(id);
                    }
                }
            }
            Some(Owner::Listener) | None => {}
        }
    }

    fn handle_qp(&mut self, ev: Copied, qp: QpId, qps: &mut FxHashMap<QpId, QpSlot>) {
        use sys::rdma_cm_event_type as t;
        let why = |what: &str| format!("{what} (status {})", ev.status);
        match ev.kind {
            t::RDMA_CM_EVENT_ADDR_RESOLVED => match ev.device.as_deref() {
                Some(d) if d == self.device => {
                    // SAFETY: a live id whose address is resolved.
                    if unsafe { sys::rdma_resolve_route(ev.id, RESOLVE_MS) } != 0 {
                        let e = std::io::Error::last_os_error();
                        self.fail(qps, qp, format!("rdma_resolve_route: {e}"));
                    }
                }
                other => {
                    let reason = format!(
                        "the destination is reached through device {other:?}, not {}",
                        self.device
                    );
                    self.fail(qps, qp, reason);
                }
            },
            t::RDMA_CM_EVENT_ROUTE_RESOLVED => {
                let (Some(param), Some(slot)) = (self.connecting.remove(&qp), qps.get(&qp)) else {
                    return;
                };
                let mut cp = conn_param(&param, slot);
                // SAFETY: a live id whose route is resolved; `cp` points at
                // `param.private_data`, alive for the call, which copies it.
                if unsafe { sys::rdma_connect(ev.id, &mut cp) } != 0 {
                    let e = std::io::Error::last_os_error();
                    self.fail(qps, qp, format!("rdma_connect: {e}"));
                }
            }
            t::RDMA_CM_EVENT_CONNECT_RESPONSE => {
                let Some(slot) = qps.get_mut(&qp) else {
                    return;
                };
                // SAFETY: the id has the peer's reply.
                let moved = unsafe { qpstate::to_rts(&slot.qp, ev.id, Depths::default()) };
                let r = moved.and_then(|()| {
                    // SAFETY: a live id with a reply; the QP is in RTS.
                    match unsafe { sys::rdma_establish(ev.id) } {
                        0 => Ok(()),
                        _ => Err(crate::ffi::os_err("rdma_establish")),
                    }
                });
                match r {
                    Ok(()) => {
                        slot.state = QpState::Rts;
                        slot.ready = true;
                        self.out.push_back(CmEvent::Established {
                            qp,
                            param: ev.param,
                        });
                    }
                    Err(e) => {
                        // SAFETY: a live id with a reply not yet answered.
                        unsafe { sys::rdma_reject(ev.id, std::ptr::null(), 0) };
                        self.fail(qps, qp, e.to_string());
                    }
                }
            }
            t::RDMA_CM_EVENT_ESTABLISHED => {
                if let Some(slot) = qps.get_mut(&qp) {
                    if slot.state == QpState::Connecting {
                        slot.state = QpState::Rts;
                        let param = self.accepted.remove(&qp).unwrap_or_default();
                        self.out.push_back(CmEvent::Established { qp, param });
                    }
                }
            }
            t::RDMA_CM_EVENT_REJECTED => {
                if ev.status == REJ_CONSUMER_DEFINED {
                    self.fail_quietly(qps, qp);
                    self.out.push_back(CmEvent::Rejected {
                        qp,
                        private_data: ev.param.private_data,
                    });
                } else {
                    self.fail(qps, qp, why("rejected by the connection manager"));
                }
            }
            t::RDMA_CM_EVENT_ADDR_ERROR => self.fail(qps, qp, why("address resolution failed")),
            t::RDMA_CM_EVENT_ROUTE_ERROR => self.fail(qps, qp, why("route resolution failed")),
            t::RDMA_CM_EVENT_UNREACHABLE => self.fail(qps, qp, why("peer unreachable")),
            t::RDMA_CM_EVENT_CONNECT_ERROR => self.fail(qps, qp, why("connection error")),
            t::RDMA_CM_EVENT_DISCONNECTED | t::RDMA_CM_EVENT_DEVICE_REMOVAL => {
                let was = qps.get(&qp).map(|s| s.state);
                if was == Some(QpState::Connecting) {
                    self.fail(qps, qp, why("disconnected while connecting"));
                } else if !self.ended.contains(&qp) {
                    self.fail_quietly(qps, qp);
                    self.out.push_back(CmEvent::Disconnected { qp });
                }
            }
            _ => {}
        }
    }

    /// Moves `qp` to error without an event of its own.
    fn fail_quietly(&mut self, qps: &mut FxHashMap<QpId, QpSlot>, qp: QpId) {
        self.connecting.remove(&qp);
        self.accepted.remove(&qp);
        if let Some(slot) = qps.get_mut(&qp) {
            if let Err(e) = qpstate::to_err(&slot.qp) {
                tracing::debug!(qp = qp.0, error = %e, "verbs: QP not moved to error");
            }
            slot.state = QpState::Error;
        }
        self.ended.insert(qp);
    }
}
