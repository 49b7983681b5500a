//! Eager credits: a sender out of credit sends by rendezvous, the
//! receiver's unexpected bytes stay within its limit plus one initial
//! credit per sender, and nothing is lost or reordered on the way.

use crate::proto::credit::{charge_of, AM_CREDIT, CREDIT_INITIAL, UNEXP_ENTRY};
use crate::proto::eager_rx::RecvStarted;
use crate::proto::eager_tx::Started;
use crate::proto::testing::{exchange, pattern, settle, virt_attr, Node};
use crate::proto::wire::{AM_EAGER_ONLY, AM_RNDV_RTS};
use crate::request::Op;
use crate::ucs::config::MemUnits;
use crate::ucs::slab::SlabId;
use crate::UcpConfig;

const LEN: usize = 64;

fn pair(limit: MemUnits) -> (Node, Node) {
    let cfg = UcpConfig {
        unexpected_max: limit,
        ..UcpConfig::default()
    };
    Node::pair(virt_attr(|_| {}), cfg)
}

fn msg(i: u64) -> Vec<u8> {
    let mut v = pattern(LEN);
    v[..8].copy_from_slice(&i.to_le_bytes());
    v
}

/// What `a` sent: eager messages, announcements.
#[derive(Default)]
struct Counts {
    eager: usize,
    rts: usize,
}

/// Sends `n` messages from `a` to `b` (tag 5), exchanging after each;
/// returns the sends still in flight and what went out.
fn stream(a: &mut Node, b: &mut Node, n: u64, sent: &mut Vec<Vec<u8>>) -> (Vec<SlabId>, Counts) {
    let (mut ids, mut c) = (Vec::new(), Counts::default());
    for _ in 0..n {
        let data = msg(sent.len() as u64);
        if let Started::InFlight(id) = a.send(&data, 5, Op::new()).unwrap() {
            ids.push(id);
        }
        sent.push(data);
        c.eager += a.tx.ams_of(AM_EAGER_ONLY).len();
        c.rts += a.tx.ams_of(AM_RNDV_RTS).len();
        exchange(a, b);
    }
    (ids, c)
}

/// Receives everything `sent` at `b`, in order.
fn drain(a: &mut Node, b: &mut Node, sent: &[Vec<u8>]) {
    let mut buf = vec![0u8; LEN];
    for (i, want) in sent.iter().enumerate() {
        match b.recv(&mut buf, 5, !0).unwrap() {
            RecvStarted::Done(info) => assert_eq!(info.length, LEN),
            RecvStarted::InFlight(rid) => {
                exchange(a, b);
                assert_eq!(b.done_len(rid), Some(LEN), "message {i}");
            }
        }
        assert_eq!(&buf, want, "message {i}");
    }
    exchange(a, b);
}

#[test]
fn out_of_credit_senders_use_rendezvous_until_receives_free_the_budget() {
    let limit = 1 << 20;
    let (mut a, mut b) = pair(MemUnits::Bytes(limit));
    let mut sent = Vec::new();
    let (ids, c) = stream(&mut a, &mut b, 10_000, &mut sent);
    let charge = charge_of(LEN);
    assert!(c.rts > 0, "the budget ran out");
    assert!(
        c.eager as u64 * charge <= limit + CREDIT_INITIAL,
        "{} eager messages of {charge} each",
        c.eager
    );
    assert!(c.eager as u64 * charge > limit / 2, "grants came");
    assert_eq!(ids.len(), c.rts, "rendezvous sends wait for their receive");
    let peak = b.core.unexp.peak() as u64;
    let bound = limit + CREDIT_INITIAL + (c.rts * UNEXP_ENTRY) as u64;
    assert!(peak <= bound, "peak {peak}, bound {bound}");
    drain(&mut a, &mut b, &sent);
    for id in ids {
        assert_eq!(a.done_len(id), Some(LEN));
    }
    assert_eq!(b.core.unexp.held(), 0);
    // The budget is free again: a new burst goes eager, up to the limit.
    let mut more = Vec::new();
    let (ids, c) = stream(&mut a, &mut b, 100, &mut more);
    assert_eq!((c.eager, c.rts), (100, 0));
    assert!(ids.is_empty());
    drain(&mut a, &mut b, &more);
}

