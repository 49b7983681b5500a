//! The posix iface: endpoints, sends, pending queues, progress, sleep.

use std::collections::{HashMap, VecDeque};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;
use std::time::Duration;

use uct::ucs::progress::{EventSet, Interest, Readiness};
use uct::ucs::{EndpointCause, Error, Result};
use uct::{limits, AmId, AmOps, AmSink, Armed, EpId, EpTable, Iface, IfaceParams, Posted, Token};

use super::addr::IfaceAddr;
use super::peer::Peer;
use super::rx::Rx;
use super::shared::MAX_SENDERS;
use super::wake::{WakeRx, WakeTx};
use super::{iface_attr, MmConfig, DEV_NAME, TL_NAME};
use crate::proc_id::{HostId, ProcessId};
use crate::segment::PosixConfig;

/// How often peers' and senders' processes are checked.
const LIVENESS_PERIOD: Duration = Duration::from_millis(100);
/// Progress calls between two looks at the clock.
const CLOCK_EVERY: u32 = 64;

/// Token of the wake-up socket in the iface's event set; the exit fd of a
/// peer process has `EXIT_TOKEN + its pid`.
const WAKE_TOKEN: u64 = 0;
const EXIT_TOKEN: u64 = 1;

/// Numbers ifaces within this process (names their wake-up sockets).
static NEXT_IFACE: AtomicU32 = AtomicU32::new(0);

#[derive(Debug)]
struct Ep {
    peer: usize,
    pending: VecDeque<Token>,
    in_pending_list: bool,
    /// Failure reported to the caller already (or to be, in `failed`).
    failed: bool,
}

/// A posix iface (see the module doc of `posix`).
#[derive(Debug)]
pub(crate) struct PosixIface {
    info: uct::IfaceInfo,
    me: ProcessId,
    max_poll: usize,
    eps: EpTable<Ep>,
    pending_eps: Vec<u32>,
    /// Spare list for `dispatch_pending` (no allocation per progress).
    pending_scratch: Vec<u32>,
    /// Endpoint failures to report on the next progress.
    failed: VecDeque<(EpId, Error)>,
    peers: Vec<Option<Peer>>,
    /// Empty entries of `peers`, reused before the vector grows.
    free_peers: Vec<usize>,
    /// The usable peer of each remote iface (its process and iface
    /// number), so that `ep_create` finds it without a scan.
    peer_by_addr: HashMap<(ProcessId, u32), usize>,
    wake_tx: Arc<WakeTx>,
    wake_rx: WakeRx,
    /// The iface's event fd: the wake-up socket and the exit fd of each
    /// peer's process (a peer that dies sends nothing, its exit does).
    events: EventSet,
    /// The peer processes whose exit `events` watches: one descriptor per
    /// process, however many of its ifaces are peers.
    exits: HashMap<ProcessId, Watch>,
    /// Spare list for polling `events` in `arm`.
    ready: Vec<(u64, Readiness)>,
    rx: Rx,
    calls: u32,
    /// When peers and senders were last checked ([`coarse_ms`]).
    last_check: u64,
}

/// The watch of a peer process's exit.
#[derive(Debug)]
struct Watch {
    /// A pidfd of the process (readable once it exited).
    fd: OwnedFd,
    /// Peers of the process that use it.
    peers: usize,
}

/// One peer of process `owner` stops using its watch; the last one closes
/// it.
fn unwatch(exits: &mut HashMap<ProcessId, Watch>, events: &EventSet, owner: ProcessId) {
    let Some(w) = exits.get_mut(&owner) else {
        return;
    };
    w.peers -= 1;
    if w.peers == 0 {
        if let Some(w) = exits.remove(&owner) {
            let _ = events.remove(w.fd.as_raw_fd());
        }
    }
}

fn no_ep(ep: EpId) -> Error {
    Error::UnknownEndpoint {
        transport: "posix".into(),
        ep: ep.0.into(),
    }
}

