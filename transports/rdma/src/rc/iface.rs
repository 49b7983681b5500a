//! The RC iface: its state (queue pairs in both roles, buffers, operations
//! in flight) and opening it.

use std::collections::VecDeque;
use std::net::{SocketAddr, SocketAddrV4};
use std::sync::Arc;

use crate::provider::{Device, Verbs};
use crate::uct::ip_addr::{self, Local, DEV_ADDR_LEN, IFACE_ADDR_LEN};
use crate::uct::ucs::netif;
use crate::uct::ucs::{Error, Result};
use crate::uct::{
    Caps, ConnectMode, EpId, EpTable, IfaceAttr, IfaceParams, PerfModel, SrcId, Token,
};
use crate::verbs::{CqId, Mr, PdId, QpId, Wc};

use super::bufs::Bufs;
use super::config::Limits;
use super::md::RcMd;

/// Completions polled at once.
pub(crate) const WC_BATCH: usize = 32;
/// Receives an endpoint's own queue pair keeps posted for credit grants
/// (at most 4 can be in flight, see `wire`).
pub(crate) const GRANT_RECVS: u32 = 8;
/// Send queue of an accepted queue pair: it sends only credit grants.
pub(crate) const SRC_TX_QUEUE: u32 = 16;
/// Largest message sent inline (copied at post time).
pub(crate) const INLINE_CAP: usize = 256;

/// Fixed part of the modelled latency: two socket passes in user space
/// on top of TCP's.
const LATENCY_BASE: f64 = 6e-6;
/// Sender CPU time per message.
const OVERHEAD: f64 = 2.5e-6;
/// Link speed assumed when the driver reports none.
const DEFAULT_BPS: f64 = 10e9;
/// Bandwidth of a loopback device (memory copies through the kernel).
const LOOPBACK_BW: f64 = 4e9;

/// Something to tell the sink on the next `progress`.
#[derive(Debug)]
pub(crate) enum Notice {
    EpFailed(EpId, Error),
    SrcFailed(SrcId, Error),
    Completed(Token, Result<()>),
}

/// Connection state of an endpoint.
#[derive(Debug)]
pub(crate) enum EpState {
    Connecting,
    Ready,
    Failed(Error),
}

/// An endpoint: the queue pair it connected, which carries its sends.
#[derive(Debug)]
pub(crate) struct RcEp {
    pub(crate) qp: QpId,
    pub(crate) state: EpState,
    /// Sends the peer can take (its posted receives we may consume).
    pub(crate) credits: u32,
    /// Free send queue entries.
    pub(crate) sq_free: u32,
    /// Tokens waiting for resources, in the order added.
    pub(crate) pending: VecDeque<Token>,
    /// Operations in flight.
    pub(crate) in_flight: u32,
}

/// An accepted queue pair: a source of active messages.
#[derive(Debug)]
pub(crate) struct RcSrc {
    /// Receives consumed and reposted but not yet granted back.
    pub(crate) to_return: u32,
    pub(crate) sq_free: u32,
    /// Something was delivered from it (so its end is reported).
    pub(crate) delivered: bool,
    pub(crate) closing: bool,
}

/// What a queue pair of this iface is for.
#[derive(Debug)]
pub(crate) enum Role {
    Ep(EpId),
    Src(RcSrc),
}

/// An operation in flight: a send work request.
#[derive(Debug)]
pub(crate) struct Op {
    pub(crate) qp: QpId,
    pub(crate) ep: Option<EpId>,
    /// Copy buffer to free.
    pub(crate) buf: Option<u32>,
    /// Region registered for this operation alone (READ sinks, sources
    /// without a device-wide local key).
    pub(crate) mr: Option<Mr>,
    /// Completion group to count down.
    pub(crate) group: Option<u32>,
}

/// Operations completing one caller's token.
#[derive(Debug)]
pub(crate) struct Group {
    pub(crate) token: Token,
    pub(crate) left: u32,
    pub(crate) error: Option<Error>,
    /// The caller was already told of a failure: report nothing.
    pub(crate) silent: bool,
}

/// Slots indexed by `u32`, reused after removal.
#[derive(Debug)]
pub(crate) struct Table<T> {
    slots: Vec<Option<T>>,
    free: Vec<u32>,
}

impl<T> Table<T> {
    pub(crate) fn new() -> Table<T> {
        Table {
            slots: Vec::new(),
            free: Vec::new(),
        }
    }

    pub(crate) fn insert(&mut self, v: T) -> u32 {
        match self.free.pop() {
            Some(i) => {
                self.slots[i as usize] = Some(v);
                i
            }
            None => {
                self.slots.push(Some(v));
                (self.slots.len() - 1) as u32
            }
        }
    }

    pub(crate) fn get_mut(&mut self, i: u32) -> Option<&mut T> {
        self.slots.get_mut(i as usize).and_then(Option::as_mut)
    }

    pub(crate) fn remove(&mut self, i: u32) -> Option<T> {
        let v = self.slots.get_mut(i as usize)?.take()?;
        self.free.push(i);
        Some(v)
    }

    /// Indices of the entries for which `f` holds.
    pub(crate) fn find(&self, f: impl Fn(&T) -> bool) -> Vec<u32> {
        let mut out = Vec::new();
        for (i, s) in self.slots.iter().enumerate() {
            if s.as_ref().is_some_and(&f) {
                out.push(i as u32);
            }
        }
        out
    }
}

