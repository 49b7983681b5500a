//! Arbitrary bytes from a peer, written into a real iface over a loopback
//! connection: the iface never panics or hangs, delivers exactly the
//! frames the wire format allows (checked against a model), fails only
//! that connection, and keeps serving a well-behaved endpoint.
//!
//! Inputs are random bytes, streams built from valid and invalid pieces
//! (puts into the iface's registered windows among them), and valid
//! streams with truncations, bit flips and length fields set to huge
//! values. The `tcp_stream` and `tcp_put` fuzz targets run the same
//! harness.

#[path = "decoder_robustness/harness.rs"]
mod harness;

use std::cell::RefCell;
use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr, SocketAddrV4, SocketAddrV6};

use harness::put_model::{self, CTRL_PUT, CTRL_PUT_ACK, PUT_HDR};
use harness::{frame, frame_hdr, hello, Target, Wire, CTRL_ACCEPT, CTRL_REJECT};
use proptest::prelude::*;
use proptest::sample::Index;
use proptest::test_runner::{Config, TestRunner};
use uct::AM_ID_MAX;

/// Who the hello claims to be.
#[derive(Debug, Clone)]
enum Hello {
    /// A made-up iface on 127.0.0.2.
    Stranger(u16),
    /// The iface under attack itself.
    Itself,
    /// The peer whose connection is already open (must be rejected).
    OpenPeer,
    /// Sixteen arbitrary bytes.
    Garbage([u8; 16]),
    /// No hello at all.
    Missing,
}

/// One piece of a stream after the hello.
#[derive(Debug, Clone)]
enum Piece {
    /// A valid user frame.
    Am(u8, Vec<u8>),
    /// A control frame with some length.
    Ctrl(bool, u32),
    /// A header with an arbitrary id and length, then some bytes.
    Hdr(u8, u32, Vec<u8>),
    /// Arbitrary bytes.
    Raw(Vec<u8>),
    /// A put into window `w` (of the target's, or a made-up one), `off`
    /// bytes from its start.
    Put {
        w: u8,
        seq: u64,
        off: i64,
        data: Vec<u8>,
    },
    /// An acknowledgement of a put never made.
    Ack(u64, u32),
}

/// Damage done to a stream.
#[derive(Debug, Clone)]
enum Mutation {
    Truncate(Index),
    FlipBit(Index, u8),
    /// Sets 1, 2 or 4 bytes (a length field or part of one) to 0xff.
    Huge(Index, u8),
    Insert(Index, Vec<u8>),
    Remove(Index),
}

#[derive(Debug, Clone)]
struct Case {
    hello: Hello,
    pieces: Vec<Piece>,
    mutations: Vec<Mutation>,
    /// Sizes of the writes.
    writes: Vec<usize>,
}

fn hello_strategy() -> impl Strategy<Value = Hello> {
    prop_oneof![
        6 => any::<u16>().prop_map(Hello::Stranger),
        1 => Just(Hello::Itself),
        1 => Just(Hello::OpenPeer),
        1 => any::<[u8; 16]>().prop_map(Hello::Garbage),
        1 => Just(Hello::Missing),
    ]
}

fn piece_strategy() -> impl Strategy<Value = Piece> {
    let bytes = |n| prop::collection::vec(any::<u8>(), 0..n);
    prop_oneof![
        6 => (0..AM_ID_MAX, bytes(300)).prop_map(|(id, p)| Piece::Am(id, p)),
        1 => (any::<bool>(), prop_oneof![Just(0u32), any::<u32>()])
            .prop_map(|(a, l)| Piece::Ctrl(a, l)),
        1 => (any::<u8>(), prop_oneof![0..64u32, Just(u32::MAX), any::<u32>()], bytes(64))
            .prop_map(|(id, l, b)| Piece::Hdr(id, l, b)),
        1 => bytes(40).prop_map(Piece::Raw),
        4 => (
            0..5u8,
            any::<u64>(),
            prop_oneof![-8..300i64, any::<i64>()],
            bytes(300),
        )
            .prop_map(|(w, seq, off, data)| Piece::Put { w, seq, off, data }),
        1 => (any::<u64>(), 0..5u32).prop_map(|(s, st)| Piece::Ack(s, st)),
    ]
}

