//! The `cma` iface: addresses, endpoints, pending tokens and progress.
//! The operations are in `ops.rs`.

use std::collections::VecDeque;
use std::os::fd::RawFd;
use std::time::{Duration, Instant};

use uct::ucs::{EndpointCause, Error, Result};
use uct::{
    AmSink, Armed, Caps, ConnectMode, EpId, EpTable, GetOps, Iface, IfaceAttr, IfaceParams, Iov,
    PerfModel, Posted, PutOps, RemoteKey, Token,
};

use super::config::Limits;
use super::sys::{Dir, Scratch};
use super::{DEV_NAME, TL_NAME};
use crate::proc_id::{HostId, ProcessId, PROCESS_ID_LEN};

/// How often `progress` checks that peers still run, and how long an
/// operation trusts its peer's last check before checking again.
///
/// A pid is reused only after the kernel has handed out every other pid
/// (`pid_max`, at least 32768 of them), which takes far longer than this.
pub const LIVENESS_PERIOD: Duration = Duration::from_millis(100);

/// Largest put or get: the kernel's limit of one call's total length
/// (`ssize_t`). Operations are split into segments anyway.
pub(crate) const MAX_RMA: usize = isize::MAX as usize;

/// Fixed time of one operation: a `process_vm_readv` of 8 bytes (the
/// system call, finding the peer, the ptrace permission check, pinning one
/// page) plus the checks here. Measured with `model_estimate` in
/// `tests/model.rs` (release build, 2-core VM, Linux 6.18, four runs): the
/// system call alone 1.15 to 1.45 us, a whole 8-byte get 1.3 to 1.8 us.
/// UCX assumes 2 us for its scopy transports.
const OVERHEAD: f64 = 1.3e-6;
/// Time until a peer can see the bytes once the call returned: nothing
/// but cache line transfers (UCX's `cma` uses the same 80 ns).
const LATENCY: f64 = 80e-9;
/// Bytes per second of large copies, from the same measurement: a get of
/// 64 MiB in 512 KiB segments ran at 3.5 to 4.8 GB/s, where one core's
/// `memcpy` of 64 MiB ran at 7.3 to 9.3 GB/s (the kernel pins every page
/// before copying it).
const BANDWIDTH: f64 = 4e9;

/// One endpoint: a peer process.
#[derive(Debug)]
pub(super) struct Ep {
    /// The peer.
    pub(super) peer: ProcessId,
    /// Its pid as the system calls take it.
    pub(super) pid: libc::pid_t,
    /// When the peer was last found alive.
    pub(super) seen: Instant,
    /// Why the endpoint failed, once it did.
    pub(super) failed: Option<String>,
}

/// A `cma` iface.
#[derive(Debug)]
pub(crate) struct CmaIface {
    info: uct::IfaceInfo,
    pub(super) limits: Limits,
    /// This process.
    pub(super) me: ProcessId,
    /// Endpoints.
    pub(super) eps: EpTable<Ep>,
    /// Tokens of `pending_add`, handed back on the next progress.
    pending: VecDeque<(EpId, Token)>,
    /// Failed endpoints not yet reported.
    unreported: Vec<EpId>,
    /// When `progress` last checked the peers.
    last_sweep: Instant,
    /// Progress calls so far.
    calls: u32,
    pub(super) scratch: Scratch,
}

/// Progress calls between two looks at the clock.
pub(super) const CLOCK_EVERY: u32 = 64;

impl CmaIface {
    /// Opens an iface; an error if this process's identity cannot be read.
    pub(crate) fn open(params: &IfaceParams, limits: Limits) -> Result<CmaIface> {
        let me = crate::md_keys::me()?;
        let host = HostId::current()?;
        tracing::debug!(
            worker = params.worker_uuid,
            pid = me.pid,
            seg_size = limits.seg_size,
            max_iov = limits.max_iov,
            "cma: iface open"
        );
        let mut iface = CmaIface {
            info: uct::IfaceInfo {
                tl_name: TL_NAME.into(),
                dev_name: DEV_NAME.into(),
                device_addr: host.as_bytes().to_vec(),
                iface_addr: me.encode().to_vec(),
                attr: IfaceAttr {
                    // The operation bits are derived from the families.
                    caps: Caps::CONNECT_TO_IFACE | Caps::PEER_FAILURE,
                    max_short: 0,
                    max_bcopy: 0,
                    max_zcopy: 0,
                    max_hdr: 0,
                    max_iov: limits.max_iov,
                    max_put_zcopy: MAX_RMA,
                    max_get_zcopy: MAX_RMA,
                    model: PerfModel {
                        latency: LATENCY,
                        overhead: OVERHEAD,
                        bandwidth: BANDWIDTH,
                    },
                    connect: ConnectMode::ToIface,
                },
            },
            limits,
            me,
            eps: EpTable::new(),
            pending: VecDeque::new(),
            unreported: Vec::new(),
            last_sweep: Instant::now(),
            calls: 0,
            scratch: Scratch::default(),
        };
        iface.info.attr.caps = uct::derive_caps(&mut iface);
        Ok(iface)
    }

