//! Data written straight into receive buffers by a transport that
//! receives into its own buffer first (`am_begin`, then `am_end`): a whole
//! eager message for a posted receive and rendezvous data, which complete
//! only at `am_end`; what is declined (unexpected messages, foreign
//! sources, fragments outside the message) and a transport giving up.

use crate::proto::select::RndvScheme;
use crate::proto::testing::{le, only, pattern, rndv_config, virt_attr, Node};
use crate::proto::wire::{AM_EAGER_ONLY, AM_RNDV_DATA, AM_RNDV_RTS};
use crate::ucs::slab::SlabId;
use crate::uct::{AmSink, SrcId};
use crate::Error;

const LEN: usize = 3000;

fn node() -> Node {
    Node::with_config(virt_attr(|_| {}), rndv_config(RndvScheme::Am, 1024))
}

/// `RNDV_DATA` for receive `rid` at `offset`.
fn data(rid: SlabId, offset: usize, payload: &[u8]) -> Vec<u8> {
    [&le(&[rid.to_u64(), offset as u64])[..], payload].concat()
}

/// A receive of `buf` at `b` that matched a request to send of `LEN`
/// bytes from source 0.
fn rndv_recv(b: &mut Node, buf: &mut [u8]) -> SlabId {
    let rid = b.recv_pending(buf, 4);
    b.arrive(AM_RNDV_RTS, &le(&[4, 0x66, LEN as u64]));
    rid
}

fn end(b: &mut Node, token: crate::uct::Token, r: crate::ucs::Result<()>) {
    b.core.am_end(token, r);
    b.run();
}

#[test]
fn a_whole_message_for_a_posted_receive_completes_at_the_end() {
    let mut b = node();
    let msg = pattern(500);
    let mut buf = vec![0u8; 500];
    let rid = b.recv_pending(&mut buf, 1);
    let t = b
        .direct(AM_EAGER_ONLY, SrcId(0), &only(1, &msg))
        .expect("taken");
    assert!(b.result(rid).is_none(), "the transport is still writing");
    assert!(
        !b.core.recv_cancel(rid),
        "a receive being written cannot be canceled"
    );
    end(&mut b, t, Ok(()));
    assert_eq!(b.done_len(rid), Some(500));
    assert_eq!(buf, msg);
}

#[test]
fn a_whole_message_longer_than_the_receive_is_truncated() {
    let mut b = node();
    let msg = pattern(500);
    let mut buf = vec![0u8; 100];
    let rid = b.recv_pending(&mut buf, 1);
    let t = b
        .direct(AM_EAGER_ONLY, SrcId(0), &only(1, &msg))
        .expect("taken");
    end(&mut b, t, Ok(()));
    assert!(matches!(
        b.result(rid),
        Some(Err(Error::Truncated {
            length: 500,
            capacity: 100
        }))
    ));
    assert_eq!(buf, msg[..100]);
}

#[test]
fn unexpected_and_malformed_messages_are_declined() {
    let mut b = node();
    assert!(b.direct(AM_EAGER_ONLY, SrcId(0), &only(1, b"x")).is_none());
    assert!(b.direct(AM_EAGER_ONLY, SrcId(0), &[1, 2, 3]).is_none());
    // Declined, it arrives whole and waits as unexpected.
    b.arrive(AM_EAGER_ONLY, &only(1, b"x"));
    let mut buf = [0u8; 1];
    assert!(b.recv(&mut buf, 1, !0).is_ok_and(|r| matches!(
        r,
        crate::proto::eager_rx::RecvStarted::Done(i) if i.length == 1
    )));
}

#[test]
fn a_transport_giving_up_fails_the_receive() {
    let mut b = node();
    let mut buf = vec![0u8; 500];
    let rid = b.recv_pending(&mut buf, 1);
    let t = b.direct(AM_EAGER_ONLY, SrcId(0), &only(1, &pattern(500)));
    let err = crate::error::peer_failed("reset".into());
    end(&mut b, t.expect("taken"), Err(err));
    assert!(matches!(
        b.result(rid),
        Some(Err(Error::EndpointFailed { .. }))
    ));
}

#[test]
fn rendezvous_fragments_go_to_their_offsets() {
    let mut b = node();
    let msg = pattern(LEN);
    let mut buf = vec![0u8; LEN];
    let rid = rndv_recv(&mut b, &mut buf);
    let t = b.direct(AM_RNDV_DATA, SrcId(0), &data(rid, 1000, &msg[1000..]));
    let t = t.expect("taken");
    // One write at a time per receive: the next fragment comes whole.
    assert!(b
        .direct(AM_RNDV_DATA, SrcId(0), &data(rid, 0, &msg[..1000]))
        .is_none());
    end(&mut b, t, Ok(()));
    assert!(b.result(rid).is_none());
    let t = b.direct(AM_RNDV_DATA, SrcId(0), &data(rid, 0, &msg[..1000]));
    end(&mut b, t.expect("taken"), Ok(()));
    assert_eq!(b.done_len(rid), Some(LEN));
    assert_eq!(buf, msg);
}

#[test]
fn rendezvous_fragments_from_elsewhere_or_outside_are_declined() {
    let mut b = node();
    let mut buf = vec![0u8; LEN];
    let rid = rndv_recv(&mut b, &mut buf);
    let cases = [
        (SrcId(1), data(rid, 0, &[1; 10])),
        (SrcId(0), data(rid, LEN - 5, &[1; 10])),
        (
            SrcId(0),
            data(SlabId::from_u64(rid.to_u64() ^ (1 << 40)), 0, &[1; 10]),
        ),
        (SrcId(0), le(&[rid.to_u64()])),
    ];
    for (src, msg) in cases {
        assert!(
            b.direct(AM_RNDV_DATA, src, &msg).is_none(),
            "{src:?} {msg:?}"
        );
    }
    assert!(buf.iter().all(|&x| x == 0));
    assert!(b.result(rid).is_none());
}
