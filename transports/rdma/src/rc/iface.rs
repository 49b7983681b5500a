//! The RC iface: its state (queue pairs in both roles, buffers, operations
//! in flight) and opening it.

use std::collections::{HashMap, VecDeque};
use std::net::SocketAddr;
use std::sync::Arc;

use crate::provider::{Device, Verbs};
use crate::verbs::{CqId, Mr, PdId, QpId, SrqId, SrqInit, Wc};
use uct::ip_addr::{self, Local};
use uct::ucs::netif;
use uct::ucs::{Error, Result};
use uct::{Caps, ConnectMode, EpId, EpTable, IfaceAttr, IfaceParams, PerfModel, SrcId, Token};

use super::bufs::{Bufs, CHUNK};
use super::config::Limits;
use super::credits::{Credits, RxPool};
use super::md::RcMd;
use super::wire::HDR;

/// Completions polled at once.
pub(crate) const WC_BATCH: usize = 32;
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

/// An endpoint: a user of one connection to a peer iface.
#[derive(Debug)]
pub(crate) struct RcEp {
    /// The queue pair of the connection it sends on.
    pub(crate) conn: QpId,
    /// Moving to this connection once what was sent on `conn` arrived.
    pub(crate) switch_to: Option<QpId>,
    /// Why it failed.
    pub(crate) failed: Option<Error>,
    /// Tokens waiting for resources, in the order added.
    pub(crate) pending: VecDeque<Token>,
    /// Operations in flight.
    pub(crate) in_flight: u32,
}

/// A connection: one queue pair to a peer iface, used both ways, shared
/// by every endpoint to that iface; also the [`SrcId`] of what arrives on
/// it.
#[derive(Debug)]
pub(crate) struct Conn {
    /// The peer iface's listening address.
    pub(crate) peer: SocketAddr,
    /// We connected it (else we accepted it).
    pub(crate) initiated: bool,
    pub(crate) failed: bool,
    /// What a fatal event of the queue pair that no Terminate explains
    /// said (a broken connection): the failure its error completions and
    /// disconnection then report.
    pub(crate) fatal: Option<String>,
    /// Credits both ways.
    pub(crate) cr: Credits,
    /// Its window is committed in the receive pool (until it fails or is
    /// destroyed).
    pub(crate) in_pool: bool,
    /// Free send queue entries.
    pub(crate) sq_free: u32,
    /// The source messages on it are reported from: one per peer iface,
    /// whichever of its connections they take.
    pub(crate) src: SrcId,
}

/// A source: a peer iface whose connections deliver messages.
#[derive(Debug)]
pub(crate) struct Source {
    pub(crate) peer: SocketAddr,
    /// Connections of it not failed.
    pub(crate) live: u32,
    /// Something was delivered from it (so its end is reported).
    pub(crate) delivered: bool,
}
/// An operation in flight: a send work request.
#[derive(Debug)]
pub(crate) struct Op {
    pub(crate) qp: QpId,
    pub(crate) ep: Option<EpId>,
    /// A READ that ends `ep`'s move to another connection.
    pub(crate) switch: bool,
    /// Copy buffer to free.
    pub(crate) buf: Option<u32>,
    /// Region registered for this operation alone (READ sinks, sources
    /// without a device-wide local key).
    pub(crate) mr: Option<Mr>,
    /// Completion group to count down.
    pub(crate) group: Option<u32>,
    /// An atomic's result: where the caller wants the old value (the
    /// device writes it into `buf` first), `None` for a posted atomic or
    /// another operation.
    pub(crate) amo: Option<u64>,
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

/// Operations and completion groups by `u32` index (their `wr_id`s):
/// uct's endpoint table, keyed by plain numbers.
#[derive(Debug)]
pub(crate) struct Table<T>(EpTable<T>);

impl<T> Table<T> {
    pub(crate) fn new() -> Table<T> {
        Table(EpTable::new())
    }

    /// Stores `v`; its index. (The table holds at most the work requests
    /// in flight, far from the 2^32 ids that would make it refuse.)
    pub(crate) fn insert(&mut self, v: T) -> u32 {
        self.0.insert(v).map_or(u32::MAX, |id| id.0)
    }

    pub(crate) fn get_mut(&mut self, i: u32) -> Option<&mut T> {
        self.0.get_mut(EpId(i))
    }

