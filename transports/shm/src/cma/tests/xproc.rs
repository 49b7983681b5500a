//! Copies between two processes: this test process and a child running
//! this test binary in child mode (`child_main` with [`CHILD_ENV`] set),
//! which registers a buffer, prints its addresses and keys, and answers
//! `hash` (of its whole buffer, guards included) and `quit` on stdin.

use std::io::{BufRead, BufReader, Write};
use std::process::{ChildStdin, ChildStdout, Command, Stdio};

use uct::testing::checks::pattern;
use uct::testing::{Event, TestSink};
use uct::ucs::Status;
use uct::{Access, EpId, Iface, IfaceParams, Iov, RemoteKey, Token};

use super::super::{open_iface, CmaConfig, LIVENESS_PERIOD};
use super::{available, ep_to_self, open_seg, rma, Region};
use crate::md_keys;
use crate::proc_id::ProcessId;

/// Set in the child's environment: run `child_main` for real.
const CHILD_ENV: &str = "RUCX_SHM_TEST_CMA_CHILD";
/// Starts every line the child means for the parent.
const PREFIX: &str = "cma-child:";
/// Guard bytes around the read-write range.
const GUARD: usize = 64;
/// The read-write range.
const RW_LEN: usize = (1 << 20) + 64;
/// The read-only range, after the second guard.
const RO_LEN: usize = 64;
const TOTAL: usize = GUARD + RW_LEN + GUARD + RO_LEN;
const RO_AT: usize = GUARD + RW_LEN + GUARD;

/// The child's buffer when it starts.
fn initial() -> Vec<u8> {
    pattern(77, TOTAL)
}

fn fnv(bytes: impl IntoIterator<Item = u8>) -> u64 {
    bytes.into_iter().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3)
    })
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

fn unhex(s: &str) -> Vec<u8> {
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
        .collect()
}

/// The child's side; does nothing in a normal test run.
#[test]
fn child_main() {
    if std::env::var_os(CHILD_ENV).is_none() {
        return;
    }
    // A parent that hangs must not leave the child behind: its reads then
    // end, and it fails instead of hanging too.
    std::thread::spawn(|| {
        std::thread::sleep(std::time::Duration::from_secs(120));
        std::process::exit(2);
    });
    let iface = open_iface(&IfaceParams::default(), &CmaConfig::default()).unwrap();
    let base = Box::into_raw(Box::<[u8]>::from(&initial()[..])).cast::<u8>();
    let rw = Access::REMOTE_READ | Access::REMOTE_WRITE;
    let h_rw = md_keys::register(base.wrapping_add(GUARD), RW_LEN, rw).unwrap();
    let h_ro = md_keys::register(base.wrapping_add(RO_AT), RO_LEN, Access::REMOTE_READ).unwrap();
    println!(
        "{PREFIX} ready {} {} {} {} {}",
        hex(iface.device_addr()),
        hex(iface.iface_addr()),
        base.expose_provenance(),
        hex(&md_keys::pack(&h_rw).unwrap()),
        hex(&md_keys::pack(&h_ro).unwrap()),
    );
    for line in std::io::stdin().lock().lines() {
        match line.unwrap().trim() {
            "hash" => {
                // The parent writes this memory with CMA between commands:
                // read it with volatile reads, through the raw pointer.
                // SAFETY: `base` owns TOTAL bytes until freed below.
                let h = fnv((0..TOTAL).map(|i| unsafe { base.add(i).read_volatile() }));
                println!("{PREFIX} hash {h:x}");
            }
            _ => break,
        }
    }
    md_keys::deregister(&h_rw).unwrap();
    md_keys::deregister(&h_ro).unwrap();
    let slice = std::ptr::slice_from_raw_parts_mut(base, TOTAL);
    // SAFETY: from `Box::into_raw` above; deregistered, and the parent has
    // quit using it.
    drop(unsafe { Box::from_raw(slice) });
}

/// A running child.
struct Child {
    proc: std::process::Child,
    stdin: ChildStdin,
    out: BufReader<ChildStdout>,
    dev: Vec<u8>,
    iface: Vec<u8>,
    /// Address of the child's buffer.
    base: u64,
    rw: RemoteKey,
    ro: RemoteKey,
}

impl Child {
    fn spawn() -> Child {
        let mut proc = Command::new(std::env::current_exe().unwrap())
            .args(["--exact", "cma::tests::xproc::child_main", "--nocapture"])
            .args(["--test-threads", "1"])
            .env(CHILD_ENV, "1")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let stdin = proc.stdin.take().unwrap();
        let out = BufReader::new(proc.stdout.take().unwrap());
        let mut c = Child {
            proc,
            stdin,
            out,
            dev: Vec::new(),
            iface: Vec::new(),
            base: 0,
            rw: dummy_key(),
            ro: dummy_key(),
        };
        let ready = c.line();
        let f: Vec<&str> = ready.split_whitespace().collect();
        assert_eq!(f[0], "ready", "{ready}");
        c.dev = unhex(f[1]);
        c.iface = unhex(f[2]);
        c.base = f[3].parse().unwrap();
        c.rw = md_keys::unpack(&unhex(f[4])).unwrap();
        c.ro = md_keys::unpack(&unhex(f[5])).unwrap();
        c
    }

