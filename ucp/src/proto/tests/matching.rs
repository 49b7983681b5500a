//! Tag matching of eager messages: messages longer than the receive
//! buffer (truncated, whole or in fragments, posted or unexpected),
//! unexpected messages matched later in arrival order and by mask, and
//! messages taken out by a probe and received afterwards.

use crate::proto::eager_rx::RecvStarted;
use crate::proto::testing::{deliver, le, only, pattern, virt_attr, Node};
use crate::proto::wire::{AM_EAGER_FIRST, AM_EAGER_MIDDLE, AM_EAGER_ONLY, AM_SYNC_ACK};
use crate::request::Op;
use crate::uct::{AmSink, SrcId};
use crate::Error;

fn node() -> Node {
    Node::new(virt_attr(|_| {}))
}

/// The first fragment of message `msg_id` (`total` bytes) with `frag`.
fn first(tag: u64, total: usize, msg_id: u64, frag: &[u8]) -> Vec<u8> {
    [&le(&[tag, total as u64, msg_id])[..], frag].concat()
}

/// A later fragment of message `msg_id` at `offset`.
fn middle(msg_id: u64, offset: usize, frag: &[u8]) -> Vec<u8> {
    [&le(&[msg_id, offset as u64])[..], frag].concat()
}

fn truncated(length: usize, capacity: usize) -> impl Fn(&Error) -> bool {
    move |e| matches!(*e, Error::Truncated { length: l, capacity: c } if (l, c) == (length, capacity))
}

#[test]
fn a_whole_message_longer_than_a_posted_receive_is_truncated() {
    let mut b = node();
    let data = pattern(50);
    let mut buf = vec![0u8; 20];
    let rid = b.recv_pending(&mut buf, 1);
    b.arrive(AM_EAGER_ONLY, &only(1, &data));
    assert!(b.result(rid).unwrap().is_err_and(|e| truncated(50, 20)(&e)));
    assert_eq!(buf, data[..20]);
}

#[test]
fn an_unexpected_message_longer_than_the_receive_is_truncated() {
    let mut b = node();
    let data = pattern(50);
    b.arrive(AM_EAGER_ONLY, &only(2, &data));
    let mut buf = vec![0u8; 20];
    let r = b.recv(&mut buf, 2, !0);
    assert!(r.is_err_and(|e| truncated(50, 20)(&e)));
    assert_eq!(buf, data[..20]);
}

#[test]
fn a_truncated_synchronous_message_is_still_acknowledged() {
    let (mut a, mut b) = (node(), node());
    let data = pattern(50);
    let crate::proto::eager_tx::Started::InFlight(sid) = a.ssend(&data, 3) else {
        panic!("a synchronous send waits for its ack");
    };
    deliver(&mut a, &mut b);
    let mut buf = vec![0u8; 10];
    assert!(b
        .recv(&mut buf, 3, !0)
        .is_err_and(|e| truncated(50, 10)(&e)));
    b.run();
    assert_eq!(b.tx.ams_of(AM_SYNC_ACK), vec![le(&[sid.to_u64()])]);
    deliver(&mut b, &mut a);
    assert_eq!(a.done_len(sid), Some(50));
}

#[test]
fn fragments_beyond_a_posted_receive_are_dropped_and_it_truncates() {
    let mut b = node();
    let data = pattern(300);
    let mut buf = vec![0u8; 120];
    let rid = b.recv_pending(&mut buf, 4);
    b.arrive(AM_EAGER_FIRST, &first(4, 300, 9, &data[..100]));
    b.arrive(AM_EAGER_MIDDLE, &middle(9, 200, &data[200..]));
    assert!(b.result(rid).is_none(), "a fragment is missing");
    b.arrive(AM_EAGER_MIDDLE, &middle(9, 100, &data[100..200]));
    assert!(b
        .result(rid)
        .unwrap()
        .is_err_and(|e| truncated(300, 120)(&e)));
    assert_eq!(buf, data[..120]);
}

