//! What other processes write into shared memory, and the addresses and
//! keys they send, decoded by this process: a FIFO region scribbled over
//! between pushes and polls, arbitrary device and iface addresses into
//! real `posix` and `cma` ifaces, arbitrary remote keys into the `shm`
//! memory domain. Nothing may panic or hang, and each result must be the
//! one a model of the documented format predicts (see the harness files
//! in `decoder_robustness/`).
//!
//! Inputs are structured cases (valid pieces, real addresses and keys with
//! edits) and plain random bytes. The `shm_fifo_region`, `shm_addresses`
//! and `shm_rkey` fuzz targets run the same checks.

#[path = "decoder_robustness/addresses.rs"]
mod addresses;
#[path = "decoder_robustness/fifo_region.rs"]
mod fifo_region;
#[path = "decoder_robustness/rkey.rs"]
mod rkey;

use std::cell::RefCell;

use addresses::{Base, Bytes, Probe, Send, Target, Tl};
use fifo_region::fifo_model::{ARMED, DESC, INLINE, OWNER, PAD};
use fifo_region::{Op, Value, WordAt};
use proptest::prelude::*;
use proptest::test_runner::{Config, TestRunner};
use rkey::Keys;

/// 256 cases by default (`PROPTEST_CASES` overrides); no regression files
/// are written into the source tree.
fn config() -> Config {
    Config {
        failure_persistence: None,
        ..Config::default()
    }
}

fn run<S: Strategy>(strategy: S, test: impl FnMut(S::Value)) {
    let test = RefCell::new(test);
    let mut runner = TestRunner::new(config());
    if let Err(e) = runner.run(&strategy, |v| {
        (test.borrow_mut())(v);
        Ok(())
    }) {
        panic!("{e}");
    }
}

fn bytes(n: usize) -> impl Strategy<Value = Vec<u8>> {
    prop::collection::vec(any::<u8>(), 0..n)
}

// ---------------------------------------------------------------- FIFO

fn push_op() -> impl Strategy<Value = Op> {
    (
        any::<u8>(),
        any::<u8>(),
        any::<u16>(),
        any::<u16>(),
        any::<u8>(),
    )
        .prop_map(|(producer, am, src, len, split)| Op::Push {
            producer,
            am,
            src,
            len,
            split,
        })
}

fn value() -> impl Strategy<Value = Value> {
    prop_oneof![
        prop_oneof![Just(0), Just(u64::MAX), Just(ARMED), 0..40u64, any::<u64>()]
            .prop_map(Value::Set),
        prop_oneof![-20..20i16, any::<i16>()].prop_map(Value::Add),
        prop_oneof![
            Just(OWNER),
            Just(ARMED),
            Just(INLINE | DESC),
            Just(PAD),
            Just(1 << 32),
            any::<u64>()
        ]
        .prop_map(Value::Xor),
        (
            prop_oneof![
                Just((OWNER | INLINE) as u8),
                Just(INLINE as u8),
                Just((OWNER | DESC) as u8),
                Just(DESC as u8),
                Just((OWNER | PAD) as u8),
                0..16u8,
                any::<u8>()
            ],
            any::<u8>(),
            any::<u16>(),
            prop_oneof![0..300u32, any::<u32>()]
        )
            .prop_map(|(f, am, src, len)| Value::Ctl(f, am, src, len)),
    ]
}

fn fifo_op(scribble: bool) -> impl Strategy<Value = Op> {
    let word_at = prop_oneof![
        Just(WordAt::Head),
        Just(WordAt::Tail),
        any::<u8>().prop_map(WordAt::Ctl),
        any::<bool>().prop_map(WordAt::Header),
    ];
    let w = u32::from(scribble);
    prop_oneof![
        6 => push_op(),
        5 => Just(Op::Poll),
        2 * w => (any::<u32>(), prop::collection::vec(any::<u8>(), 1..24))
            .prop_map(|(at, bytes)| Op::Scribble { at, bytes }),
        3 * w => (word_at, value()).prop_map(|(at, value)| Op::Word { at, value }),
        1 => any::<bool>().prop_map(|drop_first| Op::NewConsumer { drop_first }),
        1 => Just(Op::Arm),
        1 => Just(Op::SkipStuck),
        1 => Just(Op::Attach),
        1 => Just(Op::NewProducer),
        1 => any::<u8>().prop_map(Op::HasRoom),
    ]
}