    /// The peer process of an iface address: exactly an encoded
    /// [`ProcessId`] whose pid the system calls can take.
    fn peer_of(iface_addr: &[u8]) -> Option<(ProcessId, libc::pid_t)> {
        if iface_addr.len() != PROCESS_ID_LEN {
            return None;
        }
        let peer = ProcessId::decode(iface_addr)?;
        let pid = libc::pid_t::try_from(peer.pid).ok()?;
        Some((peer, pid))
    }

    /// The live endpoint `ep`: `InvalidParam` if there is none,
    /// `EndpointFailed` if it failed.
    pub(super) fn ep_mut(&mut self, ep: EpId) -> Result<&mut Ep> {
        let e = self.eps.get_mut(ep).ok_or(Error::UnknownEndpoint {
            transport: "cma".into(),
            ep: ep.0.into(),
        })?;
        match &e.failed {
            Some(why) => Err(failed(why.clone())),
            None => Ok(e),
        }
    }

    /// Fails endpoint `ep` (once; it is reported on the next progress) and
    /// returns the error its operations get from now on.
    pub(super) fn fail_ep(&mut self, ep: EpId, why: String) -> Error {
        if let Some(e) = self.eps.get_mut(ep) {
            if e.failed.is_none() {
                tracing::debug!(ep = ep.0, peer = e.peer.pid, "{why}");
                e.failed = Some(why.clone());
                self.unreported.push(ep);
            }
        }
        failed(why)
    }

    /// Fails the endpoints whose peer no longer runs.
    fn sweep(&mut self, now: Instant) {
        let mut known: std::collections::HashMap<ProcessId, bool> = Default::default();
        let mut dead = Vec::new();
        for (id, e) in self.eps.iter_mut() {
            if e.failed.is_some() {
                continue;
            }
            let alive = *known.entry(e.peer).or_insert_with(|| e.peer.is_alive());
            if alive {
                e.seen = now;
            } else {
                dead.push((id, e.peer.pid));
            }
        }
        for (ep, pid) in dead {
            self.fail_ep(ep, exited(pid));
        }
        self.last_sweep = now;
    }
}

/// Why an endpoint failed when its peer exited.
pub(super) fn exited(pid: u32) -> String {
    format!("peer process {pid} exited")
}

/// The error of an endpoint that failed for `why`.
fn failed(why: String) -> Error {
    Error::endpoint_failed("cma", EndpointCause::Other(why.into()))
}

impl Iface for CmaIface {
    fn info(&self) -> &uct::IfaceInfo {
        &self.info
    }

    fn is_reachable(&self, dev_addr: &[u8], iface_addr: &[u8]) -> bool {
        dev_addr == &self.info.device_addr[..] && Self::peer_of(iface_addr).is_some()
    }

    /// `Unreachable` for another host (boot, pid namespace or user) or a
    /// peer that no longer runs, `InvalidAddr` for a malformed address.
    fn ep_create(&mut self, dev_addr: &[u8], iface_addr: &[u8]) -> Result<EpId> {
        if dev_addr != &self.info.device_addr[..] {
            return Err(Error::Unreachable(
                "cma: the peer runs on another host, pid namespace or user".into(),
            ));
        }
        let (peer, pid) = Self::peer_of(iface_addr).ok_or_else(|| {
            Error::InvalidAddr(format!(
                "cma: iface address of {} bytes is not a process id",
                iface_addr.len()
            ))
        })?;
        if !peer.is_alive() {
            return Err(Error::Unreachable(format!(
                "cma: process {} is not running",
                peer.pid
            )));
        }
        let ep = Ep {
            peer,
            pid,
            seen: Instant::now(),
            failed: None,
        };
        self.eps.insert(ep)
    }

