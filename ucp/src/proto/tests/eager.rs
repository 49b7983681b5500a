//! The eager protocol, sending and receiving.

use crate::proto::eager_rx::RecvStarted;
use crate::proto::eager_tx::Started;
use crate::proto::testing::{deliver, fragmenting, no_rndv, pattern, virt_attr, Node, Sent};
use crate::proto::wire::{AM_EAGER_FIRST, AM_EAGER_MIDDLE, AM_EAGER_ONLY};
use crate::request::Op;
use crate::uct::{AmSink, EpId, SrcId, Token};
use crate::Error;

#[test]
fn a_short_message_is_one_active_message_and_completes_at_once() {
    let mut a = Node::new(virt_attr(|_| {}));
    let mut b = Node::new(virt_attr(|_| {}));
    let data = pattern(8);
    let started = a.send(&data, 0x42, Op::new()).unwrap();
    assert!(matches!(started, Started::Done(i) if i.length == 8 && i.tag == 0x42));
    let ams = a.tx.ams();
    assert_eq!(ams.len(), 1);
    assert_eq!(ams[0].0, AM_EAGER_ONLY);
    assert_eq!(&ams[0].1[..8], &0x42u64.to_le_bytes());
    assert_eq!(&ams[0].1[8..], &data[..]);
    // Unexpected at b, then matched by the receive.
    deliver(&mut a, &mut b);
    let mut buf = vec![0u8; 64];
    let r = b.recv(&mut buf, 0x42, !0).unwrap();
    assert!(matches!(r, RecvStarted::Done(i) if i.length == 8));
    assert_eq!(&buf[..8], &data[..]);
}

#[test]
fn a_transport_that_refuses_to_wait_fails_the_endpoint_and_its_sends() {
    let mut a = Node::new(virt_attr(|_| {}));
    a.tx.full = true;
    let data = pattern(100);
    let Started::InFlight(id) = a.send(&data, 1, Op::new()).unwrap() else {
        panic!("a full lane cannot take the message at once");
    };
    let Started::InFlight(id2) = a.send(&data, 2, Op::new()).unwrap() else {
        panic!("a send behind a queued one queues");
    };
    // The endpoint's transport fails before it was asked to wait.
    a.tx.fail = Some(crate::error::peer_failed("gone".into()));
    a.run();
    assert!(a.tx.sent.is_empty(), "nothing sent, no wait registered");
    for id in [id, id2] {
        assert!(matches!(
            a.result(id),
            Some(Err(Error::EndpointFailed { .. }))
        ));
    }
    assert!(a.core.eps.get(a.ep).is_some_and(|e| e.failed.is_some()));
}

#[test]
fn a_full_lane_queues_the_send_until_the_endpoint_has_room() {
    let mut a = Node::new(virt_attr(|_| {}));
    let mut b = Node::new(virt_attr(|_| {}));
    let data = pattern(100);
    a.tx.full = true;
    let Started::InFlight(id) = a.send(&data, 1, Op::new()).unwrap() else {
        panic!("a full lane cannot take the message at once");
    };
    // It sent nothing, and asked (once the worker carries out what the
    // call recorded) to be told when there is room, once.
    assert!(a.tx.sent.is_empty());
    a.run();
    assert_eq!(a.tx.sent, vec![Sent::Pending { ep: EpId(0) }]);
    // A second send queues behind the first without asking again.
    let second = pattern(5);
    let Started::InFlight(id2) = a.send(&second, 2, Op::new()).unwrap() else {
        panic!("a send behind a queued one queues");
    };
    a.run();
    assert_eq!(a.tx.sent.len(), 1);
    a.tx.sent.clear();
    a.tx.full = false;
    a.core.pending_ready(EpId(0), Token(a.ep.to_u64()));
    a.run();
    assert!(a.result(id).is_some_and(|r| r.is_ok()));
    assert!(a.result(id2).is_some_and(|r| r.is_ok()));
    // Posting order holds on the wire.
    let tags: Vec<u64> =
        a.tx.ams()
            .iter()
            .map(|(_, d)| u64::from_le_bytes(d[..8].try_into().unwrap()))
            .collect();
    assert_eq!(tags, vec![1, 2]);
    deliver(&mut a, &mut b);
    let mut buf = vec![0u8; 100];
    assert!(matches!(
        b.recv(&mut buf, 1, !0).unwrap(),
        RecvStarted::Done(_)
    ));
    assert_eq!(buf, data);
}

