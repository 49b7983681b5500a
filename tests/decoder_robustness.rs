//! The perftest decoders on hostile input: the parameter block, the
//! wireup payload, and the bootstrap frame reader fed by a raw socket.
//! Random bytes and valid encodings with truncations, bit flips and length
//! fields set to huge values give errors, never panics or waits; accepted
//! input re-encodes to itself; the frame reader agrees with a model of the
//! documented format.
//!
//! The fuzz targets `perf_params`, `perf_wireup` and `perf_bootstrap`
//! check the same properties.

#[path = "decoder_robustness/bootstrap.rs"]
mod bootstrap;

use bootstrap::{check_params, check_wireup, frame, Got, Model, Server, Step, KINDS};
use proptest::prelude::*;
use proptest::sample::Index;
use rucx::perf::bootstrap::{FrameKind, Wireup, MAX_FRAME, MAX_RKEY};
use rucx::perf::catalog::TestKind;
use rucx::perf::params::{TestParams, MAX_OUTSTANDING, MAX_SIZE_ENTRIES};

/// Damage done to a valid encoding.
#[derive(Debug, Clone)]
enum Mutation {
    Truncate(Index),
    FlipBit(Index, u8),
    /// Sets 1, 4 or 8 bytes (a length field or part of one) to 0xff.
    Huge(Index, u8),
    Insert(Index, Vec<u8>),
    Remove(Index),
}

fn mutations() -> impl Strategy<Value = Vec<Mutation>> {
    let m = prop_oneof![
        any::<Index>().prop_map(Mutation::Truncate),
        (any::<Index>(), 0..8u8).prop_map(|(i, b)| Mutation::FlipBit(i, b)),
        (any::<Index>(), prop_oneof![Just(1u8), Just(4), Just(8)])
            .prop_map(|(i, w)| Mutation::Huge(i, w)),
        (any::<Index>(), prop::collection::vec(any::<u8>(), 1..8))
            .prop_map(|(i, b)| Mutation::Insert(i, b)),
        any::<Index>().prop_map(Mutation::Remove),
    ];
    prop::collection::vec(m, 1..4)
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

fn params() -> impl Strategy<Value = TestParams> {
    (
        prop_oneof![Just(TestKind::TagLat), Just(TestKind::TagBw)],
        prop::collection::vec(0..100_000usize, 1..6),
        any::<u64>(),
        any::<u64>(),
        1..=64u32,
        prop_oneof![Just(0.0), Just(100.0), 0.0..=100.0f64],
        any::<(bool, bool, bool)>(),
    )
        .prop_map(
            |(
                test,
                msg_sizes,
                iters,
                warmup,
                outstanding,
                percentile,
                (validate, err_handling, sockaddr),
            )| {
                TestParams {
                    test,
                    msg_sizes,
                    iters,
                    warmup,
                    outstanding,
                    percentile,
                    validate,
                    err_handling,
                    sockaddr,
                    iov: (false, false),
                    threads: 1,
                    busy_target: false,
                    worker_per_thread: false,
                }
            },
        )
}

/// A valid wireup: tag tests' (no key, address 0) or one-sided tests'
/// (a key and a non-zero buffer address).
fn wireup() -> impl Strategy<Value = Wireup> {
    let exposed = prop_oneof![
        Just((Vec::new(), 0u64)),
        (prop::collection::vec(any::<u8>(), 1..80), 1..=u64::MAX),
    ];
    // An empty address: a listener's wireup (`--sockaddr`), with a port.
    (
        prop::collection::vec(any::<u8>(), 0..100),
        exposed,
        any::<u16>(),
    )
        .prop_map(|(address, (rkey, recv_buffer), port)| Wireup {
            listen_port: if address.is_empty() { port } else { 0 },
            address,
            rkey,
            recv_buffer,
        })
}

fn kind() -> impl Strategy<Value = FrameKind> {
    (0..KINDS.len()).prop_map(|i| KINDS[i])
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        4 => kind().prop_map(Step::Recv),
        2 => kind().prop_map(Step::Outcome),
        2 => Just(Step::Barrier),
        1 => Just(Step::CheckAlive),
    ]
}

/// A frame a well-behaved or confused peer might send.
fn piece() -> impl Strategy<Value = Vec<u8>> {
    let text = prop::collection::vec(any::<u8>(), 0..20);
    prop_oneof![
        2 => params().prop_map(|p| frame(FrameKind::Params as u8, &p.encode())),
        2 => wireup().prop_map(|w| frame(FrameKind::Wireup as u8, &w.encode())),
        2 => (prop_oneof![Just(2u8), Just(4u8)], 0..3u8, text.clone()).prop_map(|(k, ok, why)| {
            let mut p = vec![ok];
            p.extend_from_slice(&why);
            frame(k, &p)
        }),
        2 => (0..3u32).prop_map(|n| frame(FrameKind::Barrier as u8, &n.to_le_bytes())),
        1 => text.clone().prop_map(|why| frame(FrameKind::Abort as u8, &why)),
        1 => (any::<u8>(), text.clone()).prop_map(|(k, p)| frame(k, &p)),
        1 => (any::<u8>(), prop_oneof![Just(MAX_FRAME as u32 + 1), Just(u32::MAX), any::<u32>()], text)
            .prop_map(|(k, len, rest)| {
                let mut v = vec![k];
                v.extend_from_slice(&len.to_le_bytes());
                v.extend_from_slice(&rest);
                v
            }),
    ]
}

