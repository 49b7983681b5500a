//! Rendezvous by get: the sender's `RNDV_RTS_GET` offers its registered
//! buffer, the receiver reads it with `get_zcopy` reads (checked here
//! against the key's range, and the bytes moved), answers `RNDV_ATS` once
//! they completed, and the sender completes on the ATS. Reads failing,
//! a full lane, stray answers and truncation.

use crate::proto::select::RndvScheme;
use crate::proto::testing::{
    deliver, exchange, finish_reads, le, pattern, rndv_config, rndv_pair, unexpected_then_recv,
    virt_attr, Node, Sent,
};
use crate::proto::wire::{AM_RNDV_ATS, AM_RNDV_RTR, AM_RNDV_RTS_GET, RTS_GET_HDR};
use crate::uct::{AmSink, EpId, Token};
use crate::Error;

const LEN: usize = 20_000;
/// The largest read: `LEN` takes five.
const FRAG: usize = 4096;

fn nodes() -> (Node, Node) {
    rndv_pair(RndvScheme::GetZcopy, FRAG as u64)
}

/// The reads `n` posted, as (remote address, length, token).
fn gets(n: &Node) -> Vec<(u64, usize, Token)> {
    n.tx.rmas(true)
}

#[test]
fn the_receiver_reads_the_whole_buffer_then_both_complete() {
    let (mut a, mut b) = nodes();
    let data = pattern(LEN);
    let mut buf = vec![0u8; LEN];
    let rid = b.recv_pending(&mut buf, 0x99);
    let sid = a.send_pending(&data, 0x99);
    let rts = a.tx.ams_of(AM_RNDV_RTS_GET);
    assert_eq!(rts.len(), 1);
    let addr = data.as_ptr() as u64;
    assert_eq!(
        &rts[0][..RTS_GET_HDR],
        &le(&[0x99, sid.to_u64(), LEN as u64, addr])[..]
    );
    assert!(rts[0].len() > RTS_GET_HDR, "a packed key follows");
    deliver(&mut a, &mut b);
    // Reads of at most FRAG bytes, back to back over the sender's buffer.
    let g = gets(&b);
    assert_eq!(g.len(), LEN.div_ceil(FRAG));
    let mut at = addr;
    for &(remote, len, token) in &g {
        assert_eq!((remote, token), (at, Token(rid.to_u64())));
        assert!(len <= FRAG);
        at += len as u64;
    }
    assert_eq!(at, addr + LEN as u64);
    assert_eq!(buf, data, "the reads moved the bytes");
    // Nothing completes before the reads did.
    assert!(b.tx.ams_of(AM_RNDV_ATS).is_empty());
    assert!(b.result(rid).is_none());
    b.complete_all(Ok(()));
    assert_eq!(b.done_len(rid), Some(LEN));
    assert_eq!(b.tx.ams_of(AM_RNDV_ATS), vec![le(&[sid.to_u64()])]);
    assert!(a.result(sid).is_none());
    deliver(&mut b, &mut a);
    assert_eq!(a.done_len(sid), Some(LEN));
}

#[test]
fn an_unexpected_rts_is_read_once_a_receive_matches() {
    let (mut a, mut b) = nodes();
    let data = pattern(LEN);
    let mut buf = vec![0u8; LEN];
    let (sid, rid) = unexpected_then_recv(&mut a, &mut b, &data, &mut buf, 4);
    assert_eq!(gets(&b).len(), LEN.div_ceil(FRAG));
    b.complete_all(Ok(()));
    exchange(&mut a, &mut b);
    assert_eq!(b.done_len(rid), Some(LEN));
    assert_eq!(a.done_len(sid), Some(LEN));
    assert_eq!(buf, data);
}

#[test]
fn a_failed_read_fails_the_receive_and_still_frees_the_sender() {
    let (mut a, mut b) = nodes();
    let mut buf = vec![0u8; LEN];
    let rid = b.recv_pending(&mut buf, 5);
    let sid = a.send_pending(&pattern(LEN), 5);
    deliver(&mut a, &mut b);
    let first = gets(&b)[0].2;
    b.complete(
        first,
        Err(crate::ucs::Error::remote_access(
            "rec",
            crate::ucs::AccessDenied::Refused("read".into()),
        )),
    );
    assert!(b.result(rid).is_none(), "other reads are still in flight");
    b.complete_all(Ok(()));
    assert!(matches!(
        b.result(rid),
        Some(Err(Error::EndpointFailed { .. }))
    ));
    // The sender's buffer is no longer needed: the ATS says so.
    deliver(&mut b, &mut a);
    assert_eq!(a.done_len(sid), Some(LEN));
}

