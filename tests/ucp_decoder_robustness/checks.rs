//! Properties of the protocol layer's decoders, checked on any input:
//! accepted input means what it says, refused input is refused for a
//! documented reason, and nothing panics.
//!
//! Shared by the `decoder_robustness` test and the `ucp_eager_headers` and
//! `ucp_worker_address` fuzz targets.

#![allow(dead_code)]

use rucx_ucp::proto::wire::{
    decode_ack, decode_atp, decode_only, decode_rtr_put, decode_rts_keys, decode_u64x2,
    decode_u64x3, encode_rts_keys, FirstHdr, MiddleHdr, FIRST_HDR, MIDDLE_HDR, ONLY_HDR,
    RTR_PUT_HDR,
};
use rucx_ucp::uct::Caps;
use rucx_ucp::wireup::address::{WorkerAddress, MAX_MD_NAME, MAX_TL_NAME};

fn le64(b: &[u8], at: usize) -> u64 {
    let mut a = [0u8; 8];
    a.copy_from_slice(&b[at..at + 8]);
    u64::from_le_bytes(a)
}

/// Every eager header decoder on `data`: accepted input decodes to the
/// fields at their documented offsets, the payload is the rest, and
/// encoding the header gives the input back.
pub(crate) fn check_eager_headers(data: &[u8]) {
    match decode_only(data) {
        Ok((tag, payload)) => {
            assert_eq!(tag, le64(data, 0));
            assert_eq!(payload, &data[ONLY_HDR..]);
        }
        Err(_) => assert!(data.len() < ONLY_HDR),
    }
    match FirstHdr::decode(data) {
        Ok((h, frag)) => {
            assert_eq!(frag, &data[FIRST_HDR..]);
            assert!(frag.len() as u64 <= h.total, "fragment beyond the total");
            assert_eq!(h.encode(), data[..FIRST_HDR]);
        }
        Err(_) => assert!(
            data.len() < FIRST_HDR || (data.len() - FIRST_HDR) as u64 > le64(data, 8),
            "valid first header refused"
        ),
    }
    match MiddleHdr::decode(data) {
        Ok((h, frag)) => {
            assert_eq!(frag, &data[MIDDLE_HDR..]);
            assert_eq!(h.encode(), data[..MIDDLE_HDR]);
        }
        Err(_) => assert!(data.len() < MIDDLE_HDR),
    }
}

/// The rendezvous header decoders on `data`: each accepts exactly the
/// inputs long enough for its fields, which it reads at their documented
/// offsets; the rest is the payload (or key).
pub(crate) fn check_rndv_headers(data: &[u8]) {
    let n = data.len();
    match decode_u64x3("test", data) {
        Ok(f) => assert_eq!(f, [le64(data, 0), le64(data, 8), le64(data, 16)]),
        Err(_) => assert!(n < 24),
    }
    match decode_u64x2("test", data) {
        Ok((a, b, rest)) => {
            assert_eq!((a, b), (le64(data, 0), le64(data, 8)));
            assert_eq!(rest, &data[16..]);
        }
        Err(_) => assert!(n < 16),
    }
    match decode_rtr_put(data) {
        Ok((f, key)) => {
            let want = [le64(data, 0), le64(data, 8), le64(data, 16), le64(data, 24)];
            assert_eq!(f, want);
            assert_eq!(key, &data[RTR_PUT_HDR..]);
        }
        Err(_) => assert!(n < RTR_PUT_HDR),
    }
    match decode_atp(data) {
        Ok(f) => assert_eq!(f, (le64(data, 0), le64(data, 8))),
        Err(_) => assert!(n < 16),
    }
    match decode_ack(data) {
        Ok(r) => assert_eq!(r, le64(data, 0)),
        Err(_) => assert!(n < 8),
    }
    // The keys of a multi-device rendezvous by get: what decodes is
    // bounded and encodes back to the same bytes.
    if let Ok((first, more)) = decode_rts_keys(data) {
        assert!(more.len() <= rucx_ucp::proto::wire::RTS_GET_MAX_MORE);
        let owned: Vec<(&str, Vec<u8>)> = more.iter().map(|&(n, k)| (n, k.to_vec())).collect();
        let again = encode_rts_keys(first, &owned).expect("what decoded encodes");
        assert_eq!(again, data, "rendezvous keys do not round-trip");
    }
}

