//! Properties of the wire decoders, checked on any input: nothing panics,
//! what is accepted re-encodes to the input (reserved bits aside), and
//! what is refused is refused for a reason the input shows.
//!
//! Shared by the proptests below and the `iwarp_frames` fuzz target, which
//! includes this file: `super` is `crate::wire` here and the target's root
//! (which imports the same modules from `rucx_iwarp::wire`) there.

#![allow(dead_code)]

use super::crc::crc32c;
use super::ddp::{header_len_from_first_byte, DdpHeader};
use super::fpdu::{check_fpdu, encode_fpdu, fpdu_len, CRC_LEN, PREFIX_LEN};
use super::mpa::{MpaFrame, ENHANCED_LEN, HEADER_LEN, KEY_REP, KEY_REQ, MAX_PRIVATE_DATA};
use super::rdmap::{Opcode, ReadRequest, READ_REQ_LEN};
use super::term::Terminate;
use super::WireError;

fn be16_at(b: &[u8], at: usize) -> Option<usize> {
    Some(usize::from(u16::from_be_bytes(
        b.get(at..at + 2)?.try_into().ok()?,
    )))
}

/// Every decoder on `data`, and `data` as a stream of FPDUs both ways.
pub(crate) fn check_all(data: &[u8]) {
    check_mpa(data);
    check_fpdu_any(data, false);
    check_fpdu_any(data, true);
    check_ddp(data);
    check_read_request(data);
    check_terminate(data);
    check_stream(data, false);
    check_stream(data, true);
}

/// `MpaFrame::decode`: frames re-encode to the bytes they took; `None`
/// only for a prefix of a possible frame.
pub(crate) fn check_mpa(data: &[u8]) {
    let key_ok = |d: &[u8]| {
        let k = &d[..d.len().min(KEY_REQ.len())];
        KEY_REQ.starts_with(k) || KEY_REP.starts_with(k)
    };
    match MpaFrame::decode(data) {
        Ok(Some((f, n))) => {
            assert!(n <= data.len() && n >= HEADER_LEN);
            assert_eq!(f.encode(), data[..n], "accepted frame does not re-encode");
            let word = if f.enhanced.is_some() {
                ENHANCED_LEN
            } else {
                0
            };
            assert!(f.private_data.len() + word <= MAX_PRIVATE_DATA);
            assert!(f.rev <= 2 && (f.enhanced.is_none() || f.rev == 2));
            assert!(!f.reject || f.reply);
            assert_eq!(MpaFrame::decode(&data[..n - 1]), Ok(None));
        }
        Ok(None) => {
            assert!(key_ok(data));
            if let Some(pd) = be16_at(data, 18) {
                assert!(data.len() < HEADER_LEN + pd);
            }
        }
        Err(WireError::BadKey) => assert!(!key_ok(data)),
        Err(
            WireError::BadRev(_)
            | WireError::ReservedBits
            | WireError::RejectInRequest
            | WireError::PrivateDataTooLong(_)
            | WireError::BadLength(_),
        ) => assert!(data.len() >= HEADER_LEN && key_ok(data)),
        Err(e) => panic!("unexpected MPA refusal {e:?}"),
    }
}

/// `check_fpdu`: a complete FPDU re-frames to the same length field and
/// ULPDU (and, with CRC and zero pad, to the same bytes); CRC mismatches
/// only when `crc`, reporting the CRC really computed.
pub(crate) fn check_fpdu_any(data: &[u8], crc: bool) -> Option<usize> {
    match check_fpdu(data, crc) {
        Ok(Some(n)) => {
            let total = fpdu_len(n);
            assert!(total <= data.len());
            assert_eq!(be16_at(data, 0), Some(n));
            let mut re = Vec::new();
            encode_fpdu(&mut re, &[&data[PREFIX_LEN..PREFIX_LEN + n]], crc);
            assert_eq!(re.len(), total);
            assert_eq!(re[..PREFIX_LEN + n], data[..PREFIX_LEN + n]);
            let pad = &data[PREFIX_LEN + n..total - CRC_LEN];
            if crc && pad.iter().all(|&b| b == 0) {
                assert_eq!(re, data[..total], "CRC-checked FPDU does not re-encode");
            }
            Some(n)
        }
        Ok(None) => {
            if let Some(n) = be16_at(data, 0) {
                assert!(data.len() < fpdu_len(n));
            }
            None
        }
        Err(WireError::BadCrc { expected, got }) => {
            assert!(crc && expected != got);
            let n = be16_at(data, 0).expect("length field");
            let total = fpdu_len(n);
            assert_eq!(expected, crc32c(&data[..total - CRC_LEN]));
            let t = data[total - CRC_LEN..total].try_into().expect("4 bytes");
            assert_eq!(got, u32::from_le_bytes(t));
            None
        }
        Err(e) => panic!("unexpected FPDU refusal {e:?}"),
    }
}

