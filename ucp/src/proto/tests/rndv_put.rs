//! Rendezvous by put: `RNDV_RTS_PUT`, the receiver's `RNDV_RTR_PUT` with
//! its registered buffer, the sender's `put_zcopy` writes (checked here
//! against the key's range, and the bytes moved), then `RNDV_ATP` with
//! the outcome once every write completed. Writes failing, a full lane,
//! truncation, and offers that do not belong to an open put send.

use crate::proto::select::RndvScheme;
use crate::proto::testing::{deliver, le, pattern, rndv_pair, unexpected_then_recv, Node, Sent};
use crate::proto::wire::{
    decode_rtr_put, AM_RNDV_ATP, AM_RNDV_DATA, AM_RNDV_RTR, AM_RNDV_RTR_PUT, AM_RNDV_RTS_PUT,
};
use crate::ucs::slab::SlabId;
use crate::uct::{AmSink, EpId, Token};
use crate::Error;

const LEN: usize = 20_000;
/// The largest write: `LEN` takes five.
const FRAG: usize = 4096;

fn nodes() -> (Node, Node) {
    rndv_pair(RndvScheme::PutZcopy, FRAG as u64)
}

/// The writes `n` posted, as (remote address, length, token).
fn puts(n: &Node) -> Vec<(u64, usize, Token)> {
    n.tx.rmas(false)
}

/// A receive of `buf` on `b` and a send of `data` on `a`, both with
/// `tag`, the request to send delivered and the offer carried back.
fn offered(a: &mut Node, b: &mut Node, data: &[u8], buf: &mut [u8], tag: u64) -> (SlabId, SlabId) {
    let rid = b.recv_pending(buf, tag);
    let sid = a.send_pending(data, tag);
    assert_eq!(
        a.tx.ams_of(AM_RNDV_RTS_PUT),
        vec![le(&[tag, sid.to_u64(), data.len() as u64])]
    );
    deliver(a, b);
    deliver(b, a);
    (sid, rid)
}

#[test]
fn the_sender_writes_the_buffer_then_tells_the_receiver() {
    let (mut a, mut b) = nodes();
    let data = pattern(LEN);
    let mut buf = vec![0u8; LEN];
    let rid = b.recv_pending(&mut buf, 0x31);
    let sid = a.send_pending(&data, 0x31);
    deliver(&mut a, &mut b);
    let offer = b.tx.ams_of(AM_RNDV_RTR_PUT);
    assert_eq!(offer.len(), 1);
    let (fields, key) = decode_rtr_put(&offer[0]).unwrap();
    let addr = buf.as_ptr() as u64;
    assert_eq!(fields, [sid.to_u64(), rid.to_u64(), addr, LEN as u64]);
    assert!(!key.is_empty());
    deliver(&mut b, &mut a);
    let p = puts(&a);
    assert_eq!(p.len(), LEN.div_ceil(FRAG));
    let mut at = addr;
    for &(remote, len, token) in &p {
        assert_eq!((remote, token), (at, Token(sid.to_u64())));
        at += len as u64;
    }
    assert_eq!(at, addr + LEN as u64);
    assert_eq!(buf, data, "the writes moved the bytes");
    // No ATP and no completion before the writes completed.
    assert!(a.tx.ams_of(AM_RNDV_ATP).is_empty());
    assert!(a.result(sid).is_none());
    a.complete_all(Ok(()));
    assert_eq!(a.tx.ams_of(AM_RNDV_ATP), vec![le(&[rid.to_u64(), 0])]);
    assert_eq!(a.done_len(sid), Some(LEN));
    assert!(b.result(rid).is_none());
    deliver(&mut a, &mut b);
    assert_eq!(b.done_len(rid), Some(LEN));
}

#[test]
fn an_unexpected_rts_is_answered_once_a_receive_matches() {
    let (mut a, mut b) = nodes();
    let data = pattern(LEN);
    let mut buf = vec![0u8; LEN];
    let (sid, rid) = unexpected_then_recv(&mut a, &mut b, &data, &mut buf, 2);
    assert_eq!(b.tx.ams_of(AM_RNDV_RTR_PUT).len(), 1);
    deliver(&mut b, &mut a);
    a.complete_all(Ok(()));
    deliver(&mut a, &mut b);
    assert_eq!(a.done_len(sid), Some(LEN));
    assert_eq!(b.done_len(rid), Some(LEN));
    assert_eq!(buf, data);
}

