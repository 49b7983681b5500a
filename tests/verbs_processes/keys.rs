//! Forged and stale keys between two processes over `rc_verbs`: the
//! target's device refuses the access (a remote access error at the
//! initiator) and the target finds its memory untouched.
//!
//! As the RC transport documents, the refusal ends the connection between
//! the two ifaces, so the endpoint fails (and every endpoint between the
//! two workers with it): later operations on it fail, a new endpoint to
//! the same worker works, and endpoints to other workers are unaffected.

use crate::common::*;
use crate::ctl::*;
use rucx::{Access, AtomicOp, AtomicValue, Ep, Error, Op, Posted, Rkey, Worker};
use std::time::{Duration, Instant};

const ALL: Access = Access::REMOTE_READ
    .union(Access::REMOTE_WRITE)
    .union(Access::REMOTE_ATOMIC);

/// 64 bytes of memory that outlive any map of them, 8-byte aligned.
fn backing() -> *mut u8 {
    Box::leak(Box::new([0u64; 8])).as_mut_ptr().cast()
}

/// The initial contents of region `i` of the target.
fn initial(i: u64) -> Vec<u8> {
    pattern(64, 50 + i)
}

/// The target: maps a read-only region (1), a region with every right
/// (2), one it unmaps when told (3) and a scratch region (4) for the
/// operations that must work; progresses until told to check its memory.
#[test]
fn target() {
    if !is_child() {
        return;
    }
    let cmds = commands();
    let ctx = verbs_context();
    let mut w = ctx.create_worker().expect("worker");
    let mut info = vec![hex(&w.address())];
    let mut maps = Vec::new();
    let mut ptrs = Vec::new();
    for (i, access) in [(1, Access::REMOTE_READ), (2, ALL), (3, ALL), (4, ALL)] {
        let p = backing();
        // SAFETY: `p` is 64 bytes, never freed; touched only through the
        // map while mapped, and read below after it was unmapped.
        let m = unsafe { ctx.mem_map(p, 64, access) }.expect("mem_map");
        m.write(0, &initial(i)).expect("write");
        info.push(hex(&m.rkey_pack().expect("pack")));
        info.push(m.addr().to_string());
        maps.push(Some(m));
        ptrs.push(p);
    }
    say("info", &info.join(" "));
    let ppid = std::os::unix::process::parent_id();
    loop {
        w.progress();
        match cmds.try_recv().as_deref() {
            Ok("unmap") => {
                maps[2].take().expect("mapped").unmap().expect("unmap");
                say("unmapped", "");
            }
            Ok("check") => break,
            Ok(c) => panic!("unknown command {c}"),
            Err(_) => {}
        }
        if std::os::unix::process::parent_id() != ppid {
            std::process::exit(3);
        }
    }
    for (i, p) in ptrs.iter().enumerate().take(3) {
        let mut seen = [0u8; 64];
        for (j, b) in seen.iter_mut().enumerate() {
            // SAFETY: 64 bytes of leaked memory; no operation on them is
            // in flight (the initiator's all ended).
            *b = unsafe { p.add(j).read_volatile() };
        }
        assert_eq!(
            seen[..],
            initial(i as u64 + 1)[..],
            "region {} was written",
            i + 1
        );
    }
    say("untouched", "regions 1 2 3");
}

/// Progresses `ws` until the operation ends (30 s at most).
fn finish(ws: &mut [&mut Worker], p: rucx::Result<Posted<()>>) -> rucx::Result<()> {
    let id = match p? {
        Posted::Done(..) => return Ok(()),
        Posted::InFlight(id) => id,
    };
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        if let Some(r) = ws[0].request_test(id) {
            return r.map(|_| ());
        }
        assert!(Instant::now() < deadline, "an operation hangs");
        for w in ws.iter_mut() {
            w.progress();
        }
    }
}

/// An operation on `ep`: put, get or an atomic, at `addr` with `k`.
#[derive(Clone, Copy, Debug)]
enum Kind {
    Put,
    Get,
    FetchAdd,
    Cswap,
}

fn run(w: &mut Worker, ep: Ep, kind: Kind, addr: u64, k: &Rkey) -> rucx::Result<()> {
    let data = [0xeeu8; 8];
    let mut buf = [0u8; 8];
    let mut old = 0u64;
    // SAFETY: the buffers outlive the operation, which `finish` ends.
    let p = unsafe {
        match kind {
            Kind::Put => w.put_raw(ep, data.as_ptr(), 8, addr, k, Op::new()),
            Kind::Get => w.get_raw(ep, buf.as_mut_ptr(), 8, addr, k, Op::new()),
            Kind::FetchAdd => {
                let v = AtomicValue::U64(1);
                w.atomic_fetch_raw(ep, AtomicOp::Add, v, 0, &mut old, addr, k, Op::new())
            }
            Kind::Cswap => {
                let v = AtomicValue::U64(9);
                w.atomic_fetch_raw(ep, AtomicOp::Cswap, v, 0, &mut old, addr, k, Op::new())
            }
        }
    };
    finish(&mut [w], p)
}

/// Where the RC domain's key ("rcmk", 32 bytes) sits in a packed key.
fn rc_key_at(packed: &[u8]) -> usize {
    packed
        .windows(4)
        .position(|w| w == b"rcmk")
        .expect("an rc key in the packed key")
}