    pub(crate) fn remove(&mut self, i: u32) -> Option<T> {
        self.0.remove(EpId(i))
    }

    /// Indices of the entries for which `f` holds.
    pub(crate) fn find(&self, f: impl Fn(&T) -> bool) -> Vec<u32> {
        self.0
            .iter()
            .filter(|(_, v)| f(v))
            .map(|(id, _)| id.0)
            .collect()
    }
}

/// An RC iface on one device.
#[derive(Debug)]
pub(crate) struct RcIface {
    /// Declared first: dropped (queues destroyed) before the buffers.
    pub(crate) verbs: Box<dyn Verbs>,
    /// Copy-send buffers.
    pub(crate) bufs: Bufs,
    /// Receive buffers, all given to `srq`.
    pub(crate) rx: Bufs,
    /// The shared receive queue of every connection.
    pub(crate) srq: SrqId,
    /// What the receive pool committed to connections.
    pub(crate) pool: RxPool,
    /// Windows of connections that failed, released once the receives
    /// they filled were polled (see `rxpool`).
    pub(crate) releasing: u32,
    pub(crate) device: Arc<dyn Device>,
    pub(crate) pd: PdId,
    pub(crate) info: uct::IfaceInfo,
    pub(crate) local: Local,
    pub(crate) limits: Limits,
    pub(crate) worker_uuid: u64,
    pub(crate) cq: CqId,
    pub(crate) wcs: Vec<Wc>,
    pub(crate) eps: EpTable<RcEp>,
    /// The connection of each queue pair, by `QpId`.
    pub(crate) conns: Vec<Option<Conn>>,
    /// The connection endpoints to each peer iface use.
    pub(crate) peers: HashMap<SocketAddr, QpId>,
    /// Sources by id, and the live source of each peer iface.
    pub(crate) srcs: HashMap<u32, Source>,
    pub(crate) src_by_peer: HashMap<SocketAddr, u32>,
    pub(crate) next_src: u32,
    /// Where this iface listens.
    pub(crate) listen: SocketAddr,
    pub(crate) ops: Table<Op>,
    pub(crate) groups: Table<Group>,
    pub(crate) notices: VecDeque<Notice>,
    /// Endpoints whose pending tokens may go back.
    pub(crate) ready: Vec<EpId>,
    /// Endpoints that may hold pending tokens (a superset): what a
    /// connection coming up or getting credits looks through, instead of
    /// every endpoint.
    pub(crate) pending_eps: std::collections::HashSet<EpId>,
    /// Failed connections to destroy once no endpoint uses them.
    pub(crate) closing: Vec<QpId>,
    /// Local key for any memory of the process, if the device has one.
    pub(crate) local_lkey: Option<u32>,
    /// Largest inline send.
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
        let max_rx = limits
            .rx_pool_bufs
            .min(dattr.max_srq_wr as usize)
            .div_ceil(CHUNK)
            * CHUNK;
        // Room for every receive of the pool completing at once, and for
        // sends besides.
        let depth = (4 * (limits.tx_queue + limits.rx_queue).max(1024) as usize + max_rx)
            .min(dattr.max_cqe as usize) as u32;
        let cq = verbs.create_cq(depth)?;
        let srq = verbs.create_srq(&SrqInit {
            pd: md.pd,
            max_wr: max_rx.max(1) as u32,
            max_sge: 1,
        })?;
        let bound = verbs.listen(SocketAddr::new(dattr.addr, 0))?;
        let host_id = uct::ucs::sys::host_id();
        let max_inline = (dattr.max_inline as usize).min(INLINE_CAP);
        let max_short = max_inline.min(limits.seg).saturating_sub(HDR + 8);
        let max_iov = (dattr.max_sge as usize).saturating_sub(1).clamp(1, 8);
        let max_zcopy = limits.max_zcopy.min(dattr.max_msg_size as usize);
        let attr = IfaceAttr {
            // The operation bits are derived from the iface's families (no
            // AM_SHORT where the inline limit leaves no payload).
            caps: Caps::CONNECT_TO_IFACE | Caps::PEER_FAILURE | Caps::EVENT_FD,
            max_short,
            max_bcopy: limits.seg - HDR,
            max_zcopy: limits.seg.saturating_sub(HDR + 128),
            max_hdr: 128,
            max_iov,
            max_put_zcopy: max_zcopy,
            max_get_zcopy: max_zcopy,
            model: model(&nif),
            connect: ConnectMode::ToIface,
        };
        tracing::debug!(dev = %dattr.name, %bound, "rc iface listening");
        let mut iface = RcIface {
            bufs: Bufs::new(
                md.device.clone(),
                md.pd,
                limits.seg,
                limits.tx_bufs as usize,
            ),
            rx: Bufs::new(md.device.clone(), md.pd, limits.seg, max_rx),
            srq,
            pool: RxPool::default(),
            releasing: 0,
            verbs,
            device: md.device.clone(),
            pd: md.pd,
            info: uct::IfaceInfo {
                tl_name: md.tl_name.clone(),
                dev_name: dattr.name.clone(),
                device_addr: ip_addr::pack_dev(dattr.addr, host_id),
                iface_addr: ip_addr::pack_iface(bound.port()).to_vec(),
                attr,
            },
            local: Local {
                host_id,
                loopback: nif.loopback,
                family: uct::ucs::netif::AddrFamily::of(dattr.addr),
            },
            limits,
            worker_uuid: params.worker_uuid,
            cq,
            wcs: vec![Wc::default(); WC_BATCH],
            eps: EpTable::new(),
            conns: Vec::new(),
            peers: HashMap::new(),
            srcs: HashMap::new(),
            src_by_peer: HashMap::new(),
            next_src: 0,
            listen: SocketAddr::new(dattr.addr, bound.port()),
            ops: Table::new(),
            groups: Table::new(),
            notices: VecDeque::new(),
            ready: Vec::new(),
            pending_eps: Default::default(),
            closing: Vec::new(),
            local_lkey: dattr.local_lkey,
            max_inline,
        };
        iface.info.attr.caps = uct::derive_caps(&mut iface);
        Ok(iface)
    }