/// 256 cases by default (`PROPTEST_CASES` overrides); no regression
/// files are written into the source tree.
fn config() -> ProptestConfig {
    ProptestConfig {
        failure_persistence: None,
        ..ProptestConfig::default()
    }
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn params_random(data in prop::collection::vec(any::<u8>(), 0..120)) {
        check_params(&data);
        // Random bytes behind a valid magic and version reach the fields.
        let mut framed = b"RXPT".to_vec();
        framed.extend_from_slice(&1u16.to_le_bytes());
        framed.extend_from_slice(&data);
        check_params(&framed);
    }

    #[test]
    fn params_round_trip_and_survive_mutation(p in params(), muts in mutations()) {
        let valid = p.encode();
        prop_assert_eq!(TestParams::decode(&valid).expect("valid block"), p);
        check_params(&apply(valid.clone(), &muts));
        for n in 0..valid.len() {
            prop_assert!(TestParams::decode(&valid[..n]).is_err(), "prefix {}", n);
        }
    }

    #[test]
    fn wireup_random(data in prop::collection::vec(any::<u8>(), 0..64)) {
        check_wireup(&data);
    }

    #[test]
    fn wireup_key_without_buffer_or_buffer_without_key_is_refused(
        address in prop::collection::vec(any::<u8>(), 1..20),
        rkey in prop::collection::vec(any::<u8>(), 1..20),
        recv_buffer in 1..=u64::MAX,
    ) {
        let no_buffer = Wireup { address: address.clone(), rkey, recv_buffer: 0, listen_port: 0 };
        prop_assert!(Wireup::decode(&no_buffer.encode()).is_err());
        let no_key = Wireup { address, rkey: Vec::new(), recv_buffer, listen_port: 0 };
        prop_assert!(Wireup::decode(&no_key.encode()).is_err());
    }

    #[test]
    fn wireup_round_trips_and_survives_mutation(w in wireup(), muts in mutations()) {
        let valid = w.encode();
        prop_assert_eq!(Wireup::decode(&valid).expect("valid wireup"), w);
        check_wireup(&apply(valid, &muts));
    }

    #[test]
    fn model_agrees_on_structured_streams(
        pieces in prop::collection::vec(piece(), 0..6),
        muts in prop_oneof![2 => Just(Vec::new()), 1 => mutations()],
        steps in prop::collection::vec(step(), 1..6),
    ) {
        let bytes = apply(pieces.concat(), &muts);
        SERVER.with(|s| s.check(&bytes, &steps));
    }

    #[test]
    fn model_agrees_on_random_streams(
        bytes in prop::collection::vec(any::<u8>(), 0..80),
        steps in prop::collection::vec(step(), 1..4),
    ) {
        SERVER.with(|s| s.check(&bytes, &steps));
    }
}

thread_local! {
    static SERVER: Server = Server::open();
}

#[test]
fn params_length_fields_set_huge() {
    let mut p = TestParams::new(TestKind::TagBw);
    p.msg_sizes = vec![8, 16];
    let valid = p.encode();
    let patched = |at: usize, bytes: &[u8]| {
        let mut b = valid.clone();
        b[at..at + bytes.len()].copy_from_slice(bytes);
        b
    };
    let count = 40;
    for n in [0, 1, 3, MAX_SIZE_ENTRIES as u32 + 1, u32::MAX] {
        assert!(
            TestParams::decode(&patched(count, &n.to_le_bytes())).is_err(),
            "{n}"
        );
    }
    // A count the buffer is long enough for, but beyond the limit.
    let mut long = patched(count, &(MAX_SIZE_ENTRIES as u32 + 1).to_le_bytes());
    long.resize(44 + 8 * (MAX_SIZE_ENTRIES + 1), 0);
    assert!(TestParams::decode(&long).is_err());
    for size in [u64::MAX, 1 << 63, (1 << 34) + 1] {
        assert!(TestParams::decode(&patched(44, &size.to_le_bytes())).is_err());
    }
    for o in [0, MAX_OUTSTANDING + 1, u32::MAX] {
        assert!(TestParams::decode(&patched(28, &o.to_le_bytes())).is_err());
    }
    // Many entries each within the limit whose sum is not.
    let mut big = TestParams::new(TestKind::TagLat);
    big.msg_sizes = vec![1 << 34; 3];
    let mut block = TestParams::new(TestKind::TagLat).encode();
    block.truncate(40);
    block.extend_from_slice(&3u32.to_le_bytes());
    for s in &big.msg_sizes {
        block.extend_from_slice(&(*s as u64).to_le_bytes());
    }
    assert!(TestParams::decode(&block).is_err());
}

