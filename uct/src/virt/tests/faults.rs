//! Delay, bandwidth, jitter, reordering, loss, filters, windows and
//! determinism.

use super::*;
use crate::virt::{Fate, Op, TraceEvent, Verdict};

#[test]
fn latency_holds_messages_until_due() {
    let net = net_with(link(1000), |_| {});
    let (mut a, mut b) = (node(&net, "a"), node(&net, "b"));
    let ep = a.connect(&b);
    a.send(ep, b"hello");
    assert_eq!(net.next_event_time(), Some(1000));
    assert_eq!(b.progress(), 0);
    net.advance(999);
    assert_eq!(b.progress(), 0, "not due yet");
    net.advance(1);
    assert_eq!(b.progress(), 1);
    assert_eq!(b.log.payloads(), [b"hello".to_vec()]);
    assert_eq!(net.next_event_time(), None);
    assert_eq!(net.trace()[0].time, 1000);
    assert_eq!(net.trace()[0].fate, Fate::Delivered);
}

#[test]
fn bandwidth_queues_messages_behind_each_other() {
    let slow = LinkConfig {
        latency: 100,
        bandwidth: 1_000_000_000, // one byte per nanosecond
        ..LinkConfig::IDEAL
    };
    let net = net_with(slow, |_| {});
    let (mut a, mut b) = (node(&net, "a"), node(&net, "b"));
    let ep = a.connect(&b);
    a.send(ep, &[1; 1000]);
    a.send(ep, &[2; 1000]);
    let mut times = Vec::new();
    while let Some(t) = net.step(|| b.progress()).unwrap() {
        times.push(t);
    }
    assert_eq!(times, [1100, 2100]);
    assert_eq!(b.log.payloads().len(), 2);
}

#[test]
fn each_link_has_its_own_delay() {
    let net = net_with(link(100), |_| {});
    let (mut a, mut b, mut c) = (node(&net, "a"), node(&net, "b"), node(&net, "c"));
    net.set_link(a.iface.node(), c.iface.node(), Some(link(5000)))
        .unwrap();
    let (ac, bc) = (a.connect(&c), b.connect(&c));
    a.send(ac, b"slow");
    b.send(bc, b"fast");
    drive(&net, &mut [&mut c]);
    assert_eq!(c.log.payloads(), [b"fast".to_vec(), b"slow".to_vec()]);
    assert_eq!(net.now(), 5000);
    // Back to the default.
    net.set_link(a.iface.node(), c.iface.node(), None).unwrap();
    a.send(ac, b"now fast");
    assert_eq!(net.next_event_time(), Some(5100));
    assert!(net
        .set_link(a.iface.node(), super::super::NodeId(99), None)
        .is_err());
}

/// Sends 200 numbered messages a -> b over `cfg` and returns the numbers
/// in arrival order.
fn numbered(cfg: LinkConfig, seed: u64) -> (Vec<u8>, Vec<TraceEvent>) {
    let net = net_with(cfg, |c| c.seed = seed);
    let (mut a, mut b) = (node(&net, "a"), node(&net, "b"));
    let ep = a.connect(&b);
    for i in 0..200u8 {
        a.send(ep, &[i]);
        net.advance(1000);
        b.progress();
    }
    drive(&net, &mut [&mut a, &mut b]);
    let order = b.log.payloads().into_iter().map(|p| p[0]).collect();
    (order, net.trace())
}

fn jittery(reorder: bool) -> LinkConfig {
    LinkConfig {
        latency: 1000,
        jitter: 10_000,
        reorder,
        ..LinkConfig::IDEAL
    }
}

#[test]
fn jitter_without_reordering_keeps_order() {
    let (order, trace) = numbered(jittery(false), 1);
    assert_eq!(order, (0..200).collect::<Vec<u8>>());
    let mut times: Vec<u64> = trace.iter().map(|t| t.time).collect();
    assert!(times.windows(2).all(|w| w[0] <= w[1]));
    times.dedup();
    assert!(times.len() > 10, "jitter spreads arrivals: {times:?}");
}

#[test]
fn reordering_mode_breaks_order_but_delivers_all() {
    let (order, _) = numbered(jittery(true), 1);
    assert_ne!(order, (0..200).collect::<Vec<u8>>(), "some overtaking");
    let mut sorted = order.clone();
    sorted.sort_unstable();
    assert_eq!(sorted, (0..200).collect::<Vec<u8>>(), "nothing lost");
}

#[test]
fn loss_drops_messages_and_zcopy_still_completes() {
    let lossy = LinkConfig {
        loss: 0.5,
        ..LinkConfig::IDEAL
    };
    let net = net_with(lossy, |_| {});
    let (mut a, mut b) = (node(&net, "a"), node(&net, "b"));
    let ep = a.connect(&b);
    for i in 0..100u64 {
        let posted = a.zcopy(ep, &i.to_le_bytes(), Token(i)).unwrap();
        assert_eq!(posted, Posted::InFlight);
        drive(&net, &mut [&mut a, &mut b]);
    }
    let got = b.log.payloads().len();
    assert!((20..80).contains(&got), "{got} of 100 arrived at loss 0.5");
    for i in 0..100u64 {
        let n = a.log.count(|e| *e == Ev::Done(Token(i), None));
        assert_eq!(n, 1, "token {i} completes once, with Ok");
    }
    let dropped = net
        .trace()
        .iter()
        .filter(|t| t.fate == Fate::Dropped)
        .count();
    assert_eq!(dropped, 100 - got);
    // The survivors arrive in order.
    let seqs: Vec<u64> = b
        .log
        .payloads()
        .iter()
        .map(|p| u64::from_le_bytes(p[..8].try_into().unwrap()))
        .collect();
    assert!(seqs.windows(2).all(|w| w[0] < w[1]));
}

