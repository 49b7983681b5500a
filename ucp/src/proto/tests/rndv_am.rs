//! Rendezvous over active messages: `RNDV_RTS`, the receiver's
//! `RNDV_RTR`, then `RNDV_DATA` fragments. Both orders of receive and
//! request to send, the data arriving intact or truncated, answers that
//! name unknown sends or come twice or belong to another scheme, and a
//! failure at each step.

use crate::proto::select::RndvScheme;
use crate::proto::testing::{
    deliver, exchange, le, pattern, rndv_config, unexpected_then_recv, virt_attr, Node, Sent,
};
use crate::proto::wire::{
    AM_RNDV_ATP, AM_RNDV_ATS, AM_RNDV_DATA, AM_RNDV_RTR, AM_RNDV_RTR_PUT, AM_RNDV_RTS,
};
use crate::ucs::slab::SlabId;
use crate::uct::{AmSink, EpId, SrcId, Token};
use crate::Error;

/// Bytes of the messages sent here: several data fragments.
const LEN: usize = 20_000;

fn nodes() -> (Node, Node) {
    let cfg = rndv_config(RndvScheme::Am, 1024);
    (
        Node::with_config(virt_attr(|_| {}), cfg.clone()),
        Node::with_config(virt_attr(|_| {}), cfg),
    )
}

/// The offsets of the `RNDV_DATA` fragments `n` sent, all for `rreq`, and
/// the bytes they carry put together.
fn data_sent(n: &Node, rreq: SlabId) -> (Vec<u64>, Vec<u8>) {
    let mut offsets = Vec::new();
    let mut bytes = Vec::new();
    for d in n.tx.ams_of(AM_RNDV_DATA) {
        assert_eq!(
            &d[..8],
            &le(&[rreq.to_u64()])[..],
            "data for another receive"
        );
        offsets.push(u64::from_le_bytes(d[8..16].try_into().unwrap()));
        bytes.extend_from_slice(&d[16..]);
    }
    (offsets, bytes)
}

/// Checks that `b` answered send `sid` with an RTR naming receive `rid`,
/// then exchanges messages until both completed whole.
fn answered_then_done(a: &mut Node, b: &mut Node, (sid, rid): (SlabId, SlabId)) {
    let rtr = le(&[sid.to_u64(), rid.to_u64()]);
    assert_eq!(b.tx.ams_of(AM_RNDV_RTR), vec![rtr]);
    exchange(a, b);
    assert_eq!(a.done_len(sid), Some(LEN));
    assert_eq!(b.done_len(rid), Some(LEN));
}

#[test]
fn receive_posted_before_the_rts() {
    let (mut a, mut b) = nodes();
    let data = pattern(LEN);
    let mut buf = vec![0u8; LEN];
    let rid = b.recv_pending(&mut buf, 0x77);
    let sid = a.send_pending(&data, 0x77);
    assert_eq!(
        a.tx.ams_of(AM_RNDV_RTS),
        vec![le(&[0x77, sid.to_u64(), LEN as u64])]
    );
    assert_eq!(a.tx.sent.len(), 1, "nothing but the request to send");
    deliver(&mut a, &mut b);
    assert_eq!(
        b.tx.ams_of(AM_RNDV_RTR),
        vec![le(&[sid.to_u64(), rid.to_u64()])]
    );
    assert!(b.result(rid).is_none());
    deliver(&mut b, &mut a);
    // The data went: the send is complete, in fragments at rising offsets.
    assert_eq!(a.done_len(sid), Some(LEN));
    let (offsets, bytes) = data_sent(&a, rid);
    assert!(offsets.len() > 1 && offsets[0] == 0);
    assert!(offsets.windows(2).all(|w| w[0] < w[1]));
    assert_eq!(bytes, data);
    deliver(&mut a, &mut b);
    assert_eq!(b.done_len(rid), Some(LEN));
    assert_eq!(buf, data);
}

#[test]
fn receive_posted_after_the_rts() {
    let (mut a, mut b) = nodes();
    let data = pattern(LEN);
    let mut buf = vec![0u8; LEN];
    let (sid, rid) = unexpected_then_recv(&mut a, &mut b, &data, &mut buf, 5);
    answered_then_done(&mut a, &mut b, (sid, rid));
    assert_eq!(buf, data);
}

#[test]
fn a_short_receive_buffer_truncates() {
    let (mut a, mut b) = nodes();
    let data = pattern(LEN);
    let mut buf = vec![0u8; 3000];
    let rid = b.recv_pending(&mut buf, 8);
    let sid = a.send_pending(&data, 8);
    exchange(&mut a, &mut b);
    assert_eq!(a.done_len(sid), Some(LEN));
    assert!(matches!(
        b.result(rid),
        Some(Err(Error::Truncated {
            length: LEN,
            capacity: 3000
        }))
    ));
    assert_eq!(buf, data[..3000]);
}

