//! A peer killed (`kill -9`) in the middle of a transfer over `rc_verbs`:
//! a get from its memory, a put into it, and a tag rendezvous either way
//! (the receiver reads the message by RDMA READ). The kill comes once the
//! first bytes have landed (in the survivor's buffer, or for a put or a
//! send in the victim's, which says so), while the rest are on their way. The survivor's request ends with an error within
//! seconds, nothing writes into its buffer afterwards, later operations
//! on the endpoint fail, and its endpoint to another worker works on.

use crate::common::*;
use crate::ctl::*;
use rucx::{Access, Ep, MemMap, Op, Posted, Rkey, Worker, TAG_MASK_ALL};
use std::time::{Duration, Instant};

/// Large enough that the transfer takes a while after its first bytes
/// (soft-RoCE in the guest moves tens of MB/s).
const BIG: usize = 32 << 20;
const TAG: u64 = 5;
/// The bytes of the victim's window.
const VICTIM: u8 = 0x5a;
const RW: Access = Access::REMOTE_READ.union(Access::REMOTE_WRITE);

/// A volatile copy of `len` bytes at `p`, which a device may be writing.
fn peek(p: *const u8, len: usize) -> Vec<u8> {
    // SAFETY: the callers pass buffers of at least `len` bytes that live
    // as long as the process or the test; volatile byte reads race with
    // nothing but the device's writes.
    (0..len)
        .map(|i| unsafe { p.add(i).read_volatile() })
        .collect()
}

/// The victim: maps a window of [`VICTIM`] bytes, connects to the parent,
/// says how to reach the window; in mode `rndv_recv` sends the window as
/// one tagged message, in mode `rndv_send` receives one into it; in modes
/// `put` and `rndv_send` says when the parent's bytes start to land.
/// Progresses until killed.
#[test]
fn victim() {
    if !is_child() {
        return;
    }
    let mode = var("RUCX_TEST_MODE");
    let ctx = verbs_context();
    let mut w = ctx.create_worker().expect("worker");
    let ep = w.connect(&unhex(&var("RUCX_TEST_PEER"))).expect("connect");
    let window: *mut u8 = Box::leak(vec![VICTIM; BIG].into_boxed_slice()).as_mut_ptr();
    // SAFETY: leaked, so valid for the process; reached only through the
    // map, the send below and volatile reads.
    let m = unsafe { ctx.mem_map(window, BIG, RW) }.expect("mem_map");
    let key = m.rkey_pack().expect("pack");
    say(
        "info",
        &format!("{} {} {}", hex(&w.address()), hex(&key), m.addr()),
    );
    // SAFETY: the window is never freed; this process does not write it.
    let p = unsafe {
        match mode.as_str() {
            "rndv_recv" => Some(w.tag_send_raw(ep, window, BIG, TAG, Op::new())),
            "rndv_send" => Some(w.tag_recv_raw(window, BIG, TAG, TAG_MASK_ALL, Op::new())),
            _ => None,
        }
    };
    if let Some(p) = p {
        assert!(matches!(p, Ok(Posted::InFlight(_))), "{mode}: {p:?}");
    }
    // Whether the parent's bytes land in the window (it waits to hear so).
    let written = mode == "put" || mode == "rndv_send";
    let first = peek(window, 8);
    let mut told = false;
    let ppid = std::os::unix::process::parent_id();
    loop {
        for _ in 0..100 {
            w.progress();
        }
        if written && !told && peek(window, 8) != first {
            say("landing", "");
            told = true;
        }
        if std::os::unix::process::parent_id() != ppid {
            std::process::exit(3);
        }
    }
}

/// A worker of the survivor's other than the one whose peer dies, and its
/// memory: a put, a get and a tagged message to it must work.
struct Other {
    w: Worker,
    ep: Ep,
    m: MemMap,
    k: Rkey,
}

impl Other {
    fn new(ctx: &rucx::Context, w: &mut Worker) -> Other {
        let mut o = ctx.create_worker().expect("worker");
        let m = ctx.mem_alloc(65536, RW).expect("mem_alloc");
        let ep = w.connect(&o.address()).expect("connect");
        let _back = o.connect(&w.address()).expect("connect back");
        let k = w.rkey_unpack(ep, &m.rkey_pack().unwrap()).expect("rkey");
        Other { w: o, ep, m, k }
    }