    pub(crate) fn set_conn(&mut self, qp: QpId, conn: Option<Conn>) {
        let i = qp.0 as usize;
        if self.conns.len() <= i {
            self.conns.resize_with(i + 1, || None);
        }
        self.conns[i] = conn;
    }

    pub(crate) fn conn(&self, qp: QpId) -> Option<&Conn> {
        self.conns.get(qp.0 as usize).and_then(Option::as_ref)
    }

    pub(crate) fn conn_mut(&mut self, qp: QpId) -> Option<&mut Conn> {
        self.conns.get_mut(qp.0 as usize).and_then(Option::as_mut)
    }

    /// The source of peer iface `peer`, counting one more connection.
    pub(crate) fn src_for(&mut self, peer: SocketAddr) -> SrcId {
        if let Some(&id) = self.src_by_peer.get(&peer) {
            if let Some(s) = self.srcs.get_mut(&id) {
                s.live += 1;
                return SrcId(id);
            }
        }
        let mut id = self.next_src;
        while self.srcs.contains_key(&id) {
            id = id.wrapping_add(1);
        }
        self.next_src = id.wrapping_add(1);
        self.srcs.insert(
            id,
            Source {
                peer,
                live: 1,
                delivered: false,
            },
        );
        self.src_by_peer.insert(peer, id);
        SrcId(id)
    }

    /// One connection of source `src` ended; when it was the last, the
    /// source ends (reported if it delivered anything).
    pub(crate) fn src_conn_ended(&mut self, src: SrcId, error: &Error) {
        let Some(s) = self.srcs.get_mut(&src.0) else {
            return;
        };
        s.live = s.live.saturating_sub(1);
        if s.live > 0 {
            return;
        }
        let (peer, delivered) = (s.peer, s.delivered);
        self.srcs.remove(&src.0);
        if self.src_by_peer.get(&peer) == Some(&src.0) {
            self.src_by_peer.remove(&peer);
        }
        if delivered {
            self.notices
                .push_back(Notice::SrcFailed(src, error.duplicate()));
        }
    }
}

/// The error for an unknown endpoint id.
pub(crate) fn no_ep(ep: EpId) -> Error {
    Error::UnknownEndpoint {
        transport: "rc".into(),
        ep: ep.0.into(),
    }
}