    /// Nothing is ever in flight; pending tokens and an unreported failure
    /// of the endpoint are dropped.
    fn ep_destroy(&mut self, ep: EpId) {
        if self.eps.remove(ep).is_some() {
            self.pending.retain(|&(e, _)| e != ep);
            self.unreported.retain(|&e| e != ep);
        }
    }

    fn put(&mut self) -> Option<&mut dyn PutOps> {
        Some(self)
    }

    fn get(&mut self) -> Option<&mut dyn GetOps> {
        Some(self)
    }

    /// Operations never run out of resources, so `token` comes back on the
    /// next `progress`. Refused on a failed or unknown endpoint.
    fn pending_add(&mut self, ep: EpId, token: Token) -> Result<()> {
        self.ep_mut(ep)?;
        self.pending.push_back((ep, token));
        Ok(())
    }

    /// Always `Done`: every operation finished before it returned. Refused
    /// on a failed or unknown endpoint.
    fn flush(&mut self, ep: Option<EpId>, _token: Token) -> Result<Posted> {
        if let Some(ep) = ep {
            self.ep_mut(ep)?;
        }
        Ok(Posted::Done)
    }

    /// Checks the peers if [`LIVENESS_PERIOD`] passed since the last check,
    /// then reports failed endpoints (each once) and hands back pending
    /// tokens in the order added.
    fn progress(&mut self, sink: &mut dyn AmSink) -> usize {
        // The clock is read every CLOCK_EVERY calls only: progress runs in
        // tight loops, where a clock read per call is most of the cost.
        self.calls = self.calls.wrapping_add(1);
        if self.calls % CLOCK_EVERY == 0 && !self.eps.is_empty() {
            let now = Instant::now();
            if now.duration_since(self.last_sweep) >= LIVENESS_PERIOD {
                self.sweep(now);
            }
        }
        if self.unreported.is_empty() && self.pending.is_empty() {
            return 0;
        }
        let mut n = 0;
        for ep in std::mem::take(&mut self.unreported) {
            if let Some(Ep {
                failed: Some(why), ..
            }) = self.eps.get(ep)
            {
                sink.ep_failed(ep, failed(why.clone()));
                n += 1;
            }
        }
        while let Some((ep, token)) = self.pending.pop_front() {
            sink.pending_ready(ep, token);
            n += 1;
        }
        n
    }

    /// None: nothing arrives by itself (peers read and write this
    /// process's memory without telling it).
    fn event_fd(&self) -> Option<RawFd> {
        None
    }

    /// `Busy` while reports are queued for `progress`, else `Sleep`. There
    /// is no event fd because nothing arrives by itself; what `progress`
    /// could still find (a dead peer) is found by the next operation or
    /// progress call instead of waking a sleeping worker. `Sleep` rather
    /// than `Unsupported`, so that a worker can sleep on its other ifaces.
    fn arm(&mut self) -> Result<Armed> {
        if self.pending.is_empty() && self.unreported.is_empty() {
            Ok(Armed::Sleep)
        } else {
            Ok(Armed::Busy)
        }
    }
}

impl PutOps for CmaIface {
    /// Writes the local ranges to the peer with `process_vm_writev`, after
    /// checking the key (see the module doc); returns `Done` once every
    /// byte is written.
    unsafe fn put_zcopy(
        &mut self,
        ep: EpId,
        iov: &[Iov],
        remote_addr: u64,
        rkey: &RemoteKey,
        _token: Token,
    ) -> Result<Posted> {
        // SAFETY: the caller keeps the ranges of `iov` valid for reads
        // until the operation completes, which is before this returns.
        unsafe { self.rma(ep, Dir::Write, iov, remote_addr, rkey) }
    }
}

impl GetOps for CmaIface {
    /// Reads the peer's range into the local ranges with
    /// `process_vm_readv`, after checking the key; returns `Done` once
    /// every byte is read.
    unsafe fn get_zcopy(
        &mut self,
        ep: EpId,
        iov: &[uct::IovMut],
        remote_addr: u64,
        rkey: &RemoteKey,
        _token: Token,
    ) -> Result<Posted> {
        uct::with_iovs(iov, |iov| {
            // SAFETY: the caller keeps the ranges of `iov` valid for writes,
            // and untouched, until the operation completes, which is before
            // this returns.
            unsafe { self.rma(ep, Dir::Read, iov, remote_addr, rkey) }
        })
    }
}
