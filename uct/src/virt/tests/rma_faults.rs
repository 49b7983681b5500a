//! One-sided operations against a misbehaving network and failing peers:
//! every operation completes exactly once, with an error where it did not
//! finish, and no drive loop hangs.

use super::*;
use crate::virt::{Fate, Op, TraceEvent, Verdict};
use std::sync::{Arc, Mutex};

fn rw() -> Access {
    Access::REMOTE_READ | Access::REMOTE_WRITE
}

/// Statuses of the completions in `log`, by token.
fn done(log: &Log) -> Vec<(u64, Option<Status>)> {
    log.0
        .iter()
        .filter_map(|e| match e {
            Ev::Done(t, s) => Some((t.0, *s)),
            _ => None,
        })
        .collect()
}

#[test]
fn a_lost_request_or_reply_fails_the_operation() {
    let net = net_with(link(1000), |_| {});
    let victim: Arc<Mutex<Option<Op>>> = Arc::default();
    let v = Arc::clone(&victim);
    net.set_filter(move |p| match *v.lock().unwrap() {
        Some(op) if op == p.op => Verdict::Drop,
        _ => Verdict::Pass,
    });
    let md = net.memory_domain();
    let mem = Mem::new(&[0; 16]);
    let local = Mem::new(&[8; 16]);
    let (mut a, mut b) = (node(&net, "a"), node(&net, "b"));
    let ep = a.connect(&b);
    let (_, key) = mem.register(&md, rw());
    let lost = Some(Status::TimedOut);
    let iov = |off| [local.iov(off, 4)];

    *victim.lock().unwrap() = Some(Op::Put);
    let r = a.put(ep, &iov(0), mem.addr(0), &key, Token(1));
    assert_eq!(r.unwrap(), Posted::InFlight);
    drive(&net, &mut [&mut a, &mut b]);
    assert_eq!(done(&a.log), [(1, lost)]);
    assert_eq!(net.now(), 1000, "failed when it would have arrived");
    assert_eq!(mem.read(), [0; 16], "a lost put writes nothing");

    *victim.lock().unwrap() = Some(Op::PutAck);
    let r = a.put(ep, &iov(0), mem.addr(4), &key, Token(2));
    assert_eq!(r.unwrap(), Posted::InFlight);
    drive(&net, &mut [&mut a, &mut b]);
    assert_eq!(done(&a.log)[1], (2, lost));
    assert_eq!(mem.read()[4..8], [8; 4], "carried out, answer lost");

    let mine = local.read();
    for (t, op) in [(3, Op::Get), (4, Op::GetReply)] {
        *victim.lock().unwrap() = Some(op);
        let r = a.get(ep, &iov(8), mem.addr(4), &key, Token(t));
        assert_eq!(r.unwrap(), Posted::InFlight);
        drive(&net, &mut [&mut a, &mut b]);
        assert_eq!(done(&a.log)[t as usize - 1], (t, lost), "{op}");
        assert_eq!(local.read(), mine, "{op}: nothing written");
    }

    *victim.lock().unwrap() = None;
    let r = a.get(ep, &iov(8), mem.addr(4), &key, Token(5));
    assert_eq!(r.unwrap(), Posted::InFlight);
    drive(&net, &mut [&mut a, &mut b]);
    assert_eq!(done(&a.log)[4], (5, None), "the endpoint still works");
    assert_eq!(local.read()[8..12], [8; 4]);
    assert_eq!(b.log.0, [], "the target never hears of it");
    let fates: Vec<(Op, Fate)> = net.trace().iter().map(|e| (e.op, e.fate)).collect();
    assert_eq!(fates[0], (Op::Put, Fate::Dropped));
    assert_eq!(fates[2], (Op::PutAck, Fate::Dropped));
}