#[test]
fn a_failed_write_fails_both_sides_through_the_atp() {
    let (mut a, mut b) = nodes();
    let mut buf = vec![0u8; LEN];
    let (sid, rid) = offered(&mut a, &mut b, &pattern(LEN), &mut buf, 3);
    let first = puts(&a)[0].2;
    a.complete(
        first,
        Err(crate::ucs::Error::remote_access(
            "rec",
            crate::ucs::AccessDenied::Refused("write".into()),
        )),
    );
    assert!(
        a.tx.ams_of(AM_RNDV_ATP).is_empty(),
        "writes still in flight"
    );
    a.complete_all(Ok(()));
    let atp = a.tx.ams_of(AM_RNDV_ATP);
    assert_eq!(atp.len(), 1);
    assert_eq!(&atp[0][..8], &le(&[rid.to_u64()])[..]);
    assert_ne!(&atp[0][8..], &le(&[0])[..], "the status says it failed");
    assert!(matches!(
        a.result(sid),
        Some(Err(Error::EndpointFailed { .. }))
    ));
    deliver(&mut a, &mut b);
    assert!(matches!(
        b.result(rid),
        Some(Err(Error::EndpointFailed { .. }))
    ));
}

#[test]
fn a_full_lane_holds_the_writes_until_it_has_room() {
    let (mut a, mut b) = nodes();
    let data = pattern(LEN);
    let mut buf = vec![0u8; LEN];
    let rid = b.recv_pending(&mut buf, 4);
    let sid = a.send_pending(&data, 4);
    deliver(&mut a, &mut b);
    a.tx.room_for = Some(2);
    deliver(&mut b, &mut a);
    assert_eq!(puts(&a).len(), 2);
    let pending = Sent::Pending { ep: EpId(0) };
    assert_eq!(a.tx.sent.last(), Some(&pending));
    a.complete_all(Ok(()));
    assert!(a.tx.ams_of(AM_RNDV_ATP).is_empty(), "not all written yet");
    a.room();
    assert_eq!(puts(&a).len(), LEN.div_ceil(FRAG));
    a.complete_all(Ok(()));
    assert_eq!(a.done_len(sid), Some(LEN));
    deliver(&mut a, &mut b);
    assert_eq!(b.done_len(rid), Some(LEN));
    assert_eq!(buf, data);
}

#[test]
fn a_short_receive_buffer_takes_what_fits_and_truncates() {
    let (mut a, mut b) = nodes();
    let data = pattern(LEN);
    let mut buf = vec![0u8; 6000];
    let (sid, rid) = offered(&mut a, &mut b, &data, &mut buf, 5);
    assert_eq!(puts(&a).iter().map(|p| p.1).sum::<usize>(), 6000);
    a.complete_all(Ok(()));
    assert_eq!(a.done_len(sid), Some(LEN));
    deliver(&mut a, &mut b);
    assert!(matches!(
        b.result(rid),
        Some(Err(Error::Truncated {
            length: LEN,
            capacity: 6000
        }))
    ));
    assert_eq!(buf, data[..6000]);
}

#[test]
fn a_plain_rtr_gets_the_data_as_active_messages() {
    // What a receiver that cannot register answers.
    let (mut a, _) = nodes();
    let data = pattern(LEN);
    let sid = a.send_pending(&data, 6);
    a.arrive(AM_RNDV_RTR, &le(&[sid.to_u64(), 12]));
    assert!(puts(&a).is_empty());
    let bytes: Vec<u8> =
        a.tx.ams_of(AM_RNDV_DATA)
            .iter()
            .flat_map(|d| d[16..].to_vec())
            .collect();
    assert_eq!(bytes, data);
    assert_eq!(a.done_len(sid), Some(LEN));
}

