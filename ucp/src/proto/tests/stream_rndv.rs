//! Large stream sends by rendezvous: the data goes straight into a
//! posted receive with room for it, into a kept buffer otherwise (at
//! once, so that the send completes), and nothing behind it overtakes it.

use super::stream::{stream_recv, stream_send};
use crate::proto::am_wire::{AmRts, AM_USER_RTS, FLAG_STREAM};
use crate::proto::eager_tx::Started;
use crate::proto::select::RndvScheme;
use crate::proto::testing::{deliver, exchange, pattern, rndv_pair, settle, Node};
use crate::proto::wire::{AM_RNDV_RTS_GET, AM_STREAM};
use crate::uct::AmSink;

/// Larger than the pair's rendezvous threshold (1 KiB).
const BIG: usize = 20_000;

fn get_pair() -> (Node, Node) {
    rndv_pair(RndvScheme::GetZcopy, 4096)
}

fn inflight(s: Started) -> crate::ucs::slab::SlabId {
    match s {
        Started::InFlight(id) => id,
        Started::Done(_) => panic!("finished at once"),
    }
}

#[test]
fn a_large_send_goes_straight_into_a_posted_receive() {
    for scheme in [RndvScheme::GetZcopy, RndvScheme::PutZcopy] {
        let (mut a, mut b) = rndv_pair(scheme, 4096);
        let data = pattern(BIG);
        let mut buf = vec![0u8; BIG];
        let rid = inflight(stream_recv(&mut b, &mut buf, true));
        let sid = inflight(stream_send(&mut a, &data));
        assert_eq!(a.tx.ams_of(AM_USER_RTS).len(), 1, "{scheme:?}");
        assert!(a.tx.ams_of(AM_STREAM).is_empty(), "no bytes copied");
        settle(&mut a, &mut b);
        assert_eq!(b.done_len(rid), Some(BIG), "{scheme:?}");
        assert_eq!(a.done_len(sid), Some(BIG), "{scheme:?}");
        assert!(buf == data, "{scheme:?}");
        let rx = b.core.eps.get(b.ep).unwrap().stream.as_ref().unwrap();
        assert!(rx.chunks.is_empty() && rx.held.is_empty());
    }
}

#[test]
fn without_a_receive_the_data_is_fetched_to_keep() {
    // The send completes whatever the receiving program does, as an
    // eager one would: two programs that each send before they receive
    // do not wait for each other.
    let (mut a, mut b) = get_pair();
    let data = pattern(BIG);
    let sid = inflight(stream_send(&mut a, &data));
    settle(&mut a, &mut b);
    assert_eq!(a.done_len(sid), Some(BIG));
    assert_eq!(b.core.stream_poll(4), vec![b.ep], "data is ready");
    let mut buf = vec![0u8; BIG];
    let Started::Done(info) = stream_recv(&mut b, &mut buf, false) else {
        panic!("the bytes were there");
    };
    assert_eq!(info.length, BIG);
    assert!(buf == data);
}

#[test]
fn bytes_behind_a_large_send_do_not_overtake_it() {
    let (mut a, mut b) = get_pair();
    let (head, big, tail) = (pattern(5), pattern(BIG), b"tail".to_vec());
    stream_send(&mut a, &head);
    let sid = inflight(stream_send(&mut a, &big));
    settle(&mut a, &mut b);
    stream_send(&mut a, &tail);
    deliver(&mut a, &mut b);
    // Receives smaller than the large send: it comes through a buffer.
    let mut got = Vec::new();
    for _ in 0..100 {
        let mut buf = vec![0u8; 3000];
        let s = stream_recv(&mut b, &mut buf, false);
        settle(&mut a, &mut b);
        let n = match s {
            Started::Done(i) => i.length,
            Started::InFlight(id) => b.done_len(id).expect("complete once settled"),
        };
        got.extend_from_slice(&buf[..n]);
        if got.len() == head.len() + big.len() + tail.len() {
            break;
        }
    }
    assert_eq!(a.done_len(sid), Some(BIG));
    assert!(got == [&head[..], &big[..], &tail[..]].concat());
}