/// Milliseconds of the coarse monotonic clock (a few nanoseconds to read,
/// at a resolution of a few milliseconds).
fn coarse_ms() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a writable timespec; CLOCK_MONOTONIC_COARSE always
    // exists on Linux.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC_COARSE, &mut ts) };
    (ts.tv_sec as u64) * 1000 + (ts.tv_nsec as u64) / 1_000_000
}

/// A pidfd of process `p`, readable once it exits; `None` if the kernel
/// has no `pidfd_open` or `p` is gone already (its pid may be another
/// process's now).
fn exit_fd(p: ProcessId) -> Option<OwnedFd> {
    let pid = libc::pid_t::try_from(p.pid).ok()?;
    // SAFETY: pidfd_open takes no pointers.
    let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0) };
    if fd < 0 {
        return None;
    }
    // SAFETY: a new fd, owned by nothing else.
    let fd = unsafe { OwnedFd::from_raw_fd(RawFd::try_from(fd).ok()?) };
    // Still `p` after the open: the fd is `p`'s.
    p.is_alive().then_some(fd)
}

/// The error of an endpoint whose peer failed for `why`.
fn peer_failed(why: &str) -> Error {
    Error::endpoint_failed("posix", EndpointCause::Other(why.to_string().into()))
}

impl PosixIface {
    /// Opens an iface whose segment accepts up to `RUCX_MM_MAX_SENDERS`
    /// senders (at most [`MAX_SENDERS`]); a further sender's `ep_create`
    /// fails.
    pub(crate) fn open(_params: &IfaceParams, mm: &MmConfig, posix: &PosixConfig) -> Result<Self> {
        let max_senders = mm.max_senders as usize;
        if max_senders == 0 || max_senders > MAX_SENDERS {
            return Err(Error::InvalidParam(format!(
                "RUCX_MM_MAX_SENDERS={max_senders} is not in 1..={MAX_SENDERS}"
            )));
        }
        let fifo = mm.fifo()?;
        let me = ProcessId::current()?;
        let host = HostId::current()?;
        let iface_id = NEXT_IFACE.fetch_add(1, Ordering::Relaxed);
        let rx = Rx::create(fifo, posix, max_senders)?;
        let (fd, seg_len) = rx.segment();
        let addr = IfaceAddr {
            owner: me,
            fd,
            seg_len,
            fifo,
            iface_id,
        };
        let mut iface = PosixIface {
            info: uct::IfaceInfo {
                tl_name: TL_NAME.into(),
                dev_name: DEV_NAME.into(),
                device_addr: host.as_bytes().to_vec(),
                iface_addr: addr.encode().to_vec(),
                attr: iface_attr(&fifo),
            },
            me,
            max_poll: mm.max_poll.max(1) as usize,
            eps: EpTable::new(),
            pending_eps: Vec::new(),
            pending_scratch: Vec::new(),
            failed: VecDeque::new(),
            peers: Vec::new(),
            free_peers: Vec::new(),
            peer_by_addr: HashMap::new(),
            wake_tx: Arc::new(WakeTx::new()?),
            wake_rx: WakeRx::bind(me, iface_id)?,
            events: EventSet::with_capacity(8)?,
            exits: HashMap::new(),
            ready: Vec::new(),
            rx,
            calls: 0,
            last_check: coarse_ms(),
        };
        iface
            .events
            .add(iface.wake_rx.fd(), WAKE_TOKEN, Interest::READABLE)?;
        iface.info.attr.caps = uct::derive_caps(&mut iface);
        Ok(iface)
    }

    fn ep(&self, ep: EpId) -> Result<&Ep> {
        self.eps.get(ep).ok_or_else(|| no_ep(ep))
    }

    /// The live peer of `ep`.
    fn peer_of(&mut self, ep: EpId) -> Result<&mut Peer> {
        let e = self.ep(ep)?;
        let (failed, peer) = (e.failed, e.peer);
        let peer = self
            .peers
            .get_mut(peer)
            .and_then(Option::as_mut)
            .ok_or_else(|| no_ep(ep))?;
        match (&peer.failed, failed) {
            (Some(why), _) => Err(peer_failed(why)),
            (None, true) => Err(Error::endpoint_failed("posix", EndpointCause::PeerGone)),
            (None, false) => Ok(peer),
        }
    }