#[test]
fn an_rtr_for_an_unknown_send_is_dropped() {
    let (mut a, _) = nodes();
    let data = pattern(LEN);
    let sid = a.send_pending(&data, 1);
    a.tx.sent.clear();
    // A made-up id, and a stale generation of the real one's slot.
    a.arrive(AM_RNDV_RTR, &le(&[0x4242_0000_0001, 9]));
    a.arrive(AM_RNDV_RTR, &le(&[sid.to_u64() ^ (1 << 40), 9]));
    a.arrive(AM_RNDV_RTR, &le(&[sid.to_u64()])[..]);
    assert!(a.tx.sent.is_empty());
    assert!(a.result(sid).is_none());
    // The real answer still works.
    a.arrive(AM_RNDV_RTR, &le(&[sid.to_u64(), 9]));
    assert_eq!(a.done_len(sid), Some(LEN));
    assert_eq!(data_sent(&a, SlabId::from_u64(9)).1, data);
}

#[test]
fn a_duplicate_rtr_sends_the_data_once() {
    let (mut a, _) = nodes();
    let data = pattern(LEN);
    let sid = a.send_pending(&data, 1);
    a.tx.sent.clear();
    let rtr = le(&[sid.to_u64(), 33]);
    // The first answer finds the lane full, the second comes meanwhile.
    a.tx.full = true;
    a.arrive(AM_RNDV_RTR, &rtr);
    assert_eq!(a.tx.sent, vec![Sent::Pending { ep: EpId(0) }]);
    a.tx.sent.clear();
    a.arrive(AM_RNDV_RTR, &rtr);
    a.room();
    assert_eq!(a.done_len(sid), Some(LEN));
    assert_eq!(data_sent(&a, SlabId::from_u64(33)).1, data);
    // And once more after the send completed.
    a.tx.sent.clear();
    a.arrive(AM_RNDV_RTR, &rtr);
    assert!(a.tx.sent.is_empty());
}

#[test]
fn answers_of_other_schemes_do_not_start_the_data() {
    let (mut a, _) = nodes();
    let data = pattern(LEN);
    let sid = a.send_pending(&data, 2);
    a.tx.sent.clear();
    let s = sid.to_u64();
    a.arrive(AM_RNDV_ATS, &le(&[s]));
    a.arrive(AM_RNDV_ATP, &le(&[s, 0]));
    let mut offer = le(&[s, 44, 0x1000, LEN as u64]);
    offer.extend_from_slice(b"not a key");
    a.arrive(AM_RNDV_RTR_PUT, &offer);
    assert!(a.tx.sent.is_empty(), "nothing sent: {:?}", a.tx.am_ids());
    assert!(a.result(sid).is_none());
    a.arrive(AM_RNDV_RTR, &le(&[s, 44]));
    assert_eq!(a.done_len(sid), Some(LEN));
    assert_eq!(data_sent(&a, SlabId::from_u64(44)).1, data);
}

#[test]
fn a_lane_failing_before_the_rts_fails_the_send_at_once() {
    let (mut a, _) = nodes();
    a.tx.fail = Some(crate::error::peer_failed("down".into()));
    let r = a.send(&pattern(LEN), 1, crate::request::Op::new());
    assert!(matches!(r, Err(Error::EndpointFailed { .. })), "{r:?}");
    assert!(a.tx.sent.is_empty());
}

#[test]
fn endpoint_failure_after_the_rts_fails_both_sides() {
    let (mut a, mut b) = nodes();
    let mut buf = vec![0u8; LEN];
    let rid = b.recv_pending(&mut buf, 3);
    let sid = a.send_pending(&pattern(LEN), 3);
    deliver(&mut a, &mut b);
    a.core
        .ep_failed(EpId(0), crate::error::peer_failed("gone".into()));
    a.run();
    assert!(matches!(
        a.result(sid),
        Some(Err(Error::EndpointFailed { .. }))
    ));
    // The receiver learns its sender is gone.
    b.core
        .src_failed(SrcId(0), crate::error::peer_failed("gone".into()));
    b.run();
    assert!(matches!(
        b.result(rid),
        Some(Err(Error::EndpointFailed { .. }))
    ));
}