#[test]
fn fragments_reassemble_in_a_posted_receive() {
    let mut a = Node::with_config(fragmenting(), no_rndv());
    let mut b = Node::with_config(fragmenting(), no_rndv());
    let data = pattern(2000);
    let mut buf = vec![0u8; 2000];
    let RecvStarted::InFlight(rid) = b.recv(&mut buf, 9, !0).unwrap() else {
        panic!("nothing arrived yet");
    };
    let started = a.send(&data, 9, Op::new()).unwrap();
    assert!(
        matches!(started, Started::Done(_)),
        "bcopy fragments finish at once"
    );
    let ams = a.tx.ams();
    assert!(ams.len() > 2);
    assert_eq!(ams[0].0, AM_EAGER_FIRST);
    assert!(ams[1..].iter().all(|(id, _)| *id == AM_EAGER_MIDDLE));
    deliver(&mut a, &mut b);
    assert!(b
        .result(rid)
        .is_some_and(|r| r.is_ok_and(|i| i.length == 2000)));
    assert_eq!(buf, data);
}

#[test]
fn a_lane_failing_mid_message_fails_the_send_and_the_endpoint() {
    let mut a = Node::with_config(fragmenting(), no_rndv());
    let data = pattern(2000);
    a.tx.full = true;
    let Started::InFlight(id) = a.send(&data, 3, Op::new()).unwrap() else {
        panic!("queued");
    };
    a.core.ep_failed(EpId(0), crate::ucs::Error::Canceled);
    a.run();
    assert!(matches!(
        a.result(id),
        Some(Err(Error::EndpointFailed { .. }))
    ));
    // Later sends fail at once with the endpoint's error.
    a.tx.full = false;
    assert!(matches!(
        a.send(&data, 4, Op::new()),
        Err(Error::EndpointFailed { .. })
    ));
}

#[test]
fn stray_fragments_and_truncated_headers_are_dropped() {
    let mut b = Node::with_config(fragmenting(), no_rndv());
    let mut buf = vec![0u8; 64];
    let RecvStarted::InFlight(rid) = b.recv(&mut buf, 5, !0).unwrap() else {
        panic!("nothing arrived yet");
    };
    // A middle fragment of a message nobody started, and headers cut short.
    let mut middle = 77u64.to_le_bytes().to_vec();
    middle.extend_from_slice(&16u64.to_le_bytes());
    middle.extend_from_slice(b"stray");
    b.core.am(AM_EAGER_MIDDLE, SrcId(0), &middle);
    b.core.am(AM_EAGER_ONLY, SrcId(0), &[1, 2, 3]);
    b.core.am(AM_EAGER_FIRST, SrcId(0), &[0; 5]);
    b.run();
    assert!(b.result(rid).is_none(), "nothing matched the receive");
    assert_eq!(buf, vec![0u8; 64]);
    // A good message still arrives afterwards.
    let mut good = 5u64.to_le_bytes().to_vec();
    good.extend_from_slice(b"hello");
    b.core.am(AM_EAGER_ONLY, SrcId(0), &good);
    assert!(b
        .result(rid)
        .is_some_and(|r| r.is_ok_and(|i| i.length == 5)));
    assert_eq!(&buf[..5], b"hello");
}

#[test]
fn a_zero_copy_send_completes_only_after_its_fragments_do() {
    let attr = virt_attr(|_| {});
    assert!(attr.caps.contains(crate::uct::Caps::AM_ZCOPY));
    let mut c = no_rndv();
    c.zcopy_thresh = crate::ucs::config::MemUnits::Bytes(1024);
    let mut a = Node::with_config(attr.clone(), c.clone());
    let mut b = Node::with_config(attr, c);
    let data = pattern(64 * 1024);
    let Started::InFlight(id) = a.send(&data, 11, Op::new()).unwrap() else {
        panic!("zero-copy fragments are in flight");
    };
    assert!(!a.tx.inflight.is_empty());
    assert!(a.result(id).is_none());
    let mut buf = vec![0u8; data.len()];
    deliver(&mut a, &mut b);
    assert!(matches!(
        b.recv(&mut buf, 11, !0).unwrap(),
        RecvStarted::Done(_)
    ));
    assert_eq!(buf, data);
    assert!(a.result(id).is_none(), "still waiting for the transport");
    a.complete_all(Ok(()));
    assert!(a
        .result(id)
        .is_some_and(|r| r.is_ok_and(|i| i.length == data.len())));
}
