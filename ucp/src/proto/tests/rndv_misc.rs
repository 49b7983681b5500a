//! Rendezvous cases common to every scheme (active messages, get, put):
//! synchronous sends, a one-byte message, a request to send that waits for
//! room on the lane, and canceling a send whose request to send has not
//! left, and a request to send whose sender failed before a receive
//! matched it.

use crate::proto::eager_tx::Started;
use crate::proto::select::RndvScheme;
use crate::proto::testing::{pattern, rndv_config, settle, virt_attr, Node};
use crate::proto::wire::{AM_RNDV_RTS, AM_RNDV_RTS_GET, AM_RNDV_RTS_PUT};
use crate::ucs::slab::SlabId;
use crate::uct::{AmId, AmSink};
use crate::Error;

const LEN: usize = 20_000;

const SCHEMES: [(RndvScheme, AmId); 3] = [
    (RndvScheme::Am, AM_RNDV_RTS),
    (RndvScheme::GetZcopy, AM_RNDV_RTS_GET),
    (RndvScheme::PutZcopy, AM_RNDV_RTS_PUT),
];

/// Two nodes of one net doing rendezvous by `scheme` from `thresh` on.
fn nodes(scheme: RndvScheme, thresh: u64) -> (Node, Node) {
    Node::pair(virt_attr(|_| {}), rndv_config(scheme, thresh))
}

/// Posts a receive for `data` (with `tag`) at `b`, lets the nodes work,
/// and checks that send `sid` and the receive completed with the data.
fn received(a: &mut Node, b: &mut Node, sid: SlabId, data: &[u8], tag: u64) {
    let mut buf = vec![0u8; data.len()];
    let rid = b.recv_pending(&mut buf, tag);
    settle(a, b);
    assert_eq!(a.done_len(sid), Some(data.len()));
    assert_eq!(b.done_len(rid), Some(data.len()));
    assert_eq!(buf, data);
}

#[test]
fn a_synchronous_rendezvous_completes_once_the_data_is_across() {
    for (scheme, rts) in SCHEMES {
        let (mut a, mut b) = nodes(scheme, 1024);
        let data = pattern(LEN);
        let Started::InFlight(sid) = a.ssend(&data, 1) else {
            panic!("{scheme:?}: a rendezvous waits for its receiver");
        };
        assert_eq!(a.tx.ams_of(rts).len(), 1, "{scheme:?}");
        received(&mut a, &mut b, sid, &data, 1);
    }
}

#[test]
fn a_one_byte_message_goes_by_rendezvous_when_forced() {
    for (scheme, rts) in SCHEMES {
        let (mut a, mut b) = nodes(scheme, 0);
        let mut buf = [0u8; 4];
        let rid = b.recv_pending(&mut buf, 2);
        let sid = a.send_pending(&[7], 2);
        assert_eq!(a.tx.am_ids(), vec![rts], "{scheme:?}");
        settle(&mut a, &mut b);
        assert_eq!(a.done_len(sid), Some(1), "{scheme:?}");
        assert_eq!(b.done_len(rid), Some(1), "{scheme:?}");
        assert_eq!(buf, [7, 0, 0, 0], "{scheme:?}");
    }
}

#[test]
fn a_request_to_send_waits_for_room_on_the_lane() {
    for (scheme, rts) in SCHEMES {
        let (mut a, mut b) = nodes(scheme, 1024);
        let data = pattern(LEN);
        a.tx.full = true;
        let sid = a.send_pending(&data, 3);
        assert!(a.tx.ams_of(rts).is_empty(), "{scheme:?}");
        a.room();
        assert_eq!(a.tx.ams_of(rts).len(), 1, "{scheme:?}");
        received(&mut a, &mut b, sid, &data, 3);
    }
}

#[test]
fn a_send_whose_request_to_send_has_not_left_can_be_canceled() {
    for (scheme, rts) in SCHEMES {
        let (mut a, _) = nodes(scheme, 1024);
        a.tx.full = true;
        let sid = a.send_pending(&pattern(LEN), 4);
        assert!(a.core.send_cancel(sid), "{scheme:?}");
        assert!(matches!(a.result(sid), Some(Err(Error::Canceled))));
        a.room();
        assert!(
            a.tx.ams_of(rts).is_empty(),
            "{scheme:?}: canceled, yet sent"
        );
        // Once the request to send left, it is too late.
        let sid = a.send_pending(&pattern(LEN), 5);
        assert!(!a.core.send_cancel(sid), "{scheme:?}");
        assert!(a.result(sid).is_none());
    }
}

#[test]
fn a_request_to_send_whose_sender_failed_fails_the_receive_that_matches_it() {
    for (scheme, _) in SCHEMES {
        let (mut a, mut b) = nodes(scheme, 1024);
        a.send_pending(&pattern(LEN), 6);
        crate::proto::testing::deliver(&mut a, &mut b);
        b.core.src_failed(
            crate::uct::SrcId(0),
            crate::error::peer_failed("gone".into()),
        );
        let mut buf = vec![0u8; LEN];
        let rid = b.recv_pending(&mut buf, 6);
        b.run();
        assert!(
            matches!(b.result(rid), Some(Err(Error::EndpointFailed { .. }))),
            "{scheme:?}: {:?}",
            b.result(rid)
        );
        assert!(b.tx.sent.is_empty(), "{scheme:?}: answered a dead sender");
    }
}
