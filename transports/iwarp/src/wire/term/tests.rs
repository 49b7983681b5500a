use super::*;
use crate::wire::rdmap::ReadRequest;
use proptest::prelude::*;

#[test]
fn names() {
    assert_eq!(
        TermCause::DDP_TAGGED_INVALID_STAG.describe(),
        "DDP tagged buffer error: invalid STag (layer 1, type 1, code 0x00)"
    );
    assert_eq!(
        TermCause::RDMAP_CATASTROPHIC_STREAM.to_string(),
        "RDMAP remote operation error: catastrophic error, localized to RDMAP stream \
         (layer 0, type 2, code 0x07)"
    );
    assert_eq!(
        TermCause::LLP_NO_RTR.to_string(),
        "MPA error: no matching RTR (layer 2, type 0, code 0x07)"
    );
    assert_eq!(
        cause(Layer::Ddp, 7, 0x42).describe(),
        "unknown error type: unknown code (layer 1, type 7, code 0x42)"
    );
    assert_eq!(
        cause(Layer::Ddp, 2, 0x00).describe(),
        "DDP untagged buffer error: unknown code (layer 1, type 2, code 0x00)"
    );
}

#[test]
fn access_errors() {
    for c in [
        TermCause::RDMAP_INVALID_STAG,
        TermCause::RDMAP_BASE_BOUNDS,
        TermCause::RDMAP_ACCESS_RIGHTS,
        TermCause::RDMAP_STAG_NOT_ASSOC,
        TermCause::RDMAP_TO_WRAP,
        TermCause::RDMAP_CANT_INVALIDATE,
        TermCause::DDP_TAGGED_INVALID_STAG,
        TermCause::DDP_TAGGED_BASE_BOUNDS,
        TermCause::DDP_TAGGED_STAG_NOT_ASSOC,
        TermCause::DDP_TAGGED_TO_WRAP,
    ] {
        assert!(c.is_access_error(), "{c}");
    }
    for c in [
        TermCause::RDMAP_LOCAL_CATASTROPHIC,
        TermCause::RDMAP_UNEXPECTED_OPCODE,
        TermCause::DDP_TAGGED_BAD_VERSION,
        TermCause::DDP_UNTAGGED_NO_BUFFER,
        TermCause::LLP_CRC,
    ] {
        assert!(!c.is_access_error(), "{c}");
    }
}

/// What siw sends for a Write to an unknown STag: DDP/tagged/invalid STag
/// with M and D and the Write's header.
#[test]
fn tagged_error_bytes() {
    let write_hdr = [
        0xc1, 0x40, 0x0b, 0xad, 0x00, 0x01, 0, 0, 0, 0, 0, 0, 0x10, 0x00,
    ];
    let t = Terminate {
        cause: TermCause::DDP_TAGGED_INVALID_STAG,
        ddp_seg_len: Some(0x10),
        ddp_hdr: Some(write_hdr.to_vec()),
        rdmap_hdr: None,
    };
    let mut want = vec![0x11, 0x00, 0xc0, 0x00, 0x00, 0x10];
    want.extend_from_slice(&write_hdr);
    assert_eq!(t.encode(), want);
    assert_eq!(Terminate::decode(&want), Ok(t.clone()));
    let ulpdu = t.encode_ulpdu();
    assert_eq!(
        ulpdu[..18],
        [0x41, 0x47, 0, 0, 0, 0, 0, 0, 0, 2, 0, 0, 0, 1, 0, 0, 0, 0]
    );
    assert_eq!(ulpdu[18..], want[..]);
}

/// A Read Request refused, echoed with M, D and R.
#[test]
fn read_request_echo_bytes() {
    let rr = ReadRequest {
        sink_stag: 1,
        sink_to: 2,
        size: 3,
        src_stag: 4,
        src_to: 5,
    };
    let rr_hdr = DdpHeader::Untagged {
        last: true,
        opcode: Opcode::ReadRequest,
        inv_stag: 0,
        qn: 1,
        msn: 9,
        mo: 0,
    };
    let (h, n) = rr_hdr.to_bytes();
    let t = Terminate {
        cause: TermCause::RDMAP_INVALID_STAG,
        ddp_seg_len: Some(46),
        ddp_hdr: Some(h[..n].to_vec()),
        rdmap_hdr: Some(rr.encode().to_vec()),
    };
    let b = t.encode();
    assert_eq!(b[..6], [0x01, 0x00, 0xe0, 0x00, 0x00, 46]);
    assert_eq!(b[6..24], h[..]);
    assert_eq!(b[24..], rr.encode());
    assert_eq!(Terminate::decode(&b), Ok(t));
}

#[test]
fn short_forms_and_refusals() {
    let bare = Terminate::new(TermCause::LLP_CRC);
    assert_eq!(bare.encode(), [0x20, 0x02, 0x00, 0x00]);
    assert_eq!(Terminate::decode(&[0x20, 0x02, 0, 0, 0xaa]), Ok(bare));
    assert_eq!(
        Terminate::decode(&[0x20, 0x02, 0]),
        Err(WireError::Truncated { need: 4, have: 3 })
    );
    assert_eq!(
        Terminate::decode(&[0x30, 0, 0, 0]),
        Err(WireError::BadTermLayer(3))
    );
    // M with the length missing.
    assert_eq!(
        Terminate::decode(&[0x11, 0, 0x80, 0, 0]),
        Err(WireError::Truncated { need: 6, have: 5 })
    );
    // D with a tagged header cut short.
    assert_eq!(
        Terminate::decode(&[0x11, 0, 0x40, 0, 0, 0, 0xc1, 0x40]),
        Err(WireError::Truncated { need: 20, have: 8 })
    );
    // siw: R set after a Send's header, nothing more.
    let mut siw = vec![0x01, 0x09, 0xe0, 0x00, 0x00, 0x20];
    siw.extend_from_slice(&[0x41, 0x44, 0, 0, 0, 7, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0]);
    let t = Terminate::decode(&siw).unwrap();
    assert_eq!(t.rdmap_hdr, Some(Vec::new()));
    assert_eq!(t.ddp_seg_len, Some(0x20));
    assert_eq!(t.encode(), siw);
}

fn terminate() -> impl Strategy<Value = Terminate> {
    let layer = prop_oneof![Just(Layer::Rdmap), Just(Layer::Ddp), Just(Layer::Llp)];
    let ddp_hdr =
        (any::<bool>(), proptest::collection::vec(any::<u8>(), 18)).prop_map(|(tagged, mut b)| {
            b[0] = if tagged { b[0] | 0x80 } else { b[0] & 0x7f };
            b.truncate(header_len_from_first_byte(b[0]));
            b
        });
    (
        layer,
        0u8..16,
        any::<u8>(),
        proptest::option::of(any::<u16>()),
        proptest::option::of(ddp_hdr),
        proptest::option::of(proptest::collection::vec(any::<u8>(), 0..=READ_REQ_LEN)),
    )
        .prop_map(
            |(layer, etype, code, ddp_seg_len, ddp_hdr, rdmap_hdr)| Terminate {
                cause: TermCause { layer, etype, code },
                ddp_seg_len,
                ddp_hdr,
                rdmap_hdr,
            },
        )
}

proptest! {
    #[test]
    fn round_trip(t in terminate()) {
        prop_assert_eq!(Terminate::decode(&t.encode()), Ok(t));
    }
}