#[test]
fn a_full_lane_holds_the_reads_until_it_has_room() {
    let (mut a, mut b) = nodes();
    let data = pattern(LEN);
    let mut buf = vec![0u8; LEN];
    let rid = b.recv_pending(&mut buf, 6);
    let sid = a.send_pending(&data, 6);
    b.tx.room_for = Some(2);
    deliver(&mut a, &mut b);
    assert_eq!(gets(&b).len(), 2);
    let pending = Sent::Pending { ep: EpId(0) };
    assert_eq!(b.tx.sent.last(), Some(&pending));
    // The two reads completing does not finish a receive with reads to post.
    b.complete_all(Ok(()));
    assert!(b.result(rid).is_none());
    assert!(b.tx.ams_of(AM_RNDV_ATS).is_empty());
    b.room();
    assert_eq!(gets(&b).len(), LEN.div_ceil(FRAG));
    finish_reads(&mut a, &mut b, (sid, rid), LEN);
    assert_eq!(buf, data);
}

#[test]
fn a_short_receive_buffer_reads_what_fits_and_truncates() {
    let (mut a, mut b) = nodes();
    let data = pattern(LEN);
    let mut buf = vec![0u8; 5000];
    let rid = b.recv_pending(&mut buf, 7);
    let sid = a.send_pending(&data, 7);
    deliver(&mut a, &mut b);
    assert_eq!(gets(&b).iter().map(|g| g.1).sum::<usize>(), 5000);
    b.complete_all(Ok(()));
    assert!(matches!(
        b.result(rid),
        Some(Err(Error::Truncated {
            length: LEN,
            capacity: 5000
        }))
    ));
    assert_eq!(buf, data[..5000]);
    deliver(&mut b, &mut a);
    assert_eq!(a.done_len(sid), Some(LEN));
}

#[test]
fn stray_answers_do_not_complete_the_send() {
    let (mut a, _) = nodes();
    let sid = a.send_pending(&pattern(LEN), 8);
    a.tx.sent.clear();
    // An ATS for nothing, an RTR (another scheme's answer) for this send.
    a.arrive(AM_RNDV_ATS, &le(&[sid.to_u64() ^ (1 << 40)]));
    a.arrive(AM_RNDV_RTR, &le(&[sid.to_u64(), 3]));
    assert!(a.tx.sent.is_empty());
    assert!(a.result(sid).is_none());
    // The real ATS, twice: one completion.
    a.arrive(AM_RNDV_ATS, &le(&[sid.to_u64()]));
    a.arrive(AM_RNDV_ATS, &le(&[sid.to_u64()]));
    assert_eq!(a.done_len(sid), Some(LEN));
}

#[test]
fn endpoint_failure_while_awaiting_the_ats_fails_the_send() {
    let (mut a, _) = nodes();
    let sid = a.send_pending(&pattern(LEN), 9);
    a.core
        .ep_failed(EpId(0), crate::error::peer_failed("gone".into()));
    a.run();
    assert!(matches!(
        a.result(sid),
        Some(Err(Error::EndpointFailed { .. }))
    ));
    a.arrive(AM_RNDV_ATS, &le(&[sid.to_u64()]));
    assert!(matches!(
        a.result(sid),
        Some(Err(Error::EndpointFailed { .. }))
    ));
}

#[test]
fn a_key_from_another_net_is_refused() {
    let (mut a, _) = nodes();
    let mut c = Node::with_config(virt_attr(|_| {}), rndv_config(RndvScheme::GetZcopy, 1024));
    let mut buf = vec![0u8; LEN];
    let rid = c.recv_pending(&mut buf, 10);
    a.send_pending(&pattern(LEN), 10);
    deliver(&mut a, &mut c);
    assert!(gets(&c).is_empty(), "nothing read through a foreign key");
    assert!(c.result(rid).is_none());
}

#[test]
fn an_endpoint_failing_while_reads_wait_for_room_fails_the_receive() {
    let (mut a, mut b) = nodes();
    let mut buf = vec![0u8; LEN];
    let rid = b.recv_pending(&mut buf, 11);
    a.send_pending(&pattern(LEN), 11);
    b.tx.room_for = Some(2);
    deliver(&mut a, &mut b);
    assert_eq!(gets(&b).len(), 2);
    assert_eq!(b.tx.sent.last(), Some(&Sent::Pending { ep: EpId(0) }));
    // The transport fails the endpoint: its operations in flight end with
    // an error. The receive waits for them, not for the room it asked
    // for, which a failed transport need never give.
    let e = || crate::error::peer_failed("gone".into());
    b.tx.fail = Some(e());
    b.core.ep_failed(EpId(0), e());
    b.run();
    assert!(b.result(rid).is_none(), "two reads are still in flight");
    b.complete_all(Err(e()));
    assert!(matches!(
        b.result(rid),
        Some(Err(Error::EndpointFailed { .. }))
    ));
    // Room reported late changes nothing.
    b.core.pending_ready(EpId(0), Token(b.ep.to_u64()));
    b.run();
    assert_eq!(gets(&b).len(), 2, "nothing posted on a failed endpoint");
}