#[test]
fn messages_received_as_they_come_never_run_out_of_credit() {
    let (mut a, mut b) = pair(MemUnits::Bytes(1 << 20));
    let mut buf = vec![0u8; LEN];
    for i in 0..20_000u64 {
        a.send(&msg(i), 5, Op::new()).unwrap();
        assert!(a.tx.ams_of(AM_RNDV_RTS).is_empty(), "message {i}");
        exchange(&mut a, &mut b);
        assert!(matches!(
            b.recv(&mut buf, 5, !0).unwrap(),
            RecvStarted::Done(_)
        ));
        assert_eq!(buf, msg(i));
    }
    // Requests went once per half grant, not per message.
    assert!(b.core.unexp.peak() <= charge_of(LEN) as usize);
}

#[test]
fn the_message_that_reaches_half_the_credit_asks_for_more_and_none_before() {
    let (mut a, mut b) = pair(MemUnits::Bytes(1 << 20));
    let due = (CREDIT_INITIAL / 2).div_ceil(charge_of(LEN));
    for i in 1..=due + 2 {
        a.send(&msg(i), 5, Op::new()).unwrap();
        assert_eq!(
            a.tx.ams_of(AM_EAGER_ONLY).len(),
            1,
            "message {i} went eager"
        );
        let asked = a.tx.ams_of(AM_CREDIT).len();
        assert_eq!(asked, usize::from(i == due), "requests with message {i}");
        exchange(&mut a, &mut b);
    }
}

/// Bursts of `burst` messages of `len` bytes from `a`, each burst sent
/// before anything reaches `b` (a window in flight), then received in
/// order; the number of messages of each burst that went by rendezvous.
fn bursts(a: &mut Node, b: &mut Node, len: usize, burst: usize, n: usize) -> Vec<usize> {
    let data = pattern(len);
    let mut buf = vec![0u8; len];
    let mut rndv = Vec::new();
    for _ in 0..n {
        for _ in 0..burst {
            a.send(&data, 5, Op::new()).unwrap();
        }
        rndv.push(a.tx.ams_of(AM_RNDV_RTS).len());
        exchange(a, b);
        for i in 0..burst {
            match b.recv(&mut buf, 5, !0).unwrap() {
                RecvStarted::Done(info) => assert_eq!(info.length, len),
                RecvStarted::InFlight(rid) => {
                    settle(a, b);
                    assert_eq!(b.done_len(rid), Some(len), "message {i}");
                }
            }
            assert_eq!(buf, data);
        }
        exchange(a, b);
    }
    rndv
}

#[test]
fn a_sender_with_a_window_of_large_messages_stops_falling_back_after_a_few_requests() {
    // 32 messages of 64 KiB in flight, a receiver that keeps up: from the
    // third burst on every message goes eagerly (grants of twice what was
    // used took five bursts: 31, 30, 28, 24 and 16 messages by rendezvous).
    let cfg = UcpConfig {
        unexpected_max: MemUnits::Bytes(64 << 20),
        rndv_thresh: MemUnits::Inf,
        ..UcpConfig::default()
    };
    let (mut a, mut b) = Node::pair(virt_attr(|_| {}), cfg);
    let rndv = bursts(&mut a, &mut b, 64 << 10, 32, 12);
    let ramp = rndv.iter().position(|&r| r == 0);
    assert!(
        matches!(ramp, Some(r) if r <= 2),
        "rendezvous per burst: {rndv:?}"
    );
    assert!(
        rndv[2..].iter().all(|&r| r == 0),
        "rendezvous per burst: {rndv:?}"
    );
}

