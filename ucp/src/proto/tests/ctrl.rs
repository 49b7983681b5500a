//! The core's own protocol messages (acknowledgements, rendezvous
//! answers): queued behind earlier sends while the lane is full, sent in
//! order when it has room, and dropped when the endpoint fails, without
//! being taken for requests of the user.

use crate::proto::select::RndvScheme;
use crate::proto::testing::{deliver, le, pattern, rndv_config, virt_attr, Node};
use crate::proto::wire::{
    AM_EAGER_ONLY, AM_EAGER_SYNC_ONLY, AM_RNDV_RTR, AM_RNDV_RTS, AM_SYNC_ACK,
};
use crate::uct::{AmSink, EpId};

/// A node that matched a synchronous message from request 0x55 and a
/// request to send from request 0x66 while its lane was full: an ack and
/// an RTR wait in its queue. The receive buffers come with it.
fn answers_queued() -> (Node, [Vec<u8>; 2]) {
    let mut b = Node::with_config(virt_attr(|_| {}), rndv_config(RndvScheme::Am, 1024));
    let (mut x, mut y) = (vec![0u8; 8], vec![0u8; 64 * 1024]);
    b.recv_pending(&mut x, 1);
    let rid = b.recv_pending(&mut y, 2);
    b.tx.full = true;
    b.arrive(AM_EAGER_SYNC_ONLY, &[le(&[1, 0x55]), pattern(8)].concat());
    b.arrive(AM_RNDV_RTS, &le(&[2, 0x66, 20_000]));
    assert!(b.tx.ams().is_empty());
    assert_eq!(b.tx.sent.len(), 1, "one request for room");
    b.tx.sent.clear();
    assert!(b.result(rid).is_none());
    (b, [x, y])
}

#[test]
fn queued_answers_go_in_order_when_the_lane_has_room() {
    let (mut b, _bufs) = answers_queued();
    b.room();
    assert_eq!(b.tx.am_ids(), vec![AM_SYNC_ACK, AM_RNDV_RTR]);
    assert_eq!(b.tx.ams_of(AM_SYNC_ACK), vec![le(&[0x55])]);
    assert_eq!(&b.tx.ams_of(AM_RNDV_RTR)[0][..8], &le(&[0x66])[..]);
}

#[test]
fn answers_dropped_by_a_failed_endpoint_are_not_user_requests() {
    let (mut b, _bufs) = answers_queued();
    let (done, err) = (
        b.core.done.released_done,
        b.core.done.released_error.is_some(),
    );
    b.core
        .ep_failed(EpId(0), crate::error::peer_failed("gone".into()));
    b.run();
    assert!(b.tx.ams().is_empty());
    assert_eq!(b.core.done.released_done, done, "internal messages counted");
    assert_eq!(
        b.core.done.released_error.is_some(),
        err,
        "an error nobody made"
    );
}

#[test]
fn an_ack_behind_a_queued_send_waits_its_turn() {
    let mut a = Node::new(virt_attr(|_| {}));
    let mut b = Node::new(virt_attr(|_| {}));
    let mut buf = [0u8; 8];
    b.recv_pending(&mut buf, 1);
    // b's own send waits for room; the ack it owes queues behind it.
    b.tx.full = true;
    let data = pattern(100);
    let own = b.send_pending(&data, 9);
    let crate::proto::eager_tx::Started::InFlight(sid) = a.ssend(&pattern(8), 1) else {
        panic!("waits for its ack");
    };
    deliver(&mut a, &mut b);
    assert!(b.tx.ams().is_empty());
    b.room();
    assert_eq!(b.tx.am_ids(), vec![AM_EAGER_ONLY, AM_SYNC_ACK]);
    assert_eq!(b.done_len(own), Some(100));
    deliver(&mut b, &mut a);
    assert_eq!(a.done_len(sid), Some(8));
}
