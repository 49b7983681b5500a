//! Cancel safety of a shared worker's futures on tokio: receive and send
//! futures dropped at random points (never polled, polled once, raced
//! against a timer in `select!`, polled a few times) never let a transfer
//! touch freed memory, and later messages still arrive intact.
//!
//! Each round posts a receive on tag [`RACE`], often with a message sent
//! to it at the same time, and drops both futures at random points; then a
//! checked ping-pong on other tags must go through. Messages are
//! self-describing (round and length in their first 16 bytes, a pattern of
//! the round after), so whatever a later receive gets, whichever dropped
//! receive consumed what, every byte that arrives is checked. At the end a
//! sentinel on [`RACE`] collects every message no dropped receive took.
//!
//! `valgrind_memcheck` runs the workload in a child process under
//! valgrind's memcheck, which fails on any read or write of freed or
//! unallocated memory (`skipped: ...` without valgrind, a failure with
//! `RUCX_REQUIRE_ALL=1`).

mod async_common;
mod common;

use async_common::{current, err, multi, ping_pong, within};
use common::{context_vars, is_child, pattern, skip_or_fail};
use rucx::ucp::OpFuture;
use std::future::Future;
use std::pin::Pin;
use std::process::Command;
use std::task::Poll;
use std::time::Duration;

/// The tag of the raced messages and receives.
const RACE: u64 = 50;
/// Tags of the checked ping-pong (it uses `CHECK` and `CHECK + 1`).
const CHECK: u64 = 60;
/// Sizes of raced messages: inline, copied, fragmented, rendezvous.
const SIZES: [usize; 5] = [16, 200, 9000, 70_000, 300_000];
const MAX: usize = 300_000;
/// The round number of the sentinel.
const END: u64 = u64::MAX;

struct Rng(u64);

impl Rng {
    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % n
    }
}

/// Message of round `r`: `r`, its length, then a pattern of `r`.
fn frame(r: u64, len: usize) -> Vec<u8> {
    let mut m = r.to_le_bytes().to_vec();
    m.extend_from_slice(&(len as u64).to_le_bytes());
    m.extend_from_slice(&pattern(len - 16, r));
    m
}

/// Checks a received message; its round.
fn check(got: &[u8]) -> u64 {
    assert!(got.len() >= 16, "message of {} bytes", got.len());
    let r = u64::from_le_bytes(got[..8].try_into().expect("8 bytes"));
    let len = u64::from_le_bytes(got[8..16].try_into().expect("8 bytes")) as usize;
    assert_eq!(len, got.len(), "round {r}: length field");
    assert!(
        got == frame(r, len),
        "round {r}: corrupted message of {len} B"
    );
    r
}

/// Awaits `f` partly, as the rng says, then drops it; its result if it
/// completed first (checked for a receive).
async fn drop_somewhere(f: OpFuture<Vec<u8>>, rng: &mut Rng, recv: bool) -> Option<usize> {
    let mut f = f;
    let done = match rng.below(4) {
        // Never polled.
        0 => None,
        // Polled once.
        1 => {
            std::future::poll_fn(|cx| {
                Poll::Ready(match Pin::new(&mut f).poll(cx) {
                    Poll::Ready(r) => Some(r),
                    Poll::Pending => None,
                })
            })
            .await
        }
        // Raced against a timer of up to 300 µs.
        2 => {
            let t = Duration::from_micros(rng.below(300));
            tokio::select! {
                r = &mut f => Some(r),
                _ = tokio::time::sleep(t) => None,
            }
        }
        // Polled a few times between yields.
        _ => {
            let mut out = None;
            for _ in 0..rng.below(20) {
                let r = std::future::poll_fn(|cx| {
                    Poll::Ready(match Pin::new(&mut f).poll(cx) {
                        Poll::Ready(r) => Some(r),
                        Poll::Pending => None,
                    })
                })
                .await;
                if let Some(r) = r {
                    out = Some(r);
                    break;
                }
                tokio::task::yield_now().await;
            }
            out
        }
    };
    match done {
        Some(r) => {
            let (info, buf) = r.map_err(err).expect("operation failed");
            if recv {
                check(&buf[..info.length]);
            }
            Some(info.length)
        }
        None => {
            drop(f);
            None
        }
    }
}

