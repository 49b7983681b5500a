//! Arbitrary bytes as the peer's side of the MPA handshake and what
//! follows it, both as initiator and as responder (see the harness): the
//! engine neither panics nor hangs, and keeps serving. Inputs are random,
//! and random tails after well-formed request and reply headers (so that
//! the engine gets past the key check and into the private data, the
//! RFC 6581 word, and FPDUs).

#[path = "handshake_robustness/harness.rs"]
mod harness;

use harness::Target;
use proptest::prelude::*;
use rucx_iwarp::wire::mpa::{EnhancedWord, MpaFrame};

fn frame(reply: bool, flags: u8, rev: u8, pd: &[u8]) -> Vec<u8> {
    let f = MpaFrame {
        reply,
        markers: flags & 1 != 0,
        crc: flags & 2 != 0,
        reject: reply && flags & 4 != 0,
        rev,
        enhanced: (rev == 2).then(|| EnhancedWord {
            p2p: flags & 8 != 0,
            rtr_write: flags & 16 != 0,
            rtr_read: flags & 32 != 0,
            ird: 4,
            ord: 4,
            ..EnhancedWord::default()
        }),
        private_data: pd.to_vec(),
    };
    f.encode()
}

fn input() -> impl Strategy<Value = (bool, Vec<u8>, usize)> {
    let raw = proptest::collection::vec(any::<u8>(), 0..300);
    let shaped = (
        any::<bool>(),
        any::<u8>(),
        1u8..=2,
        proptest::collection::vec(any::<u8>(), 0..40),
        proptest::collection::vec(any::<u8>(), 0..200),
    )
        .prop_map(|(reply, flags, rev, pd, tail)| {
            let mut v = frame(reply, flags, rev, &pd);
            v.extend_from_slice(&tail);
            v
        });
    (any::<bool>(), prop_oneof![raw, shaped], 0usize..8)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    #[test]
    fn arbitrary_handshakes_neither_panic_nor_hang((initiator, bytes, piece) in input()) {
        let mut t = Target::open();
        if initiator {
            t.play_initiator(&bytes, piece, piece % 2 == 0);
        } else {
            t.play_responder(&bytes);
        }
        t.still_serves();
    }
}