/// `DdpHeader::decode`: accepted headers re-encode to the input with the
/// reserved bits cleared; each refusal matches the bytes.
pub(crate) fn check_ddp(data: &[u8]) -> Option<(DdpHeader, usize)> {
    match DdpHeader::decode(data) {
        Ok((h, n)) => {
            assert_eq!(n, h.len());
            assert_eq!(n, header_len_from_first_byte(data[0]));
            assert_eq!(h.opcode().is_tagged(), data[0] & 0x80 != 0);
            assert_eq!(h.last(), data[0] & 0x40 != 0);
            let (b, m) = h.to_bytes();
            assert_eq!(m, n);
            assert_eq!(b[0], data[0] & !0x3c);
            assert_eq!(b[1], data[1] & !0x30);
            assert_eq!(b[2..n], data[2..n]);
            Some((h, n))
        }
        Err(e) => {
            match e {
                WireError::BadLength(l) => {
                    assert_eq!(l, data.len());
                    assert!(data
                        .first()
                        .is_none_or(|&b| l < header_len_from_first_byte(b)));
                }
                WireError::BadDdpVersion(v) => assert!(v == data[0] & 3 && v != 1),
                WireError::BadRdmapVersion(v) => assert!(v == data[1] >> 6 && v != 1),
                WireError::BadOpcode(op) => assert!(op == data[1] & 0x0f && op > 7),
                WireError::WrongBufferModel { opcode, tagged } => {
                    assert_eq!(opcode as u8, data[1] & 0x0f);
                    assert_eq!(tagged, data[0] & 0x80 != 0);
                    assert_ne!(opcode.is_tagged(), tagged);
                }
                e => panic!("unexpected DDP refusal {e:?}"),
            }
            None
        }
    }
}

/// `ReadRequest::decode`: the first 28 bytes, or `Truncated`.
pub(crate) fn check_read_request(data: &[u8]) {
    match ReadRequest::decode(data) {
        Ok(r) => assert_eq!(r.encode(), data[..READ_REQ_LEN]),
        Err(e) => assert_eq!(
            e,
            WireError::Truncated {
                need: READ_REQ_LEN,
                have: data.len()
            }
        ),
    }
}

/// `Terminate::decode`: accepted bodies re-encode to at most the input,
/// with the same cause and header bits, and decode back to themselves.
pub(crate) fn check_terminate(data: &[u8]) {
    match Terminate::decode(data) {
        Ok(t) => {
            let b = t.encode();
            assert!(b.len() <= data.len());
            assert_eq!(b[..2], data[..2]);
            assert_eq!(b[2], data[2] & 0xe0);
            if let Some(h) = &t.ddp_hdr {
                assert_eq!(h.len(), header_len_from_first_byte(h[0]));
            }
            assert!(t.rdmap_hdr.as_ref().is_none_or(|r| r.len() <= READ_REQ_LEN));
            assert_eq!(Terminate::decode(&b), Ok(t));
        }
        Err(WireError::Truncated { have, .. }) => assert_eq!(have, data.len()),
        Err(WireError::BadTermLayer(l)) => assert!(l == data[0] >> 4 && l > 2),
        Err(e) => panic!("unexpected Terminate refusal {e:?}"),
    }
}

