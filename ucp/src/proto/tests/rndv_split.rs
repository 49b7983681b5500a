//! Split rendezvous by get: within the host, the receiver of a large
//! `RNDV_RTS_GET` offers the tail of its buffer (`RNDV_RTR_SPLIT`, from a
//! page boundary) for the sender to write while it reads the head, or,
//! when its worker's uuid is the larger, offers the head
//! (`RNDV_RTR_SPLIT_HEAD`) and reads the tail. Both orders of the
//! receiver's ATS and the sender's ATP, a failed write, a failed read,
//! the sender's source failing, and offers the sender must refuse.

use crate::proto::select::RndvScheme;
use crate::proto::testing::{deliver, finish_reads, le, pattern, rndv_config, virt_attr, Node};
use crate::proto::wire::{
    decode_rtr_put, AM_RNDV_ATP, AM_RNDV_ATS, AM_RNDV_RTR_SPLIT, AM_RNDV_RTR_SPLIT_HEAD,
};
use crate::ucs::config::MemUnits;
use crate::ucs::slab::SlabId;
use crate::uct::{AmSink, DeviceType, SrcId, Token};
use crate::Error;

const LEN: usize = 20_000;
/// Where the message splits: half of it, down to a page boundary.
const HEAD: usize = 8192;

fn nodes() -> (Node, Node) {
    let mut cfg = rndv_config(RndvScheme::GetZcopy, 1024);
    cfg.rndv_frag_size = MemUnits::Bytes(4096);
    cfg.rndv_split_thresh = MemUnits::Bytes(8192);
    Node::pair_on(virt_attr(|_| {}), cfg, DeviceType::Shm)
}

/// A receive of `buf` at `b` and a send of `data` at `a`, the request to
/// send delivered: `b` offered the tail and reads the head.
fn split(a: &mut Node, b: &mut Node, data: &[u8], buf: &mut [u8]) -> (SlabId, SlabId) {
    let rid = b.recv_pending(buf, 1);
    let sid = a.send_pending(data, 1);
    deliver(a, b);
    let offer = b.tx.ams_of(AM_RNDV_RTR_SPLIT);
    assert_eq!(offer.len(), 1, "the tail is offered");
    let (f, key) = decode_rtr_put(&offer[0]).unwrap();
    let tail = buf.as_ptr() as u64 + HEAD as u64;
    assert_eq!(f, [sid.to_u64(), rid.to_u64(), tail, (LEN - HEAD) as u64]);
    assert!(!key.is_empty());
    let read: usize = b.tx.rmas(true).iter().map(|g| g.1).sum();
    assert_eq!(read, HEAD, "only the head is read");
    (sid, rid)
}

#[test]
fn reads_done_first_then_the_writes() {
    let (mut a, mut b) = nodes();
    let data = pattern(LEN);
    let mut buf = vec![0u8; LEN];
    let (sid, rid) = split(&mut a, &mut b, &data, &mut buf);
    b.complete_all(Ok(()));
    assert_eq!(b.tx.ams_of(AM_RNDV_ATS).len(), 1);
    assert!(b.result(rid).is_none(), "the tail is not written yet");
    // The offer and the ATS reach the sender together.
    deliver(&mut b, &mut a);
    assert_eq!(
        a.tx.rmas(false).iter().map(|p| p.1).sum::<usize>(),
        LEN - HEAD
    );
    assert!(a.result(sid).is_none());
    a.complete_all(Ok(()));
    assert_eq!(a.tx.ams_of(AM_RNDV_ATP), vec![le(&[rid.to_u64(), 0])]);
    assert_eq!(a.done_len(sid), Some(LEN));
    deliver(&mut a, &mut b);
    assert_eq!(b.done_len(rid), Some(LEN));
    assert_eq!(buf, data);
}

#[test]
fn the_worker_with_the_larger_uuid_reads_the_tail() {
    let (mut a, mut b) = nodes();
    // The harness's endpoints lead to worker 7.
    b.core.uuid = 8;
    let data = pattern(LEN);
    let mut buf = vec![0u8; LEN];
    let rid = b.recv_pending(&mut buf, 1);
    let sid = a.send_pending(&data, 1);
    deliver(&mut a, &mut b);
    assert!(b.tx.ams_of(AM_RNDV_RTR_SPLIT).is_empty());
    let offer = b.tx.ams_of(AM_RNDV_RTR_SPLIT_HEAD);
    assert_eq!(offer.len(), 1, "the head is offered");
    let (f, _) = decode_rtr_put(&offer[0]).unwrap();
    let head = buf.as_ptr() as u64;
    assert_eq!(f, [sid.to_u64(), rid.to_u64(), head, HEAD as u64]);
    let reads = b.tx.rmas(true);
    assert_eq!(reads.iter().map(|g| g.1).sum::<usize>(), LEN - HEAD);
    assert_eq!(reads[0].0, data.as_ptr() as u64 + HEAD as u64);
    deliver(&mut b, &mut a);
    let writes = a.tx.rmas(false);
    assert_eq!(writes.iter().map(|p| p.1).sum::<usize>(), HEAD);
    assert_eq!(writes[0].0, head);
    a.complete_all(Ok(()));
    deliver(&mut a, &mut b);
    finish_reads(&mut a, &mut b, (sid, rid), LEN);
    assert_eq!(buf, data);
}