/// Some good messages first, then anything (with or without scribbles).
fn fifo_case() -> impl Strategy<Value = (u8, Vec<Op>)> {
    (0..4u8, any::<bool>()).prop_flat_map(|(shape, scribble)| {
        (
            Just(shape),
            prop::collection::vec(push_op(), 0..8),
            prop::collection::vec(fifo_op(scribble), 0..48),
        )
            .prop_map(|(shape, mut ops, rest)| {
                ops.extend(rest);
                (shape, ops)
            })
    })
}

#[test]
fn fifo_region_scribbled_by_a_peer_matches_the_model() {
    let mut total = fifo_region::Stats::default();
    let mut clean = 0;
    run(fifo_case(), |(shape, ops)| {
        let s = fifo_region::run(shape, &ops);
        total.delivered += s.delivered;
        total.corrupt += s.corrupt;
        total.full += s.full;
        total.too_long += s.too_long;
        total.attached += s.attached;
        total.attach_refused += s.attach_refused;
        total.skipped += s.skipped;
        clean += usize::from(s.clean);
    });
    // The cases reach every outcome, with and without scribbles.
    eprintln!("{total:?}, {clean} clean cases");
    assert!(
        clean > 0 && total.corrupt > 0 && total.full > 0 && total.too_long > 0,
        "{total:?}"
    );
    assert!(
        total.attached > 0 && total.attach_refused > 0 && total.skipped > 0,
        "{total:?}"
    );
}

#[test]
fn fifo_model_is_not_trivial() {
    let push = |len| Op::Push {
        producer: 0,
        am: 7,
        src: 3,
        len,
        split: 1,
    };
    // Clean: inline and descriptor messages come out; the FIFO fills.
    let mut ops: Vec<Op> = (0..10).map(|i| push(i * 40)).collect();
    ops.extend([Op::Poll, Op::Poll, Op::Attach, push(1), Op::Arm]);
    let s = fifo_region::run(0, &ops);
    assert!(
        s.clean && s.delivered >= 10 && s.full >= 1 && s.attached == 1,
        "{s:?}"
    );
    // A ready word with a length beyond the element is corrupt; a broken
    // magic refuses attaching; a claimed hole can be skipped.
    let ready = (OWNER | INLINE) as u8;
    let ops = [
        Op::Word {
            at: WordAt::Ctl(0),
            value: Value::Ctl(ready, 1, 2, 57),
        },
        Op::Poll,
        Op::Word {
            at: WordAt::Header(false),
            value: Value::Xor(1),
        },
        Op::Attach,
        Op::Word {
            at: WordAt::Head,
            value: Value::Add(2),
        },
        Op::SkipStuck,
        push(300),
    ];
    let s = fifo_region::run(0, &ops);
    assert_eq!(
        (s.corrupt, s.attach_refused, s.skipped, s.too_long),
        (1, 1, 1, 0),
        "{s:?}"
    );
    assert!(!s.clean);
    // A too-long push, in a FIFO without descriptors.
    let s = fifo_region::run(1, &[push(9)]);
    assert_eq!(s.too_long, 1, "{s:?}");
}

// ----------------------------------------------------------- addresses

fn edits() -> impl Strategy<Value = Vec<addresses::Edit>> {
    use addresses::Edit;
    let u32s = prop_oneof![
        Just(0u32),
        Just(1),
        Just(2),
        Just(3),
        Just(16),
        Just(64),
        Just(128),
        Just(256),
        Just(8192),
        Just(1 << 20),
        Just(u32::MAX),
        any::<u32>()
    ];
    let u64s = prop_oneof![
        Just(0u64),
        Just(u64::MAX),
        Just(1 << 40),
        0..3_000_000u64,
        any::<u64>()
    ];
    let edit = prop_oneof![
        (any::<u16>(), 1..=255u8).prop_map(|(a, x)| Edit::Xor(a, x)),
        (any::<u16>(), any::<u8>()).prop_map(|(a, x)| Edit::Set(a, x)),
        (0..50u16).prop_map(Edit::Truncate),
        prop::collection::vec(any::<u8>(), 1..8).prop_map(Edit::Append),
        (any::<u8>(), u32s).prop_map(|(f, x)| Edit::U32(f, x)),
        (any::<u8>(), u64s).prop_map(|(f, x)| Edit::U64(f, x)),
    ];
    prop::collection::vec(edit, 1..4)
}