#[test]
fn offers_for_unknown_sends_and_stray_atps_are_dropped() {
    let (mut a, mut b) = nodes();
    let data = pattern(LEN);
    let mut buf = vec![0u8; LEN];
    let rid = b.recv_pending(&mut buf, 7);
    let sid = a.send_pending(&data, 7);
    deliver(&mut a, &mut b);
    let offer = b.tx.ams_of(AM_RNDV_RTR_PUT).remove(0);
    b.tx.sent.clear();
    // The offer, naming a stale generation of the send: no write.
    let mut stale = offer.clone();
    stale[..8].copy_from_slice(&(sid.to_u64() ^ (1 << 40)).to_le_bytes());
    a.arrive(AM_RNDV_RTR_PUT, &stale);
    assert!(puts(&a).is_empty());
    // An ATP for a receive that does not exist.
    b.arrive(AM_RNDV_ATP, &le(&[rid.to_u64() ^ (1 << 40), 0]));
    assert!(b.result(rid).is_none());
    // The real offer, twice: written once.
    a.arrive(AM_RNDV_RTR_PUT, &offer);
    a.arrive(AM_RNDV_RTR_PUT, &offer);
    assert_eq!(puts(&a).len(), LEN.div_ceil(FRAG));
    a.complete_all(Ok(()));
    assert_eq!(a.tx.ams_of(AM_RNDV_ATP).len(), 1);
    deliver(&mut a, &mut b);
    assert_eq!(b.done_len(rid), Some(LEN));
    assert_eq!(buf, data);
}

#[test]
fn endpoint_failure_while_awaiting_the_offer_fails_the_send() {
    let (mut a, mut b) = nodes();
    let mut buf = vec![0u8; LEN];
    b.recv_pending(&mut buf, 8);
    let sid = a.send_pending(&pattern(LEN), 8);
    deliver(&mut a, &mut b);
    a.core
        .ep_failed(EpId(0), crate::error::peer_failed("gone".into()));
    a.run();
    assert!(matches!(
        a.result(sid),
        Some(Err(Error::EndpointFailed { .. }))
    ));
    // The user may reuse the buffer now: a late offer must not write it.
    deliver(&mut b, &mut a);
    assert!(puts(&a).is_empty(), "wrote from a completed send");
}

#[test]
fn endpoint_failure_mid_writes_waits_for_them_then_fails() {
    let (mut a, mut b) = nodes();
    let mut buf = vec![0u8; LEN];
    let (sid, _) = offered(&mut a, &mut b, &pattern(LEN), &mut buf, 9);
    assert!(!a.tx.inflight.is_empty());
    a.core
        .ep_failed(EpId(0), crate::error::peer_failed("gone".into()));
    a.run();
    // The writes still own the buffer: no completion before they end.
    assert!(a.result(sid).is_none());
    a.complete_all(Err(crate::ucs::Error::Canceled));
    assert!(matches!(
        a.result(sid),
        Some(Err(Error::EndpointFailed { .. }))
    ));
}

#[test]
fn an_atp_from_another_source_is_refused() {
    let (mut a, mut b) = nodes();
    let mut buf = vec![0u8; LEN];
    let (_, rid) = offered(&mut a, &mut b, &pattern(LEN), &mut buf, 10);
    b.core
        .am(AM_RNDV_ATP, crate::uct::SrcId(1), &le(&[rid.to_u64(), 0]));
    b.run();
    assert!(b.result(rid).is_none(), "completed by a stranger");
    a.complete_all(Ok(()));
    deliver(&mut a, &mut b);
    assert_eq!(b.done_len(rid), Some(LEN));
}

#[test]
fn an_offer_with_a_key_that_does_not_unpack_fails_the_send_and_says_so() {
    let (mut a, mut b) = nodes();
    let mut buf = vec![0u8; LEN];
    let rid = b.recv_pending(&mut buf, 12);
    let sid = a.send_pending(&pattern(LEN), 12);
    deliver(&mut a, &mut b);
    let mut offer = b.tx.take_ams_of(AM_RNDV_RTR_PUT).remove(0);
    offer.truncate(crate::proto::wire::RTR_PUT_HDR);
    offer.extend_from_slice(b"garbage key");
    a.arrive(AM_RNDV_RTR_PUT, &offer);
    assert!(puts(&a).is_empty());
    assert!(matches!(a.result(sid), Some(Err(Error::Transport { .. }))));
    let atp = a.tx.ams_of(AM_RNDV_ATP);
    assert_eq!(atp.len(), 1);
    assert_ne!(&atp[0][8..], &le(&[0])[..], "the receiver is told");
    deliver(&mut a, &mut b);
    assert!(matches!(
        b.result(rid),
        Some(Err(Error::EndpointFailed { .. }))
    ));
    assert!(buf.iter().all(|&x| x == 0));
}