#[test]
fn a_receive_matching_a_partly_arrived_message_takes_the_rest() {
    let mut b = node();
    let data = pattern(300);
    b.arrive(AM_EAGER_FIRST, &first(5, 300, 1, &data[..100]));
    b.arrive(AM_EAGER_MIDDLE, &middle(1, 100, &data[100..150]));
    let mut buf = vec![0u8; 300];
    let rid = b.recv_pending(&mut buf, 5);
    assert_eq!(buf[..150], data[..150]);
    // Once matched, the rest may come in any order.
    b.arrive(AM_EAGER_MIDDLE, &middle(1, 250, &data[250..]));
    b.arrive(AM_EAGER_MIDDLE, &middle(1, 150, &data[150..250]));
    assert_eq!(b.done_len(rid), Some(300));
    assert_eq!(buf, data);
}

#[test]
fn an_unexpected_fragment_out_of_order_drops_the_message() {
    let mut b = node();
    let data = pattern(300);
    b.arrive(AM_EAGER_FIRST, &first(5, 300, 1, &data[..100]));
    assert_eq!(b.core.probe(5, !0).map(|i| i.length), Some(300));
    // Past what arrived: unexpected data stays contiguous, and a sender
    // that breaks this loses the message.
    b.arrive(AM_EAGER_MIDDLE, &middle(1, 200, &data[200..]));
    assert!(b.core.probe(5, !0).is_none());
    let mut buf = vec![0u8; 300];
    let rid = b.recv_pending(&mut buf, 5);
    b.arrive(AM_EAGER_MIDDLE, &middle(1, 100, &data[100..]));
    assert_eq!(b.done_len(rid), None);
    assert!(buf.iter().all(|&x| x == 0));
    // The next message with that tag is received.
    b.arrive(AM_EAGER_ONLY, &only(5, b"next"));
    assert_eq!(b.done_len(rid), Some(4));
    assert_eq!(&buf[..4], b"next");
}

#[test]
fn unexpected_messages_match_in_arrival_order_and_by_mask() {
    let mut b = node();
    b.arrive(AM_EAGER_ONLY, &only(0x10, b"one"));
    b.arrive(AM_EAGER_ONLY, &only(0x21, b"two"));
    b.arrive(AM_EAGER_ONLY, &only(0x10, b"three"));
    let mut buf = [0u8; 8];
    // Tag 0x2_ under mask 0xf0 is the second message.
    let r = b.recv(&mut buf, 0x20, 0xf0).unwrap();
    assert!(matches!(r, RecvStarted::Done(i) if i.tag == 0x21 && i.length == 3));
    assert_eq!(&buf[..3], b"two");
    for want in [&b"one"[..], b"three"] {
        let mut buf = [0u8; 8];
        let r = b.recv(&mut buf, 0x10, !0).unwrap();
        assert!(matches!(r, RecvStarted::Done(i) if i.length == want.len()));
        assert_eq!(&buf[..want.len()], want);
    }
    let mut buf = [0u8; 8];
    assert!(matches!(
        b.recv(&mut buf, 0x10, !0),
        Ok(RecvStarted::InFlight(_))
    ));
}

#[test]
fn posted_receives_match_in_posting_order() {
    let mut b = node();
    let (mut x, mut y) = ([0u8; 4], [0u8; 4]);
    let rx = b.recv_pending(&mut x, 7);
    let ry = b.recv_pending(&mut y, 7);
    b.arrive(AM_EAGER_ONLY, &only(7, b"ab"));
    assert_eq!((b.done_len(rx), b.done_len(ry)), (Some(2), None));
    b.arrive(AM_EAGER_ONLY, &only(7, b"cde"));
    assert_eq!(b.done_len(ry), Some(3));
    assert_eq!((&x[..2], &y[..3]), (&b"ab"[..], &b"cde"[..]));
}