fn probe() -> impl Strategy<Value = Probe> {
    let base = prop_oneof![Just(Base::Posix), Just(Base::PosixPeer), Just(Base::Cma)];
    let dev = prop_oneof![
        6 => Just(Bytes::Real(Base::Device, Vec::new())),
        1 => edits().prop_map(|e| Bytes::Real(Base::Device, e)),
        1 => bytes(40).prop_map(Bytes::Raw),
    ];
    let iface = prop_oneof![
        3 => base.clone().prop_map(|b| Bytes::Real(b, Vec::new())),
        6 => (base, edits()).prop_map(|(b, e)| Bytes::Real(b, e)),
        2 => bytes(60).prop_map(Bytes::Raw),
    ];
    let send = (
        any::<u8>(),
        any::<u64>(),
        prop_oneof![0..=120u8, any::<u8>()],
    )
        .prop_map(|(id, header, len)| Send { id, header, len });
    (
        prop_oneof![3 => Just(Tl::Posix), 1 => Just(Tl::Cma)],
        dev,
        iface,
        prop::collection::vec(send, 0..3),
    )
        .prop_map(|(tl, dev, iface, sends)| Probe {
            tl,
            dev,
            iface,
            sends,
        })
}

#[test]
fn addresses_from_a_peer_match_the_model() {
    let mut t = Target::open();
    let mut total = addresses::Stats::default();
    run(prop::collection::vec(probe(), 1..5), |probes| {
        let s = t.check(&probes);
        total.reachable += s.reachable;
        total.created += s.created;
        total.sent += s.sent;
        total.delivered += s.delivered;
    });
    // Edited real addresses get past the decoder to real endpoints.
    eprintln!("{total:?}, cma: {}", t.has_cma());
    assert!(total.created > 0 && total.delivered > 0, "{total:?}");
}

#[test]
fn address_model_is_not_trivial() {
    let mut t = Target::open();
    let real = |b| Bytes::Real(b, Vec::new());
    let send = Send {
        id: 5,
        header: 0x1122,
        len: 3,
    };
    let mut probes = vec![
        Probe {
            tl: Tl::Posix,
            dev: real(Base::Device),
            iface: real(Base::PosixPeer),
            sends: vec![send, send],
        },
        Probe {
            tl: Tl::Posix,
            dev: real(Base::Device),
            iface: real(Base::Posix),
            sends: vec![send],
        },
        // A valid shape that differs only in the release interval reaches
        // the same segment.
        Probe {
            tl: Tl::Posix,
            dev: real(Base::Device),
            iface: Bytes::Real(Base::PosixPeer, vec![addresses::Edit::U32(8, 1)]),
            sends: vec![send],
        },
        // Too short, another host.
        Probe {
            tl: Tl::Posix,
            dev: real(Base::Device),
            iface: Bytes::Real(Base::Posix, vec![addresses::Edit::Truncate(43)]),
            sends: vec![],
        },
        Probe {
            tl: Tl::Posix,
            dev: Bytes::Raw(vec![0; 32]),
            iface: real(Base::Posix),
            sends: vec![],
        },
    ];
    if t.has_cma() {
        probes.push(Probe {
            tl: Tl::Cma,
            dev: real(Base::Device),
            iface: real(Base::Cma),
            sends: vec![send],
        });
    }
    let s = t.check(&probes);
    let cma = usize::from(t.has_cma());
    assert_eq!((s.reachable, s.created), (3 + cma, 3 + cma), "{s:?}");
    assert_eq!((s.sent, s.delivered), (4, 4), "{s:?}");
}

