//! One-sided operations from several processes on one process's memory:
//! concurrent fetch-and-add, posted adds and compare-and-swap loops give
//! exactly the arithmetic result, and each child's puts and gets of its own
//! region come back intact. Over shared memory and over TCP.
//!
//! The test binary starts itself again as the children (see `common`).

mod common;

use common::*;
use rucx::{Access, AtomicOp, AtomicValue, Op, Posted};
use std::time::{Duration, Instant};

const CHILDREN: usize = 3;
const ADDS: u64 = 2000;
const CSWAPS: u64 = 300;
const REGION: usize = 8192;

/// Child side: the operations on the parent's memory.
#[test]
fn rma_child() {
    if !is_child() {
        return;
    }
    let var = |k: &str| std::env::var(k).unwrap_or_else(|_| panic!("{k}"));
    let ctx = context(&var("RUCX_TEST_TLS"));
    let mut w = ctx.create_worker().expect("worker");
    let ep = w.connect(&unhex(&var("RUCX_TEST_PEER"))).expect("connect");
    let rkey = w
        .rkey_unpack(ep, &unhex(&var("RUCX_TEST_RKEY")))
        .expect("rkey");
    let base: u64 = var("RUCX_TEST_ADDR").parse().expect("address");
    let me: usize = var("RUCX_TEST_INDEX").parse().expect("index");
    for _ in 0..ADDS {
        w.atomic_blocking(ep, AtomicOp::Add, AtomicValue::U64(1), 0, base, &rkey)
            .expect("fetch-add");
        match w
            .atomic_post(
                ep,
                AtomicOp::Add,
                AtomicValue::U32(1),
                base + 8,
                &rkey,
                Op::new(),
            )
            .expect("add")
        {
            Posted::InFlight(id) => w.request_release(id),
            Posted::Done(..) => {}
        }
    }
    // Increment by compare-and-swap: retry until our compare wins.
    for _ in 0..CSWAPS {
        let mut seen = 0u64;
        loop {
            let old = w
                .atomic_blocking(
                    ep,
                    AtomicOp::Cswap,
                    AtomicValue::U64(seen + 1),
                    seen,
                    base + 16,
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
    let at = base + (REGION * (me + 1)) as u64;
    let data = pattern(REGION, me as u64);
    w.put_blocking(ep, &data, at, &rkey).expect("put");
    let mut back = vec![0u8; REGION];
    w.get_blocking(ep, &mut back, at, &rkey).expect("get");
    assert!(back == data, "child {me}: get returned other bytes");
    w.ep_flush(ep).expect("flush");
    println!("child done");
}

fn contention(tls: &str) {
    let ctx = context(tls);
    let mut w = ctx.create_worker().expect("worker");
    let all = Access::REMOTE_READ | Access::REMOTE_WRITE | Access::REMOTE_ATOMIC;
    let m = ctx
        .mem_alloc(REGION * (CHILDREN + 1), all)
        .expect("mem_alloc");
    let packed = m.rkey_pack().expect("pack");
    let mut kids: Vec<ChildGuard> = (0..CHILDREN)
        .map(|i| {
            spawn_child(
                "rma_child",
                &[
                    ("RUCX_TEST_TLS", tls.to_string()),
                    ("RUCX_TEST_PEER", hex(&w.address())),
                    ("RUCX_TEST_RKEY", hex(&packed)),
                    ("RUCX_TEST_ADDR", m.addr().to_string()),
                    ("RUCX_TEST_INDEX", i.to_string()),
                ],
            )
        })
        .collect();
    let done: Vec<_> = kids
        .iter_mut()
        .map(|k| watch_stdout(k, "child done"))
        .collect();
    // The children's operations are executed by this worker: progress
    // until every child has finished and exited.
    let deadline = Instant::now() + Duration::from_secs(120);
    let mut exited = [None; CHILDREN];
    while exited.iter().any(Option::is_none) {
        assert!(Instant::now() < deadline, "{tls}: children did not finish");
        w.progress();
        for (i, k) in kids.iter_mut().enumerate() {
            if exited[i].is_none() {
                exited[i] = k.0.try_wait().expect("try_wait");
            }
        }
    }
    for (i, st) in exited.iter().enumerate() {
        assert!(
            st.is_some_and(|s| s.success()),
            "{tls}: child {i} failed: {st:?}"
        );
        // The line may still be on its way through the reader thread.
        assert!(
            done[i].recv_timeout(Duration::from_secs(10)).is_ok(),
            "{tls}: child {i} did not report"
        );
    }
    let n = CHILDREN as u64;
    assert_eq!(
        m.load_u64(0).unwrap(),
        n * ADDS,
        "{tls}: fetch-and-add total"
    );
    let mut w32 = [0u8; 4];
    m.read(8, &mut w32).unwrap();
    assert_eq!(
        u64::from(u32::from_le_bytes(w32)),
        n * ADDS,
        "{tls}: 32-bit add total"
    );
    assert_eq!(
        m.load_u64(16).unwrap(),
        n * CSWAPS,
        "{tls}: compare-and-swap total"
    );
    for i in 0..CHILDREN {
        let mut got = vec![0u8; REGION];
        m.read(REGION * (i + 1), &mut got).unwrap();
        assert!(
            got == pattern(REGION, i as u64),
            "{tls}: region of child {i}"
        );
    }
}

#[test]
fn atomics_from_several_processes_over_shm() {
    if is_child() {
        return;
    }
    contention("shm");
}

#[test]
fn atomics_from_several_processes_over_tcp() {
    if is_child() {
        return;
    }
    contention("tcp");
}
