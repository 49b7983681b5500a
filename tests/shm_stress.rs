//! Many tagged messages from several processes to one over shared memory
//! (`RUCX_TLS=shm`: the `posix` FIFO for messages, `cma` for rendezvous).
//!
//! [`SENDERS`] child processes each send their share of [`total`]
//! messages to the test process: mostly short ones (0..=112 bytes, inline
//! in a FIFO element), some of 113..=8192 bytes (in the element's
//! descriptor, or two fragments just above 8184), and one in a thousand of
//! 8193..=256K bytes (multi-fragment eager up to about 12K, rendezvous with
//! a CMA read above). The size of every message follows from its sender
//! and sequence number, its bytes are `pattern(len, seed(sender, seq))`.
//!
//! The receiver keeps [`WINDOW`] receives posted at once, each matching
//! any sender (the tag holds a data bit, the sender and the sequence
//! number; the mask only the data bit), and retires them in the order they
//! were posted, which is the order they matched. It checks each message's
//! length and every byte, and that each sender's sequence numbers come one
//! after the other, none lost, none twice, none overtaken. Senders keep at
//! most [`WINDOW`] sends in flight.
//!
//! The count depends on the build: a million messages in optimised builds
//! (`cargo test --release --test shm_stress`), 200 000 in debug builds,
//! where the pattern generation and checks alone take most of the time.
//! `RUCX_TEST_STRESS_COUNT` overrides it.
//!
//! The test binary starts itself again as the senders (see `common`).

mod common;

use common::*;
use rucx::{Ep, Info, Op, Posted, ReqId, Worker, TAG_MASK_ALL};
use std::collections::VecDeque;
use std::time::{Duration, Instant};

/// Sender processes.
const SENDERS: u64 = 3;
/// Receives posted at once; sends in flight per sender at most.
const WINDOW: usize = 64;
/// Largest message.
const MAX_SIZE: usize = 256 << 10;
/// Longest the whole exchange may take.
const TIMEOUT: Duration = Duration::from_secs(300);

/// Set in the tag of every data message, and the only bit the receives
/// look at.
const DATA: u64 = 1 << 62;
/// Sender id's place in the tag.
const SENDER_SHIFT: u32 = 40;
/// Tag of the receiver's goodbye to each sender.
const BYE: u64 = 1;

/// Messages in all.
fn total() -> u64 {
    if let Some(n) = std::env::var("RUCX_TEST_STRESS_COUNT")
        .ok()
        .and_then(|s| s.parse().ok())
    {
        return n;
    }
    if cfg!(debug_assertions) {
        200_000
    } else {
        1_000_000
    }
}

/// Messages sender `s` sends.
fn share(s: u64) -> u64 {
    total() / SENDERS + u64::from(s < total() % SENDERS)
}

fn tag(s: u64, seq: u64) -> u64 {
    DATA | (s << SENDER_SHIFT) | seq
}

fn seed(s: u64, seq: u64) -> u64 {
    (s << SENDER_SHIFT) ^ seq ^ 0x5eed_0000_0000_0000
}

/// A well-mixed hash of the message's identity (splitmix64).
fn mix(s: u64, seq: u64) -> u64 {
    let mut x = seed(s, seq).wrapping_add(0x9e37_79b9_7f4a_7c15);
    x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^ (x >> 31)
}

/// Size of message `seq` of sender `s`: 94 % short, 5.9 % up to 8K,
/// 0.1 % up to 256K.
fn size(s: u64, seq: u64) -> usize {
    let h = mix(s, seq);
    let r = h % 10_000;
    let v = (h >> 20) as usize;
    match r {
        0..9_400 => v % 113,
        9_400..9_990 => 113 + v % (8192 - 113 + 1),
        _ => 8193 + v % (MAX_SIZE - 8193 + 1),
    }
}

