//! The protocol layer's wire decoders on hostile input: eager headers,
//! worker addresses, and the eager receive path of a real worker fed by a
//! raw TCP peer. Random bytes and valid encodings with truncations, bit
//! flips and length fields set to huge values must give errors, never
//! panics; what is accepted must mean what it says.
//!
//! Rendezvous headers include the key list of a multi-device rendezvous
//! by get (`decode_rts_keys`).
//!
//! The fuzz targets `ucp_eager_headers`, `ucp_worker_address` and
//! `ucp_eager_rx` check the same properties.

#[path = "ucp_decoder_robustness/checks.rs"]
mod checks;
#[path = "ucp_decoder_robustness/victim.rs"]
mod victim;

use std::cell::RefCell;

use checks::{
    caps_offsets, check_address, check_eager_headers, check_rma_headers, check_rndv_headers,
};
use proptest::prelude::*;
use proptest::sample::Index;
use proptest::test_runner::{Config, TestRunner};
use rucx_ucp::proto::wire::{FirstHdr, MiddleHdr};
use rucx_ucp::uct::{Caps, PerfModel};
use rucx_ucp::wireup::address::{IfaceEntry, WorkerAddress};
use victim::{Msg, Victim};

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

fn mutation() -> impl Strategy<Value = Mutation> {
    prop_oneof![
        any::<Index>().prop_map(Mutation::Truncate),
        (any::<Index>(), 0..8u8).prop_map(|(i, b)| Mutation::FlipBit(i, b)),
        (any::<Index>(), prop_oneof![Just(1u8), Just(4), Just(8)])
            .prop_map(|(i, w)| Mutation::Huge(i, w)),
        (any::<Index>(), prop::collection::vec(any::<u8>(), 1..8))
            .prop_map(|(i, b)| Mutation::Insert(i, b)),
        any::<Index>().prop_map(Mutation::Remove),
    ]
}