    fn send(&mut self, ep: EpId, id: AmId, parts: &[&[u8]]) -> Result<Posted> {
        self.send_with(ep, |p, wake| p.push(wake, id, parts))
    }

    /// Hands the peer of `ep` to `push` if both are usable: `Done` when
    /// it pushed, `NoResource` when the FIFO was full (or the endpoint
    /// failed, which `progress` reports).
    #[inline]
    fn send_with(
        &mut self,
        ep: EpId,
        push: impl FnOnce(&mut Peer, &WakeTx) -> Result<bool>,
    ) -> Result<Posted> {
        let wake = &self.wake_tx;
        let e = self.eps.get(ep);
        let Some(e) = e else { return Err(no_ep(ep)) };
        let (peer_index, ep_failed) = (e.peer, e.failed);
        match self.peers.get_mut(peer_index).and_then(Option::as_mut) {
            Some(p) if p.failed.is_none() && !ep_failed => Ok(if push(p, wake)? {
                Posted::Done
            } else {
                Posted::NoResource
            }),
            _ => self.peer_of(ep).map(|_| Posted::NoResource),
        }
    }

    /// How many peer processes' exits are watched.
    #[cfg(test)]
    pub(super) fn watched_processes(&self) -> usize {
        self.exits.len()
    }

    /// The mapping of the peer segment `ep` sends to.
    #[cfg(test)]
    pub(super) fn peer_mapping(&self, ep: EpId) -> Option<(*const u8, usize)> {
        let peer = self.eps.get(ep)?.peer;
        Some(self.peers.get(peer)?.as_ref()?.mapping())
    }

    /// Watches the exit of peer `i`'s process, where the kernel can
    /// (`pidfd_open`, Linux 5.3); without it a sleeping worker finds a dead
    /// peer on its next liveness check only.
    fn watch_exit(&mut self, i: usize) {
        let Some(Some(p)) = self.peers.get_mut(i) else {
            return;
        };
        let owner = p.addr.owner;
        if owner == self.me {
            return;
        }
        if let Some(w) = self.exits.get_mut(&owner) {
            w.peers += 1;
            p.watched = true;
            return;
        }
        let Some(fd) = exit_fd(owner) else {
            return;
        };
        let token = EXIT_TOKEN + u64::from(owner.pid);
        if self
            .events
            .add(fd.as_raw_fd(), token, Interest::READABLE)
            .is_ok()
        {
            self.exits.insert(owner, Watch { fd, peers: 1 });
            p.watched = true;
        }
    }

    /// The peer processes whose exit fd is readable (they exited).
    fn exited_peers(&mut self) -> Result<Vec<ProcessId>> {
        self.events.wait(Some(Duration::ZERO), &mut self.ready)?;
        let pids: Vec<u64> = self
            .ready
            .iter()
            .filter_map(|&(t, _)| t.checked_sub(EXIT_TOKEN))
            .collect();
        // A pid names one watched process unless it was reused: the
        // process that is still there has not exited.
        Ok(self
            .exits
            .keys()
            .filter(|p| pids.contains(&u64::from(p.pid)) && !p.is_alive())
            .copied()
            .collect())
    }

    /// Fails every endpoint of peers that died or closed; the processes in
    /// `exited` are known to have exited.
    fn check_peers(&mut self, exited: &[ProcessId]) {
        let mut known: HashMap<ProcessId, bool> = HashMap::new();
        let mut alive =
            |p: ProcessId| !exited.contains(&p) && *known.entry(p).or_insert_with(|| p.is_alive());
        for (pi, slot) in self.peers.iter_mut().enumerate() {
            let Some(p) = slot else { continue };
            let failed_before = p.failed.is_some();
            if !failed_before && p.check(&mut alive) {
                continue;
            }
            // Its end is known: no more wake-ups from its exit.
            if std::mem::take(&mut p.watched) {
                unwatch(&mut self.exits, &self.events, p.addr.owner);
            }
            if failed_before {
                continue;
            }
            let why = p.failed.clone().unwrap_or_default();
            for (id, e) in self.eps.iter_mut() {
                if e.peer == pi && !e.failed {
                    e.failed = true;
                    self.failed.push_back((id, peer_failed(&why)));
                }
            }
        }
    }