/// Positions of the capability words in an accepted address.
pub(crate) fn caps_offsets(a: &WorkerAddress) -> Vec<usize> {
    let mut at = 1 + 8 + 1;
    let mut out = Vec::new();
    for i in &a.ifaces {
        at += 4 + i.tl_name.len() + i.md_name.len() + i.dev_addr.len() + i.iface_addr.len() + 24;
        out.push(at);
        at += 4;
    }
    out
}

/// The address decoder on `data`: no panic; an accepted address
/// re-encodes to the input (capability bits this build does not know
/// cleared, if the decoder drops them) and decodes to itself again.
pub(crate) fn check_address(data: &[u8]) {
    let Ok(a) = WorkerAddress::decode(data) else {
        return;
    };
    for i in &a.ifaces {
        assert!(!i.tl_name.is_empty() && i.tl_name.len() <= MAX_TL_NAME);
        assert!(!i.md_name.is_empty() && i.md_name.len() <= MAX_MD_NAME);
        let m = i.model;
        for v in [m.latency, m.overhead, m.bandwidth] {
            assert!(v.is_finite() && v >= 0.0, "model {m:?}");
        }
        assert!(m.bandwidth > 0.0);
    }
    let enc = a.encode().expect("an accepted address encodes");
    if enc != data {
        let mut known = data.to_vec();
        for at in caps_offsets(&a) {
            let mut w = [0u8; 4];
            w.copy_from_slice(&known[at..at + 4]);
            let bits = Caps::from_bits_truncate(u32::from_le_bytes(w)).bits();
            known[at..at + 4].copy_from_slice(&bits.to_le_bytes());
        }
        assert_eq!(enc, known, "re-encoding changed more than unknown caps");
    }
    assert_eq!(WorkerAddress::decode(&enc).expect("re-decodes"), a);
}

/// Every one-sided (RMA) decoder on `data`: accepted input re-encodes to
/// itself (the header, for a put and a reply), refused input is too short,
/// too long or breaks a documented rule (operation, width, padding).
pub(crate) fn check_rma_headers(data: &[u8]) {
    use rucx_ucp::rma::wire::{self as w, AtomicReq, GetReq, Reply};
    match w::decode_put(data) {
        Ok((req, key, addr, rest)) => {
            assert_eq!(w::encode_put(req, &key, addr), data[..w::PUT_HDR]);
            assert_eq!(rest, &data[w::PUT_HDR..]);
        }
        Err(_) => assert!(data.len() < w::PUT_HDR),
    }
    match GetReq::decode(data) {
        Ok(g) => assert_eq!(g.encode(), data),
        Err(_) => assert_ne!(data.len(), w::GET_LEN),
    }
    match AtomicReq::decode(data) {
        Ok(a) => assert_eq!(a.encode(), data),
        Err(_) => {
            if data.len() == w::ATOMIC_LEN {
                let k = 8 + w::KEY_REF_LEN;
                let width_ok = matches!(data[k + 9], 4 | 8);
                let wide32 = data[k + 9] == 4 && data[k + 20..k + 24] != [0; 4];
                assert!(
                    data[k + 8] > 5 || !width_ok || wide32 || data[k + 10..k + 16] != [0; 6],
                    "a well-formed atomic request was refused"
                );
            }
        }
    }
    match Reply::decode(data) {
        Ok((r, rest)) => {
            assert_eq!(r.encode(), data[..w::REPLY_HDR]);
            assert_eq!(rest, &data[w::REPLY_HDR..]);
        }
        Err(_) => assert!(data.len() < w::REPLY_HDR || data[28..32] != [0; 4]),
    }
}
