//! The active message fragment decoder (`AmFrag::decode`) on arbitrary
//! bytes: it never panics, and what it accepts re-encodes to the bytes it
//! was read from and lies within the message it describes.
#![no_main]

use rucx_ucp::proto::am_wire::{AmFrag, AM_HDR, AM_MAX, FLAG_REPLY};

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    if let Ok((f, bytes)) = AmFrag::decode(data) {
        assert_eq!(&f.encode()[..], &data[..AM_HDR]);
        assert_eq!(bytes, &data[AM_HDR..]);
        assert!(f.total <= AM_MAX && u64::from(f.hdr_len) <= f.total);
        assert!(f.offset + bytes.len() as u64 <= f.total);
        assert_eq!(f.flags & !FLAG_REPLY, 0);
    }
});
