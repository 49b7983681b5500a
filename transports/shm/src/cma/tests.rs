//! Tests of the `cma` iface in one process: attributes, addresses,
//! endpoints, pending tokens, segmented copies to this process itself,
//! and a peer that exits. Key checks are in `tests/keys.rs`, copies
//! between two processes in `tests/xproc.rs`, the transport conformance
//! checks of one-sided operations in `tests/conformance.rs`.

// Uses the component, which the loom build leaves out.
#[cfg(not(loom))]
mod conformance;
mod keys;
mod model;
mod xproc;

use uct::testing::checks::pattern;
use uct::testing::{Event, TestSink};
use uct::ucs::Status;
use uct::{Access, Armed, Caps, EpId, Iface, IfaceParams, Iov, MemHandle, Posted, Token};

use super::{open_checked, open_iface, CmaConfig, DEV_NAME, LIVENESS_PERIOD, TL_NAME};
use crate::md_keys;
use crate::proc_id::{HostId, ProcessId};

/// Whether CMA works here; says why not on stderr (the test then passes
/// without checking anything), or fails when `RUCX_REQUIRE_ALL=1`.
pub(super) fn available() -> bool {
    match super::probe() {
        Ok(()) => true,
        Err(why) => {
            assert!(
                std::env::var("RUCX_REQUIRE_ALL").as_deref() != Ok("1"),
                "CMA unavailable with RUCX_REQUIRE_ALL=1: {why}"
            );
            eprintln!("skipped: {why}");
            false
        }
    }
}

/// An iface with `RUCX_CMA_SEG_SIZE=seg`.
pub(super) fn open_seg(seg: &str) -> Box<dyn Iface> {
    let seg = seg.to_string();
    let cfg = CmaConfig::from_lookup(|v| (v == "RUCX_CMA_SEG_SIZE").then(|| seg.clone())).unwrap();
    open_iface(&IfaceParams::default(), &cfg).unwrap()
}

/// An endpoint from `iface` to this process.
pub(super) fn ep_to_self(iface: &mut dyn Iface) -> EpId {
    let (dev, addr) = (iface.device_addr().to_vec(), iface.iface_addr().to_vec());
    iface.ep_create(&dev, &addr).unwrap()
}

/// A heap buffer reached only through its raw pointer, registered with
/// the `shm` table, with its unpacked key.
pub(super) struct Region {
    ptr: *mut u8,
    len: usize,
    memh: Option<MemHandle>,
    pub(super) key: uct::RemoteKey,
}

impl Region {
    pub(super) fn new(init: &[u8], access: Access) -> Region {
        let len = init.len();
        let ptr = Box::into_raw(Box::<[u8]>::from(init)).cast::<u8>();
        let memh = md_keys::register(ptr, len, access).unwrap();
        let key = md_keys::unpack(&md_keys::pack(&memh).unwrap()).unwrap();
        Region {
            ptr,
            len,
            memh: Some(memh),
            key,
        }
    }

    pub(super) fn addr(&self, off: usize) -> u64 {
        self.ptr.wrapping_add(off).expose_provenance() as u64
    }

    pub(super) fn read(&self) -> Vec<u8> {
        // SAFETY: `ptr` owns `len` bytes; no operation runs during a read.
        unsafe { std::slice::from_raw_parts(self.ptr, self.len) }.to_vec()
    }

    /// An iov entry for `[off, off + len)`.
    pub(super) fn iov(&self, off: usize, len: usize) -> Iov {
        assert!(off + len <= self.len);
        Iov {
            ptr: self.ptr.wrapping_add(off),
            len,
        }
    }
}

impl Drop for Region {
    fn drop(&mut self) {
        if let Some(h) = self.memh.take() {
            md_keys::deregister(&h).unwrap();
        }
        let slice = std::ptr::slice_from_raw_parts_mut(self.ptr, self.len);
        // SAFETY: from `Box::into_raw` in `new`, freed only here, after
        // deregistering.
        drop(unsafe { Box::from_raw(slice) });
    }
}

