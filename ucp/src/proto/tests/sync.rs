//! Synchronous sends: the sender completes only once the receiver's
//! `SYNC_ACK` says a receive matched the message; stray, stale and
//! repeated acknowledgements change nothing, and an endpoint that fails
//! while the send waits fails it. Fragmented, zero-copy and probed
//! synchronous messages.

use crate::proto::eager_rx::RecvStarted;
use crate::proto::eager_tx::Started;
use crate::proto::testing::{deliver, fragmenting, le, no_rndv, pattern, virt_attr, Node};
use crate::proto::wire::{AM_EAGER_SYNC_FIRST, AM_EAGER_SYNC_ONLY, AM_SYNC_ACK};
use crate::uct::{AmSink, EpId};
use crate::Error;

fn nodes() -> (Node, Node) {
    (Node::new(virt_attr(|_| {})), Node::new(virt_attr(|_| {})))
}

/// Posts a synchronous send of `data` with `tag` on `a`: in flight.
fn ssend(a: &mut Node, data: &[u8], tag: u64) -> crate::ucs::slab::SlabId {
    match a.ssend(data, tag) {
        Started::InFlight(id) => id,
        Started::Done(i) => panic!("a synchronous send finished before its ack: {i:?}"),
    }
}

#[test]
fn completes_only_after_the_receivers_ack() {
    let (mut a, mut b) = nodes();
    let data = pattern(40);
    let id = ssend(&mut a, &data, 0x51);
    // One message carrying tag and sender request, then the data.
    let sent = a.tx.ams_of(AM_EAGER_SYNC_ONLY);
    assert_eq!(sent.len(), 1);
    assert_eq!(&sent[0][..16], &le(&[0x51, id.to_u64()])[..]);
    assert_eq!(&sent[0][16..], &data[..]);
    // Delivered while unexpected: no ack before a receive matched it.
    deliver(&mut a, &mut b);
    assert!(b.tx.ams().is_empty());
    assert!(a.result(id).is_none());
    let mut buf = vec![0u8; 40];
    assert!(matches!(b.recv(&mut buf, 0x51, !0), Ok(RecvStarted::Done(i)) if i.length == 40));
    b.run();
    assert_eq!(
        b.tx.ams_of(AM_SYNC_ACK),
        vec![id.to_u64().to_le_bytes().to_vec()]
    );
    assert_eq!(buf, data);
    assert!(a.result(id).is_none(), "the ack has not arrived yet");
    deliver(&mut b, &mut a);
    assert_eq!(a.done_len(id), Some(40));
}

#[test]
fn a_receive_posted_first_acks_on_arrival() {
    let (mut a, mut b) = nodes();
    let data = pattern(12);
    let mut buf = vec![0u8; 12];
    let rid = b.recv_pending(&mut buf, 3);
    let id = ssend(&mut a, &data, 3);
    deliver(&mut a, &mut b);
    assert_eq!(b.done_len(rid), Some(12));
    assert_eq!(buf, data);
    assert_eq!(b.tx.ams_of(AM_SYNC_ACK), vec![le(&[id.to_u64()])]);
    deliver(&mut b, &mut a);
    assert_eq!(a.done_len(id), Some(12));
}

#[test]
fn duplicate_and_unknown_acks_are_harmless() {
    let (mut a, _) = nodes();
    let first = ssend(&mut a, &pattern(8), 1);
    let second = ssend(&mut a, &pattern(8), 2);
    // An ack for a request that never existed.
    a.arrive(AM_SYNC_ACK, &le(&[0xdead_beef_0000_0042]));
    assert!(a.result(first).is_none() && a.result(second).is_none());
    // The first is acked twice: it completes once, the second stays open.
    a.arrive(AM_SYNC_ACK, &le(&[first.to_u64()]));
    a.arrive(AM_SYNC_ACK, &le(&[first.to_u64()]));
    assert_eq!(a.done_len(first), Some(8));
    assert!(a.result(second).is_none());
    // The endpoint still works.
    a.arrive(AM_SYNC_ACK, &le(&[second.to_u64()]));
    assert_eq!(a.done_len(second), Some(8));
    assert!(matches!(
        a.send(&pattern(4), 9, crate::request::Op::new()),
        Ok(Started::Done(_))
    ));
}