#[test]
fn a_receive_being_filled_by_a_fetch_cannot_be_canceled() {
    let (mut a, mut b) = get_pair();
    let data = pattern(BIG);
    let mut buf = vec![0u8; BIG];
    let rid = inflight(stream_recv(&mut b, &mut buf, true));
    stream_send(&mut a, &data);
    deliver(&mut a, &mut b);
    assert!(!b.tx.inflight.is_empty(), "reads in flight");
    assert!(!b.core.stream_recv_cancel(rid));
    b.complete_all(Ok(()));
    exchange(&mut a, &mut b);
    assert_eq!(b.done_len(rid), Some(BIG));
    assert!(buf == data);
}

#[test]
fn fetched_data_is_taken_as_a_chunk_without_a_copy() {
    let (mut a, mut b) = get_pair();
    let data = pattern(BIG);
    let sid = inflight(stream_send(&mut a, &data));
    deliver(&mut a, &mut b);
    // Still being fetched: nothing to take yet.
    assert_eq!(b.core.stream_take_chunk(b.ep).unwrap(), None);
    settle(&mut a, &mut b);
    let chunk = b.core.stream_take_chunk(b.ep).unwrap().expect("fetched");
    assert!(chunk == data);
    assert_eq!(a.done_len(sid), Some(BIG));
}

#[test]
fn a_failed_fetch_fails_the_receive_and_the_endpoint() {
    let (mut a, mut b) = get_pair();
    let data = pattern(BIG);
    let mut buf = vec![0u8; BIG];
    let rid = inflight(stream_recv(&mut b, &mut buf, true));
    stream_send(&mut a, &data);
    deliver(&mut a, &mut b);
    b.complete_all(Err(crate::ucs::Error::Io {
        op: "get".into(),
        source: std::io::Error::other("gone"),
    }));
    assert!(matches!(b.result(rid), Some(Err(_))));
    assert!(b.core.eps.get(b.ep).unwrap().failed.is_some());
}

#[test]
fn a_stream_announcement_out_of_place_fails_the_endpoint() {
    let (mut a, mut b) = get_pair();
    let data = pattern(BIG);
    stream_send(&mut a, &data);
    let m = a.tx.take_ams_of(AM_USER_RTS).remove(0);
    // The same announcement at stream offset 7, where 0 is due.
    let (rts, _, inner) = AmRts::decode(&m).unwrap();
    assert_eq!((rts.inner, rts.flags), (AM_RNDV_RTS_GET, FLAG_STREAM));
    let mut forged = rts.encode().to_vec();
    forged.extend_from_slice(&7u64.to_le_bytes());
    forged.extend_from_slice(inner);
    b.core.am(AM_USER_RTS, crate::uct::SrcId(0), &forged);
    b.run();
    assert!(b.core.eps.get(b.ep).unwrap().failed.is_some());
    // An offset of the wrong size is refused at decoding.
    let mut short = rts.encode().to_vec();
    short[4..8].copy_from_slice(&7u32.to_le_bytes());
    short.extend_from_slice(&[0; 7]);
    short.extend_from_slice(inner);
    assert!(AmRts::decode(&short).is_err());
}

#[test]
fn a_stream_announcement_beyond_the_limit_is_refused_without_allocating() {
    use crate::proto::am_wire::AM_MAX;
    let (mut a, mut b) = get_pair();
    let data = pattern(BIG);
    stream_send(&mut a, &data);
    let m = a.tx.take_ams_of(AM_USER_RTS).remove(0);
    let (rts, off, inner) = AmRts::decode(&m).unwrap();
    // The wrapped request's length (its third u64) forged huge.
    let mut forged = rts.encode().to_vec();
    forged.extend_from_slice(off);
    let mut inner = inner.to_vec();
    inner[16..24].copy_from_slice(&(AM_MAX + 1).to_le_bytes());
    forged.extend_from_slice(&inner);
    b.core.am(AM_USER_RTS, crate::uct::SrcId(0), &forged);
    b.run();
    assert!(b.core.eps.get(b.ep).unwrap().failed.is_some());
    assert!(b.tx.rmas(true).is_empty(), "nothing fetched");
}