/// Sender side: sends its address, then its share of messages with at
/// most [`WINDOW`] in flight, then waits for the receiver's goodbye.
#[test]
fn stress_sender() {
    if !is_child() {
        return;
    }
    let me: u64 = std::env::var("RUCX_TEST_SENDER")
        .expect("sender id")
        .parse()
        .expect("sender id");
    let ctx = context("shm");
    let mut w = ctx.create_worker().expect("worker");
    let parent = unhex(&std::env::var("RUCX_TEST_PEER").expect("peer address"));
    let ep = w.connect(&parent).expect("connect");
    w.tag_send_blocking(ep, &w.address(), 0)
        .expect("send address");
    let n = share(me);
    let started = Instant::now();
    let mut inflight: VecDeque<(ReqId, u64)> = VecDeque::new();
    // Sends that did not complete at once (a full FIFO, or rendezvous).
    let mut waited = 0u64;
    for seq in 0..n {
        let data = pattern(size(me, seq), seed(me, seq));
        match w.tag_send(ep, data, tag(me, seq), Op::new()) {
            Ok(Posted::Done(..)) => {}
            Ok(Posted::InFlight(id)) => {
                waited += 1;
                inflight.push_back((id, seq));
            }
            Err(e) => panic!("sender {me}: send {seq}: {e}"),
        }
        if !inflight.is_empty() {
            w.progress();
        }
        reap_sends(&mut w, &mut inflight, me);
        while inflight.len() >= WINDOW {
            if w.progress() == 0 {
                // Two cores for four busy processes: let the receiver run.
                std::thread::yield_now();
            }
            reap_sends(&mut w, &mut inflight, me);
        }
    }
    while !inflight.is_empty() {
        w.progress();
        reap_sends(&mut w, &mut inflight, me);
    }
    println!(
        "sender {me}: {n} messages sent in {:.2} s, {waited} of them waited",
        started.elapsed().as_secs_f64()
    );
    let mut bye = [0u8; 1];
    w.tag_recv_blocking(&mut bye, BYE, TAG_MASK_ALL)
        .expect("bye");
    assert_eq!(w.requests_outstanding(), 0, "sender {me}: requests leaked");
}

/// Collects the sends at the head of `inflight` that completed.
fn reap_sends(w: &mut Worker, inflight: &mut VecDeque<(ReqId, u64)>, me: u64) {
    while let Some(&(id, seq)) = inflight.front() {
        if w.request_is_active(id) {
            return;
        }
        match w.take::<Vec<u8>>(id) {
            Some(Ok(_)) => {}
            Some(Err(e)) => panic!("sender {me}: send {seq}: {}", e.error),
            None => panic!("sender {me}: send {seq}: no result"),
        }
        inflight.pop_front();
    }
}

/// Checks one received message: tag, length, bytes, and that it is the
/// next of its sender.
fn check(info: &Info, buf: &[u8], next: &mut [u64]) {
    assert_ne!(
        info.tag & DATA,
        0,
        "tag {:#x} without the data bit",
        info.tag
    );
    let s = (info.tag & !DATA) >> SENDER_SHIFT;
    let seq = info.tag & ((1 << SENDER_SHIFT) - 1);
    let want_seq = next
        .get_mut(s as usize)
        .unwrap_or_else(|| panic!("tag {:#x}: no sender {s}", info.tag));
    assert_eq!(
        seq, *want_seq,
        "sender {s}: message {seq} matched where {want_seq} was due"
    );
    *want_seq += 1;
    let len = size(s, seq);
    assert_eq!(info.length, len, "sender {s} message {seq}: length");
    let want = pattern(len, seed(s, seq));
    if let Some(at) = buf[..len].iter().zip(&want).position(|(a, b)| a != b) {
        panic!("sender {s} message {seq} ({len} B) differs from byte {at} on");
    }
}

/// Panics if a sender exited before the end.
fn check_children(children: &mut [ChildGuard]) {
    for (i, c) in children.iter_mut().enumerate() {
        if let Some(st) = c.try_wait().expect("wait child") {
            panic!("sender {i} exited early: {st}");
        }
    }
}