#[test]
fn peer_death_fails_operations_in_flight() {
    let net = net_with(link(1000), |_| {});
    let md = net.memory_domain();
    let mem = Mem::new(&[0; 16]);
    let local = Mem::new(&[8; 16]);
    let (mut a, b) = (node(&net, "a"), node(&net, "b"));
    let ep = a.connect(&b);
    let (_, key) = mem.register(&md, rw());
    let mine = local.read();
    // Both requests on the wire.
    let r = a.put(ep, &[local.iov(0, 8)], mem.addr(0), &key, Token(1));
    assert_eq!(r.unwrap(), Posted::InFlight);
    let r = a.get(ep, &[local.iov(8, 8)], mem.addr(8), &key, Token(2));
    assert_eq!(r.unwrap(), Posted::InFlight);
    assert_eq!(a.iface.flush(None, Token(3)).unwrap(), Posted::InFlight);
    net.advance(500);
    net.kill(b.iface.node()).unwrap();
    a.progress();
    let reset = Some(Status::ConnectionReset);
    assert_eq!(
        a.log.0,
        [
            Ev::EpFailed(ep),
            Ev::Done(Token(1), reset),
            Ev::Done(Token(2), reset),
            Ev::Done(Token(3), None),
        ]
    );
    drive(&net, &mut [&mut a]);
    assert_eq!(a.log.0.len(), 4, "nothing more");
    assert_eq!(mem.read(), [0; 16]);
    assert_eq!(local.read(), mine);
    assert!(net.trace().iter().all(|e| e.fate == Fate::Lost));

    // A reply on its way back from a peer that dies.
    let c = node(&net, "c");
    let ep = a.connect(&c);
    a.log.0.clear();
    let r = a.get(ep, &[local.iov(8, 8)], mem.addr(0), &key, Token(4));
    assert_eq!(r.unwrap(), Posted::InFlight);
    net.advance(1000);
    assert_eq!(net.on_wire(), 1, "the reply");
    net.kill(c.iface.node()).unwrap();
    drive(&net, &mut [&mut a]);
    assert_eq!(done(&a.log), [(4, reset)]);
    assert_eq!(local.read(), mine);
}

#[test]
fn a_killed_initiator_hears_its_operations_fail() {
    let net = net_with(link(1000), |_| {});
    let md = net.memory_domain();
    let mem = Mem::new(&[0; 8]);
    let (mut a, b) = (node(&net, "a"), node(&net, "b"));
    let ep = a.connect(&b);
    let (_, key) = mem.register(&md, rw());
    let data = Mem::new(&[1; 8]);
    let r = a.put(ep, &[data.iov(0, 8)], mem.addr(0), &key, Token(1));
    assert_eq!(r.unwrap(), Posted::InFlight);
    assert_eq!(a.iface.flush(None, Token(2)).unwrap(), Posted::InFlight);
    net.kill(a.iface.node()).unwrap();
    a.progress();
    let reset = Some(Status::ConnectionReset);
    assert_eq!(done(&a.log), [(1, reset), (2, reset)]);
    drive(&net, &mut [&mut a]);
    assert_eq!(mem.read(), [0; 8], "its request died with it");
}

#[test]
fn ep_destroy_cancels_operations() {
    let net = net_with(link(1000), |_| {});
    let md = net.memory_domain();
    let mem = Mem::new(&[0; 8]);
    let local = Mem::new(&[2; 8]);
    let (mut a, b) = (node(&net, "a"), node(&net, "b"));
    let ep = a.connect(&b);
    let (_, key) = mem.register(&md, rw());
    let r = a.put(ep, &[local.iov(0, 4)], mem.addr(0), &key, Token(1));
    assert_eq!(r.unwrap(), Posted::InFlight);
    let r = a.get(ep, &[local.iov(4, 4)], mem.addr(4), &key, Token(2));
    assert_eq!(r.unwrap(), Posted::InFlight);
    assert_eq!(a.iface.flush(Some(ep), Token(3)).unwrap(), Posted::InFlight);
    assert_eq!(a.iface.flush(None, Token(4)).unwrap(), Posted::InFlight);
    a.iface.ep_destroy(ep);
    drive(&net, &mut [&mut a]);
    let canceled = Some(Status::Canceled);
    assert_eq!(
        done(&a.log),
        [(1, canceled), (2, canceled), (3, canceled), (4, None)]
    );
    assert_eq!(mem.read(), [0; 8]);
    assert_eq!(local.read(), [2; 8]);
    assert_eq!(net.on_wire(), 0);
}