/// Runs `get` or `put` (by `put`) and expects `Done`.
pub(super) fn rma(
    iface: &mut dyn Iface,
    ep: EpId,
    put: bool,
    iov: &[Iov],
    remote: u64,
    key: &uct::RemoteKey,
) -> uct::Result<()> {
    // SAFETY: every caller's iov names live buffers reached only through
    // raw pointers (`Region`, or vectors not otherwise used meanwhile);
    // the operation is over when it returns.
    let r = unsafe {
        if put {
            iface
                .put()
                .unwrap()
                .put_zcopy(ep, iov, remote, key, Token(0))
        } else {
            iface
                .get()
                .unwrap()
                .get_zcopy(ep, &uct::testing::writable(iov), remote, key, Token(0))
        }
    };
    r.map(|p| assert_eq!(p, Posted::Done))
}

#[test]
fn attributes_and_addresses() {
    if !available() {
        return;
    }
    let mut a = open_seg("auto");
    assert_eq!((a.tl_name(), a.dev_name()), (TL_NAME, DEV_NAME));
    let attr = a.attr().clone();
    assert_eq!(
        attr.caps,
        Caps::PUT_ZCOPY
            | Caps::GET_ZCOPY
            | Caps::PENDING
            | Caps::CONNECT_TO_IFACE
            | Caps::PEER_FAILURE
    );
    assert_eq!((attr.max_short, attr.max_bcopy, attr.max_zcopy), (0, 0, 0));
    assert_eq!(attr.max_iov, 16);
    assert_eq!(attr.max_put_zcopy, isize::MAX as usize);
    assert_eq!(attr.max_get_zcopy, isize::MAX as usize);
    let m = attr.model;
    assert!(m.latency > 0.0 && m.overhead > 0.0 && m.bandwidth > 1e9);
    assert!(a.event_fd().is_none());
    assert_eq!(a.device_addr(), HostId::current().unwrap().as_bytes());
    assert_eq!(a.iface_addr(), ProcessId::current().unwrap().encode());

    // No active messages: the families are absent, not refusing.
    assert!(a.am().is_none() && a.zcopy().is_none());
    assert!(a.put().is_some() && a.get().is_some());
}

#[test]
fn reachability_and_bad_addresses() {
    if !available() {
        return;
    }
    let mut a = open_seg("auto");
    let (dev, me) = (a.device_addr().to_vec(), a.iface_addr().to_vec());
    assert!(a.is_reachable(&dev, &me));
    let mut other_host = dev.clone();
    other_host[0] ^= 1;
    assert!(!a.is_reachable(&other_host, &me));
    assert_eq!(
        a.ep_create(&other_host, &me).unwrap_err().status(),
        Status::Unreachable
    );
    let zero_pid = [&[0u8; 4][..], &me[4..]].concat();
    let long = [&me[..], &[0][..]].concat();
    for bad in [&[][..], &me[..11], &long, &zero_pid] {
        assert!(!a.is_reachable(&dev, bad), "{bad:?}");
        assert_eq!(
            a.ep_create(&dev, bad).unwrap_err().status(),
            Status::InvalidAddr
        );
    }
    // A pid that does not fit a pid_t.
    let huge = [&u32::MAX.to_le_bytes()[..], &me[4..]].concat();
    assert!(!a.is_reachable(&dev, &huge));
    // A process that exited is unreachable.
    let mut child = std::process::Command::new("true").spawn().unwrap();
    let gone = ProcessId::of(child.id()).unwrap();
    child.wait().unwrap();
    assert!(a.is_reachable(&dev, &gone.encode()));
    assert_eq!(
        a.ep_create(&dev, &gone.encode()).unwrap_err().status(),
        Status::Unreachable
    );
    for len in 0..40 {
        let _ = a.is_reachable(&pattern(len as u64, len), &pattern(len as u64 + 1, len));
    }
}