#[test]
fn a_lane_failing_mid_data_fails_the_send_and_the_receive() {
    let (mut a, mut b) = nodes();
    let data = pattern(LEN);
    let mut buf = vec![0u8; LEN];
    let rid = b.recv_pending(&mut buf, 4);
    let sid = a.send_pending(&data, 4);
    exchange_rts_rtr(&mut a, &mut b);
    // Two fragments go, then the lane is full; they reach the receiver.
    a.tx.room_for = Some(2);
    deliver(&mut b, &mut a);
    let (offsets, bytes) = data_sent(&a, rid);
    assert_eq!(offsets.len(), 2);
    assert!(a.tx.sent.iter().any(|s| matches!(s, Sent::Pending { .. })));
    deliver(&mut a, &mut b);
    assert_eq!(buf[..bytes.len()], data[..bytes.len()]);
    assert!(b.result(rid).is_none());
    // When it has room again, the lane fails.
    a.tx.full = false;
    a.tx.room_for = None;
    a.tx.fail = Some(crate::error::peer_failed("cut".into()));
    a.core.pending_ready(EpId(0), Token(a.ep.to_u64()));
    a.run();
    assert!(matches!(
        a.result(sid),
        Some(Err(Error::EndpointFailed { .. }))
    ));
    b.core
        .src_failed(SrcId(0), crate::error::peer_failed("cut".into()));
    assert!(matches!(
        b.result(rid),
        Some(Err(Error::EndpointFailed { .. }))
    ));
}

/// Carries the RTS to `b` and leaves `b`'s RTR undelivered.
fn exchange_rts_rtr(a: &mut Node, b: &mut Node) {
    deliver(a, b);
    assert_eq!(b.tx.ams_of(AM_RNDV_RTR).len(), 1);
}

#[test]
fn data_that_does_not_fit_the_announced_length_is_refused() {
    let (mut a, mut b) = nodes();
    let data = pattern(LEN);
    let mut buf = vec![0u8; LEN];
    let rid = b.recv_pending(&mut buf, 6);
    a.send_pending(&data, 6);
    exchange_rts_rtr(&mut a, &mut b);
    let r = rid.to_u64();
    let mut beyond = le(&[r, LEN as u64 - 2]);
    beyond.extend_from_slice(&[0xee; 4]);
    b.arrive(AM_RNDV_DATA, &beyond);
    let mut forged = le(&[r ^ (1 << 40), 0]);
    forged.extend_from_slice(&[0xee; 4]);
    b.arrive(AM_RNDV_DATA, &forged);
    assert!(buf.iter().all(|&x| x == 0), "nothing written");
    assert!(b.result(rid).is_none());
}

#[test]
fn a_send_failed_while_awaiting_the_rtr_sends_nothing_when_it_comes() {
    let (mut a, mut b) = nodes();
    let mut buf = vec![0u8; LEN];
    b.recv_pending(&mut buf, 7);
    let sid = a.send_pending(&pattern(LEN), 7);
    exchange_rts_rtr(&mut a, &mut b);
    a.core
        .ep_failed(EpId(0), crate::error::peer_failed("gone".into()));
    a.run();
    assert!(matches!(
        a.result(sid),
        Some(Err(Error::EndpointFailed { .. }))
    ));
    // The user may reuse the buffer now: a late answer must not read it.
    deliver(&mut b, &mut a);
    assert!(
        a.tx.ams_of(AM_RNDV_DATA).is_empty(),
        "data read from a completed send"
    );
}

#[test]
fn a_probed_rts_starts_the_transfer_when_received() {
    let (mut a, mut b) = nodes();
    let data = pattern(LEN);
    let sid = a.send_pending(&data, 9);
    deliver(&mut a, &mut b);
    let (pid, info) = b.core.probe_remove(9, !0).expect("announced");
    assert_eq!((info.tag, info.length), (9, LEN));
    assert!(b.tx.sent.is_empty(), "a probe asks for nothing");
    let mut buf = vec![0u8; LEN];
    let Ok(crate::proto::eager_rx::RecvStarted::InFlight(rid)) = b.msg_recv(pid, &mut buf) else {
        panic!("the data is still with the sender");
    };
    answered_then_done(&mut a, &mut b, (sid, rid));
    assert_eq!(buf, data);
}

#[test]
fn data_from_another_source_is_refused() {
    let (mut a, mut b) = nodes();
    let mut buf = vec![0u8; LEN];
    let rid = b.recv_pending(&mut buf, 11);
    a.send_pending(&pattern(LEN), 11);
    exchange_rts_rtr(&mut a, &mut b);
    let mut d = le(&[rid.to_u64(), 0]);
    d.extend_from_slice(&[0xee; 16]);
    b.core.am(AM_RNDV_DATA, SrcId(1), &d);
    b.run();
    assert!(buf.iter().all(|&x| x == 0), "written by a stranger");
    assert!(b.result(rid).is_none());
}