#[test]
fn an_ack_for_a_standard_send_is_ignored() {
    let mut a = Node::new(virt_attr(|_| {}));
    a.tx.full = true;
    let id = a.send_pending(&pattern(8), 4);
    // Not synchronous: an ack must not complete it before its data left.
    a.arrive(AM_SYNC_ACK, &le(&[id.to_u64()]));
    assert!(a.result(id).is_none());
    a.room();
    assert_eq!(a.done_len(id), Some(8));
}

#[test]
fn endpoint_failure_while_awaiting_the_ack_fails_the_send() {
    let (mut a, _) = nodes();
    let id = ssend(&mut a, &pattern(8), 6);
    a.core.ep_failed(EpId(0), crate::ucs::Error::Canceled);
    a.run();
    assert!(matches!(
        a.result(id),
        Some(Err(Error::EndpointFailed { .. }))
    ));
    // A late ack does not overwrite the failure.
    a.arrive(AM_SYNC_ACK, &le(&[id.to_u64()]));
    assert!(matches!(
        a.result(id),
        Some(Err(Error::EndpointFailed { .. }))
    ));
}

#[test]
fn a_truncated_ack_header_completes_nothing() {
    let (mut a, _) = nodes();
    let id = ssend(&mut a, &pattern(8), 7);
    a.arrive(AM_SYNC_ACK, &id.to_u64().to_le_bytes()[..7]);
    assert!(a.result(id).is_none());
}

/// Nodes whose lanes send a 2000-byte message in copied fragments.
fn fragmenting_nodes() -> (Node, Node) {
    (
        Node::with_config(fragmenting(), no_rndv()),
        Node::with_config(fragmenting(), no_rndv()),
    )
}

#[test]
fn a_fragmented_message_is_acknowledged_when_matched_not_when_whole() {
    let (mut a, mut b) = fragmenting_nodes();
    let data = pattern(2000);
    let id = ssend(&mut a, &data, 8);
    let first = a.tx.ams_of(AM_EAGER_SYNC_FIRST);
    assert_eq!(first.len(), 1);
    // Tag, length, message id, then the sender's request.
    assert_eq!(&first[0][24..32], &le(&[id.to_u64()])[..]);
    // Only the first fragment arrives before the receive is posted.
    let mut sent = std::mem::take(&mut a.tx.sent);
    let rest = sent.split_off(1);
    a.tx.sent = sent;
    deliver(&mut a, &mut b);
    let mut buf = vec![0u8; 2000];
    let rid = b.recv_pending(&mut buf, 8);
    b.run();
    assert_eq!(b.tx.ams_of(AM_SYNC_ACK), vec![le(&[id.to_u64()])]);
    assert!(b.result(rid).is_none(), "the rest is still to come");
    a.tx.sent = rest;
    deliver(&mut a, &mut b);
    assert_eq!(b.done_len(rid), Some(2000));
    assert_eq!(buf, data);
    deliver(&mut b, &mut a);
    assert_eq!(a.done_len(id), Some(2000));
}

#[test]
fn a_zero_copy_failure_completes_a_synchronous_send_without_its_ack() {
    let mut a = Node::with_config(
        virt_attr(|_| {}),
        crate::UcpConfig {
            zcopy_thresh: crate::ucs::config::MemUnits::Bytes(64),
            ..no_rndv()
        },
    );
    let id = ssend(&mut a, &pattern(4000), 9);
    assert!(!a.tx.inflight.is_empty(), "sent zero-copy");
    a.complete_all(Err(crate::error::peer_failed("lost".into())));
    assert!(matches!(
        a.result(id),
        Some(Err(Error::EndpointFailed { .. }))
    ));
}

#[test]
fn a_probed_message_is_acknowledged_when_received_not_when_probed() {
    let (mut a, mut b) = nodes();
    let id = ssend(&mut a, &pattern(30), 10);
    deliver(&mut a, &mut b);
    let (pid, _) = b.core.probe_remove(10, !0).expect("arrived");
    b.run();
    assert!(b.tx.ams().is_empty(), "acknowledged by a probe");
    let mut buf = vec![0u8; 30];
    assert!(matches!(
        b.msg_recv(pid, &mut buf),
        Ok(RecvStarted::Done(_))
    ));
    assert_eq!(b.tx.ams_of(AM_SYNC_ACK), vec![le(&[id.to_u64()])]);
    deliver(&mut b, &mut a);
    assert_eq!(a.done_len(id), Some(30));
}