    /// Puts, gets and sends 64 KiB to the other worker, checking the bytes.
    fn works(&mut self, w: &mut Worker, seed: u64) {
        let data = pattern(65536, seed);
        let o = &mut self.w;
        // SAFETY: `data` outlives the request, which the loop ends.
        let p = unsafe {
            w.put_raw(
                self.ep,
                data.as_ptr(),
                data.len(),
                self.m.addr(),
                &self.k,
                Op::new(),
            )
        };
        wait(w, o, p.expect("put"), "put to the other worker");
        let mut back = vec![0u8; data.len()];
        // SAFETY: as above.
        let p = unsafe {
            w.get_raw(
                self.ep,
                back.as_mut_ptr(),
                back.len(),
                self.m.addr(),
                &self.k,
                Op::new(),
            )
        };
        wait(w, o, p.expect("get"), "get from the other worker");
        assert!(back == data, "get from the other worker read other bytes");
        let mut got = vec![0u8; data.len()];
        // SAFETY: as above.
        let r =
            unsafe { o.tag_recv_raw(got.as_mut_ptr(), got.len(), TAG, TAG_MASK_ALL, Op::new()) };
        let s = w
            .tag_send(self.ep, data.clone(), TAG, Op::new())
            .expect("send");
        if let Posted::InFlight(id) = s {
            wait(w, o, Posted::InFlight(id), "send to the other worker");
        }
        if let Posted::InFlight(id) = r.expect("recv") {
            wait(o, w, Posted::InFlight(id), "receive from the first worker");
        }
        assert!(got == data, "the message to the other worker");
    }
}

/// Progresses `a` and `b` until `p` (of `a`) ends, successfully.
fn wait(a: &mut Worker, b: &mut Worker, p: Posted<()>, what: &str) {
    let Posted::InFlight(id) = p else { return };
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        if let Some(r) = a.request_test(id) {
            r.unwrap_or_else(|e| panic!("{what}: {e}"));
            return;
        }
        assert!(Instant::now() < deadline, "{what}: hangs");
        a.progress();
        b.progress();
    }
}