#[test]
fn without_a_limit_the_first_request_grants_everything() {
    let (mut a, mut b) = pair(MemUnits::Inf);
    let mut sent = Vec::new();
    let (ids, c) = stream(&mut a, &mut b, 2000, &mut sent);
    assert_eq!((c.eager, c.rts), (2000, 0));
    assert!(ids.is_empty());
    assert_eq!(a.core.eps.get(a.ep).unwrap().credit.ask_at, u64::MAX);
    drain(&mut a, &mut b, &sent);
}

#[test]
fn a_malformed_credit_message_is_refused_and_a_forged_grant_only_raises_the_limit() {
    let (mut a, _b) = pair(MemUnits::Bytes(4096));
    let before = a.core.eps.get(a.ep).unwrap().credit.limit;
    a.arrive(AM_CREDIT, &[7, 0, 0, 0, 0, 0, 0, 0, 0]);
    a.arrive(AM_CREDIT, &[1, 0]);
    a.arrive(AM_CREDIT, &[0; 9]);
    assert_eq!(a.core.eps.get(a.ep).unwrap().credit.limit, before);
    let mut m = vec![1];
    m.extend_from_slice(&5u64.to_le_bytes());
    a.arrive(AM_CREDIT, &m);
    assert_eq!(a.core.eps.get(a.ep).unwrap().credit.limit, before);
}

#[test]
fn a_request_claiming_more_than_was_granted_counts_as_the_grant() {
    let (mut a, mut b) = pair(MemUnits::Bytes(1 << 20));
    let mut m = vec![0];
    m.extend_from_slice(&u64::MAX.to_le_bytes());
    m.extend_from_slice(&0u64.to_le_bytes());
    b.arrive(AM_CREDIT, &m);
    exchange(&mut a, &mut b);
    // The claim is taken as the whole initial credit used; the budget
    // counts the new grant, which the sender got.
    let limit = a.core.eps.get(a.ep).unwrap().credit.limit;
    assert!(limit > CREDIT_INITIAL && limit <= CREDIT_INITIAL + (1 << 20));
    assert_eq!(b.core.unexp.out(), limit - CREDIT_INITIAL);
}

#[test]
fn a_limit_below_the_initial_credit_slows_a_sender_once_and_not_for_good() {
    let (mut a, mut b) = pair(MemUnits::Bytes(64 * 1024));
    let mut buf = vec![0u8; LEN];
    let mut rts = 0;
    for i in 0..5000u64 {
        let data = msg(i);
        let started = a.send(&data, 5, Op::new()).unwrap();
        let n = a.tx.ams_of(AM_RNDV_RTS).len();
        rts += n;
        exchange(&mut a, &mut b);
        match b.recv(&mut buf, 5, !0).unwrap() {
            RecvStarted::Done(_) => assert_eq!(n, 0),
            RecvStarted::InFlight(rid) => {
                exchange(&mut a, &mut b);
                assert_eq!(b.done_len(rid), Some(LEN));
                assert!(matches!(started, Started::InFlight(_)));
            }
        }
        assert_eq!(buf, data, "message {i}");
        if i >= 4000 {
            assert_eq!(n, 0, "message {i} went by rendezvous");
        }
    }
    assert!(rts <= 2, "{rts} announcements");
    assert_eq!(b.core.unexp.held(), 0);
}

#[test]
fn a_forged_request_to_a_worker_without_a_limit_is_answered_not_a_panic() {
    let (mut a, mut b) = pair(MemUnits::Inf);
    let mut m = vec![0];
    m.extend_from_slice(&u64::MAX.to_le_bytes());
    m.extend_from_slice(&u64::MAX.to_le_bytes());
    b.arrive(AM_CREDIT, &m);
    exchange(&mut a, &mut b);
    assert_eq!(a.core.eps.get(a.ep).unwrap().credit.limit, u64::MAX);
}