#[test]
fn a_dropped_initiator_writes_nothing_more() {
    let net = net_with(link(1000), |_| {});
    let md = net.memory_domain();
    let mem = Mem::new(&[4; 8]);
    let local = Mem::new(&[9; 8]);
    let (mut a, mut b) = (node(&net, "a"), node(&net, "b"));
    let ep = a.connect(&b);
    let (_, key) = mem.register(&md, rw());
    let r = a.get(ep, &[local.iov(0, 4)], mem.addr(4), &key, Token(1));
    assert_eq!(r.unwrap(), Posted::InFlight);
    let r = a.put(ep, &[local.iov(4, 4)], mem.addr(0), &key, Token(2));
    assert_eq!(r.unwrap(), Posted::InFlight);
    drop(a);
    drive(&net, &mut [&mut b]);
    assert_eq!(local.read(), [9; 8], "the reply found no one");
    assert_eq!(
        mem.read(),
        [9, 9, 9, 9, 4, 4, 4, 4],
        "what it sent is delivered"
    );
    let replies: Vec<Fate> = net
        .trace()
        .iter()
        .filter(|e| matches!(e.op, Op::PutAck | Op::GetReply))
        .map(|e| e.fate)
        .collect();
    assert_eq!(replies, [Fate::Lost, Fate::Lost]);
}

/// Puts and gets both ways over a lossy, jittery, reordering link.
fn chaos(seed: u64) -> (Vec<TraceEvent>, Vec<(u64, Option<Status>)>) {
    let bad = LinkConfig {
        latency: 500,
        bandwidth: 2_000_000_000,
        jitter: 3000,
        reorder: true,
        loss: 0.2,
        ..LinkConfig::IDEAL
    };
    let net = net_with(bad, |c| c.seed = seed);
    let md = net.memory_domain();
    let mem = Mem::new(&[0; 4096]);
    let local = Mem::new(&bytes(0, 4096));
    let (mut a, mut b) = (node(&net, "a"), node(&net, "b"));
    let (ab, ba) = (a.connect(&b), b.connect(&a));
    let (_, key) = mem.register(&md, rw());
    for i in 0..40u64 {
        let off = (i as usize * 97) % 4000;
        let (iov, t) = ([local.iov(off, 64)], Token(i));
        let r = match i % 4 {
            0 => a.put(ab, &iov, mem.addr(off), &key, t),
            1 => a.get(ab, &iov, mem.addr(off), &key, t),
            2 => b.put(ba, &iov, mem.addr(off), &key, t),
            _ => b.get(ba, &iov, mem.addr(off), &key, t),
        };
        assert_eq!(r.unwrap(), Posted::InFlight);
        net.advance(i * 13 % 700);
    }
    drive(&net, &mut [&mut a, &mut b]);
    let mut all = done(&a.log);
    all.extend(done(&b.log));
    all.sort_unstable_by_key(|d| d.0);
    (net.trace(), all)
}

#[test]
fn every_operation_ends_once_under_chaos_and_runs_repeat() {
    let (trace, done) = chaos(42);
    let tokens: Vec<u64> = done.iter().map(|d| d.0).collect();
    assert_eq!(tokens, (0..40).collect::<Vec<_>>(), "each exactly once");
    let lost = done
        .iter()
        .filter(|d| d.1 == Some(Status::TimedOut))
        .count();
    assert!(lost > 0 && lost < 40, "{lost} of 40 lost");
    assert!(done
        .iter()
        .all(|d| matches!(d.1, None | Some(Status::TimedOut))));
    assert_eq!((trace.clone(), done.clone()), chaos(42));
    assert_ne!(trace, chaos(43).0);
}