async fn workload(tls: &str, seed: u64, rounds: u64) {
    let ctx = context_vars(&[("RUCX_TLS", tls)]);
    let (a, _da) = async_common::driven(&ctx);
    let (b, _db) = async_common::driven(&ctx);
    let ab = a.connect(&b.address()).expect("connect");
    let ba = b.connect(&a.address()).expect("connect");
    let mut rng = Rng(seed | 1);
    let mut sent = 0u64;
    let mut taken = 0u64;
    for r in 0..rounds {
        let rx = b
            .tag_recv(vec![0xee; MAX], RACE, u64::MAX)
            .expect("post recv");
        let tx = (rng.below(3) != 0).then(|| {
            sent += 1;
            let len = SIZES[rng.below(SIZES.len() as u64) as usize];
            a.tag_send(ab, frame(r, len), RACE).expect("post send")
        });
        // Drop the receive and the send in either order.
        if rng.below(2) == 0 {
            taken += u64::from(drop_somewhere(rx, &mut rng, true).await.is_some());
            if let Some(tx) = tx {
                drop_somewhere(tx, &mut rng, false).await;
            }
        } else {
            if let Some(tx) = tx {
                drop_somewhere(tx, &mut rng, false).await;
            }
            taken += u64::from(drop_somewhere(rx, &mut rng, true).await.is_some());
        }
        // Fresh buffers now take the place of whatever was freed.
        let size = [8, 5000, 100_000][rng.below(3) as usize];
        let n = within(60, ping_pong(&a, ab, &b, ba, CHECK, size, 2)).await;
        assert_eq!(n, 2, "round {r}: ping-pong");
    }
    // Every raced message no dropped receive took arrives, intact, before
    // the sentinel.
    a.tag_send(ab, frame(END, 16), RACE)
        .expect("post")
        .await
        .map_err(err)
        .expect("sentinel");
    let mut left = 0u64;
    loop {
        let (info, buf) = within(
            60,
            b.tag_recv(vec![0u8; MAX], RACE, u64::MAX).expect("post"),
        )
        .await
        .map_err(err)
        .expect("recv");
        if check(&buf[..info.length]) == END {
            break;
        }
        left += 1;
    }
    assert!(
        taken + left <= sent,
        "more messages than sent: {taken} + {left} > {sent}"
    );
    within(30, a.flush()).await.expect("flush");
    println!("{tls}: {sent} raced messages, {taken} taken before a drop, {left} after");
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
fn random_drops_current_thread() {
    if is_child() {
        return;
    }
    let seed = seed();
    println!("seed {seed}");
    for tls in ["self", "shm", "tcp"] {
        current().block_on(workload(tls, seed, 60));
    }
}

#[test]
fn random_drops_multi_thread() {
    if is_child() {
        return;
    }
    let seed = seed();
    println!("seed {seed}");
    for tls in ["shm", "tcp"] {
        multi().block_on(workload(tls, seed, 60));
    }
}

/// Child side of `valgrind_memcheck`.
#[test]
fn memcheck_child() {
    if !is_child() {
        return;
    }
    let seed = seed();
    println!("seed {seed}");
    for tls in ["self", "posix", "tcp"] {
        current().block_on(workload(tls, seed, 8));
    }
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
        stdout.contains("seed ") && stdout.contains("tcp: ") && stdout.contains("1 passed"),
        "the workload did not run under valgrind:\n{stdout}"
    );
}

/// The sentinel check sees a corrupted message (the checker can fail).
#[test]
#[should_panic(expected = "corrupted")]
fn check_sees_corruption() {
    let mut m = frame(3, 100);
    m[50] ^= 1;
    check(&m);
}
