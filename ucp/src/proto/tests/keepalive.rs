//! Keepalive rounds: pings to peer-mode endpoints only, answers reset the
//! count, unanswered rounds fail the endpoint, malformed messages refused.

use crate::proto::keepalive::AM_KEEPALIVE;
use crate::proto::testing::{virt_attr, Node};

fn watched() -> Node {
    let mut a = Node::new(virt_attr(|_| {}));
    a.core.eps.get_mut(a.ep).unwrap().report_failure = true;
    a
}

#[test]
fn only_endpoints_in_peer_mode_are_pinged() {
    let mut a = Node::new(virt_attr(|_| {}));
    assert_eq!(a.core.keepalive_round(&mut a.tx, 128, 3), 0);
    assert!(a.tx.ams_of(AM_KEEPALIVE).is_empty());
    let mut a = watched();
    assert_eq!(a.core.keepalive_round(&mut a.tx, 128, 3), 1);
    assert_eq!(a.tx.ams_of(AM_KEEPALIVE), vec![vec![0u8]]);
}

#[test]
fn unanswered_rounds_fail_the_endpoint_and_answers_reset_them() {
    let mut a = watched();
    for _ in 0..3 {
        a.core.keepalive_round(&mut a.tx, 128, 3);
        a.run();
    }
    // A pong: heard from the peer.
    a.arrive(AM_KEEPALIVE, &[1]);
    assert_eq!(a.core.eps.get(a.ep).unwrap().ka_missed, 0);
    for _ in 0..3 {
        a.core.keepalive_round(&mut a.tx, 128, 3);
    }
    assert!(a.core.eps.get(a.ep).unwrap().failed.is_none());
    a.core.keepalive_round(&mut a.tx, 128, 3);
    let e = a
        .core
        .eps
        .get(a.ep)
        .unwrap()
        .failed
        .clone()
        .expect("failed");
    assert!(e.to_string().contains("keepalive"), "{e}");
}

#[test]
fn a_ping_is_answered_and_nonsense_refused() {
    let mut b = Node::new(virt_attr(|_| {}));
    b.arrive(AM_KEEPALIVE, &[0]);
    assert_eq!(b.tx.ams_of(AM_KEEPALIVE), vec![vec![1u8]]);
    b.tx.sent.clear();
    b.arrive(AM_KEEPALIVE, &[7]);
    b.arrive(AM_KEEPALIVE, &[0, 0]);
    b.arrive(AM_KEEPALIVE, &[]);
    assert!(b.tx.ams_of(AM_KEEPALIVE).is_empty());
}
