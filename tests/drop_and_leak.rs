//! Requests dropped, leaked and abandoned at random points never let a
//! transfer touch freed memory.
//!
//! `random_drops_and_leaks` runs the workload directly; under
//! `valgrind_memcheck` the same workload runs in a child process under
//! valgrind's memcheck, which fails on any read or write of freed or
//! unallocated memory. Without valgrind that test prints `skipped: ...`, or
//! fails when `RUCX_REQUIRE_ALL=1`.

mod common;

use common::*;
use rucx::{Op, Posted, Worker, TAG_MASK_ALL};
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};

const SIZES: [usize; 5] = [0, 24, 9000, 70_000, 300_000];

/// The tag of scoped sends, which nothing else sends or receives.
const SCOPED_TAG: u64 = 200;

/// One round: random operations between two workers, with every kind of
/// early exit a safe caller can take.
fn round(rng: &mut Rng, a: &mut Worker, b: &mut Worker, ab: rucx::Ep) {
    let mut owned = Vec::new();
    for _ in 0..40 {
        let size = SIZES[rng.below(SIZES.len() as u64) as usize];
        let tag = rng.below(4);
        match rng.below(6) {
            0 => {
                // Owned send: taken, released, or simply never collected.
                if let Ok(Posted::InFlight(id)) =
                    a.tag_send(ab, vec![tag as u8; size], tag, Op::new())
                {
                    owned.push((id, rng.below(3)));
                }
            }
            1 => {
                if let Ok(Posted::InFlight(id)) =
                    b.tag_recv(vec![0u8; size], tag, TAG_MASK_ALL, Op::new())
                {
                    owned.push((id, rng.below(3)));
                }
            }
            2 => {
                // Scoped operations whose tokens are leaked or dropped. The
                // scope waits for its sends, and a rendezvous send completes
                // only once matched: even a small one goes by rendezvous
                // while its endpoint is out of eager credit (`ucp`'s
                // `proto/credit.rs`), so the send has a tag of its own and a
                // receive posted for it, whose fate is decided as the others'.
                let size = size.min(2000);
                let data = vec![7u8; size];
                let mut sink = vec![0u8; size];
                let leak = rng.below(2) == 0;
                let steps = rng.below(20);
                if let Ok(Posted::InFlight(id)) =
                    b.tag_recv(vec![0u8; size], SCOPED_TAG, TAG_MASK_ALL, Op::new())
                {
                    owned.push((id, rng.below(3)));
                }
                // The receiver progresses in another thread meanwhile: the
                // scope's drain waits for the send, which needs room.
                let stop = AtomicBool::new(false);
                std::thread::scope(|ts| {
                    let peer = &mut *b;
                    let stop = &stop;
                    ts.spawn(move || {
                        while !stop.load(Ordering::Relaxed) {
                            peer.progress();
                        }
                    });
                    a.scope(|s| {
                        let p = s.tag_send(ab, &data, SCOPED_TAG);
                        let q = s.tag_recv(&mut sink, 99, TAG_MASK_ALL);
                        if leak {
                            std::mem::forget(p);
                            std::mem::forget(q);
                        }
                        for _ in 0..steps {
                            s.progress();
                        }
                    });
                    stop.store(true, Ordering::Relaxed);
                });
                // Both buffers are free again here, and dropped now.
            }
            3 => {
                // A receive canceled before it matched.
                if let Ok(Posted::InFlight(id)) =
                    b.tag_recv(vec![0u8; size], 1000 + tag, TAG_MASK_ALL, Op::new())
                {
                    b.request_cancel(id);
                    owned.push((id, 1));
                }
            }
            _ => {
                for _ in 0..rng.below(30) {
                    a.progress();
                    b.progress();
                }
            }
        }
        // Decide the fate of some collected ids at random points.
        if !owned.is_empty() && rng.below(3) == 0 {
            let (id, fate) = owned.swap_remove(rng.below(owned.len() as u64) as usize);
            match fate {
                0 => {
                    let w = if a.request_is_active(id) {
                        &mut *a
                    } else {
                        &mut *b
                    };
                    w.request_release(id);
                    b.request_release(id);
                }
                1 => {
                    let _ = a.take::<Vec<u8>>(id);
                    let _ = b.take::<Vec<u8>>(id);
                }
                _ => {} // leaked: the worker keeps the buffer
            }
        }
    }
}

fn workload(seed: u64, rounds: usize) {
    println!("seed {seed}");
    let mut rng = Rng(seed | 1);
    for tls in ["self", "tcp"] {
        let ctx = context(tls);
        let mut a = ctx.create_worker().expect("worker");
        let mut b = ctx.create_worker().expect("worker");
        let ab = a.connect(&b.address()).expect("connect");
        for _ in 0..rounds {
            round(&mut rng, &mut a, &mut b, ab);
        }
        // Workers dropped with requests in flight and buffers parked.
        if rng.below(2) == 0 {
            drop(b);
            drop(a);
        } else {
            drop(a);
            drop(b);
        }
    }
}

fn seed() -> u64 {
    std::env::var("RUCX_TEST_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_nanos() as u64)
                .unwrap_or(1)
        })
}

#[test]
fn random_drops_and_leaks() {
    if is_child() {
        return;
    }
    workload(seed(), 20);
}

/// Child side of `valgrind_memcheck`.
#[test]
fn memcheck_child() {
    if !is_child() {
        return;
    }
    workload(seed(), 3);
}

#[test]
fn valgrind_memcheck() {
    if is_child() {
        return;
    }
    if Command::new("valgrind").arg("--version").output().is_err() {
        skip_or_fail("valgrind not installed");
        return;
    }
    let exe = std::env::current_exe().expect("current_exe");
    let seed = seed();
    let out = Command::new("valgrind")
        .args([
            "--error-exitcode=99",
            "--leak-check=no",
            "--errors-for-leak-kinds=none",
            "-q",
        ])
        .arg(exe)
        .args([
            "memcheck_child",
            "--exact",
            "--nocapture",
            "--test-threads=1",
        ])
        .env("RUCX_TEST_ROLE", "child")
        .env("RUCX_TEST_SEED", seed.to_string())
        .output()
        .expect("run valgrind");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "memcheck failed (seed {seed}, status {}):\n{stdout}\n{stderr}",
        out.status,
    );
    assert!(
        stdout.contains("seed ") && stdout.contains("1 passed"),
        "the workload did not run under valgrind:\n{stdout}"
    );
}
