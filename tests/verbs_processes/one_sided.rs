//! Puts, gets and device atomics from several processes on memory of a
//! process that does not call `progress` while they run: over `rc_verbs`
//! the NIC executes them (RDMA WRITE, READ, fetch-and-add and
//! compare-and-swap). Only the connections need the target: it accepts
//! them in `progress` before it stops.

use crate::common::*;
use crate::ctl::*;
use rucx::{Access, AtomicOp, AtomicValue, Op, Posted, TAG_MASK_ALL};
use std::time::{Duration, Instant};

const CHILDREN: usize = 3;
/// Fetch-and-adds of 1, and posted adds of 3, by each child.
const FADDS: u64 = 150;
const CSWAPS: u64 = 40;
const REGION: usize = 8192;
const HELLO: u64 = 7;
/// Offsets of the words of the fetch-and-adds, the posted adds and the
/// compare-and-swaps.
const FADD_AT: u64 = 0;
const ADD_AT: u64 = 8;
const CSWAP_AT: u64 = 16;
/// The region every child reads, written by the target before.
const SHARED_AT: usize = REGION;

/// Region of child `i`'s puts.
fn own_at(i: usize) -> usize {
    REGION * (2 + i)
}

/// A child: connects, says hello and waits for `go`; then its operations,
/// each completed before the next (atomics) or flushed (posted adds), and
/// the values its fetch-and-adds fetched.
#[test]
fn initiator() {
    if !is_child() {
        return;
    }
    let cmds = commands();
    let ctx = verbs_context();
    let mut w = ctx.create_worker().expect("worker");
    let ep = w.connect(&unhex(&var("RUCX_TEST_PEER"))).expect("connect");
    let rkey = w
        .rkey_unpack(ep, &unhex(&var("RUCX_TEST_RKEY")))
        .expect("rkey");
    assert!(rkey.atomics_by_device(), "device memory");
    let base: u64 = var("RUCX_TEST_ADDR").parse().expect("address");
    let me: usize = var("RUCX_TEST_INDEX").parse().expect("index");
    // The hello goes once the connection is up, which takes this
    // worker's progress (the connection manager's events) and the
    // target's (it accepts).
    w.tag_send_blocking(ep, &[me as u8], HELLO).expect("hello");
    say("ready", "");
    let go = loop {
        match cmds.try_recv() {
            Ok(c) => break c,
            Err(_) => w.progress(),
        };
    };
    assert_eq!(go, "go");
    let t = Instant::now();
    let mut fetched = Vec::new();
    for i in 0..FADDS {
        let old = w
            .atomic_blocking(
                ep,
                AtomicOp::Add,
                AtomicValue::U64(1),
                0,
                base + FADD_AT,
                &rkey,
            )
            .unwrap_or_else(|e| panic!("fetch-add {i}: {e}"))
            .as_u64();
        fetched.push(old);
        let p = w
            .atomic_post(
                ep,
                AtomicOp::Add,
                AtomicValue::U64(3),
                base + ADD_AT,
                &rkey,
                Op::new(),
            )
            .unwrap_or_else(|e| panic!("add {i}: {e}"));
        if let Posted::InFlight(id) = p {
            w.request_release(id);
        }
    }
    // Increments by compare-and-swap: retried until the compare wins.
    for _ in 0..CSWAPS {
        let mut seen = 0u64;
        loop {
            let old = w
                .atomic_blocking(
                    ep,
                    AtomicOp::Cswap,
                    AtomicValue::U64(seen + 1),
                    seen,
                    base + CSWAP_AT,
                    &rkey,
                )
                .expect("cswap")
                .as_u64();
            if old == seen {
                break;
            }
            seen = old;
        }
    }
    let data = pattern(REGION, me as u64);
    let at = base + own_at(me) as u64;
    w.put_blocking(ep, &data, at, &rkey).expect("put");
    let mut back = vec![0u8; REGION];
    w.get_blocking(ep, &mut back, at, &rkey).expect("get");
    assert!(back == data, "child {me}: get of its put read other bytes");
    let mut shared = vec![0u8; REGION];
    w.get_blocking(ep, &mut shared, base + SHARED_AT as u64, &rkey)
        .expect("get");
    assert!(
        shared == pattern(REGION, 100),
        "child {me}: get of the target's region read other bytes"
    );
    w.ep_flush(ep).expect("flush");
    let list: Vec<String> = fetched.iter().map(u64::to_string).collect();
    say("fetched", &list.join(" "));
    say("done", &format!("{:?}", t.elapsed()));
    assert_eq!(cmds.recv().expect("a command"), "exit");
}

