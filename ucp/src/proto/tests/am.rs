//! Active messages: fragments on the sender, reassembly and refusals on
//! the receiver.

use crate::proto::am_wire::{AmFrag, AM_HDR, AM_ONLY_HDR, AM_USER, AM_USER_ONLY, FLAG_REPLY};
use crate::proto::testing::{deliver, pattern, virt_attr, Node};
use crate::uct::{AmSink, SrcId};

fn send(a: &mut Node, header: &[u8], data: &[u8], reply: bool) {
    let ep = a.ep;
    a.core
        .am_send(
            &mut a.tx,
            ep,
            5,
            (header, data),
            reply,
            crate::request::Op::new(),
        )
        .expect("am_send");
    a.run();
}

#[test]
fn small_and_fragmented_messages_arrive_whole() {
    let mut a = Node::new(virt_attr(|_| {}));
    let mut b = Node::new(virt_attr(|_| {}));
    let max_bcopy = a.core.ep_cfgs[a.core.eps.get(a.ep).unwrap().iface].max_bcopy;
    let frag = max_bcopy - AM_HDR;
    let last_whole = max_bcopy - AM_ONLY_HDR;
    for (h, d) in [
        (0, 0),
        (3, 0),
        (0, 10),
        (16, 1000),
        (0, last_whole),
        (1, last_whole),
        (8, 3 * frag + 5),
    ] {
        let (header, data) = (pattern(h), pattern(d));
        send(&mut a, &header, &data, false);
        // A message that fits one send goes whole; a larger one in
        // fragments.
        let (whole, frags) = (a.tx.ams_of(AM_USER_ONLY).len(), a.tx.ams_of(AM_USER).len());
        if h + d <= last_whole {
            assert_eq!((whole, frags), (1, 0), "{h} + {d}");
        } else {
            assert_eq!((whole, frags), (0, (h + d).div_ceil(frag)), "{h} + {d}");
        }
        deliver(&mut a, &mut b);
        let got = std::mem::take(&mut b.core.done.am_arrivals);
        assert_eq!(got.len(), 1, "{h} + {d}");
        assert_eq!(got[0].id, 5);
        assert_eq!(
            &got[0].bytes.as_slice()[..got[0].hdr_len as usize],
            &header[..]
        );
        assert_eq!(
            &got[0].bytes.as_slice()[got[0].hdr_len as usize..],
            &data[..]
        );
        assert_eq!(got[0].reply_from, None);
        assert!(b.core.am_frags.is_empty());
    }
}

#[test]
fn a_reply_request_gives_the_endpoint_back() {
    let mut a = Node::new(virt_attr(|_| {}));
    let mut b = Node::new(virt_attr(|_| {}));
    send(&mut a, b"h", b"d", true);
    deliver(&mut a, &mut b);
    assert_eq!(b.core.done.am_arrivals[0].reply_from, Some((0, SrcId(0))));
}

/// A fragment with header `f` and `n` bytes.
fn frag(f: AmFrag, n: usize) -> Vec<u8> {
    let mut m = f.encode().to_vec();
    m.extend(pattern(n));
    m
}

fn first(total: u64) -> AmFrag {
    AmFrag {
        id: 1,
        flags: 0,
        hdr_len: 0,
        msg_id: 9,
        total,
        offset: 0,
    }
}

#[test]
fn fragments_out_of_order_or_inconsistent_are_refused() {
    let at = |f: AmFrag, offset: u64| AmFrag { offset, ..f };
    let second = first(10);
    let cases: [(&str, Vec<(AmFrag, usize)>); 4] = [
        (
            "a middle of a message never begun",
            vec![(at(second, 4), 2)],
        ),
        ("a gap", vec![(second, 4), (at(second, 6), 4)]),
        ("another length", vec![(second, 4), (at(first(12), 4), 6)]),
        (
            "another flag",
            vec![
                (second, 4),
                (
                    AmFrag {
                        flags: FLAG_REPLY,
                        ..at(second, 4)
                    },
                    6,
                ),
            ],
        ),
    ];
    for (what, frags) in cases {
        let mut b = Node::new(virt_attr(|_| {}));
        for (f, n) in frags {
            b.arrive(AM_USER, &frag(f, n));
        }
        assert!(b.core.done.am_arrivals.is_empty(), "{what}");
        assert!(b.core.am_frags.is_empty(), "{what}: a partial stays");
    }
}

#[test]
fn a_failed_source_takes_its_unfinished_messages() {
    let mut b = Node::new(virt_attr(|_| {}));
    b.arrive(AM_USER, &frag(first(10), 4));
    assert_eq!(b.core.am_frags.len(), 1);
    b.core
        .src_failed(SrcId(0), crate::error::peer_failed("gone".into()));
    b.run();
    assert!(b.core.am_frags.is_empty());
    // The rest, should it still come, begins nothing.
    b.arrive(
        AM_USER,
        &frag(
            AmFrag {
                offset: 4,
                ..first(10)
            },
            6,
        ),
    );
    assert!(b.core.done.am_arrivals.is_empty());
}

#[test]
fn a_rendezvous_announcement_gives_the_handler_a_descriptor() {
    use crate::proto::am_wire::{AmRts, AM_USER_RTS};
    use crate::proto::wire::AM_RNDV_RTS;
    let mut b = Node::new(virt_attr(|_| {}));
    let rts = AmRts {
        inner: AM_RNDV_RTS,
        flags: FLAG_REPLY,
        id: 3,
        hdr_len: 2,
    };
    let mut m = rts.encode().to_vec();
    m.extend_from_slice(b"hi");
    for v in [0u64, 77, 5000] {
        m.extend_from_slice(&v.to_le_bytes());
    }
    b.arrive(AM_USER_RTS, &m);
    let got = std::mem::take(&mut b.core.done.am_arrivals);
    assert_eq!(got.len(), 1);
    assert_eq!(
        (got[0].id, got[0].bytes.as_slice(), got[0].reply_from),
        (3, &b"hi"[..], Some((0, SrcId(0))))
    );
    let (pid, len) = **got[0].rndv.as_ref().expect("a descriptor");
    assert_eq!(len, 5000);
    assert_eq!(b.core.probed_len(pid), Some(5000));
    assert!(b.core.am_rts.is_none());
    // A wrapped request cut short is refused, and leaves nothing behind.
    b.arrive(AM_USER_RTS, &m[..m.len() - 3]);
    assert!(b.core.done.am_arrivals.is_empty() && b.core.am_rts.is_none());
}

#[test]
fn a_rendezvous_announcement_over_the_limit_is_dropped() {
    use crate::proto::am_wire::{AmRts, AM_MAX, AM_USER_RTS};
    use crate::proto::wire::AM_RNDV_RTS;
    let mut b = Node::new(virt_attr(|_| {}));
    let rts = AmRts {
        inner: AM_RNDV_RTS,
        flags: 0,
        id: 3,
        hdr_len: 0,
    };
    let mut m = rts.encode().to_vec();
    for v in [0u64, 77, AM_MAX + 1] {
        m.extend_from_slice(&v.to_le_bytes());
    }
    b.arrive(AM_USER_RTS, &m);
    assert!(b.core.done.am_arrivals.is_empty());
    assert!(b.core.probed.is_empty());
}