    /// The next line for the parent, without the prefix.
    fn line(&mut self) -> String {
        loop {
            let mut l = String::new();
            assert!(self.out.read_line(&mut l).unwrap() > 0, "child ended");
            // The harness may have started the line ("test ... ").
            if let Some(at) = l.find(PREFIX) {
                return l[at + PREFIX.len()..].trim().to_string();
            }
        }
    }

    fn hash(&mut self) -> u64 {
        writeln!(self.stdin, "hash").unwrap();
        let l = self.line();
        let h = l.strip_prefix("hash ").unwrap();
        u64::from_str_radix(h, 16).unwrap()
    }

    fn peer(&self) -> ProcessId {
        ProcessId::decode(&self.iface).unwrap()
    }

    fn ep(&self, a: &mut dyn Iface) -> EpId {
        a.ep_create(&self.dev, &self.iface).unwrap()
    }

    fn quit(mut self) {
        writeln!(self.stdin, "quit").unwrap();
        assert!(self.proc.wait().unwrap().success());
    }

    fn kill(&mut self) {
        let _ = self.proc.kill();
        let _ = self.proc.wait();
    }
}

impl Drop for Child {
    fn drop(&mut self) {
        if matches!(self.proc.try_wait(), Ok(None)) {
            self.kill();
        }
    }
}

fn dummy_key() -> RemoteKey {
    RemoteKey {
        md_name: String::new(),
        packed: std::sync::Arc::from(&[][..]),
        addr: 0,
        len: 0,
        access: Access::empty(),
    }
}

/// `pieces` entries covering `size` bytes of `local` from offset 0, with
/// one-byte gaps.
fn split(local: &Region, size: usize, pieces: usize) -> Vec<Iov> {
    let cut = size / pieces;
    let (mut at, mut left, mut iov) = (0, size, Vec::new());
    for i in 0..pieces {
        let len = if i + 1 == pieces { left } else { cut };
        iov.push(local.iov(at, len));
        at += len + 1;
        left -= len;
    }
    iov
}

/// Gets and puts of 0, 1, 4095 and 1 MiB + 3 bytes, from one iov entry and
/// from four, in 4 KiB segments and in the default ones; the child's
/// whole buffer (guards, the read-only range) matches a model after each.
#[test]
fn get_and_put_between_processes() {
    if !available() {
        return;
    }
    let mut child = Child::spawn();
    let mut model = initial();
    let local = Region::new(&vec![0; RW_LEN + 8], Access::empty());
    let mut seed = 100;
    for seg in ["4k", "auto"] {
        let mut a = open_seg(seg);
        assert!(a.is_reachable(&child.dev, &child.iface));
        let ep = child.ep(&mut *a);
        for size in [0usize, 1, 4095, (1 << 20) + 3] {
            for pieces in [1, 4] {
                let off = if size + 5 <= RW_LEN { 5 } else { RW_LEN - size };
                let remote = child.base + (GUARD + off) as u64;
                let iov = split(&local, size, pieces);
                let what = format!("seg {seg}, {size} bytes in {pieces}");
                // Get.
                // SAFETY: `local` owns RW_LEN + 8 bytes; nothing runs.
                unsafe { local.ptr.write_bytes(0, RW_LEN + 8) };
                rma(&mut *a, ep, false, &iov, remote, &child.rw).unwrap();
                let got = local.read();
                let mut from = GUARD + off;
                for v in &iov {
                    let o = v.ptr.addr() - local.ptr.addr();
                    assert!(
                        got[o..o + v.len] == model[from..from + v.len],
                        "get, {what}"
                    );
                    from += v.len;
                }
                // Put of fresh bytes.
                seed += 1;
                let data = pattern(seed, RW_LEN + 8);
                // SAFETY: as above.
                unsafe { std::ptr::copy_nonoverlapping(data.as_ptr(), local.ptr, data.len()) };
                rma(&mut *a, ep, true, &iov, remote, &child.rw).unwrap();
                let mut to = GUARD + off;
                for v in &iov {
                    let o = v.ptr.addr() - local.ptr.addr();
                    model[to..to + v.len].copy_from_slice(&data[o..o + v.len]);
                    to += v.len;
                }
                assert_eq!(child.hash(), fnv(model.iter().copied()), "put, {what}");
            }
        }
    }
    child.quit();
}