#[test]
fn a_probe_sees_and_a_removing_probe_takes_a_message() {
    let mut b = node();
    assert!(b.core.probe(1, !0).is_none());
    b.arrive(AM_EAGER_ONLY, &only(1, b"hello"));
    let seen = b.core.probe(1, !0).expect("the message is there");
    assert_eq!((seen.tag, seen.length), (1, 5));
    let (pid, info) = b.core.probe_remove(1, !0).expect("still there");
    assert_eq!(info.length, 5);
    // Removed: a receive does not match it any more.
    assert!(b.core.probe(1, !0).is_none());
    let mut other = [0u8; 8];
    b.recv_pending(&mut other, 1);
    let mut buf = [0u8; 5];
    let r = b.msg_recv(pid, &mut buf).unwrap();
    assert!(matches!(r, RecvStarted::Done(i) if i.length == 5));
    assert_eq!(&buf, b"hello");
    // A handle is received once.
    assert!(matches!(
        b.msg_recv(pid, &mut buf),
        Err(Error::InvalidHandle)
    ));
}

#[test]
fn a_probed_message_still_arriving_completes_its_receive() {
    let mut b = node();
    let data = pattern(300);
    b.arrive(AM_EAGER_FIRST, &first(2, 300, 4, &data[..100]));
    let (pid, info) = b.core.probe_remove(2, !0).unwrap();
    assert_eq!(info.length, 300);
    b.arrive(AM_EAGER_MIDDLE, &middle(4, 100, &data[100..200]));
    let mut buf = vec![0u8; 300];
    let Ok(RecvStarted::InFlight(rid)) = b.msg_recv(pid, &mut buf) else {
        panic!("the rest has not arrived");
    };
    b.arrive(AM_EAGER_MIDDLE, &middle(4, 200, &data[200..]));
    assert_eq!(b.done_len(rid), Some(300));
    assert_eq!(buf, data);
}

#[test]
fn a_probed_message_whose_sender_failed_cannot_be_received() {
    let mut b = node();
    b.arrive(AM_EAGER_FIRST, &first(2, 300, 4, &pattern(100)));
    let (pid, _) = b.core.probe_remove(2, !0).unwrap();
    b.core
        .src_failed(SrcId(0), crate::error::peer_failed("gone".into()));
    let mut buf = vec![0u8; 300];
    assert!(matches!(
        b.msg_recv(pid, &mut buf),
        Err(Error::EndpointFailed { .. })
    ));
}

#[test]
fn a_standard_send_posts_no_synchronous_header() {
    // The tag alone precedes the data of a standard send.
    let mut a = node();
    let r = a.send(b"xyz", 0x5, Op::new()).unwrap();
    assert!(matches!(r, crate::proto::eager_tx::Started::Done(_)));
    assert_eq!(a.tx.ams_of(AM_EAGER_ONLY), vec![only(5, b"xyz")]);
}

#[test]
fn a_sender_failing_mid_message_fails_its_receive_and_drops_its_unexpected_message() {
    let mut b = node();
    let data = pattern(300);
    let mut buf = vec![0u8; 300];
    let rid = b.recv_pending(&mut buf, 1);
    b.arrive(AM_EAGER_FIRST, &first(1, 300, 1, &data[..100]));
    b.arrive(AM_EAGER_FIRST, &first(2, 300, 2, &data[..100]));
    assert_eq!(b.core.probe(2, !0).map(|i| i.length), Some(300));
    b.core
        .src_failed(SrcId(0), crate::error::peer_failed("gone".into()));
    assert!(matches!(
        b.result(rid),
        Some(Err(Error::EndpointFailed { .. }))
    ));
    assert!(
        b.core.probe(2, !0).is_none(),
        "a message that cannot finish"
    );
    // A fragment of it that was still on its way finds nothing.
    b.arrive(AM_EAGER_MIDDLE, &middle(1, 100, &data[100..]));
    assert!(buf[100..].iter().all(|&x| x == 0));
}
