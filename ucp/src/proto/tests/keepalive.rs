//! Keepalive rounds: pings to peer-mode endpoints only, answers reset the
//! count, unanswered rounds fail the endpoint, malformed messages refused.

use crate::proto::keepalive::AM_KEEPALIVE;
use crate::proto::testing::{virt_attr, Node};

fn watched() -> Node {
    let mut a = Node::new(virt_attr(|_| {}));
    let ep = a.ep;
    a.core.set_report_failure(ep, true);
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
    // The failed endpoint leaves the watched list at the next round.
    assert_eq!(a.core.ka_watched.len(), 1);
    assert_eq!(a.core.keepalive_round(&mut a.tx, 128, 3), 0);
    assert!(a.core.ka_watched.is_empty());
}

#[test]
fn a_round_walks_the_watched_endpoints_only_and_takes_turns() {
    let mut a = watched();
    let ep = a.ep;
    // Listed twice (peer mode, none, peer again before a round met it):
    // still one ping a round, never two.
    a.core.set_report_failure(ep, false);
    a.core.set_report_failure(ep, true);
    assert_eq!(a.core.ka_watched.len(), 2);
    for _ in 0..3 {
        assert_eq!(a.core.keepalive_round(&mut a.tx, 1, 100), 1);
        assert_eq!(a.core.keepalive_round(&mut a.tx, 128, 100), 1);
    }
    // Back in mode none: no pings, and the entries go.
    a.core.set_report_failure(ep, false);
    assert_eq!(a.core.keepalive_round(&mut a.tx, 128, 100), 0);
    assert!(a.core.ka_watched.is_empty());
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