fn mutation_strategy() -> impl Strategy<Value = Mutation> {
    prop_oneof![
        any::<Index>().prop_map(Mutation::Truncate),
        (any::<Index>(), 0..8u8).prop_map(|(i, b)| Mutation::FlipBit(i, b)),
        (any::<Index>(), prop_oneof![Just(1u8), Just(2), Just(4)])
            .prop_map(|(i, w)| Mutation::Huge(i, w)),
        (any::<Index>(), prop::collection::vec(any::<u8>(), 1..8))
            .prop_map(|(i, b)| Mutation::Insert(i, b)),
        any::<Index>().prop_map(Mutation::Remove),
    ]
}

fn case_strategy() -> impl Strategy<Value = Case> {
    (
        hello_strategy(),
        prop::collection::vec(piece_strategy(), 0..8),
        prop_oneof![
            2 => Just(Vec::new()),
            1 => prop::collection::vec(mutation_strategy(), 1..4),
        ],
        prop::collection::vec(1..200usize, 1..4),
    )
        .prop_map(|(hello, pieces, mutations, writes)| Case {
            hello,
            pieces,
            mutations,
            writes,
        })
}

fn apply(mut v: Vec<u8>, muts: &[Mutation]) -> Vec<u8> {
    for m in muts {
        if v.is_empty() {
            break;
        }
        match m {
            Mutation::Truncate(i) => v.truncate(i.index(v.len())),
            Mutation::FlipBit(i, b) => {
                let at = i.index(v.len());
                v[at] ^= 1 << b;
            }
            Mutation::Huge(i, w) => {
                let at = i.index(v.len());
                let end = (at + *w as usize).min(v.len());
                v[at..end].fill(0xff);
            }
            Mutation::Insert(i, b) => {
                let at = i.index(v.len() + 1);
                v.splice(at..at, b.iter().copied());
            }
            Mutation::Remove(i) => {
                v.remove(i.index(v.len()));
            }
        }
    }
    v
}

fn build(t: &Target, c: &Case) -> Vec<u8> {
    let mut v = match &c.hello {
        Hello::Stranger(port) => hello(SocketAddrV4::new(Ipv4Addr::new(127, 0, 0, 2), *port)),
        Hello::Itself => hello(t.own_addr()),
        Hello::OpenPeer => hello(t.peer_addr()),
        Hello::Garbage(b) => b.to_vec(),
        Hello::Missing => Vec::new(),
    };
    for p in &c.pieces {
        match p {
            Piece::Am(id, payload) => v.extend(frame(*id, payload)),
            Piece::Ctrl(accept, len) => {
                let id = if *accept { CTRL_ACCEPT } else { CTRL_REJECT };
                v.extend(frame_hdr(id, *len));
            }
            Piece::Hdr(id, len, rest) => {
                v.extend(frame_hdr(*id, *len));
                v.extend_from_slice(rest);
            }
            Piece::Raw(b) => v.extend_from_slice(b),
            Piece::Put { w, seq, off, data } => v.extend(t.put_frame(*w, *seq, *off, data)),
            Piece::Ack(seq, status) => {
                let mut b = seq.to_le_bytes().to_vec();
                b.extend_from_slice(&status.to_le_bytes());
                v.extend(frame(CTRL_PUT_ACK, &b));
            }
        }
    }
    apply(v, &c.mutations)
}

/// 256 cases by default (`PROPTEST_CASES` overrides); no regression
/// files are written into the source tree.
fn config() -> Config {
    Config {
        failure_persistence: None,
        ..Config::default()
    }
}

#[test]
fn structured_and_mutated_streams_match_the_model() {
    let target = RefCell::new(Target::open());
    let mut runner = TestRunner::new(config());
    let result = runner.run(&case_strategy(), |c| {
        let mut t = target.borrow_mut();
        let bytes = build(&t, &c);
        t.check(&bytes, &c.writes);
        Ok(())
    });
    if let Err(e) = result {
        panic!("{e}");
    }
}

