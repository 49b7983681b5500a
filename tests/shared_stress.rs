//! Stress of the shared worker (thread mode multi): `SENDERS` threads on
//! one worker, each running a random mix of tag sends (bursts of posted
//! sends, then waits), puts read back with gets, and fetching atomics to
//! `TARGETS` other workers (one endpoint each); on every target worker a
//! thread receives with wildcard tags, several receives posted at once,
//! and posts and drops receives that never match. Every byte, the order
//! of each sender's messages and every atomic's old value is checked.
//! Half of the targets have a progress thread. CI runs it in a release
//! build (`cargo test --release --test shared_stress`).

mod common;

use common::*;
use rucx::ucp::{AtomicOp, AtomicValue, OpFuture, SharedWorker};
use rucx::{Access, Ep, MemMap, Rkey};
use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};

const SENDERS: u64 = 4;
const TARGETS: usize = 3;
/// Bytes of each sender's slot in a target's memory.
const SLOT: usize = 64 << 10;
const MAX_MSG: usize = 200_000;
/// Tags of receives that are posted and dropped: never sent.
const NEVER: u64 = 1 << 63;

#[derive(Clone, Copy)]
enum Step {
    /// A burst of tag messages to a target.
    Tags { target: usize, count: u64 },
    /// A put of a random range of the sender's slot, read back.
    PutGet { target: usize },
    /// A fetch-add on the sender's word.
    Add { target: usize },
}

/// Sender `s`'s steps (the same for the senders and the receivers'
/// count).
fn plan(s: u64, steps: usize) -> Vec<Step> {
    let mut r = Rng(0x5eed_0000 + s * 7919);
    (0..steps)
        .map(|_| {
            let target = r.below(TARGETS as u64) as usize;
            match r.below(4) {
                0 | 1 => Step::Tags {
                    target,
                    count: 1 + r.below(4),
                },
                2 => Step::PutGet { target },
                _ => Step::Add { target },
            }
        })
        .collect()
}

fn msg_len(s: u64, seq: u64) -> usize {
    let mut r = Rng((s << 32 | seq) | 1);
    match r.below(8) {
        0..=4 => r.below(256) as usize,
        5 | 6 => r.below(16 << 10) as usize,
        _ => r.below(MAX_MSG as u64) as usize,
    }
}

fn tag(s: u64, target: usize, seq: u64) -> u64 {
    s << 48 | (target as u64) << 40 | seq
}

struct Target {
    w: SharedWorker,
    map: MemMap,
    _backing: Vec<u64>,
}

fn stress(tls: &str, steps: usize) {
    let ctx = context(tls);
    let a = ctx.create_worker().expect("worker").into_shared();
    let access = Access::REMOTE_READ | Access::REMOTE_WRITE | Access::REMOTE_ATOMIC;
    let len = SLOT * SENDERS as usize + 8 * SENDERS as usize;
    let targets: Vec<Target> = (0..TARGETS)
        .map(|j| {
            let w = ctx.create_worker().expect("target").into_shared();
            if j % 2 == 0 {
                w.start_progress_thread().expect("progress thread");
            }
            let mut backing = vec![0u64; len / 8];
            // SAFETY: the map is dropped before `backing` (field order
            // of Target) and the memory is only reached through it.
            let map =
                unsafe { ctx.mem_map(backing.as_mut_ptr().cast(), len, access) }.expect("mem_map");
            Target {
                w,
                map,
                _backing: backing,
            }
        })
        .collect();
    let eps: Vec<Ep> = targets
        .iter()
        .map(|t| a.connect(&t.w.address()).expect("connect"))
        .collect();
    let rkeys: Vec<Rkey> = targets
        .iter()
        .zip(&eps)
        .map(|(t, ep)| {
            let packed = t.map.rkey_pack().expect("pack");
            a.with(|w| w.rkey_unpack(*ep, &packed)).expect("unpack")
        })
        .collect();
    let plans: Vec<Vec<Step>> = (0..SENDERS).map(|s| plan(s, steps)).collect();
    // Messages each target receives from each sender.
    let expected: Vec<Vec<u64>> = (0..TARGETS)
        .map(|j| {
            plans
                .iter()
                .map(|p| {
                    p.iter()
                        .map(|st| match st {
                            Step::Tags { target, count } if *target == j => *count,
                            _ => 0,
                        })
                        .sum()
                })
                .collect()
        })
        .collect();
    let senders_done = &AtomicU64::new(0);
    std::thread::scope(|sc| {
        for (j, t) in targets.iter().enumerate() {
            let exp = &expected[j];
            sc.spawn(move || {
                receive(j, &t.w, exp);
                // A target without a progress thread serves one-sided
                // operations only while its own threads progress.
                while senders_done.load(Ordering::Acquire) < SENDERS {
                    if t.w.progress() == 0 {
                        std::thread::yield_now();
                    }
                }
            });
        }
        for s in 0..SENDERS {
            let (a, eps, rkeys, targets) = (&a, &eps, &rkeys, &targets);
            let plan = &plans[s as usize];
            sc.spawn(move || {
                send(s, a, eps, rkeys, targets, plan);
                senders_done.fetch_add(1, Ordering::Release);
            });
        }
    });
    // Every fetch-add landed once.
    for (j, t) in targets.iter().enumerate() {
        for s in 0..SENDERS {
            let adds = plans[s as usize]
                .iter()
                .filter(|st| matches!(st, Step::Add { target } if *target == j))
                .count() as u64;
            let word = t.map.load_u64(word_off(s)).expect("word");
            assert_eq!(word, adds * (s + 1), "{tls}: target {j} sender {s}");
        }
    }
}