/// Across processes the initiator checks rights, range and owner; what it
/// refuses moves nothing. A key widened by whoever sent it is not caught
/// (see `md_keys`): shown here with a get of the child's guard bytes.
#[test]
fn refusals_between_processes() {
    if !available() {
        return;
    }
    let mut child = Child::spawn();
    let before = child.hash();
    let mut a = open_seg("auto");
    let ep = child.ep(&mut *a);
    let me = ep_to_self(&mut *a);
    let local = Region::new(&pattern(5, 64), Access::REMOTE_READ);
    let l0 = local.read();
    let iov = [local.iov(0, 8)];
    let (rw, ro) = (child.rw.clone(), child.ro.clone());
    let rw_at = child.base + GUARD as u64;
    let ro_at = child.base + RO_AT as u64;
    let cases: [(&str, EpId, bool, u64, &RemoteKey, Status); 8] = [
        ("put, read-only key", ep, true, ro_at, &ro, Status::Rejected),
        (
            "get before the range",
            ep,
            false,
            rw_at - 1,
            &rw,
            Status::Rejected,
        ),
        (
            "get across the end",
            ep,
            false,
            rw_at + RW_LEN as u64 - 4,
            &rw,
            Status::Rejected,
        ),
        (
            "put across the end",
            ep,
            true,
            rw_at + RW_LEN as u64 - 4,
            &rw,
            Status::Rejected,
        ),
        (
            "child's key, endpoint to self",
            me,
            false,
            rw_at,
            &rw,
            Status::Rejected,
        ),
        (
            "own key, endpoint to the child",
            ep,
            false,
            local.addr(0),
            &local.key,
            Status::Rejected,
        ),
        (
            "the read-only key, read-write range",
            ep,
            true,
            rw_at,
            &ro,
            Status::Rejected,
        ),
        (
            "a truncated key",
            ep,
            false,
            rw_at,
            &RemoteKey {
                packed: rw.packed[..20].into(),
                ..rw.clone()
            },
            Status::InvalidParam,
        ),
    ];
    for (what, e, put, at, key, want) in cases {
        let err = rma(&mut *a, e, put, &iov, at, key).unwrap_err();
        assert_eq!(err.status(), want, "{what}: {err}");
        assert!(local.read() == l0, "{what}");
    }
    assert_eq!(child.hash(), before);
    let mut sink = TestSink::new();
    a.progress(&mut sink);
    assert_eq!(sink.ep_failures(ep), 0);

    // A key naming memory the child does not map: the kernel refuses.
    let (owner, f) = md_keys::key_owner(&rw).unwrap();
    let nowhere = uct::KeyFields {
        addr: 4096,
        len: 4096,
        ..f
    };
    let k = md_keys::unpack(&md_keys::pack_as(&owner, &nowhere)).unwrap();
    let err = rma(&mut *a, ep, false, &iov, 4096, &k).unwrap_err();
    assert_eq!(err.status(), Status::Rejected);
    assert!(err.to_string().contains("bad address"), "{err}");
    assert!(local.read() == l0);
    a.progress(&mut sink);
    assert_eq!(sink.ep_failures(ep), 0);

    // What cannot be caught: a key re-packed with a wider range.
    let wide = uct::KeyFields {
        addr: child.base,
        len: TOTAL as u64,
        ..f
    };
    let forged = md_keys::unpack(&md_keys::pack_as(&owner, &wide)).unwrap();
    rma(&mut *a, ep, false, &iov, child.base, &forged).unwrap();
    assert!(local.read()[..8] == initial()[..8]);
    child.quit();
}

/// A child killed: operations on its endpoint fail with `EndpointFailed`
/// (no panic), `progress` reports each endpoint once (one failed by an
/// operation, one found by the liveness check), and new endpoints to it
/// are refused.
#[test]
fn peer_death_fails_the_endpoints() {
    if !available() {
        return;
    }
    let mut child = Child::spawn();
    let mut a = open_seg("auto");
    let (ep1, ep2) = (child.ep(&mut *a), child.ep(&mut *a));
    let local = Region::new(&[0; 16], Access::empty());
    let iov = [local.iov(0, 16)];
    let rw = child.rw.clone();
    let at = child.base + GUARD as u64;
    rma(&mut *a, ep1, false, &iov, at, &rw).unwrap();
    a.pending_add(ep1, Token(1)).unwrap();
    let peer = child.peer();
    child.kill();
    assert!(!peer.is_alive());
    for put in [false, true, false] {
        let e = rma(&mut *a, ep1, put, &iov, at, &rw).unwrap_err();
        assert_eq!(e.status(), Status::ConnectionReset, "{e}");
        assert!(
            matches!(
                &e,
                uct::Error::EndpointFailed { transport, cause: uct::ucs::EndpointCause::Other(why) }
                    if transport == "cma" && why.contains("exited")
            ),
            "{e}"
        );
    }
    assert!(a.pending_add(ep1, Token(2)).is_err());
    assert!(a.flush(Some(ep1), Token(3)).is_err());
    let mut sink = TestSink::new();
    a.progress(&mut sink);
    match &sink.events[..] {
        [Event::EpFailed { ep, .. }, Event::PendingReady {
            ep: p,
            token: Token(1),
        }] if *ep == ep1 && *p == ep1 => {}
        e => panic!("{e:?}"),
    }
    std::thread::sleep(LIVENESS_PERIOD);
    for _ in 0..2 * super::super::iface::CLOCK_EVERY {
        a.progress(&mut sink);
    }
    assert_eq!((sink.ep_failures(ep1), sink.ep_failures(ep2)), (1, 1));
    let e = a.ep_create(&child.dev, &child.iface).unwrap_err();
    assert_eq!(e.status(), Status::Unreachable);
    a.ep_destroy(ep1);
    a.ep_destroy(ep2);
}