#[test]
fn open_fails_when_the_probe_did() {
    let e = open_checked(
        Err("cma: no".into()),
        &IfaceParams::default(),
        &CmaConfig::default(),
    )
    .unwrap_err();
    assert_eq!(e.status(), Status::Unsupported);
    assert!(e.to_string().contains("cma: no"));
    let bad = CmaConfig::from_lookup(|v| (v == "RUCX_CMA_MAX_IOV").then(|| "0".into())).unwrap();
    let e = open_checked(Ok(()), &IfaceParams::default(), &bad).unwrap_err();
    assert_eq!(e.status(), Status::InvalidParam);
}

#[test]
fn pending_flush_arm_and_destroy() {
    if !available() {
        return;
    }
    let mut a = open_seg("auto");
    let ep = ep_to_self(&mut *a);
    let other = ep_to_self(&mut *a);
    assert_ne!(ep, other);
    assert_eq!(a.arm().unwrap(), Armed::Sleep);
    a.pending_add(ep, Token(1)).unwrap();
    a.pending_add(other, Token(2)).unwrap();
    a.pending_add(ep, Token(3)).unwrap();
    assert_eq!(a.arm().unwrap(), Armed::Busy);
    let mut sink = TestSink::new();
    assert_eq!(a.progress(&mut sink), 3);
    let got: Vec<(EpId, Token)> = sink
        .events
        .iter()
        .map(|e| match e {
            Event::PendingReady { ep, token } => (*ep, *token),
            e => panic!("{e:?}"),
        })
        .collect();
    assert_eq!(got, [(ep, Token(1)), (other, Token(2)), (ep, Token(3))]);
    assert_eq!(a.progress(&mut sink), 0);
    assert_eq!(a.arm().unwrap(), Armed::Sleep);

    assert_eq!(a.flush(None, Token(4)).unwrap(), Posted::Done);
    assert_eq!(a.flush(Some(ep), Token(5)).unwrap(), Posted::Done);

    // A destroyed endpoint's tokens are dropped; its id is reused.
    a.pending_add(other, Token(6)).unwrap();
    a.ep_destroy(other);
    a.ep_destroy(other);
    assert_eq!(a.arm().unwrap(), Armed::Sleep);
    assert_eq!(a.progress(&mut TestSink::new()), 0);
    let st = |r: uct::Result<()>| r.unwrap_err().status();
    assert_eq!(st(a.pending_add(other, Token(7))), Status::InvalidParam);
    assert_eq!(
        a.flush(Some(other), Token(8)).unwrap_err().status(),
        Status::InvalidParam
    );
    assert_eq!(ep_to_self(&mut *a), other);
    assert_eq!(st(a.pending_add(EpId(999), Token(9))), Status::InvalidParam);
}