/// An RC iface on one device.
#[derive(Debug)]
pub(crate) struct RcIface {
    /// Declared first: dropped (queue pairs destroyed) before the buffers.
    pub(crate) verbs: Box<dyn Verbs>,
    pub(crate) bufs: Bufs,
    pub(crate) device: Arc<dyn Device>,
    pub(crate) pd: PdId,
    pub(crate) tl_name: String,
    pub(crate) dev_name: String,
    pub(crate) attr: IfaceAttr,
    pub(crate) dev_addr: [u8; DEV_ADDR_LEN],
    pub(crate) iface_addr: [u8; IFACE_ADDR_LEN],
    pub(crate) local: Local,
    pub(crate) limits: Limits,
    pub(crate) worker_uuid: u64,
    pub(crate) cq: CqId,
    pub(crate) wcs: Vec<Wc>,
    pub(crate) eps: EpTable<RcEp>,
    /// Role of each queue pair, by `QpId`.
    pub(crate) roles: Vec<Option<Role>>,
    pub(crate) ops: Table<Op>,
    pub(crate) groups: Table<Group>,
    pub(crate) notices: VecDeque<Notice>,
    /// Endpoints whose pending tokens may go back.
    pub(crate) ready: Vec<EpId>,
    /// Accepted queue pairs to destroy once their completions are in.
    pub(crate) closing: Vec<QpId>,
    /// Local key for any memory of the process, if the device has one.
    pub(crate) local_lkey: Option<u32>,
    /// Reads this side may have outstanding, as negotiated (per endpoint
    /// the provider enforces its own).
    pub(crate) max_inline: usize,
}

fn model(nif: &netif::NetIf) -> PerfModel {
    let bw = if nif.loopback {
        LOOPBACK_BW
    } else {
        netif::link_speed_bps(&nif.name).unwrap_or(DEFAULT_BPS) / 8.0
    };
    PerfModel {
        latency: LATENCY_BASE,
        overhead: OVERHEAD,
        bandwidth: bw,
    }
}

impl RcIface {
    /// Opens an iface on the device of `md`, listening on its address.
    pub(crate) fn open(md: &RcMd, params: &IfaceParams) -> Result<RcIface> {
        let limits = Limits::from_config(&md.config)?;
        let dattr = md.device.attr().clone();
        let nif = netif::find(&dattr.netdev)?;
        let mut verbs = md.device.open_context()?;
        let depth = 4 * (limits.tx_queue + limits.rx_queue).max(1024);
        let cq = verbs.create_cq(depth)?;
        let bound = verbs.listen(SocketAddr::V4(SocketAddrV4::new(nif.addr, 0)))?;
        let host_id = crate::uct::ucs::sys::host_id();
        let max_inline = (dattr.max_inline as usize).min(INLINE_CAP);
        let max_short = max_inline.min(limits.seg).saturating_sub(9);
        let max_iov = (dattr.max_sge as usize).saturating_sub(1).clamp(1, 8);
        let max_zcopy = limits.max_zcopy.min(dattr.max_msg_size as usize);
        let mut caps = Caps::AM_BCOPY
            | Caps::AM_ZCOPY
            | Caps::PENDING
            | Caps::CONNECT_TO_IFACE
            | Caps::PEER_FAILURE
            | Caps::EVENT_FD
            | Caps::PUT_ZCOPY
            | Caps::GET_ZCOPY;
        if max_short > 0 {
            caps |= Caps::AM_SHORT;
        }
        let attr = IfaceAttr {
            caps,
            max_short,
            max_bcopy: limits.seg - 1,
            max_zcopy: limits.seg.saturating_sub(1 + 128),
            max_hdr: 128,
            max_iov,
            max_put_zcopy: max_zcopy,
            max_get_zcopy: max_zcopy,
            model: model(&nif),
            connect: ConnectMode::ToIface,
        };
        tracing::debug!(dev = %dattr.name, %bound, "rc iface listening");
        let max_bufs = (limits.tx_bufs as usize) + 64 * (limits.rx_queue as usize);
        Ok(RcIface {
            bufs: Bufs::new(md.device.clone(), md.pd, limits.seg, max_bufs),
            verbs,
            device: md.device.clone(),
            pd: md.pd,
            tl_name: md.tl_name.clone(),
            dev_name: dattr.name.clone(),
            attr,
            dev_addr: ip_addr::pack_dev(nif.addr, host_id),
            iface_addr: ip_addr::pack_iface(bound.port()),
            local: Local {
                host_id,
                loopback: nif.loopback,
            },
            limits,
            worker_uuid: params.worker_uuid,
            cq,
            wcs: vec![Wc::default(); WC_BATCH],
            eps: EpTable::new(),
            roles: Vec::new(),
            ops: Table::new(),
            groups: Table::new(),
            notices: VecDeque::new(),
            ready: Vec::new(),
            closing: Vec::new(),
            local_lkey: dattr.local_lkey,
            max_inline,
        })
    }

    pub(crate) fn set_role(&mut self, qp: QpId, role: Option<Role>) {
        let i = qp.0 as usize;
        if self.roles.len() <= i {
            self.roles.resize_with(i + 1, || None);
        }
        self.roles[i] = role;
    }

    pub(crate) fn role_mut(&mut self, qp: QpId) -> Option<&mut Role> {
        self.roles.get_mut(qp.0 as usize).and_then(Option::as_mut)
    }

    /// The source id of an accepted queue pair.
    pub(crate) fn src_of(qp: QpId) -> SrcId {
        SrcId(qp.0)
    }
}

/// The error for an unknown endpoint id.
pub(crate) fn no_ep(ep: EpId) -> Error {
    Error::InvalidParam(format!("rc: no endpoint {}", ep.0))
}
