//! The connection manager's handshake decoder (`uct::sockcm::wire`) on
//! arbitrary bytes: it never panics; what it accepts re-encodes to the
//! bytes it took; what it waits on is a prefix of something it could
//! accept; data is never longer than the limit.
#![no_main]

use uct::sockcm::wire::{decode, encode, HDR, MAGIC, MAX_DATA};

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    match decode(data) {
        Ok(Some((kind, body, used))) => {
            assert!(body.len() <= MAX_DATA);
            assert_eq!(used, HDR + body.len());
            let again = encode(kind, body).expect("accepted data encodes");
            assert_eq!(&again[..], &data[..used]);
        }
        Ok(None) => {
            // Incomplete: a prefix of the magic, or a header whose data
            // has not all arrived.
            let n = data.len().min(MAGIC.len());
            assert_eq!(&data[..n], &MAGIC[..n]);
        }
        Err(_) => {}
    }
});
