//! The connection manager's handshake messages.
//!
//! Layout (little-endian): magic `RUCXCM` (6 bytes), version (1 byte,
//! [`VERSION`]), kind (1 byte: 0 hello, 1 accept, 2 reject), length of the
//! private data (4 bytes, at most [`MAX_DATA`]), the private data. A
//! reject carries none.

use crate::ucs::PeerMisbehaved;

/// The first bytes of every handshake message.
pub const MAGIC: [u8; 6] = *b"RUCXCM";
/// The handshake's version.
pub const VERSION: u8 = 1;
/// Length of a message's header.
pub const HDR: usize = 12;
/// Most private data a message carries.
pub const MAX_DATA: usize = 64 * 1024;

/// What a handshake message says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// A client asks to connect, with its private data.
    Hello,
    /// The server accepted, with its private data.
    Accept,
    /// The server rejected the connection.
    Reject,
}

impl Kind {
    fn byte(self) -> u8 {
        match self {
            Kind::Hello => 0,
            Kind::Accept => 1,
            Kind::Reject => 2,
        }
    }
}

/// Encodes a message; `None` if `data` is longer than [`MAX_DATA`].
pub fn encode(kind: Kind, data: &[u8]) -> Option<Vec<u8>> {
    if data.len() > MAX_DATA || (kind == Kind::Reject && !data.is_empty()) {
        return None;
    }
    let mut v = Vec::with_capacity(HDR + data.len());
    v.extend_from_slice(&MAGIC);
    v.push(VERSION);
    v.push(kind.byte());
    v.extend_from_slice(&(data.len() as u32).to_le_bytes());
    v.extend_from_slice(data);
    Some(v)
}

/// A decoded message: its kind, its private data, the bytes it took.
pub type Decoded<'a> = (Kind, &'a [u8], usize);

/// Decodes the message at the start of `buf`: `Ok(None)` while it is
/// incomplete, else its kind, its private data and the bytes it took.
/// Anything that cannot begin a valid message is an error at once, so a
/// peer that sends garbage is refused without waiting for more.
pub fn decode(buf: &[u8]) -> Result<Option<Decoded<'_>>, PeerMisbehaved> {
    let have = buf.len().min(MAGIC.len());
    if buf[..have] != MAGIC[..have] {
        let mut m = [0u8; 8];
        m[..have].copy_from_slice(&buf[..have]);
        return Err(PeerMisbehaved::BadMagic(u64::from_le_bytes(m)));
    }
    if buf.len() < HDR {
        return Ok(None);
    }
    if buf[6] != VERSION {
        return Err(PeerMisbehaved::Invalid {
            what: "handshake version",
            detail: buf[6].to_string(),
        });
    }
    let kind = match buf[7] {
        0 => Kind::Hello,
        1 => Kind::Accept,
        2 => Kind::Reject,
        k => return Err(PeerMisbehaved::UnknownId(k)),
    };
    let mut l = [0u8; 4];
    l.copy_from_slice(&buf[8..12]);
    let len = u32::from_le_bytes(l) as usize;
    if len > MAX_DATA {
        return Err(PeerMisbehaved::FrameTooLong { len, max: MAX_DATA });
    }
    if kind == Kind::Reject && len != 0 {
        return Err(PeerMisbehaved::Invalid {
            what: "reject length",
            detail: len.to_string(),
        });
    }
    match buf.get(HDR..HDR + len) {
        Some(data) => Ok(Some((kind, data, HDR + len))),
        None => Ok(None),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_in_every_split() {
        for kind in [Kind::Hello, Kind::Accept] {
            let m = encode(kind, b"address bytes").unwrap();
            for cut in 0..m.len() {
                assert_eq!(decode(&m[..cut]).unwrap(), None, "cut {cut}");
            }
            let (k, d, used) = decode(&m).unwrap().unwrap();
            assert_eq!((k, d, used), (kind, &b"address bytes"[..], m.len()));
        }
        let r = encode(Kind::Reject, &[]).unwrap();
        assert_eq!(decode(&r).unwrap(), Some((Kind::Reject, &[][..], HDR)));
    }

    #[test]
    fn garbage_is_refused_at_once() {
        assert!(matches!(decode(b"GET /"), Err(PeerMisbehaved::BadMagic(_))));
        assert!(decode(b"R").unwrap().is_none(), "a prefix of the magic waits");
        let mut m = encode(Kind::Hello, b"x").unwrap();
        m[6] = 9;
        assert!(decode(&m).is_err(), "another version");
        let mut m = encode(Kind::Hello, b"x").unwrap();
        m[7] = 7;
        assert_eq!(decode(&m), Err(PeerMisbehaved::UnknownId(7)));
        let mut m = encode(Kind::Hello, b"").unwrap();
        m[8..12].copy_from_slice(&(MAX_DATA as u32 + 1).to_le_bytes());
        assert!(matches!(decode(&m), Err(PeerMisbehaved::FrameTooLong { .. })));
        let mut m = encode(Kind::Reject, b"").unwrap();
        m[8] = 1;
        assert!(decode(&m).is_err(), "a reject with data");
    }

    proptest::proptest! {
        #[test]
        fn arbitrary_bytes_never_panic_and_what_is_taken_re_encodes(
            b in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..64),
        ) {
            if let Ok(Some((k, d, used))) = decode(&b) {
                proptest::prop_assert_eq!(&encode(k, d).unwrap()[..], &b[..used]);
            }
        }

        #[test]
        fn a_message_decodes_whatever_follows_it(
            d in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..300),
            tail in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..20),
            accept in proptest::prelude::any::<bool>(),
        ) {
            let kind = if accept { Kind::Accept } else { Kind::Hello };
            let mut m = encode(kind, &d).unwrap();
            let n = m.len();
            m.extend_from_slice(&tail);
            proptest::prop_assert_eq!(decode(&m).unwrap(), Some((kind, &d[..], n)));
        }
    }

    #[test]
    fn too_much_data_is_not_encoded() {
        assert!(encode(Kind::Hello, &vec![0; MAX_DATA + 1]).is_none());
        assert!(encode(Kind::Reject, b"x").is_none());
    }
}