#[test]
fn writes_done_first_then_the_reads() {
    let (mut a, mut b) = nodes();
    let data = pattern(LEN);
    let mut buf = vec![0u8; LEN];
    let (sid, rid) = split(&mut a, &mut b, &data, &mut buf);
    deliver(&mut b, &mut a);
    a.complete_all(Ok(()));
    assert_eq!(a.tx.ams_of(AM_RNDV_ATP).len(), 1);
    assert!(a.result(sid).is_none(), "the receiver still reads");
    deliver(&mut a, &mut b);
    assert!(b.result(rid).is_none(), "its own reads are in flight");
    finish_reads(&mut a, &mut b, (sid, rid), LEN);
    assert_eq!(buf, data);
}

#[test]
fn a_failed_tail_write_fails_both_sides() {
    let (mut a, mut b) = nodes();
    let mut buf = vec![0u8; LEN];
    let (sid, rid) = split(&mut a, &mut b, &pattern(LEN), &mut buf);
    deliver(&mut b, &mut a);
    let first = a.tx.rmas(false)[0].2;
    a.complete(
        first,
        Err(crate::ucs::Error::remote_access(
            "rec",
            crate::ucs::AccessDenied::Refused("write".into()),
        )),
    );
    a.complete_all(Ok(()));
    let atp = a.tx.ams_of(AM_RNDV_ATP);
    assert_eq!(atp.len(), 1);
    assert_ne!(&atp[0][8..], &le(&[0])[..]);
    deliver(&mut a, &mut b);
    b.complete_all(Ok(()));
    assert!(matches!(
        b.result(rid),
        Some(Err(Error::EndpointFailed { .. }))
    ));
    deliver(&mut b, &mut a);
    assert!(matches!(
        a.result(sid),
        Some(Err(Error::EndpointFailed { .. }))
    ));
}

#[test]
fn a_failed_head_read_fails_the_receive_once_the_tail_is_written() {
    let (mut a, mut b) = nodes();
    let mut buf = vec![0u8; LEN];
    let (sid, rid) = split(&mut a, &mut b, &pattern(LEN), &mut buf);
    let first = b.tx.rmas(true)[0].2;
    b.complete(
        first,
        Err(crate::ucs::Error::remote_access(
            "rec",
            crate::ucs::AccessDenied::Refused("read".into()),
        )),
    );
    b.complete_all(Ok(()));
    assert!(
        b.result(rid).is_none(),
        "the sender may still write the tail"
    );
    deliver(&mut b, &mut a);
    a.complete_all(Ok(()));
    assert_eq!(a.done_len(sid), Some(LEN));
    deliver(&mut a, &mut b);
    assert!(matches!(
        b.result(rid),
        Some(Err(Error::EndpointFailed { .. }))
    ));
}

#[test]
fn the_sender_failing_while_reading_fails_the_receive_after_the_reads() {
    let (mut a, mut b) = nodes();
    let mut buf = vec![0u8; LEN];
    let (_, rid) = split(&mut a, &mut b, &pattern(LEN), &mut buf);
    b.core
        .src_failed(SrcId(0), crate::error::peer_failed("gone".into()));
    b.run();
    assert!(b.result(rid).is_none(), "reads still own the buffer");
    b.complete_all(Ok(()));
    assert!(matches!(
        b.result(rid),
        Some(Err(Error::EndpointFailed { .. }))
    ));
}

#[test]
fn offers_of_a_tail_the_sender_did_not_expect_are_refused() {
    let (mut a, mut b) = nodes();
    let mut buf = vec![0u8; LEN];
    let (sid, rid) = split(&mut a, &mut b, &pattern(LEN), &mut buf);
    let offer = b.tx.take_ams_of(AM_RNDV_RTR_SPLIT).remove(0);
    // For a send that does not exist.
    let mut stale = offer.clone();
    stale[..8].copy_from_slice(&(sid.to_u64() ^ (1 << 40)).to_le_bytes());
    a.arrive(AM_RNDV_RTR_SPLIT, &stale);
    assert!(a.tx.rmas(false).is_empty());
    // The real one twice: the tail is written once.
    a.arrive(AM_RNDV_RTR_SPLIT, &offer);
    a.arrive(AM_RNDV_RTR_SPLIT, &offer);
    let written = a.tx.rmas(false);
    assert_eq!(written.iter().map(|p| p.1).sum::<usize>(), LEN - HEAD);
    assert!(written.iter().all(|p| p.2 == Token(sid.to_u64())));
    a.complete_all(Ok(()));
    b.complete_all(Ok(()));
    deliver(&mut a, &mut b);
    deliver(&mut b, &mut a);
    assert_eq!(a.done_len(sid), Some(LEN));
    assert_eq!(b.done_len(rid), Some(LEN));
}

#[test]
fn a_repeated_offer_after_the_atp_writes_nothing() {
    let (mut a, mut b) = nodes();
    let data = pattern(LEN);
    let mut buf = vec![0u8; LEN];
    let (sid, rid) = split(&mut a, &mut b, &data, &mut buf);
    let offer = b.tx.ams_of(AM_RNDV_RTR_SPLIT).remove(0);
    deliver(&mut b, &mut a);
    a.complete_all(Ok(()));
    deliver(&mut a, &mut b);
    assert!(a.result(sid).is_none(), "waits for the ATS");
    let writes = a.tx.rmas(false).len();
    // The offer again (a duplicate on the wire, or a forged one).
    a.arrive(AM_RNDV_RTR_SPLIT, &offer);
    assert_eq!(a.tx.rmas(false).len(), writes, "the tail was written again");
    b.complete_all(Ok(()));
    assert_eq!(b.done_len(rid), Some(LEN));
    deliver(&mut b, &mut a);
    assert_eq!(a.done_len(sid), Some(LEN));
}