// ---------------------------------------------------------------- keys

#[derive(Debug, Clone)]
enum Key {
    Raw(Vec<u8>),
    /// The header of a key, then random bytes.
    Shaped(Vec<u8>),
    Real(usize, Vec<rkey::Edit>),
}

fn key() -> impl Strategy<Value = Key> {
    use rkey::Edit;
    let edit = prop_oneof![
        (any::<u8>(), 1..=255u8).prop_map(|(a, x)| Edit::Xor(a, x)),
        (any::<u8>(), any::<u8>()).prop_map(|(a, x)| Edit::Set(a, x)),
        (0..104u8).prop_map(Edit::Truncate),
        prop::collection::vec(any::<u8>(), 1..4).prop_map(Edit::Append),
        (
            any::<u8>(),
            prop_oneof![Just(0u64), Just(u64::MAX), Just(1 << 63), any::<u64>()]
        )
            .prop_map(|(a, x)| Edit::U64(a, x)),
    ];
    prop_oneof![
        bytes(110).prop_map(Key::Raw),
        prop_oneof![
            prop::collection::vec(any::<u8>(), 46..50),
            prop::collection::vec(any::<u8>(), 90..94)
        ]
        .prop_map(|tail| {
            let mut k = rkey::HEADER.to_vec();
            k.extend(tail);
            Key::Shaped(k)
        }),
        (any::<usize>(), prop::collection::vec(edit, 0..4)).prop_map(|(i, e)| Key::Real(i, e)),
    ]
}

#[test]
fn remote_keys_from_a_peer_match_the_model() {
    let keys = Keys::open();
    let (mut accepted, mut cases) = (0, 0);
    run(key(), |k| {
        cases += 1;
        accepted += usize::from(match k {
            Key::Raw(b) | Key::Shaped(b) => keys.check(&b),
            Key::Real(i, e) => keys.check_real(i, &e),
        });
    });
    eprintln!("{accepted} of {cases} keys accepted");
    assert!(accepted > 0 && accepted < cases);
}

#[test]
fn key_model_is_not_trivial() {
    use rkey::Edit;
    let keys = Keys::open();
    for i in 0..keys.real.len() {
        assert!(keys.check_real(i, &[]));
        // Widened rights and a range at the very top are still well formed.
        assert!(keys.check_real(i, &[Edit::Set(52, 15)]));
        assert!(keys.check_real(i, &[Edit::U64(36, u64::MAX), Edit::U64(44, 0)]));
        // Unknown rights, a wrapping range, a pid of 0, another version.
        assert!(!keys.check_real(i, &[Edit::Set(52, 16)]));
        assert!(!keys.check_real(i, &[Edit::U64(36, u64::MAX), Edit::U64(44, 1)]));
        assert!(!keys.check_real(i, &[Edit::U64(8, 0)]));
        assert!(!keys.check_real(i, &[Edit::Set(4, 1)]));
        assert!(!keys.check_real(i, &[Edit::Truncate(55)]));
        assert!(!keys.check_real(i, &[Edit::Append(vec![0])]));
    }
    // The keys of allocations have a segment entry: descriptor, length.
    let allocs = keys.real.len() - 2..keys.real.len();
    for i in allocs {
        assert_eq!(keys.real[i].0.len(), rkey::SEG_KEY_LEN);
        assert!(!keys.check_real(i, &[Edit::Truncate(99)]));
        assert!(!keys.check_real(i, &[Edit::Set(91, 0x80)]), "descriptor");
        assert!(!keys.check_real(i, &[Edit::U64(92, 0)]), "empty segment");
        assert!(
            !keys.check_real(i, &[Edit::U64(92, u64::MAX)]),
            "huge segment"
        );
        assert!(
            !keys.check_real(i, &[Edit::U64(44, 1 << 20)]),
            "past the segment"
        );
        assert!(keys.check_real(i, &[Edit::U64(44, 0)]), "a shorter range");
        assert!(keys.check_real(i, &[Edit::Xor(56, 1)]), "another host");
    }
}