fn word_off(s: u64) -> usize {
    SLOT * SENDERS as usize + 8 * s as usize
}

fn send(s: u64, a: &SharedWorker, eps: &[Ep], rkeys: &[Rkey], targets: &[Target], plan: &[Step]) {
    let mut seq = [0u64; TARGETS];
    let mut adds = [0u64; TARGETS];
    let mut r = Rng(0xabc0 + s);
    for st in plan {
        match *st {
            Step::Tags { target, count } => {
                let mut burst = Vec::new();
                for _ in 0..count {
                    let n = seq[target];
                    seq[target] += 1;
                    let data = pattern(msg_len(s, n), tag(s, target, n));
                    let f = a
                        .tag_send(eps[target], data, tag(s, target, n))
                        .expect("send");
                    burst.push(f);
                }
                for f in burst {
                    f.wait().expect("send done");
                }
            }
            Step::PutGet { target } => {
                let len = 1 + r.below(SLOT as u64) as usize;
                let off = r.below((SLOT - len + 1) as u64) as usize;
                let at = targets[target].map.addr() + (SLOT * s as usize + off) as u64;
                let data = pattern(len, r.next());
                let (_, data) = a
                    .put(eps[target], data, at, &rkeys[target])
                    .expect("put")
                    .wait()
                    .expect("put done");
                let (_, got) = a
                    .get(eps[target], vec![0u8; len], at, &rkeys[target])
                    .expect("get")
                    .wait()
                    .expect("get done");
                assert!(got == data, "sender {s}: get of {len} B at {off}");
            }
            Step::Add { target } => {
                let at = targets[target].map.addr() + word_off(s) as u64;
                let (_, old) = a
                    .atomic_fetch(
                        eps[target],
                        AtomicOp::Add,
                        AtomicValue::U64(s + 1),
                        0,
                        at,
                        &rkeys[target],
                    )
                    .expect("fadd")
                    .wait()
                    .expect("fadd done");
                assert_eq!(old.value(), adds[target] * (s + 1), "sender {s}");
                adds[target] += 1;
            }
        }
    }
    a.flush().wait().expect("flush");
}

/// Target `j`'s receiver: up to four wildcard receives posted at once,
/// each sender's messages in order and intact; now and then a receive
/// that never matches, posted and dropped.
fn receive(j: usize, w: &SharedWorker, expected: &[u64]) {
    let total: u64 = expected.iter().sum();
    let mut next = vec![0u64; SENDERS as usize];
    let mut posted: VecDeque<OpFuture<Vec<u8>>> = VecDeque::new();
    let mut got = 0;
    let mut k = 0u64;
    while got < total {
        while posted.len() < 4 && (got + posted.len() as u64) < total {
            k += 1;
            if k % 7 == 0 {
                drop(
                    w.tag_recv(vec![0u8; 64], NEVER | k, u64::MAX)
                        .expect("recv"),
                );
            }
            posted.push_back(w.tag_recv(vec![0u8; MAX_MSG], 0, 0).expect("recv"));
        }
        let Some(f) = posted.pop_front() else { break };
        let (info, buf) = f.wait().expect("recv done");
        let (s, target, seq) = (
            info.tag >> 48,
            (info.tag >> 40) & 0xff,
            info.tag & 0xff_ffff_ffff,
        );
        assert_eq!(target as usize, j, "a message for another target");
        assert!(s < SENDERS, "sender {s}");
        assert_eq!(seq, next[s as usize], "target {j}: order of sender {s}");
        next[s as usize] += 1;
        assert_eq!(info.length, msg_len(s, seq));
        assert!(
            buf[..info.length] == pattern(info.length, info.tag)[..],
            "target {j}: bytes of sender {s} message {seq}"
        );
        got += 1;
    }
    assert_eq!(next, expected, "target {j}: counts");
}

/// Steps per sender: fewer in a debug build (the workspace test run);
/// `RUCX_STRESS_STEPS` sets them.
fn steps() -> usize {
    if let Some(n) = std::env::var("RUCX_STRESS_STEPS")
        .ok()
        .and_then(|v| v.parse().ok())
    {
        return n;
    }
    if cfg!(debug_assertions) {
        40
    } else {
        1500
    }
}

#[test]
fn stress_shm() {
    stress("shm", steps());
}

#[test]
fn stress_tcp() {
    stress("tcp", steps());
}

#[test]
fn stress_rc_iwarp() {
    stress("rc_iwarp", steps());
}