    fn report_failed(&mut self, sink: &mut dyn AmSink) -> usize {
        let mut n = 0;
        while let Some((id, err)) = self.failed.pop_front() {
            sink.ep_failed(id, err);
            n += 1;
            if let Some(e) = self.eps.get_mut(id) {
                while let Some(t) = e.pending.pop_front() {
                    sink.pending_ready(id, t);
                    n += 1;
                }
            }
        }
        n
    }

    fn dispatch_pending(&mut self, sink: &mut dyn AmSink) -> usize {
        let mut n = 0;
        let mut keep = std::mem::take(&mut self.pending_scratch);
        let list = std::mem::take(&mut self.pending_eps);
        for &i in &list {
            let Some(e) = self.eps.get_mut(EpId(i)) else {
                continue;
            };
            let ready = e.failed
                || self
                    .peers
                    .get_mut(e.peer)
                    .and_then(Option::as_mut)
                    .is_none_or(|p| p.failed.is_some() || p.has_room());
            if !ready {
                keep.push(i);
                continue;
            }
            while let Some(t) = e.pending.pop_front() {
                sink.pending_ready(EpId(i), t);
                n += 1;
            }
            e.in_pending_list = false;
        }
        self.pending_eps = keep;
        self.pending_scratch = list;
        self.pending_scratch.clear();
        n
    }
}

impl Drop for PosixIface {
    fn drop(&mut self) {
        self.rx.close();
    }
}

impl Iface for PosixIface {
    fn info(&self) -> &uct::IfaceInfo {
        &self.info
    }

    fn is_reachable(&self, dev_addr: &[u8], iface_addr: &[u8]) -> bool {
        dev_addr == &self.info.device_addr[..] && IfaceAddr::decode(iface_addr).is_ok()
    }

    fn ep_create(&mut self, dev_addr: &[u8], iface_addr: &[u8]) -> Result<EpId> {
        if dev_addr != &self.info.device_addr[..] {
            return Err(Error::Unreachable(
                "posix: peer is on another host, pid namespace or user".into(),
            ));
        }
        let addr = IfaceAddr::decode(iface_addr)?;
        let key = (addr.owner, addr.iface_id);
        let existing = self.peer_by_addr.get(&key).copied().filter(|&i| {
            self.peers
                .get(i)
                .and_then(Option::as_ref)
                .is_some_and(|p| p.addr == addr && p.failed.is_none())
        });
        let peer = match existing {
            Some(i) => i,
            None => {
                let p = Peer::attach(addr, self.me)?;
                let i = match self.free_peers.pop() {
                    Some(i) => {
                        self.peers[i] = Some(p);
                        i
                    }
                    None => {
                        self.peers.push(Some(p));
                        self.peers.len() - 1
                    }
                };
                // A failed peer of the same address keeps its entry until
                // its last endpoint goes; new endpoints use this one.
                self.peer_by_addr.insert(key, i);
                self.watch_exit(i);
                i
            }
        };
        if let Some(Some(p)) = self.peers.get_mut(peer) {
            p.refs += 1;
        }
        let ep = Ep {
            peer,
            pending: VecDeque::new(),
            in_pending_list: false,
            failed: false,
        };
        self.eps.insert(ep)
    }

