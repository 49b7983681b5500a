//! Streams: offset-stamped fragments on the sender; on the receiver,
//! bytes into posted receives or kept, gaps refused, early bytes adopted.
#![allow(unsafe_code)]

use crate::proto::eager_tx::Started;
use crate::proto::testing::{deliver, no_rndv, pattern, virt_attr, Node};
use crate::proto::wire::{AM_STREAM, STREAM_HDR};
use crate::request::buf::{RecvBuf, SendBuf};
use crate::request::Op;
use crate::uct::{AmSink, SrcId};

pub(super) fn stream_send(a: &mut Node, data: &[u8]) -> Started {
    // SAFETY: the tests keep `data` alive while the send is open.
    let buf = unsafe { SendBuf::new(data.as_ptr(), data.len()) };
    let ep = a.ep;
    let s = a
        .core
        .stream_start(&mut a.tx, ep, buf, Op::new())
        .expect("send");
    a.run();
    s
}

pub(super) fn stream_recv(b: &mut Node, buf: &mut [u8], wait_all: bool) -> Started {
    // SAFETY: the tests keep `buf` alive while the receive is open.
    let rb = unsafe { RecvBuf::new(buf.as_mut_ptr(), buf.len()) };
    let ep = b.ep;
    b.core
        .stream_recv_start(ep, rb, wait_all, Op::new())
        .expect("recv")
}

fn offset_of(frag: &[u8]) -> u64 {
    u64::from_le_bytes(frag[..STREAM_HDR].try_into().unwrap())
}

#[test]
fn sends_carry_their_stream_offsets_and_arrive_in_order() {
    // Without rendezvous (`stream_rndv.rs` has those), in fragments.
    let mut a = Node::with_config(virt_attr(|_| {}), no_rndv());
    let mut b = Node::with_config(virt_attr(|_| {}), no_rndv());
    let cfg = a.core.ep_cfgs[a.core.eps.get(a.ep).unwrap().iface];
    let (small, large) = (
        pattern(10),
        pattern(3 * cfg.max_bcopy.max(cfg.max_zcopy) + 7),
    );
    stream_send(&mut a, &small);
    let big = stream_send(&mut a, &large);
    a.complete_all(Ok(()));
    if let Started::InFlight(id) = big {
        assert_eq!(a.done_len(id), Some(large.len()));
    }
    let frags = a.tx.ams_of(AM_STREAM);
    assert!(frags.len() >= 4, "{} fragments", frags.len());
    let mut at = 0u64;
    for f in &frags {
        assert_eq!(offset_of(f), at);
        at += (f.len() - STREAM_HDR) as u64;
    }
    assert_eq!(at as usize, small.len() + large.len());
    deliver(&mut a, &mut b);
    let mut got = vec![0u8; small.len() + large.len()];
    let Started::Done(info) = stream_recv(&mut b, &mut got, true) else {
        panic!("the bytes were there");
    };
    assert_eq!(info.length, got.len());
    assert_eq!(&got[..10], &small[..]);
    assert!(got[10..] == large[..]);
}

#[test]
fn a_posted_receive_takes_bytes_as_they_arrive() {
    let mut a = Node::new(virt_attr(|_| {}));
    let mut b = Node::new(virt_attr(|_| {}));
    let mut buf = vec![0u8; 6];
    let Started::InFlight(id) = stream_recv(&mut b, &mut buf, true) else {
        panic!("nothing sent");
    };
    stream_send(&mut a, b"abcd");
    deliver(&mut a, &mut b);
    assert_eq!(b.result(id).map(|r| r.is_ok()), None, "4 of 6 bytes");
    stream_send(&mut a, b"efgh");
    deliver(&mut a, &mut b);
    assert_eq!(b.done_len(id), Some(6));
    assert_eq!(&buf, b"abcdef");
    assert_eq!(
        b.core.stream_take_chunk(b.ep).unwrap().as_deref(),
        Some(&b"gh"[..])
    );
    assert_eq!(b.core.stream_poll(4), Vec::new());
}

#[test]
fn a_gap_in_the_stream_fails_the_endpoint() {
    let mut b = Node::new(virt_attr(|_| {}));
    let mut m = 0u64.to_le_bytes().to_vec();
    m.extend_from_slice(b"abc");
    b.arrive(AM_STREAM, &m);
    let mut m = 5u64.to_le_bytes().to_vec();
    m.extend_from_slice(b"xyz");
    b.arrive(AM_STREAM, &m);
    assert!(b.core.eps.get(b.ep).unwrap().failed.is_some());
    // A fragment too short for its header is refused too (no panic).
    b.arrive(AM_STREAM, &[1, 2, 3]);
}

