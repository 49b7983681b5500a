//! The active message decoders (`AmFrag::decode`, `AmOnly::decode`,
//! `AmRts::decode`) on arbitrary bytes: they never panic, and what they
//! accept re-encodes to the bytes it was read from and lies within the
//! message it describes.
#![no_main]

use rucx_ucp::proto::am_wire::{
    AmFrag, AmOnly, AmRts, AM_HDR, AM_MAX, AM_ONLY_HDR, AM_RTS_HDR, FLAG_REPLY,
};

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    if let Ok((f, bytes)) = AmFrag::decode(data) {
        assert_eq!(&f.encode()[..], &data[..AM_HDR]);
        assert_eq!(bytes, &data[AM_HDR..]);
        assert!(f.total <= AM_MAX && u64::from(f.hdr_len) <= f.total);
        assert!(f.offset + bytes.len() as u64 <= f.total);
        assert_eq!(f.flags & !FLAG_REPLY, 0);
    }
    if let Ok((m, bytes)) = AmOnly::decode(data) {
        assert_eq!(&m.encode()[..], &data[..AM_ONLY_HDR]);
        assert_eq!(bytes, &data[AM_ONLY_HDR..]);
        assert!(m.hdr_len as usize <= bytes.len() && bytes.len() as u64 <= AM_MAX);
        assert_eq!(m.flags & !FLAG_REPLY, 0);
    }
    if let Ok((r, header, inner)) = AmRts::decode(data) {
        assert_eq!(&r.encode()[..], &data[..AM_RTS_HDR]);
        assert_eq!(header.len(), r.hdr_len as usize);
        assert_eq!(AM_RTS_HDR + header.len() + inner.len(), data.len());
        assert_eq!(r.flags & !FLAG_REPLY, 0);
    }
});