    fn ep_destroy(&mut self, ep: EpId) {
        let Some(e) = self.eps.remove(ep) else {
            return;
        };
        self.pending_eps.retain(|&i| i != ep.0);
        self.failed.retain(|(id, _)| *id != ep);
        if let Some(slot) = self.peers.get_mut(e.peer) {
            if let Some(p) = slot {
                p.refs = p.refs.saturating_sub(1);
                if p.refs == 0 {
                    if p.watched {
                        unwatch(&mut self.exits, &self.events, p.addr.owner);
                    }
                    let key = (p.addr.owner, p.addr.iface_id);
                    if self.peer_by_addr.get(&key) == Some(&e.peer) {
                        self.peer_by_addr.remove(&key);
                    }
                    *slot = None;
                    self.free_peers.push(e.peer);
                }
            }
        }
    }

    fn am(&mut self) -> Option<&mut dyn AmOps> {
        Some(self)
    }

    fn pending_add(&mut self, ep: EpId, token: Token) -> Result<()> {
        self.peer_of(ep)?;
        let Some(e) = self.eps.get_mut(ep) else {
            return Err(no_ep(ep));
        };
        e.pending.push_back(token);
        if !e.in_pending_list {
            e.in_pending_list = true;
            self.pending_eps.push(ep.0);
        }
        Ok(())
    }

    fn flush(&mut self, ep: Option<EpId>, _token: Token) -> Result<Posted> {
        // A send is complete once it returns: the bytes are in the
        // receiver's memory.
        if let Some(ep) = ep {
            self.peer_of(ep)?;
        }
        Ok(Posted::Done)
    }

    fn progress(&mut self, sink: &mut dyn AmSink) -> usize {
        let mut n = self.rx.poll(sink, self.max_poll);
        self.calls = self.calls.wrapping_add(1);
        let clock = self.calls % CLOCK_EVERY == 0;
        if clock {
            // Closed senders: looked for every CLOCK_EVERY calls, not on
            // the message path.
            n += self.rx.reap_closed(sink);
        }
        // Dead processes: looked for at most every LIVENESS_PERIOD, on
        // every CLOCK_EVERY calls and on calls that found nothing (an idle
        // worker, or the first call after the application did something
        // else for a while: a peer that died meanwhile fails now, not
        // after a message it will never answer).
        if clock || n == 0 {
            let now = coarse_ms();
            if now.saturating_sub(self.last_check) >= LIVENESS_PERIOD.as_millis() as u64 {
                self.last_check = now;
                n += self.rx.check_senders(sink);
                self.check_peers(&[]);
            }
        }
        if !self.failed.is_empty() {
            n += self.report_failed(sink);
        }
        if !self.pending_eps.is_empty() {
            n += self.dispatch_pending(sink);
        }
        n
    }

    fn event_fd(&self) -> Option<RawFd> {
        Some(self.events.as_raw_fd())
    }

    fn arm(&mut self) -> Result<Armed> {
        self.wake_rx.drain();
        let exited = self.exited_peers()?;
        if !exited.is_empty() {
            self.check_peers(&exited);
        }
        if !self.failed.is_empty() || !self.pending_eps.is_empty() || !self.rx.arm() {
            return Ok(Armed::Busy);
        }
        Ok(Armed::Sleep)
    }
}

impl AmOps for PosixIface {
    fn am_short(&mut self, ep: EpId, id: AmId, header: u64, payload: &[u8]) -> Result<Posted> {
        limits::check_short(payload.len(), self.info.attr.max_short)?;
        self.send_with(ep, |p, wake| p.push_short(wake, id, header, payload))
    }

    fn am_bcopy(&mut self, ep: EpId, id: AmId, parts: &[&[u8]]) -> Result<(Posted, usize)> {
        let total = limits::bcopy_len(parts, self.info.attr.max_bcopy)?;
        Ok(self.send(ep, id, parts)?.with_len(total))
    }

    fn short_sender(&mut self, ep: EpId) -> Option<Box<dyn uct::ShortSender>> {
        let max_short = self.info.attr.max_short;
        let wake = Arc::clone(&self.wake_tx);
        let peer = self.peer_of(ep).ok()?;
        Some(Box::new(peer.sender(&wake, max_short)))
    }
}
