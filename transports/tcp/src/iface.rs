//! The TCP iface: its state (listener, connections, endpoints) and opening it.

use std::collections::VecDeque;
use std::net::{IpAddr, SocketAddr};
use std::os::fd::{AsRawFd, OwnedFd};
use std::time::{Duration, Instant};

use uct::ucs::{Error, Result};
use uct::{Caps, ConnectMode, EpId, IfaceAttr, IfaceParams, PerfModel, SrcId, Token};

use crate::config::{Limits, TcpConfig, MAX_HDR, MAX_IOV};
use crate::conn::Conn;
use crate::peers::PeerTable;
use crate::slots::Slots;
use crate::sys::{self, Epoll};
use crate::wire;
use uct::ip_addr::{self as addr, Local};
use uct::ucs::netif::{self, AddrFamily, NetIf};
use uct::ucs::sock::Keepalive;

/// Events fetched per `epoll_wait`.
pub(crate) const EVENT_BATCH: usize = 64;

/// Fixed part of the modelled latency, like UCX's TCP model.
const LATENCY_BASE: f64 = 5.2e-6;
/// Bits on the wire for a small message, divided by the link speed.
const LATENCY_BITS: f64 = 576.0;
/// Sender CPU time per message: one `send` through the kernel's TCP path.
/// A stream of 8-byte messages on loopback runs at 2-3 us per message
/// (UCX models 50 us, far from what a current host shows).
const OVERHEAD: f64 = 2e-6;
/// Bandwidth cap, like UCX's `MAX_BW=2200MBs` (MiB per second).
const MAX_BW: f64 = 2200.0 * 1024.0 * 1024.0;
/// Link speed assumed when the driver reports none.
const DEFAULT_BPS: f64 = 10e9;
/// Link speed of a loopback device.
const LOOPBACK_BPS: f64 = 100e9;

/// Epoll data of the listening socket; a connection's is
/// `1 << 63 | generation << 32 | index` (see [`conn_tag`]).
pub(crate) const LISTENER_TAG: u64 = 0;

/// Something to tell the sink on the next `progress`.
#[derive(Debug)]
pub(crate) enum Notice {
    EpFailed(EpId, Error),
    SrcFailed(SrcId, Error),
    Completed(Token, Result<()>),
    Ready(EpId, Token),
    /// A message being received into a sink's destination will not end.
    AmEnded(Token, Error),
}

/// An endpoint: a user of one connection. While it lives, its peer is its
/// connection's; [`tests::ep_stays_small`] bounds its size.
#[derive(Debug)]
pub(crate) struct Ep {
    /// Index of its connection; `None` once failed.
    pub(crate) conn: Option<u32>,
    /// Why it failed, and to whom; boxed, as few endpoints fail.
    pub(crate) failed: Option<Box<EpFailure>>,
}

/// The failure of an endpoint.
#[derive(Debug)]
pub(crate) struct EpFailure {
    pub(crate) err: Error,
    /// The address of the connection's peer.
    pub(crate) peer: SocketAddr,
}

/// An iface-wide flush: completes when `left` connections have drained.
#[derive(Debug)]
pub(crate) struct GlobalFlush {
    pub(crate) token: Token,
    pub(crate) left: u32,
}

/// Socket options applied to every connection.
#[derive(Debug, Clone, Copy)]
pub(crate) struct SockOpts {
    nodelay: bool,
    bufs: sys::BufSizes,
    /// Keepalive and user timeout: how a vanished peer is noticed.
    keepalive: Keepalive,
    pub(crate) conn_timeout: Option<Duration>,
}

impl SockOpts {
    fn from_config(c: &TcpConfig) -> Result<SockOpts> {
        Ok(SockOpts {
            nodelay: c.nodelay,
            bufs: sys::BufSizes::from_config(c.sndbuf, c.rcvbuf),
            keepalive: crate::config::keepalive(c)?,
            conn_timeout: c.conn_timeout.finite(),
        })
    }

    /// Applies the options to a connection's socket.
    pub(crate) fn apply(&self, fd: &OwnedFd) -> Result<()> {
        use libc::IPPROTO_TCP;
        if self.nodelay {
            sys::set_opt(
                fd,
                IPPROTO_TCP,
                libc::TCP_NODELAY,
                1,
                "setsockopt(TCP_NODELAY)",
            )?;
        }
        self.bufs.apply(fd)?;
        self.keepalive.apply(fd)?;
        Ok(())
    }
}

