//! The bound on unexpected data: over it, the receiver asks the sender
//! for rendezvous; below half of it, for eager sends again. Nothing is
//! lost or reordered on the way.

use crate::proto::core::Unexp;
use crate::proto::eager_rx::RecvStarted;
use crate::proto::testing::{deliver, exchange, pattern, virt_attr, Node};
use crate::proto::throttle::AM_THROTTLE;
use crate::proto::wire::{AM_EAGER_ONLY, AM_RNDV_RTS};
use crate::request::Op;
use crate::ucs::config::MemUnits;
use crate::UcpConfig;

const LEN: usize = 64;

fn pair(limit: u64) -> (Node, Node) {
    let cfg = UcpConfig {
        unexpected_max: MemUnits::Bytes(limit),
        ..UcpConfig::default()
    };
    Node::pair(virt_attr(|_| {}), cfg)
}

fn msg(i: u64) -> Vec<u8> {
    let mut v = pattern(LEN);
    v[..8].copy_from_slice(&i.to_le_bytes());
    v
}

#[test]
fn over_the_limit_senders_switch_to_rendezvous_and_back() {
    let (mut a, mut b) = pair(4096);
    let mut sent = Vec::new();
    let mut ids = Vec::new();
    // Eager until the receiver is over its limit and says so.
    for i in 0..200u64 {
        let data = msg(i);
        if let crate::proto::eager_tx::Started::InFlight(id) = a.send(&data, 5, Op::new()).unwrap()
        {
            ids.push(id);
        }
        sent.push(data);
        exchange(&mut a, &mut b);
    }
    let (held, peak) = (b.core.unexp.held(), b.core.unexp.peak());
    assert!(b.core.eps.get(b.ep).unwrap().throttled_peer);
    assert!(a.core.eps.get(a.ep).unwrap().rndv_only);
    assert!(!ids.is_empty(), "rendezvous sends wait for their receive");
    // Over the limit only announcements queue: their entries, no data.
    let rts = ids.len() * std::mem::size_of::<Unexp>();
    assert!(
        peak <= 4096 + 1024 + rts,
        "held {held}, peak {peak}, rts {rts}"
    );
    assert!(peak > 4096, "the limit was reached");
    // Receive everything, in order; the sends finish as they match.
    let mut buf = vec![0u8; LEN];
    for (i, want) in sent.iter().enumerate() {
        match b.recv(&mut buf, 5, !0).unwrap() {
            RecvStarted::Done(info) => assert_eq!(info.length, LEN),
            RecvStarted::InFlight(rid) => {
                exchange(&mut a, &mut b);
                assert_eq!(b.done_len(rid), Some(LEN), "message {i}");
            }
        }
        assert_eq!(&buf, want, "message {i}");
    }
    exchange(&mut a, &mut b);
    for id in ids {
        assert_eq!(a.done_len(id), Some(LEN));
    }
    assert_eq!(b.core.unexp.held(), 0);
    assert!(!b.core.eps.get(b.ep).unwrap().throttled_peer);
    assert!(!a.core.eps.get(a.ep).unwrap().rndv_only, "eager again");
    a.tx.sent.clear();
    a.send(&msg(0), 5, Op::new()).unwrap();
    assert_eq!(a.tx.ams_of(AM_EAGER_ONLY).len(), 1);
    assert!(a.tx.ams_of(AM_RNDV_RTS).is_empty());
}

#[test]
fn under_the_limit_nothing_changes() {
    let (mut a, mut b) = pair(1 << 20);
    for i in 0..100 {
        a.send(&msg(i), 1, Op::new()).unwrap();
    }
    deliver(&mut a, &mut b);
    assert!(b.tx.ams_of(AM_THROTTLE).is_empty());
    assert!(b.core.unexp.held() >= 100 * LEN);
}

#[test]
fn a_malformed_throttle_message_is_refused() {
    let (mut a, _b) = pair(4096);
    a.arrive(AM_THROTTLE, &[7]);
    assert!(!a.core.eps.get(a.ep).unwrap().rndv_only);
    a.arrive(AM_THROTTLE, &[1]);
    assert!(a.core.eps.get(a.ep).unwrap().rndv_only);
}