#[test]
fn shm_stress_many_senders() {
    if is_child() {
        return;
    }
    let ctx = context("shm");
    let mut w = ctx.create_worker().expect("worker");
    let addr = hex(&w.address());
    let mut children: Vec<ChildGuard> = (0..SENDERS)
        .map(|s| {
            spawn_child(
                "stress_sender",
                &[
                    ("RUCX_TEST_PEER", addr.clone()),
                    ("RUCX_TEST_SENDER", s.to_string()),
                    ("RUCX_TEST_STRESS_COUNT", total().to_string()),
                ],
            )
        })
        .collect();
    let _forward: Vec<_> = children.iter_mut().map(|c| watch_stdout(c, "")).collect();
    let eps: Vec<Ep> = (0..SENDERS).map(|_| accept_peer(&mut w)).collect();
    let tables = w.ep_protocols(eps[0]).expect("tables");
    println!("{}", tables[0]);

    let n = total();
    let started = Instant::now();
    let deadline = started + TIMEOUT;
    let mut spare: Vec<Vec<u8>> = Vec::new();
    let mut window: VecDeque<Posted<Vec<u8>>> = VecDeque::new();
    let mut next = vec![0u64; SENDERS as usize];
    let (mut posted, mut received) = (0u64, 0u64);
    let mut spins = 0u32;
    let mut bytes = 0usize;
    while received < n {
        while window.len() < WINDOW && posted < n {
            let buf = spare.pop().unwrap_or_else(|| vec![0u8; MAX_SIZE]);
            let p = w.tag_recv(buf, DATA, DATA, Op::new()).expect("post recv");
            window.push_back(p);
            posted += 1;
        }
        w.progress();
        // Retire the receives in posting order: the order they matched.
        while let Some(front) = window.front_mut() {
            if let Posted::InFlight(id) = *front {
                match w.take::<Vec<u8>>(id) {
                    None => break,
                    Some(Ok((info, buf))) => *front = Posted::Done(info, buf),
                    Some(Err(e)) => panic!("receive {received}: {}", e.error),
                }
            }
            let Some(Posted::Done(info, buf)) = window.pop_front() else {
                unreachable!("the head is done")
            };
            check(&info, &buf, &mut next);
            bytes += info.length;
            received += 1;
            spare.push(buf);
        }
        spins = spins.wrapping_add(1);
        if spins % 4096 == 0 {
            check_children(&mut children);
            assert!(
                Instant::now() < deadline,
                "timed out with {received} of {n} received ({next:?} per sender)"
            );
        }
    }
    let took = started.elapsed().as_secs_f64();
    println!(
        "received {n} messages ({:.1} MB) from {SENDERS} senders in {took:.2} s: {:.0} msg/s",
        bytes as f64 / 1e6,
        n as f64 / took
    );
    for (s, &got) in next.iter().enumerate() {
        assert_eq!(got, share(s as u64), "sender {s}: count");
    }
    for &ep in &eps {
        w.tag_send_blocking(ep, &[1], BYE).expect("bye");
    }
    for (i, c) in children.iter_mut().enumerate() {
        let status = loop {
            if let Some(st) = c.try_wait().expect("wait child") {
                break st;
            }
            assert!(Instant::now() < deadline, "sender {i} did not exit");
            w.progress();
        };
        assert!(status.success(), "sender {i} failed: {status}");
    }
    assert_eq!(w.requests_outstanding(), 0, "receiver: requests leaked");
}

/// The size classes are all present, in about the intended shares.
#[test]
fn size_mix() {
    let mut classes = [0u64; 3];
    for seq in 0..100_000 {
        let len = size(seq % SENDERS, seq);
        assert!(len <= MAX_SIZE);
        classes[match len {
            0..=112 => 0,
            113..=8192 => 1,
            _ => 2,
        }] += 1;
    }
    assert!((93_000..95_000).contains(&classes[0]), "{classes:?}");
    assert!((5_500..6_300).contains(&classes[1]), "{classes:?}");
    assert!((50..200).contains(&classes[2]), "{classes:?}");
}