#[test]
fn wireup_length_fields_set_huge() {
    let w = Wireup {
        address: vec![1, 2, 3],
        rkey: vec![4],
        recv_buffer: 9,
        listen_port: 0,
    };
    let valid = w.encode();
    for (at, len) in [
        (0, u32::MAX),
        (0, MAX_FRAME as u32 + 1),
        (0, 4),
        (0, 0),
        (7, u32::MAX),
        (7, MAX_RKEY as u32 + 1),
        (7, 2),
    ] {
        let mut b = valid.clone();
        b[at..at + 4].copy_from_slice(&len.to_le_bytes());
        assert!(Wireup::decode(&b).is_err(), "length {len} at {at}");
    }
}

#[test]
fn frame_reader_edge_cases() {
    let s = Server::open();
    let barrier = |n: u32| frame(FrameKind::Barrier as u8, &n.to_le_bytes());
    let cases: Vec<(Vec<u8>, Vec<Step>)> = vec![
        (Vec::new(), vec![Step::Recv(FrameKind::Params)]),
        (vec![1, 0, 0], vec![Step::Recv(FrameKind::Params)]),
        // A header announcing more than the limit, and exactly the limit
        // (then closed before the payload).
        (
            [&[3u8][..], &(MAX_FRAME as u32 + 1).to_le_bytes()].concat(),
            vec![Step::Recv(FrameKind::Wireup)],
        ),
        (
            [&[3u8][..], &(MAX_FRAME as u32).to_le_bytes()].concat(),
            vec![Step::Recv(FrameKind::Wireup)],
        ),
        (frame(0, b""), vec![Step::Recv(FrameKind::Params)]),
        (frame(7, b""), vec![Step::Recv(FrameKind::Params)]),
        // An unknown kind is refused before its payload is awaited.
        (
            [&[7u8][..], &10u32.to_le_bytes()].concat(),
            vec![Step::Recv(FrameKind::Params)],
        ),
        (frame(6, b"bye \xff"), vec![Step::Recv(FrameKind::Params)]),
        (frame(6, b"bye"), vec![Step::CheckAlive]),
        (
            frame(2, b"x"),
            vec![Step::CheckAlive, Step::Recv(FrameKind::Accept)],
        ),
        (frame(2, b""), vec![Step::Outcome(FrameKind::Accept)]),
        (frame(2, &[0, 0]), vec![Step::Outcome(FrameKind::Accept)]),
        (
            frame(4, &[1, b'n', b'o']),
            vec![Step::Outcome(FrameKind::Status)],
        ),
        (frame(4, &[2]), vec![Step::Outcome(FrameKind::Status)]),
        ([barrier(0), barrier(1)].concat(), vec![Step::Barrier; 3]),
        ([barrier(0), barrier(0)].concat(), vec![Step::Barrier; 2]),
        (frame(5, &[0, 0, 0]), vec![Step::Barrier]),
        (frame(5, &[0, 0, 0, 0, 0]), vec![Step::Barrier]),
        (frame(1, b"RXPT"), vec![Step::Recv(FrameKind::Params)]),
        (frame(3, &[0; 8]), vec![Step::Recv(FrameKind::Wireup)]),
    ];
    for (bytes, steps) in &cases {
        s.check(bytes, steps);
    }
    // The model is not trivial: it tells these outcomes apart.
    let two = [barrier(0), barrier(1)].concat();
    let mut m = Model::new(&two);
    assert_eq!(m.step(Step::Barrier), Got::Done);
    assert_eq!(m.step(Step::Barrier), Got::Done);
    assert_eq!(m.step(Step::Barrier), Got::Gone);
    let abort = frame(6, b"bye \xff");
    let mut m = Model::new(&abort);
    assert_eq!(
        m.step(Step::Recv(FrameKind::Params)),
        Got::Aborted("bye \u{fffd}".into())
    );
}

#[test]
fn listener_serves_a_good_client_after_bad_ones() {
    let s = Server::open();
    for bad in [&b"\x01\xff\xff\xff\xff"[..], b"", &frame(9, b"?")] {
        s.check(bad, &[Step::Recv(FrameKind::Params)]);
    }
    let p = TestParams::new(TestKind::TagLat);
    let good = frame(FrameKind::Params as u8, &p.encode());
    let got = s.run(&good, &[Step::Recv(FrameKind::Params)]);
    assert_eq!(got, vec![Got::Payload(p.encode())]);
    assert_eq!(TestParams::decode(&p.encode()).unwrap(), p);
}