/// Puts and gets to this process, in 4 KiB segments, of 0, 1, 4095 and
/// 1 MiB + 3 bytes, from one iov entry and from several.
#[test]
fn segmented_copies_to_self() {
    if !available() {
        return;
    }
    let mut a = open_seg("4k");
    let ep = ep_to_self(&mut *a);
    let n = (1 << 20) + 3;
    let rw = Access::REMOTE_READ | Access::REMOTE_WRITE;
    let remote = Region::new(&pattern(1, n + 10), rw);
    let local = Region::new(&pattern(2, n + 20), Access::empty());
    let mut model = remote.read();
    let mut seed = 3;
    for size in [0usize, 1, 4095, n] {
        for pieces in [1usize, 5] {
            // The local side: `pieces` entries with one-byte gaps.
            let cut = size / pieces;
            let mut iov = Vec::new();
            let (mut at, mut left) = (0, size);
            for i in 0..pieces {
                let len = if i + 1 == pieces { left } else { cut };
                iov.push(local.iov(at, len));
                at += len + 1;
                left -= len;
            }
            let off = 7.min(n + 10 - size);
            // Put: the pieces land back to back at `off`.
            seed += 1;
            let data = pattern(seed, n + 20);
            // SAFETY: in bounds of `local`; no operation runs.
            unsafe { std::ptr::copy_nonoverlapping(data.as_ptr(), local.ptr, n + 20) };
            rma(&mut *a, ep, true, &iov, remote.addr(off), &remote.key).unwrap();
            let sent: Vec<u8> = iov
                .iter()
                .flat_map(|v| {
                    let o = v.ptr.addr() - local.ptr.addr();
                    data[o..o + v.len].to_vec()
                })
                .collect();
            model[off..off + size].copy_from_slice(&sent);
            assert!(remote.read() == model, "put {size} in {pieces}");
            // Get: read it back into a clean local buffer.
            // SAFETY: as above.
            unsafe { local.ptr.write_bytes(0, n + 20) };
            rma(&mut *a, ep, false, &iov, remote.addr(off), &remote.key).unwrap();
            let got = local.read();
            let mut want = vec![0u8; n + 20];
            let mut from = off;
            for v in &iov {
                let o = v.ptr.addr() - local.ptr.addr();
                want[o..o + v.len].copy_from_slice(&model[from..from + v.len]);
                from += v.len;
            }
            assert!(got == want, "get {size} in {pieces}");
        }
    }
    // More entries than max_iov are refused before anything moves.
    let iov: Vec<Iov> = (0..17).map(|i| local.iov(i, 1)).collect();
    let e = rma(&mut *a, ep, true, &iov, remote.addr(0), &remote.key).unwrap_err();
    assert_eq!(e.status(), Status::InvalidParam);
    assert!(remote.read() == model);
}

/// A peer that exits: progress finds it within a liveness period and
/// reports it once, before the pending tokens; the endpoint refuses work.
#[test]
fn progress_finds_a_dead_peer() {
    if !available() {
        return;
    }
    let mut a = open_seg("auto");
    let mut child = std::process::Command::new("sleep")
        .arg("30")
        .spawn()
        .unwrap();
    let peer = ProcessId::of(child.id()).unwrap();
    let dev = a.device_addr().to_vec();
    let ep = a.ep_create(&dev, &peer.encode()).unwrap();
    let mine = ep_to_self(&mut *a);
    a.pending_add(ep, Token(1)).unwrap();
    child.kill().unwrap();
    child.wait().unwrap();
    // The next progress is due to check the peers.
    std::thread::sleep(LIVENESS_PERIOD);
    let mut sink = TestSink::new();
    // The clock is read every CLOCK_EVERY progress calls.
    let found: usize = (0..super::iface::CLOCK_EVERY)
        .map(|_| a.progress(&mut sink))
        .sum();
    assert_eq!(found, 2);
    // The token comes back on the first progress (cma never lacks
    // resources); the failure when the clock says the peers are due.
    match &sink.events[..] {
        [Event::PendingReady {
            ep: p,
            token: Token(1),
        }, Event::EpFailed { ep: f, error }]
            if *f == ep && *p == ep =>
        {
            assert_eq!(error.status(), Status::ConnectionReset);
            assert!(error.to_string().contains("exited"), "{error}");
        }
        e => panic!("{e:?}"),
    }
    for _ in 0..3 {
        a.progress(&mut sink);
    }
    assert_eq!(sink.ep_failures(ep), 1);
    assert_eq!(sink.ep_failures(mine), 0);
    assert!(a.pending_add(ep, Token(2)).is_err());
    assert!(a.flush(Some(ep), Token(3)).is_err());
    let buf = Region::new(&[1; 8], Access::REMOTE_READ);
    let e = rma(&mut *a, ep, false, &[buf.iov(0, 8)], buf.addr(0), &buf.key).unwrap_err();
    assert_eq!(e.status(), Status::ConnectionReset);
    a.ep_destroy(ep);
}