fn mutations() -> impl Strategy<Value = Vec<Mutation>> {
    prop::collection::vec(mutation(), 1..4)
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

/// 256 cases by default (`PROPTEST_CASES` overrides); no regression
/// files are written into the source tree.
fn config() -> ProptestConfig {
    ProptestConfig {
        failure_persistence: None,
        ..ProptestConfig::default()
    }
}

fn entry() -> impl Strategy<Value = IfaceEntry> {
    let pos = || prop_oneof![Just(0.0), 1e-9..1.0f64, Just(f64::MAX)];
    (
        ("[a-z_]{1,32}", "[a-z0-9_]{1,64}"),
        prop::collection::vec(any::<u8>(), 0..40),
        prop::collection::vec(any::<u8>(), 0..40),
        (pos(), pos(), 1.0..1e12f64),
        any::<u32>(),
    )
        .prop_map(
            |((tl_name, md_name), dev_addr, iface_addr, (l, o, b), caps)| IfaceEntry {
                tl_name,
                md_name,
                dev_addr,
                iface_addr,
                model: PerfModel {
                    latency: l,
                    overhead: o,
                    bandwidth: b,
                },
                caps: Caps::from_bits_truncate(caps),
            },
        )
}

fn address() -> impl Strategy<Value = WorkerAddress> {
    (any::<u64>(), prop::collection::vec(entry(), 0..5))
        .prop_map(|(uuid, ifaces)| WorkerAddress { uuid, ifaces })
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn eager_headers_random(data in prop::collection::vec(any::<u8>(), 0..64)) {
        check_eager_headers(&data);
        check_rndv_headers(&data);
    }

    #[test]
    fn rma_headers_random(data in prop::collection::vec(any::<u8>(), 0..100)) {
        check_rma_headers(&data);
    }

    #[test]
    fn rma_headers_mutated(
        req in any::<u64>(),
        addr in any::<u64>(),
        op in 0..6u8,
        wide in any::<bool>(),
        value in any::<u64>(),
        muts in mutations(),
    ) {
        use rucx_ucp::rma::wire::{AtomicReq, GetReq, KeyRef};
        use rucx_ucp::{AtomicOp, AtomicValue};
        let key = KeyRef { owner: addr ^ 1, index: 2, generation: 3, secret: value };
        let op = AtomicOp::ALL[usize::from(op)];
        let value = if wide { AtomicValue::U64(value) } else { AtomicValue::U32(value as u32) };
        let a = AtomicReq { req, key, addr, op, value, compare: addr };
        let e = a.encode();
        prop_assert_eq!(AtomicReq::decode(&e).expect("valid atomic"), a);
        check_rma_headers(&apply(e, &muts));
        let g = GetReq { req, key, addr, len: value.as_u64(), offset: 0 }.encode();
        check_rma_headers(&g);
        check_rma_headers(&apply(g, &muts));
    }

    #[test]
    fn rts_keys_round_trip_and_survive_mutation(
        first in prop::collection::vec(any::<u8>(), 0..48),
        more in prop::collection::vec(("[a-z0-9:_]{0,12}", prop::collection::vec(any::<u8>(), 0..48)), 0..4),
        muts in mutations(),
    ) {
        use rucx_ucp::proto::wire::{decode_rts_keys, encode_rts_keys};
        let refs: Vec<(&str, Vec<u8>)> = more.iter().map(|(n, k)| (n.as_str(), k.clone())).collect();
        let e = encode_rts_keys(&first, &refs).expect("within the limits");
        let (f, got) = decode_rts_keys(&e).expect("valid keys");
        prop_assert_eq!(f, &first[..]);
        let want: Vec<(&str, &[u8])> = more.iter().map(|(n, k)| (n.as_str(), &k[..])).collect();
        prop_assert_eq!(got, want);
        check_rndv_headers(&apply(e, &muts));
    }

    #[test]
    fn eager_headers_mutated(
        tag in any::<u64>(),
        total in prop_oneof![0..64u64, Just(u64::MAX), any::<u64>()],
        id in any::<u64>(),
        frag in prop::collection::vec(any::<u8>(), 0..40),
        muts in mutations(),
    ) {
        let h = FirstHdr { tag, total, msg_id: id };
        let mut valid = h.encode().to_vec();
        valid.extend_from_slice(&frag);
        check_eager_headers(&valid);
        check_eager_headers(&apply(valid, &muts));
        let m = MiddleHdr { msg_id: id, offset: total };
        let mut valid = m.encode().to_vec();
        valid.extend_from_slice(&frag);
        let (back, rest) = MiddleHdr::decode(&valid).expect("valid middle header");
        prop_assert_eq!(back, m);
        prop_assert_eq!(rest, &frag[..]);
        check_eager_headers(&apply(valid, &muts));
    }

    #[test]
    fn address_random(data in prop::collection::vec(any::<u8>(), 0..200)) {
        check_address(&data);
        // Random bytes behind a valid version and uuid reach the entries.
        let mut framed = vec![rucx_ucp::wireup::address::VERSION];
        framed.extend_from_slice(&data);
        check_address(&framed);
    }

    #[test]
    fn address_round_trips_and_survives_mutation(a in address(), muts in mutations()) {
        let valid = a.encode().expect("encode");
        prop_assert_eq!(WorkerAddress::decode(&valid).expect("valid address"), a.clone());
        check_address(&valid);
        check_address(&apply(valid.clone(), &muts));
        // Every truncation is an error.
        for n in 0..valid.len() {
            prop_assert!(WorkerAddress::decode(&valid[..n]).is_err(), "prefix {}", n);
        }
    }
}

#[test]
fn address_length_fields_set_huge() {
    let a = WorkerAddress {
        uuid: 1,
        ifaces: vec![
            IfaceEntry {
                tl_name: "tcp".into(),
                md_name: "tcp".into(),
                dev_addr: vec![127, 0, 0, 1],
                iface_addr: vec![0x12, 0x34],
                model: PerfModel {
                    latency: 1e-6,
                    overhead: 1e-7,
                    bandwidth: 1e9,
                },
                caps: Caps::AM_SHORT | Caps::AM_BCOPY,
            };
            2
        ],
    };
    let valid = a.encode().unwrap();
    // Count, transport name, domain name, device and iface lengths of the
    // first entry.
    let first_name = 10;
    let md = first_name + 1 + 3;
    let dev = md + 1 + 3;
    let iface = dev + 1 + 4;
    for at in [9, first_name, md, dev, iface] {
        for v in [0u8, 33, 65, 0xff] {
            let mut b = valid.clone();
            b[at] = v;
            assert!(WorkerAddress::decode(&b).is_err(), "byte {at} = {v}");
        }
    }
    // The same with the rest of the buffer long enough to satisfy them.
    let mut padded = valid.clone();
    padded[9] = 0xff;
    padded.extend_from_slice(&[0u8; 4096]);
    assert!(WorkerAddress::decode(&padded).is_err());
    // Non-finite or negative models are refused.
    let model_at = iface + 1 + 2;
    for bad in [f64::NAN, f64::INFINITY, -1.0] {
        let mut b = valid.clone();
        b[model_at..model_at + 8].copy_from_slice(&bad.to_bits().to_le_bytes());
        assert!(WorkerAddress::decode(&b).is_err(), "latency {bad}");
    }
}

#[test]
fn unknown_capability_bits_re_encode_readably() {
    // A peer built later may advertise capabilities this build does not
    // know. Decoding either refuses them or drops them; either way the
    // result re-encodes to an address this build can read back.
    let a = WorkerAddress {
        uuid: 3,
        ifaces: vec![IfaceEntry {
            tl_name: "x".into(),
            md_name: "y".into(),
            dev_addr: vec![],
            iface_addr: vec![],
            model: PerfModel {
                latency: 0.0,
                overhead: 0.0,
                bandwidth: 1.0,
            },
            caps: Caps::AM_SHORT,
        }],
    };
    let mut b = a.encode().unwrap();
    let at = caps_offsets(&a)[0];
    b[at + 3] = 0x80;
    check_address(&b);
}

// The worker-level attack.

fn attack_tag() -> impl Strategy<Value = u64> {
    0..4u64
}

fn msg() -> impl Strategy<Value = Msg> {
    let bytes = |n| prop::collection::vec(any::<u8>(), 0..n);
    // Totals stay far below memory limits: see
    // `fragment_offset_near_a_huge_total` for why.
    let total = prop_oneof![0..64u64, 64..4096u64];
    let id = 0..3u64;
    prop_oneof![
        3 => (attack_tag(), bytes(64)).prop_map(|(tag, payload)| Msg::Only { tag, payload }),
        3 => (attack_tag(), total.clone(), id.clone(), bytes(64)).prop_map(
            |(tag, total, msg_id, frag)| Msg::First { tag, total, msg_id, frag }
        ),
        4 => (id, prop_oneof![0..64u64, total, Just(u64::MAX)], bytes(64)).prop_map(
            |(msg_id, offset, frag)| Msg::Middle { msg_id, offset, frag }
        ),
        1 => (prop_oneof![0..8u8, 0..32u8], bytes(40))
            .prop_map(|(id, data)| Msg::Raw { id, data }),
        // Rendezvous messages (RTS to ATP) with small request ids, lengths
        // and addresses, so that some name live requests.
        2 => (8..16u8, prop::collection::vec(0..4u64, 0..5), bytes(24)).prop_map(|(id, f, tail)| {
            let mut data: Vec<u8> = f.iter().flat_map(|v| v.to_le_bytes()).collect();
            data.extend_from_slice(&tail);
            Msg::Raw { id, data }
        }),
    ]
}

#[test]
fn eager_receive_path_survives_hostile_messages() {
    let v = RefCell::new(Victim::open());
    let mut runner = TestRunner::new(Config {
        failure_persistence: None,
        ..Config::default()
    });
    let strategy = (
        prop::collection::vec((attack_tag(), 0..200usize), 0..4),
        prop::collection::vec(msg(), 0..10),
        prop::collection::vec(1..100usize, 1..3),
    );
    let reached = RefCell::new(0usize);
    let result = runner.run(&strategy, |(recvs, msgs, pieces)| {
        let r = v.borrow_mut().attack(&recvs, &msgs, &pieces);
        *reached.borrow_mut() += r.completed + r.failed + r.drained;
        Ok(())
    });
    if let Err(e) = result {
        panic!("{e}");
    }
    // The attack is not hollow: messages got through to the matcher.
    assert!(
        *reached.borrow() > 0,
        "no hostile message was ever received"
    );
}

#[test]
fn valid_messages_from_a_raw_peer_are_received() {
    // The harness reaches the eager path: well-formed messages from the
    // raw connection arrive like any other.
    let mut v = Victim::open();
    let r = v.attack(
        &[(1, 16), (2, 16), (3, 4)],
        &[
            Msg::Only {
                tag: 1,
                payload: b"only".to_vec(),
            },
            Msg::First {
                tag: 2,
                total: 6,
                msg_id: 7,
                frag: b"fir".to_vec(),
            },
            Msg::Middle {
                msg_id: 7,
                offset: 3,
                frag: b"st!".to_vec(),
            },
            // Longer than its receive buffer: truncated.
            Msg::Only {
                tag: 3,
                payload: b"too long".to_vec(),
            },
            // Nobody waits for it: unexpected, drained afterwards.
            Msg::Only {
                tag: 0,
                payload: b"later".to_vec(),
            },
        ],
        &[7],
    );
    assert_eq!(
        (r.completed, r.failed, r.drained, r.stuck),
        (2, 1, 1, 0),
        "{r:?}"
    );
}

/// Found by this suite: a receive matched by a first fragment whose
/// sender then closes its connection between frames is never completed
/// and cannot be canceled (the transport treats a close between frames as
/// clean and reports nothing, so the open fragments are never failed).
#[test]
fn receive_fails_when_its_sender_leaves_mid_message() {
    let mut v = Victim::open();
    let first = |tag| Msg::First {
        tag,
        total: 100,
        msg_id: 1,
        frag: vec![1; 10],
    };
    let matched = v.attack(&[(1, 100)], &[first(1)], &[usize::MAX]);
    assert_eq!((matched.stuck, matched.failed), (0, 1), "{matched:?}");
    let unexpected = v.attack(&[], &[first(2)], &[usize::MAX]);
    assert_eq!(unexpected.stuck, 0, "{unexpected:?}");
}

/// Found by this suite: a middle fragment near the end of a huge announced
/// total makes the receiver allocate the whole total for an unexpected
/// message. 37 bytes on the wire ask for 1 TiB here and abort the process
/// (`memory allocation of 1099511627776 bytes failed`); smaller totals
/// succeed and zero-fill gigabytes. Run it alone: it aborts.
#[test]
fn fragment_offset_near_a_huge_total() {
    let mut v = Victim::open();
    let total = 1u64 << 40;
    let first = Msg::First {
        tag: 2,
        total,
        msg_id: 1,
        frag: vec![],
    };
    let middle = Msg::Middle {
        msg_id: 1,
        offset: total - 1,
        frag: vec![1],
    };
    let r = v.attack(&[], &[first, middle], &[usize::MAX]);
    assert_eq!(r.stuck, 0, "{r:?}");
}