/// The declared range and rights widened, in the protocol layer's key
/// (which the initiator checks) and in the RC domain's (which names the
/// region to the device, and which the device ignores).
fn widen(packed: &mut [u8]) {
    packed[40..48].copy_from_slice(&(1u64 << 40).to_le_bytes());
    packed[48..52].copy_from_slice(&ALL.bits().to_le_bytes());
    let at = rc_key_at(packed);
    packed[at + 20..at + 28].copy_from_slice(&(1u64 << 40).to_le_bytes());
    packed[at + 28..at + 32].copy_from_slice(&ALL.bits().to_le_bytes());
}

/// The device's key (the rkey, little-endian after "rcmk", version and
/// three reserved bytes) with `byte` of it XORed with `x`: byte 0 is the
/// key part of an rxe rkey, bytes 1-3 the region's index.
fn other_rkey(byte: usize, x: u8) -> impl Fn(&mut [u8]) {
    move |packed: &mut [u8]| {
        let at = rc_key_at(packed);
        packed[at + 8 + byte] ^= x;
    }
}

#[test]
fn rc_verbs_forged_and_stale_keys_across_processes() {
    if is_child() || rc_verbs().is_none() {
        return;
    }
    let ctx = verbs_context();
    let mut w = ctx.create_worker().expect("worker");
    // Another worker, reached over its own connection.
    let mut other = ctx.create_worker().expect("worker");
    let om = ctx.mem_alloc(64, ALL).expect("mem_alloc");
    let eo = w.connect(&other.address()).expect("connect");
    let ok = w.rkey_unpack(eo, &om.rkey_pack().unwrap()).expect("rkey");
    let mut t = Ctl::spawn("keys::target", "target", &[]);
    let info = t.expect("info", 120);
    let f = fields(&info);
    let taddr = unhex(f[0]);
    let region = |i: usize| (unhex(f[2 * i - 1]), f[2 * i].parse::<u64>().expect("addr"));
    let widened: &dyn Fn(&mut [u8]) = &widen;
    let key_byte = other_rkey(0, 0x01);
    let index = other_rkey(1, 0x5a);
    let high_key = other_rkey(0, 0x80);
    let same: &dyn Fn(&mut [u8]) = &|_: &mut [u8]| {};
    // (what, region, forgery, operation, offset from the region's start)
    type Forge<'a> = &'a dyn Fn(&mut [u8]);
    let cases: [(&str, usize, Forge, Kind, u64); 9] = [
        ("rights widened", 1, widened, Kind::Put, 0),
        ("rights widened", 1, widened, Kind::FetchAdd, 0),
        ("range widened", 1, widened, Kind::Get, 4096),
        ("another key byte", 2, &key_byte, Kind::Put, 0),
        ("another key byte", 2, &high_key, Kind::Cswap, 0),
        ("another region index", 2, &index, Kind::FetchAdd, 8),
        ("stale", 3, same, Kind::Get, 0),
        ("stale", 3, same, Kind::Put, 0),
        ("stale", 3, same, Kind::FetchAdd, 0),
    ];
    let (key4, addr4) = region(4);
    let mut unmapped = false;
    for (n, (what, r, forge, kind, off)) in cases.into_iter().enumerate() {
        if what == "stale" && !unmapped {
            t.tell("unmap");
            t.expect_progressing("unmapped", &mut w, 30);
            unmapped = true;
        }
        // A working endpoint: a new one after each failure.
        let ep = w.connect(&taddr).expect("connect");
        let k4 = w.rkey_unpack(ep, &key4).expect("rkey");
        let data = pattern(64, n as u64);
        // SAFETY: `data` outlives the operation, which `finish` ends.
        let p = unsafe { w.put_raw(ep, data.as_ptr(), 64, addr4, &k4, Op::new()) };
        finish(&mut [&mut w], p).unwrap_or_else(|e| panic!("case {n}: put on a new endpoint: {e}"));
        let mut back = vec![0u8; 64];
        // SAFETY: as above.
        let p = unsafe { w.get_raw(ep, back.as_mut_ptr(), 64, addr4, &k4, Op::new()) };
        finish(&mut [&mut w], p).expect("get on a new endpoint");
        assert!(back == data, "case {n}: get read other bytes");

        let (mut packed, addr) = region(r);
        forge(&mut packed);
        let k = w.rkey_unpack(ep, &packed).expect("unpack");
        let res = run(&mut w, ep, kind, addr + off, &k);
        assert!(
            matches!(res, Err(Error::RemoteAccess { .. })),
            "{what} key, {kind:?}: expected a remote access error, got {res:?}"
        );
        println!("{what} key, {kind:?}: {}", res.unwrap_err());
        // The connection ended: the endpoint failed, later operations on
        // it fail.
        let deadline = Instant::now() + Duration::from_secs(10);
        while w.ep_status(ep).is_ok() {
            assert!(Instant::now() < deadline, "case {n}: the endpoint works on");
            w.progress();
        }
        let later = run(&mut w, ep, Kind::Get, addr4, &k4);
        assert!(
            later.is_err(),
            "case {n}: a get on the failed endpoint succeeded"
        );
        // Another worker's endpoint is unaffected.
        // SAFETY: `data` outlives the operation, which `finish` ends.
        let p = unsafe { w.put_raw(eo, data.as_ptr(), 64, om.addr(), &ok, Op::new()) };
        finish(&mut [&mut w, &mut other], p).expect("put to the other worker");
        let mut seen = vec![0u8; 64];
        om.read(0, &mut seen).unwrap();
        assert!(seen == data, "case {n}: the other worker's memory");
        let _ = w.ep_close(ep);
    }
    t.tell("check");
    let v = t.expect_progressing("untouched", &mut w, 30);
    println!("target: untouched: {v}");
    t.exits_ok(&mut w, 30);
}