#[test]
fn random_bytes_match_the_model() {
    let target = RefCell::new(Target::open());
    let mut runner = TestRunner::new(config());
    let strategy = (
        prop::collection::vec(any::<u8>(), 0..600),
        prop::collection::vec(1..100usize, 1..3),
    );
    let result = runner.run(&strategy, |(bytes, writes)| {
        target.borrow_mut().check(&bytes, &writes);
        Ok(())
    });
    if let Err(e) = result {
        panic!("{e}");
    }
}

#[test]
fn known_edge_cases_match_the_model() {
    let mut t = Target::open();
    let me = SocketAddrV4::new(Ipv4Addr::new(127, 0, 0, 2), 9);
    let h = hello(me);
    let max = t.max_frame as u32;
    let with = |tail: &[u8]| {
        let mut v = h.clone();
        v.extend_from_slice(tail);
        v
    };
    let edge_cases: Vec<Vec<u8>> = vec![
        Vec::new(),
        h[..15].to_vec(),
        h.clone(),
        with(&frame(1, b"one")),
        // Largest id, empty payload; then the first reserved id.
        with(&[frame(AM_ID_MAX - 1, b""), frame(AM_ID_MAX, b"")].concat()),
        // Length at the limit (never completed) and just above it.
        with(&frame_hdr(2, max)),
        with(&[frame(3, b"x"), frame_hdr(2, max + 1).to_vec()].concat()),
        with(&[frame(3, b"x"), frame_hdr(2, u32::MAX).to_vec()].concat()),
        // Control frames after the acceptance.
        with(&[frame(3, b"x"), frame_hdr(CTRL_ACCEPT, 0).to_vec()].concat()),
        with(&frame_hdr(CTRL_REJECT, 0)),
        with(&frame_hdr(CTRL_ACCEPT, 7)),
        // A second hello where a frame belongs.
        with(&h),
        // Partial header at the end, after a delivered message.
        with(&[frame(4, b"y"), vec![5, 1]].concat()),
        // Hellos with the wrong version or magic.
        [&h[..8], &2u16.to_le_bytes()[..], &h[10..]].concat(),
        [&b"RUCX-TCP"[..], &h[8..]].concat(),
        // An older peer's 16-byte version-2 hello, then a frame.
        [
            &h[..8],
            &2u16.to_le_bytes()[..],
            &h[10..12],
            &h[13..],
            &frame(1, b"v2"),
        ]
        .concat(),
        // Unknown address families; the address cut short.
        [&h[..12], &[5u8][..], &h[13..], &frame(1, b"f5")].concat(),
        [&h[..12], &[0u8][..], &h[13..]].concat(),
        h[..14].to_vec(),
        // A stranger on IPv6, whole and cut short.
        [
            hello(SocketAddrV6::new(Ipv6Addr::LOCALHOST, 9, 0, 0)),
            frame(1, b"six"),
        ]
        .concat(),
        hello(SocketAddrV6::new(Ipv6Addr::LOCALHOST, 9, 0, 0))[..20].to_vec(),
        // The open peer's identity.
        [hello(t.peer_addr()), frame(1, b"spoof")].concat(),
        // Puts: whole, refused, at the edges, truncated, malformed.
        with(&[t.put_frame(0, 1, 0, b"abc"), frame(1, b"after")].concat()),
        with(&t.put_frame(0, 2, 250, &[7; 6])),
        with(&t.put_frame(0, 3, 251, &[7; 6])),
        with(&t.put_frame(0, 4, -1, &[7; 1])),
        with(&t.put_frame(0, 5, 256, b"")),
        with(&t.put_frame(1, 6, 0, b"read only")),
        with(&t.put_frame(2, 7, 0, b"ended")),
        with(&t.put_frame(3, 8, 0, b"another process")),
        with(&t.put_frame(4, 9, 0, b"no such slot")),
        with(&t.put_frame(5, 13, 0, b"wrong secret")),
        with(&t.put_frame(0, 10, 0, &[9; 200])[..150]),
        with(&t.put_frame(0, 11, 0, b"x")[..20]),
        with(&frame_hdr(CTRL_PUT, PUT_HDR as u32 - 1)),
        with(&frame_hdr(CTRL_PUT, u32::MAX)),
        with(&[frame(1, b"x"), frame(CTRL_PUT_ACK, &[0; 12])].concat()),
        {
            let mut p = t.put_frame(0, 12, 0, b"abcd");
            p[5 + 52] = 3;
            with(&p)
        },
    ];
    for bytes in &edge_cases {
        for pieces in [&[usize::MAX][..], &[1], &[3, 16, 5]] {
            t.check(bytes, pieces);
        }
    }
    // The largest frame arrives whole; one byte more fails the source.
    let largest = vec![0xa5; t.max_frame];
    for payload in [&largest[..], &[largest.as_slice(), &[1]].concat()] {
        let bytes = with(&[frame(1, b"x"), frame(2, payload), frame(3, b"z")].concat());
        t.check(&bytes, &[32 << 10]);
    }
}