#[test]
fn rc_verbs_one_sided_without_target_progress() {
    if is_child() || rc_verbs().is_none() {
        return;
    }
    let ctx = verbs_context();
    let mut w = ctx.create_worker().expect("worker");
    let all = Access::REMOTE_READ | Access::REMOTE_WRITE | Access::REMOTE_ATOMIC;
    let m = ctx
        .mem_alloc(REGION * (CHILDREN + 2), all)
        .expect("mem_alloc");
    m.write(SHARED_AT, &pattern(REGION, 100)).expect("write");
    let packed = m.rkey_pack().expect("pack");
    let mut kids: Vec<Ctl> = (0..CHILDREN)
        .map(|i| {
            Ctl::spawn(
                "one_sided::initiator",
                &format!("initiator {i}"),
                &[
                    ("RUCX_TEST_PEER", hex(&w.address())),
                    ("RUCX_TEST_RKEY", hex(&packed)),
                    ("RUCX_TEST_ADDR", m.addr().to_string()),
                    ("RUCX_TEST_INDEX", i.to_string()),
                ],
            )
        })
        .collect();
    // Accept the connections: every child's hello arrives.
    for k in &kids {
        k.expect_progressing("ready", &mut w, 120);
    }
    for _ in 0..CHILDREN {
        let mut b = [0u8; 1];
        w.tag_recv_blocking(&mut b, HELLO, TAG_MASK_ALL)
            .expect("hello");
    }
    // From here until the checks, this process calls no progress.
    for k in &mut kids {
        k.tell("go");
    }
    let t = Instant::now();
    let mut fetched = Vec::new();
    for k in &kids {
        let f = k.expect("fetched", 300);
        fetched.extend(
            fields(&f)
                .iter()
                .map(|v| v.parse::<u64>().expect("a number")),
        );
        k.expect("done", 60);
    }
    println!(
        "rc_verbs: {CHILDREN} initiators done in {:?} without the target's progress",
        t.elapsed()
    );
    let n = CHILDREN as u64;
    fetched.sort_unstable();
    assert!(
        fetched.iter().copied().eq(0..n * FADDS),
        "the fetch-and-adds fetched each value once"
    );
    assert_eq!(
        m.load_u64(FADD_AT as usize).unwrap(),
        n * FADDS,
        "fetch-add total"
    );
    assert_eq!(
        m.load_u64(ADD_AT as usize).unwrap(),
        3 * n * FADDS,
        "add total"
    );
    assert_eq!(
        m.load_u64(CSWAP_AT as usize).unwrap(),
        n * CSWAPS,
        "cswap total"
    );
    let mut seen = vec![0u8; REGION];
    for i in 0..CHILDREN {
        m.read(own_at(i), &mut seen).unwrap();
        assert!(seen == pattern(REGION, i as u64), "region of child {i}");
    }
    m.read(SHARED_AT, &mut seen).unwrap();
    assert!(seen == pattern(REGION, 100), "the region read by all");
    let mut word = [0u8; 8];
    m.read(24, &mut word).unwrap();
    assert_eq!(word, [0; 8], "the word after the counters");
    for k in &mut kids {
        k.tell("exit");
    }
    let deadline = Instant::now() + Duration::from_secs(60);
    for k in &mut kids {
        let left = deadline.saturating_duration_since(Instant::now()).as_secs();
        k.exits_ok(&mut w, left.max(1));
    }
}