/// A TCP iface on one network device.
#[derive(Debug)]
pub(crate) struct TcpIface {
    pub(crate) info: uct::IfaceInfo,
    pub(crate) local: Local,
    /// Its key (see [`crate::wire::key`]).
    pub(crate) own_key: wire::Key,
    /// Its entry among this process's ifaces, held for its drop (read
    /// only by tests).
    #[cfg_attr(not(test), allow(dead_code))]
    pub(crate) local_key: crate::local::LocalKey,
    /// The hello its connections send first (the same on all of them).
    pub(crate) hello: Vec<u8>,
    pub(crate) limits: Limits,
    pub(crate) opts: SockOpts,
    pub(crate) listener: OwnedFd,
    pub(crate) epoll: Epoll,
    pub(crate) events: Vec<libc::epoll_event>,
    pub(crate) conns: Slots<Conn>,
    pub(crate) eps: Slots<Ep>,
    /// The connection to each peer iface, by key.
    pub(crate) peers: PeerTable,
    /// Reports made outside `progress`, delivered by the next one.
    pub(crate) notices: VecDeque<Notice>,
    /// Connections whose pending tokens go back on the next `progress`.
    pub(crate) ready: Vec<u32>,
    /// Small sends wait in the backlog until `uncork` ([`Iface::cork`]).
    pub(crate) corked: bool,
    /// Open connections with sends held back by the cork.
    pub(crate) corked_conns: Vec<u32>,
    /// `RUCX_TCP_TX_BATCH`: a small send to a connection that wrote
    /// since the last `progress` answers `NoResource`, and the worker
    /// resumes it in the next progress call with the iface corked.
    pub(crate) batch: bool,
    /// `progress` calls so far, modulo 256: a connection that wrote
    /// straight to its socket since the last one has `Conn::wrote_in`
    /// equal to it. So does one that last wrote a multiple of 256 calls
    /// earlier: its next small send then waits for one progress call
    /// without need, which costs time, never order or data (a `u8`, so
    /// that `Conn` does not grow).
    pub(crate) epoch: u8,
    pub(crate) flushes: Slots<GlobalFlush>,
    /// Connections not open yet.
    pub(crate) unopened: usize,
    /// Deadlines of connections not open yet, with their slot and epoll
    /// data, in order (every deadline is its creation time plus the one
    /// `RUCX_TCP_CONN_TIMEOUT`); entries of connections that opened or went
    /// away are dropped when their time comes.
    pub(crate) deadlines: VecDeque<(Instant, u32, u64)>,
    /// Connections that may hold buffers (slot, generation in the epoll data);
    /// see `idle.rs`.
    pub(crate) holders: Vec<(u32, u32)>,
    /// `progress` calls since the clock was last read for a sweep.
    pub(crate) sweep_tick: u32,
    /// When the holders are next swept.
    pub(crate) next_sweep: Instant,
    /// Connections looked at so far (epoll events, sweeps, deadlines): what
    /// `progress` costs beyond the epoll call, for tests.
    pub(crate) visits: u64,
    /// When connection deadlines are next checked.
    pub(crate) next_timeout_check: Instant,
}

/// The performance model of an iface on `nif`.
fn model(nif: &NetIf) -> PerfModel {
    let speed = if nif.loopback {
        LOOPBACK_BPS
    } else {
        netif::link_speed_bps(&nif.name).unwrap_or(DEFAULT_BPS)
    };
    PerfModel {
        latency: LATENCY_BASE + LATENCY_BITS / speed,
        overhead: OVERHEAD,
        bandwidth: (speed / 8.0).min(MAX_BW),
    }
}

/// Binds the listening socket on `ip`, to a port of the configured range.
fn bind_listener(fd: &OwnedFd, ip: IpAddr, c: &TcpConfig) -> Result<()> {
    let range = c.port_range;
    if range.first == 0 {
        let addr = SocketAddr::new(ip, 0);
        return sys::bind(fd, addr).map_err(|e| Error::io(format!("bind {addr}"), e));
    }
    let mut last_err = None;
    for port in range.first..=range.last {
        let addr = SocketAddr::new(ip, port);
        match sys::bind(fd, addr) {
            Ok(()) => return Ok(()),
            Err(e) if e.raw_os_error() == Some(libc::EADDRINUSE) => last_err = Some(e),
            Err(e) => return Err(Error::io(format!("bind {addr}"), e)),
        }
    }
    Err(Error::io(
        format!("bind {}-{}", SocketAddr::new(ip, range.first), range.last),
        last_err.unwrap_or_else(|| std::io::Error::from_raw_os_error(libc::EADDRINUSE)),
    ))
}