fn killed_mid(mode: &str) {
    let ctx = verbs_context();
    let mut w = ctx.create_worker().expect("worker");
    let mut other = Other::new(&ctx, &mut w);
    other.works(&mut w, 1);
    let mut v = Ctl::spawn(
        "peer_death::victim",
        "victim",
        &[
            ("RUCX_TEST_PEER", hex(&w.address())),
            ("RUCX_TEST_MODE", mode.to_string()),
        ],
    );
    let info = v.expect_progressing("info", &mut w, 120);
    let f = fields(&info);
    let ep = w.connect(&unhex(f[0])).expect("connect to the victim");
    let rkey = w.rkey_unpack(ep, &unhex(f[1])).expect("rkey");
    let raddr: u64 = f[2].parse().expect("address");
    // What the buffer holds before: the data of a put or send, or bytes
    // the victim's window does not hold.
    let writes = mode == "put" || mode == "rndv_send";
    let fill = vec![if writes { 0x33 } else { 0xaa }; BIG];
    let mut buf = fill.clone();
    let bp = buf.as_mut_ptr();
    // SAFETY: `buf` is not touched but through `bp` until the request
    // ended, and lives until the end of the test.
    let p = unsafe {
        match mode {
            "get" => w.get_raw(ep, bp, BIG, raddr, &rkey, Op::new()),
            "put" => w.put_raw(ep, bp, BIG, raddr, &rkey, Op::new()),
            "rndv_send" => w.tag_send_raw(ep, bp, BIG, TAG, Op::new()),
            _ => w.tag_recv_raw(bp, BIG, TAG, TAG_MASK_ALL, Op::new()),
        }
    }
    .expect("post");
    let Posted::InFlight(id) = p else {
        panic!("{mode}: done at once")
    };
    // Under way: the first bytes landed, the request is not over.
    let t = Instant::now();
    loop {
        assert!(
            w.request_is_active(id),
            "{mode}: {BIG} bytes moved before the kill could come"
        );
        let landed = if writes {
            v.poll("landing").is_some()
        } else {
            // Several places, not just the start: the reads of a
            // rendezvous (over two devices, one half each) need not land
            // in order, and the first bytes may come last.
            (0..16).any(|i| {
                let at = i * (BIG / 16);
                // SAFETY: inside `buf`, see `peek`.
                peek(unsafe { bp.add(at) }, 64) != fill[at..at + 64]
            })
        };
        if landed {
            break;
        }
        assert!(
            t.elapsed() < Duration::from_secs(60),
            "{mode}: nothing moves"
        );
        w.progress();
    }
    v.child.kill().expect("kill");
    let killed = Instant::now();
    let _ = v.child.wait();
    let r = loop {
        if let Some(r) = w.request_test(id) {
            break r;
        }
        assert!(
            killed.elapsed() < Duration::from_secs(60),
            "{mode}: the request hangs after the kill"
        );
        w.progress();
    };
    let took = killed.elapsed();
    let e = match r {
        // A receive by rendezvous reads the victim's memory, which its
        // device serves until the process's teardown closes the queue
        // pair: the rest of the message may still land after the kill.
        // Then every byte must be the victim's, and nothing is cut.
        Ok(info) if mode == "rndv_recv" => {
            assert_eq!(info.length, BIG, "{mode}: a short message reported whole");
            assert!(
                buf.iter().all(|&b| b == VICTIM),
                "{mode}: a message reported whole with bytes that are not the sender's"
            );
            println!(
                "rc_verbs {mode}: completed {took:?} after the kill, every byte the sender's \
                 (its device served the reads before the teardown)"
            );
            other.works(&mut w, 2);
            assert_eq!(w.requests_outstanding(), 0, "{mode}: requests left behind");
            return;
        }
        r => r.expect_err("a transfer cut by the kill succeeded"),
    };
    // The request is over: `buf` is read directly (and copied and
    // compared whole, which a volatile byte loop would make slow in the
    // guest); the worker may write it, as far as the compiler knows.
    let now = buf.clone();
    let page = &fill[..4096];
    let moved = now.chunks(4096).filter(|c| *c != page).count();
    println!(
        "rc_verbs {mode}: failed {took:?} after the kill ({moved} of {} pages of the buffer changed): {e}",
        BIG / 4096
    );
    // Nothing writes the buffer afterwards.
    progress_for(&mut w, 1000);
    assert!(
        buf == now,
        "{mode}: the buffer was written after the failure"
    );
    if writes {
        assert!(now == fill, "{mode}: its source was written");
    }
    // The endpoint failed: later operations on it fail.
    let deadline = Instant::now() + Duration::from_secs(10);
    while w.ep_status(ep).is_ok() {
        assert!(Instant::now() < deadline, "{mode}: the endpoint works on");
        w.progress();
    }
    let mut small = [0u8; 8];
    // SAFETY: `small` outlives the request, which ends below or at once.
    let later = unsafe { w.get_raw(ep, small.as_mut_ptr(), 8, raddr, &rkey, Op::new()) };
    match later {
        Err(_) => {}
        Ok(Posted::Done(..)) => panic!("{mode}: a get on the failed endpoint succeeded"),
        Ok(Posted::InFlight(id)) => {
            let r = loop {
                if let Some(r) = w.request_test(id) {
                    break r;
                }
                assert!(
                    killed.elapsed() < Duration::from_secs(90),
                    "a later get hangs"
                );
                w.progress();
            };
            assert!(r.is_err(), "{mode}: a get on the failed endpoint succeeded");
        }
    }
    other.works(&mut w, 2);
    assert_eq!(w.requests_outstanding(), 0, "{mode}: requests left behind");
}

#[test]
fn rc_verbs_peer_killed_mid_get() {
    if is_child() || rc_verbs().is_none() {
        return;
    }
    killed_mid("get");
}

#[test]
fn rc_verbs_peer_killed_mid_put() {
    if is_child() || rc_verbs().is_none() {
        return;
    }
    killed_mid("put");
}

#[test]
fn rc_verbs_peer_killed_mid_rendezvous_receive() {
    if is_child() || rc_verbs().is_none() {
        return;
    }
    killed_mid("rndv_recv");
}

#[test]
fn rc_verbs_peer_killed_mid_rendezvous_send() {
    if is_child() || rc_verbs().is_none() {
        return;
    }
    killed_mid("rndv_send");
}