/// `data` as a receiver sees it after the MPA handshake: FPDUs one after
/// the other, each ULPDU a DDP segment whose Read Request or Terminate
/// body is decoded too. Stops at the first incomplete or refused one.
pub(crate) fn check_stream(mut data: &[u8], crc: bool) {
    while let Some(n) = check_fpdu_any(data, crc) {
        let ulpdu = &data[PREFIX_LEN..PREFIX_LEN + n];
        let Some((h, len)) = check_ddp(ulpdu) else {
            return;
        };
        let body = &ulpdu[len..];
        match h.opcode() {
            Opcode::ReadRequest => check_read_request(body),
            Opcode::Terminate => check_terminate(body),
            _ => {}
        }
        data = &data[fpdu_len(n)..];
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::ddp::MAX_HDR_LEN;
    use crate::wire::mpa::EnhancedWord;
    use crate::wire::term::TermCause;
    use proptest::prelude::*;
    use proptest::sample::Index;

    /// A valid encoding of something: an MPA frame, FPDUs of every kind,
    /// a Terminate body or a Read Request.
    fn valid() -> impl Strategy<Value = Vec<u8>> {
        let mpa = (
            any::<bool>(),
            any::<u32>(),
            proptest::collection::vec(any::<u8>(), 0..40),
        )
            .prop_map(|(reply, w, pd)| {
                MpaFrame {
                    reply,
                    markers: false,
                    crc: true,
                    reject: false,
                    rev: 2,
                    enhanced: Some(EnhancedWord::from_u32(w)),
                    private_data: pd,
                }
                .encode()
            });
        let fpdus = (
            proptest::collection::vec((0u8..8, any::<u32>(), 0usize..40), 1..4),
            any::<bool>(),
        )
            .prop_map(|(segs, crc)| {
                let mut out = Vec::new();
                for (op, x, len) in segs {
                    let opcode = Opcode::from_u8(op).expect("0..8");
                    let h = if opcode.is_tagged() {
                        DdpHeader::Tagged {
                            last: true,
                            opcode,
                            stag: x,
                            to: u64::from(x) << 3,
                        }
                    } else {
                        let qn = opcode.qn().expect("untagged");
                        DdpHeader::Untagged {
                            last: x & 1 == 0,
                            opcode,
                            inv_stag: x,
                            qn,
                            msn: 1,
                            mo: 0,
                        }
                    };
                    let (b, n) = h.to_bytes();
                    let body = match opcode {
                        Opcode::ReadRequest => ReadRequest {
                            sink_stag: x,
                            sink_to: 1,
                            size: x >> 4,
                            src_stag: 2,
                            src_to: 3,
                        }
                        .encode()
                        .to_vec(),
                        Opcode::Terminate => Terminate {
                            cause: TermCause::DDP_UNTAGGED_INVALID_MSN,
                            ddp_seg_len: Some(40),
                            ddp_hdr: Some(b[..n].to_vec()),
                            rdmap_hdr: None,
                        }
                        .encode(),
                        _ => vec![0x5a; len],
                    };
                    encode_fpdu(&mut out, &[&b[..n], &body], crc);
                }
                out
            });
        let term = any::<[u8; MAX_HDR_LEN]>().prop_map(|h| {
            Terminate {
                cause: TermCause::RDMAP_ACCESS_RIGHTS,
                ddp_seg_len: Some(46),
                ddp_hdr: Some(h[..header_len_from_first_byte(h[0])].to_vec()),
                rdmap_hdr: Some(vec![7; READ_REQ_LEN]),
            }
            .encode()
        });
        prop_oneof![
            mpa,
            fpdus,
            term,
            any::<[u8; READ_REQ_LEN]>().prop_map(|b| b.to_vec())
        ]
    }

    #[derive(Debug, Clone)]
    enum Mutation {
        Truncate(Index),
        FlipBit(Index, u8),
        Set(Index, u8),
        Insert(Index, u8),
    }

    fn mutation() -> impl Strategy<Value = Mutation> {
        prop_oneof![
            any::<Index>().prop_map(Mutation::Truncate),
            (any::<Index>(), 0u8..8).prop_map(|(i, b)| Mutation::FlipBit(i, b)),
            (any::<Index>(), any::<u8>()).prop_map(|(i, v)| Mutation::Set(i, v)),
            (any::<Index>(), any::<u8>()).prop_map(|(i, v)| Mutation::Insert(i, v)),
        ]
    }

    fn apply(data: &mut Vec<u8>, m: &Mutation) {
        if data.is_empty() {
            return;
        }
        let len = data.len();
        match *m {
            Mutation::Truncate(i) => data.truncate(i.index(len)),
            Mutation::FlipBit(i, b) => data[i.index(len)] ^= 1 << b,
            Mutation::Set(i, v) => data[i.index(len)] = v,
            Mutation::Insert(i, v) => data.insert(i.index(len + 1), v),
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(2000))]

        #[test]
        fn arbitrary_bytes(data in proptest::collection::vec(any::<u8>(), 0..600)) {
            check_all(&data);
        }

        #[test]
        fn valid_encodings(data in valid()) {
            check_all(&data);
        }

        #[test]
        fn mutated_encodings(
            mut data in valid(),
            muts in proptest::collection::vec(mutation(), 1..4),
        ) {
            for m in &muts {
                apply(&mut data, m);
            }
            check_all(&data);
        }
    }

    #[test]
    fn valid_streams_decode_whole() {
        // A Send, a Write and a Terminate back to back, with and without
        // CRC: every FPDU is accepted.
        for crc in [false, true] {
            let mut s = Vec::new();
            let send = DdpHeader::Untagged {
                last: true,
                opcode: Opcode::Send,
                inv_stag: 0,
                qn: 0,
                msn: 1,
                mo: 0,
            };
            let write = DdpHeader::Tagged {
                last: true,
                opcode: Opcode::Write,
                stag: 9,
                to: 0,
            };
            for (h, body) in [(send, &b"abc"[..]), (write, &b"defgh"[..])] {
                let (b, n) = h.to_bytes();
                encode_fpdu(&mut s, &[&b[..n], body], crc);
            }
            encode_fpdu(
                &mut s,
                &[&Terminate::new(TermCause::LLP_CRC).encode_ulpdu()],
                crc,
            );
            let mut rest = &s[..];
            let mut count = 0;
            while let Some(n) = check_fpdu_any(rest, crc) {
                assert!(check_ddp(&rest[2..2 + n]).is_some());
                rest = &rest[fpdu_len(n)..];
                count += 1;
            }
            assert_eq!((count, rest.len()), (3, 0));
        }
    }
}