impl TcpIface {
    /// Opens an iface listening on device `dev`, on its address of the
    /// first family of `RUCX_TCP_AF_PRIO` it has.
    pub(crate) fn open(dev: &str, params: &IfaceParams, config: &TcpConfig) -> Result<TcpIface> {
        let limits = Limits::from_config(config)?;
        let opts = SockOpts::from_config(config)?;
        let nif = netif::find(dev).map_err(|e| Error::InvalidParam(format!("tcp: {e}")))?;
        let ip = nif.addr(&config.af_prio).ok_or_else(|| {
            Error::InvalidParam(format!(
                "tcp: interface {dev:?} has no address of RUCX_TCP_AF_PRIO={}",
                uct::ucs::config::ConfigValue::to_text(&config.af_prio)
            ))
        })?;
        let listener = sys::tcp_socket(ip)?;
        sys::set_opt(
            &listener,
            libc::SOL_SOCKET,
            libc::SO_REUSEADDR,
            1,
            "setsockopt(SO_REUSEADDR)",
        )?;
        bind_listener(&listener, ip, config)?;
        let backlog = config.backlog.clamp(1, i32::MAX as u32) as libc::c_int;
        sys::listen(&listener, backlog)?;
        let bound = sys::local_addr(&listener)?;
        let epoll = Epoll::new()?;
        epoll.add(listener.as_raw_fd(), libc::EPOLLIN as u32, LISTENER_TAG)?;
        let host_id = uct::ucs::sys::host_id();
        tracing::debug!(
            dev,
            %bound,
            worker = params.worker_uuid,
            "tcp iface listening"
        );
        let attr = IfaceAttr {
            // The operation bits are derived from the iface's families.
            caps: Caps::CONNECT_TO_IFACE | Caps::PEER_FAILURE | Caps::EVENT_FD,
            max_short: limits.max_short,
            max_bcopy: limits.max_bcopy,
            max_zcopy: limits.max_zcopy,
            max_hdr: MAX_HDR,
            max_iov: MAX_IOV,
            max_put_zcopy: limits.max_put,
            max_get_zcopy: 0,
            model: model(&nif),
            connect: ConnectMode::ToIface,
        };
        let listen = SocketAddr::new(ip, bound.port());
        let mut iface = TcpIface {
            info: uct::IfaceInfo {
                tl_name: "tcp".into(),
                dev_name: nif.name.clone(),
                device_addr: addr::pack_dev(ip, host_id),
                iface_addr: addr::pack_iface(bound.port()).to_vec(),
                attr,
            },
            local: Local {
                host_id,
                loopback: nif.loopback,
                family: AddrFamily::of(ip),
            },
            own_key: wire::key(listen),
            local_key: crate::local::register(wire::key(listen)),
            hello: wire::hello(listen),
            limits,
            opts,
            listener,
            epoll,
            events: vec![sys::EMPTY_EVENT; EVENT_BATCH],
            conns: Slots::new(),
            eps: Slots::new(),
            peers: PeerTable::new(),
            notices: VecDeque::new(),
            ready: Vec::new(),
            corked: false,
            corked_conns: Vec::new(),
            batch: config.tx_batch,
            epoch: 0,
            flushes: Slots::new(),
            unopened: 0,
            deadlines: VecDeque::new(),
            holders: Vec::new(),
            sweep_tick: 0,
            next_sweep: Instant::now(),
            visits: 0,
            next_timeout_check: Instant::now(),
        };
        iface.info.attr.caps = uct::derive_caps(&mut iface);
        Ok(iface)
    }

    /// The connection to the peer iface `key`.
    pub(crate) fn peer_conn(&self, key: &wire::Key) -> Option<u32> {
        let conns = &self.conns;
        self.peers.get(key, |ci| conns.get(ci).and_then(Conn::key))
    }

    /// Makes `ci`, whose key is `key`, the connection to that peer.
    pub(crate) fn set_peer_conn(&mut self, key: &wire::Key, ci: u32) {
        let conns = &self.conns;
        self.peers
            .insert(key, ci, |c| conns.get(c).and_then(Conn::key));
    }

    /// Forgets `ci` as the connection to the peer `key`, if it is; before
    /// its slot is freed.
    pub(crate) fn forget_peer_conn(&mut self, key: &wire::Key, ci: u32) {
        let conns = &self.conns;
        self.peers
            .remove(key, ci, |c| conns.get(c).and_then(Conn::key));
    }
}

/// Epoll data for the connection in slot `idx` of generation `gen`: unique
/// among the iface's connections (a reused slot has a new generation) until
/// a slot is reused 2^31 times.
pub(crate) fn conn_tag(idx: u32, gen: u32) -> u64 {
    (1 << 63) | (u64::from(gen & 0x7fff_ffff) << 32) | u64::from(idx)
}

/// The error for an unknown endpoint id.
pub(crate) fn no_ep(ep: EpId) -> Error {
    Error::UnknownEndpoint {
        transport: "tcp".into(),
        ep: ep.0.into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every endpoint pays for its `Ep`: it stays this small.
    #[test]
    fn ep_stays_small() {
        let size = size_of::<Ep>();
        assert!(size <= EP_SIZE_MAX, "Ep is {size} bytes");
    }

    const EP_SIZE_MAX: usize = 16;
}