#[test]
fn filter_drops_and_delays_chosen_messages() {
    let net = net_with(link(10), |_| {});
    let (mut a, mut b) = (node(&net, "a"), node(&net, "b"));
    let ep = a.connect(&b);
    net.set_filter(|p| match p.data.first() {
        Some(b'x') => Verdict::Drop,
        Some(b'd') if p.op == Op::Bcopy => Verdict::Delay(1000),
        _ => Verdict::Pass,
    });
    for m in [&b"1"[..], b"x", b"d", b"2"] {
        a.send(ep, m);
    }
    drive(&net, &mut [&mut b]);
    // In-order link: the delayed message holds up the one behind it.
    assert_eq!(
        b.log.payloads(),
        [b"1".to_vec(), b"d".to_vec(), b"2".to_vec()]
    );
    let trace = net.take_trace();
    let fate = |seq| {
        trace
            .iter()
            .find(|t| t.seq == seq)
            .map(|t| (t.fate, t.time))
    };
    assert_eq!(fate(0), Some((Fate::Delivered, 10)));
    assert_eq!(fate(1), Some((Fate::Dropped, 10)));
    assert_eq!(fate(2), Some((Fate::Delivered, 1010)));
    assert_eq!(fate(3), Some((Fate::Delivered, 1010)));
    assert!(net.trace().is_empty());

    // Where reordering is allowed, the delayed message comes last.
    let reorder = LinkConfig {
        reorder: true,
        ..link(10)
    };
    net.set_link(a.iface.node(), b.iface.node(), Some(reorder))
        .unwrap();
    b.log.0.clear();
    for m in [&b"d"[..], b"3", b"4"] {
        a.send(ep, m);
    }
    net.clear_filter();
    a.send(ep, b"d");
    drive(&net, &mut [&mut b]);
    let want: Vec<Vec<u8>> = vec![b"3".to_vec(), b"4".to_vec(), b"d".to_vec(), b"d".to_vec()];
    assert_eq!(b.log.payloads(), want);
}

#[test]
fn window_refuses_then_pending_token_comes_back() {
    let small = LinkConfig {
        window_msgs: 2,
        ..LinkConfig::IDEAL
    };
    let net = net_with(small, |_| {});
    let (mut a, mut b) = (node(&net, "a"), node(&net, "b"));
    let ep = a.connect(&b);
    assert_eq!(
        a.iface.am().unwrap().am_short(ep, 1, 1, &[]).unwrap(),
        Posted::Done
    );
    assert_eq!(
        a.iface.am().unwrap().am_short(ep, 1, 2, &[]).unwrap(),
        Posted::Done
    );
    assert_eq!(
        a.iface.am().unwrap().am_short(ep, 1, 3, &[]).unwrap(),
        Posted::NoResource
    );
    assert_eq!(a.zcopy(ep, b"z", Token(5)).unwrap(), Posted::NoResource);
    a.iface.pending_add(ep, Token(7)).unwrap();
    a.iface.pending_add(ep, Token(8)).unwrap();
    assert_eq!(a.progress(), 0, "no room yet");
    assert_eq!(b.progress(), 2);
    assert_eq!(a.progress(), 2);
    assert_eq!(a.log.0, [Ev::Ready(ep, Token(7)), Ev::Ready(ep, Token(8))]);
    assert_eq!(
        a.iface.am().unwrap().am_short(ep, 1, 3, &[]).unwrap(),
        Posted::Done
    );
    assert_eq!(a.progress(), 0, "each token comes back once");

    // A token added while there is room comes back on the next progress.
    a.iface.pending_add(ep, Token(9)).unwrap();
    assert_eq!(a.progress(), 1);
    assert_eq!(a.log.0.last(), Some(&Ev::Ready(ep, Token(9))));
}

#[test]
fn byte_window_lets_one_message_overshoot() {
    let small = LinkConfig {
        window_bytes: 100,
        ..LinkConfig::IDEAL
    };
    let net = net_with(small, |_| {});
    let (mut a, mut b) = (node(&net, "a"), node(&net, "b"));
    let ep = a.connect(&b);
    a.send(ep, &[0; 500]);
    let r = a.iface.am().unwrap().am_bcopy(ep, 1, &[&[1]]).unwrap();
    assert_eq!(r, (Posted::NoResource, 0));
    b.progress();
    a.send(ep, &[1]);
}

/// Two ifaces talking both ways over a link with every fault on.
fn chaos(seed: u64) -> Vec<TraceEvent> {
    let bad = LinkConfig {
        latency: 500,
        bandwidth: 2_000_000_000,
        jitter: 3000,
        reorder: true,
        loss: 0.1,
        ..LinkConfig::IDEAL
    };
    let net = net_with(bad, |c| c.seed = seed);
    let (mut a, mut b) = (node(&net, "a"), node(&net, "b"));
    let (ab, ba) = (a.connect(&b), b.connect(&a));
    for i in 0..50u64 {
        a.send(ab, &vec![i as u8; (i * 37 % 300) as usize]);
        assert_eq!(
            b.zcopy(ba, &i.to_le_bytes(), Token(i)).unwrap(),
            Posted::InFlight
        );
        net.advance(i * 13 % 700);
    }
    drive(&net, &mut [&mut a, &mut b]);
    net.trace()
}

#[test]
fn same_seed_same_trace() {
    let one = chaos(42);
    assert_eq!(one.len(), 100);
    assert!(one.iter().any(|t| t.fate == Fate::Dropped));
    assert_eq!(one, chaos(42));
    assert_ne!(one, chaos(43));
}