#[test]
fn the_model_itself_is_not_trivial() {
    // The oracle must tell deliveries, rejections and failures apart.
    let peer = SocketAddr::V4(SocketAddrV4::new(Ipv4Addr::LOCALHOST, 4000));
    let h = hello(SocketAddrV4::new(Ipv4Addr::LOCALHOST, 5000));
    let plain = Wire {
        max_frame: 100,
        max_put: 100,
        ..Wire::default()
    };
    let ok = harness::expect(
        &[h.clone(), frame(1, b"a"), frame(2, b"")].concat(),
        &plain,
        peer,
    );
    assert_eq!(ok.ams, vec![(1, b"a".to_vec()), (2, vec![])]);
    // A source that delivered anything is reported when it goes away.
    assert!(ok.src_failed);
    let broken = harness::expect(&[h.clone(), frame(1, b"a"), vec![9]].concat(), &plain, peer);
    assert!(broken.src_failed && broken.ams.len() == 1);
    let too_long = harness::expect(&[h.clone(), frame(1, &[0; 101])].concat(), &plain, peer);
    assert!(too_long.ams.is_empty() && !too_long.src_failed);
    let spoof = harness::expect(&[hello(peer), frame(1, b"a")].concat(), &plain, peer);
    assert!(spoof.ams.is_empty());
    // Puts: written where the key allows, answered, or breaking the stream.
    let t = Target::open();
    let w = &t.wire;
    let put = harness::expect(
        &[h.clone(), t.put_frame(0, 5, 2, b"hi"), frame(1, b"a")].concat(),
        w,
        peer,
    );
    assert_eq!(put.acks, vec![(5, put_model::OK)]);
    assert_eq!(&put.memory[0][2..4], b"hi");
    assert_ne!(put.memory[0], w.before[0]);
    assert_eq!(put.ams.len(), 1);
    let refused = harness::expect(&[h.clone(), t.put_frame(1, 6, 0, b"x")].concat(), w, peer);
    assert_eq!(refused.acks, vec![(6, put_model::ACCESS)]);
    assert_eq!(refused.memory, w.before);
    let foreign = harness::expect(&[h.clone(), t.put_frame(3, 7, 0, b"x")].concat(), w, peer);
    assert_eq!(foreign.acks, vec![(7, put_model::FOREIGN)]);
    let forged = harness::expect(&[h.clone(), t.put_frame(5, 9, 0, b"x")].concat(), w, peer);
    assert_eq!(forged.acks, vec![(9, put_model::NO_REGISTRATION)]);
    assert_eq!(forged.memory, w.before);
    let cut = t.put_frame(0, 8, 0, b"abcdef");
    let partial = harness::expect(&[&h[..], &cut[..cut.len() - 2]].concat(), w, peer);
    assert!(partial.acks.is_empty());
    assert_eq!(&partial.memory[0][..4], b"abcd");
    let ack = harness::expect(
        &[h, frame(CTRL_PUT_ACK, &[0; 12]), frame(1, b"a")].concat(),
        w,
        peer,
    );
    assert!(ack.ams.is_empty() && ack.acks.is_empty());
}