#[test]
fn bytes_before_the_endpoint_is_known_join_it() {
    let mut b = Node::new(virt_attr(|_| {}));
    b.core.src_eps.clear();
    for (off, d) in [(0u64, &b"early"[..]), (5, &b" bird"[..])] {
        let mut m = off.to_le_bytes().to_vec();
        m.extend_from_slice(d);
        b.core.am(AM_STREAM, SrcId(0), &m);
    }
    let mut buf = vec![0u8; 7];
    let Started::InFlight(id) = stream_recv(&mut b, &mut buf, true) else {
        panic!("the endpoint has nothing yet");
    };
    b.core.src_eps.insert((0, SrcId(0)), b.ep);
    b.core.stream_adopt(0, SrcId(0), b.ep);
    assert_eq!(b.done_len(id), Some(7));
    assert_eq!(&buf, b"early b");
    assert_eq!(b.core.stream_poll(4), vec![b.ep]);
    assert_eq!(
        b.core.stream_take_chunk(b.ep).unwrap().as_deref(),
        Some(&b"ird"[..])
    );
    // The stream goes on where the early bytes ended.
    let mut m = 10u64.to_le_bytes().to_vec();
    m.extend_from_slice(b"!");
    b.arrive(AM_STREAM, &m);
    assert_eq!(
        b.core.stream_take_chunk(b.ep).unwrap().as_deref(),
        Some(&b"!"[..])
    );
}

#[test]
fn a_receive_of_elements_ends_with_whole_ones() {
    let mut a = Node::new(virt_attr(|_| {}));
    let mut b = Node::new(virt_attr(|_| {}));
    let mut buf = vec![0u8; 8];
    // SAFETY: `buf` outlives the receive.
    let rb = unsafe { RecvBuf::new(buf.as_mut_ptr(), buf.len()) };
    let ep = b.ep;
    let Started::InFlight(id) = b.core.stream_recv_start_unit(ep, rb, 4, Op::new()).unwrap() else {
        panic!("nothing sent");
    };
    stream_send(&mut a, b"abcdef");
    deliver(&mut a, &mut b);
    assert_eq!(
        b.result(id).map(|r| r.is_ok()),
        None,
        "6 bytes: 1.5 elements"
    );
    stream_send(&mut a, b"gh");
    deliver(&mut a, &mut b);
    assert_eq!(b.done_len(id), Some(8));
    assert_eq!(&buf, b"abcdefgh");
}

#[test]
fn the_poll_lists_an_endpoint_once() {
    let mut a = Node::new(virt_attr(|_| {}));
    let mut b = Node::new(virt_attr(|_| {}));
    stream_send(&mut a, b"abc");
    deliver(&mut a, &mut b);
    // Its bytes taken without a poll, then more arrive, twice.
    for more in [&b"de"[..], b"f"] {
        assert!(b.core.stream_take_chunk(b.ep).unwrap().is_some());
        stream_send(&mut a, more);
        deliver(&mut a, &mut b);
    }
    assert_eq!(b.core.stream_poll(4), vec![b.ep]);
}

/// An immediate receive of elements: refused while the kept bytes make
/// no whole element (or a receive waits ahead of it), taken when they
/// do; bytes of a fragment partly taken count from where it was taken.
#[test]
fn an_immediate_receive_takes_whole_elements_or_nothing() {
    let mut a = Node::new(virt_attr(|_| {}));
    let mut b = Node::new(virt_attr(|_| {}));
    let ep = b.ep;
    let recv = |b: &mut Node, buf: &mut [u8], unit: usize| {
        // SAFETY: an immediate receive writes `buf` within the call or
        // not at all.
        let rb = unsafe { RecvBuf::new(buf.as_mut_ptr(), buf.len()) };
        b.core
            .stream_recv_start_unit(ep, rb, unit, Op::new().immediate())
    };
    stream_send(&mut a, b"abcdef");
    deliver(&mut a, &mut b);
    let mut two = [0u8; 2];
    // Two bytes of the six, leaving four in a fragment taken from its
    // third byte.
    assert!(matches!(recv(&mut b, &mut two, 1), Ok(Started::Done(i)) if i.length == 2));
    assert_eq!(&two, b"ab");
    // Four kept: not a whole element of 3 into 5 bytes, nor 8 bytes.
    let mut five = [0u8; 5];
    assert!(matches!(
        recv(&mut b, &mut five, 3),
        Err(crate::Error::NoResource)
    ));
    let mut eight = [0u8; 8];
    assert!(matches!(
        recv(&mut b, &mut eight, 8),
        Err(crate::Error::NoResource)
    ));
    assert_eq!(five, [0; 5], "a refused receive writes nothing");
    // Elements of 2: all four bytes.
    assert!(matches!(recv(&mut b, &mut five, 2), Ok(Started::Done(i)) if i.length == 4));
    assert_eq!(&five[..4], b"cdef");
    // A plain receive waits; an immediate one behind it is refused even
    // when bytes come, which are the waiting receive's.
    let mut wait = [0u8; 4];
    let waiting = stream_recv(&mut b, &mut wait, true);
    assert!(matches!(waiting, Started::InFlight(_)));
    stream_send(&mut a, b"ij");
    deliver(&mut a, &mut b);
    assert!(matches!(
        recv(&mut b, &mut two, 1),
        Err(crate::Error::NoResource)
    ));
}
