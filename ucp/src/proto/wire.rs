//! Wire format of the eager tag protocol.
//!
//! All integers are little-endian. Every message is one transport active
//! message whose id says which header follows:
//!
//! | AM id | name | header | then |
//! |---|---|---|---|
//! | 1 | `EAGER_ONLY` | tag: u64 | the whole payload |
//! | 2 | `EAGER_FIRST` | tag: u64, total length: u64, message id: u64 | the first fragment |
//! | 3 | `EAGER_MIDDLE` | message id: u64, offset: u64 | a later fragment |
//!
//! A message id is unique per sending worker; fragments of one message may
//! arrive in any order after its first fragment, on the same transport
//! source. Everything here is decoded from untrusted bytes: a short header
//! or an impossible offset is a [`PeerMisbehaved`], never a panic.

use crate::ucs::PeerMisbehaved;
use crate::uct::AmId;

/// Whole message with its tag.
pub const AM_EAGER_ONLY: AmId = 1;
/// First fragment of a multi-fragment message.
pub const AM_EAGER_FIRST: AmId = 2;
/// A later fragment of a multi-fragment message.
pub const AM_EAGER_MIDDLE: AmId = 3;

/// Size of the `EAGER_ONLY` header.
pub const ONLY_HDR: usize = 8;
/// Size of the `EAGER_FIRST` header.
pub const FIRST_HDR: usize = 24;
/// Size of the `EAGER_MIDDLE` header.
pub const MIDDLE_HDR: usize = 16;

fn u64_at(b: &[u8], at: usize) -> u64 {
    let mut a = [0u8; 8];
    a.copy_from_slice(&b[at..at + 8]);
    u64::from_le_bytes(a)
}

fn need(what: &'static str, data: &[u8], min: usize) -> Result<(), PeerMisbehaved> {
    if data.len() < min {
        Err(PeerMisbehaved::Truncated {
            what,
            len: data.len(),
            min,
        })
    } else {
        Ok(())
    }
}

/// Decodes `EAGER_ONLY`: (tag, payload).
pub fn decode_only(data: &[u8]) -> Result<(u64, &[u8]), PeerMisbehaved> {
    need("eager header", data, ONLY_HDR)?;
    Ok((u64_at(data, 0), &data[ONLY_HDR..]))
}

/// Header of a first fragment.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FirstHdr {
    /// Message tag.
    pub tag: u64,
    /// Length of the whole message.
    pub total: u64,
    /// Sender's message id.
    pub msg_id: u64,
}

impl FirstHdr {
    /// Encodes the header.
    pub fn encode(&self) -> [u8; FIRST_HDR] {
        let mut b = [0u8; FIRST_HDR];
        b[0..8].copy_from_slice(&self.tag.to_le_bytes());
        b[8..16].copy_from_slice(&self.total.to_le_bytes());
        b[16..24].copy_from_slice(&self.msg_id.to_le_bytes());
        b
    }

    /// Decodes header and fragment; the fragment may not exceed the total.
    pub fn decode(data: &[u8]) -> Result<(FirstHdr, &[u8]), PeerMisbehaved> {
        need("eager first header", data, FIRST_HDR)?;
        let h = FirstHdr {
            tag: u64_at(data, 0),
            total: u64_at(data, 8),
            msg_id: u64_at(data, 16),
        };
        let frag = &data[FIRST_HDR..];
        if frag.len() as u64 > h.total {
            return Err(PeerMisbehaved::Invalid {
                what: "eager first fragment",
                detail: format!("{} bytes of a {}-byte message", frag.len(), h.total),
            });
        }
        Ok((h, frag))
    }
}

/// Header of a later fragment.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MiddleHdr {
    /// Sender's message id.
    pub msg_id: u64,
    /// Offset of this fragment in the message.
    pub offset: u64,
}

impl MiddleHdr {
    /// Encodes the header.
    pub fn encode(&self) -> [u8; MIDDLE_HDR] {
        let mut b = [0u8; MIDDLE_HDR];
        b[0..8].copy_from_slice(&self.msg_id.to_le_bytes());
        b[8..16].copy_from_slice(&self.offset.to_le_bytes());
        b
    }

    /// Decodes header and fragment.
    pub fn decode(data: &[u8]) -> Result<(MiddleHdr, &[u8]), PeerMisbehaved> {
        need("eager middle header", data, MIDDLE_HDR)?;
        Ok((
            MiddleHdr {
                msg_id: u64_at(data, 0),
                offset: u64_at(data, 8),
            },
            &data[MIDDLE_HDR..],
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips() {
        let f = FirstHdr {
            tag: 7,
            total: 100,
            msg_id: 9,
        };
        let mut b = f.encode().to_vec();
        b.extend_from_slice(&[1, 2, 3]);
        let (g, frag) = FirstHdr::decode(&b).unwrap();
        assert_eq!(g, f);
        assert_eq!(frag, &[1, 2, 3]);
        let m = MiddleHdr {
            msg_id: 9,
            offset: 50,
        };
        let enc = m.encode();
        let (n, frag) = MiddleHdr::decode(&enc).unwrap();
        assert_eq!(n, m);
        assert!(frag.is_empty());
        let mut only = 5u64.to_le_bytes().to_vec();
        only.push(42);
        let (tag, payload) = decode_only(&only).unwrap();
        assert_eq!((tag, payload), (5, &[42u8][..]));
    }

    #[test]
    fn rejects_bad_input() {
        assert!(decode_only(&[1, 2, 3]).is_err());
        assert!(FirstHdr::decode(&[0; 23]).is_err());
        assert!(MiddleHdr::decode(&[0; 15]).is_err());
        let f = FirstHdr {
            tag: 1,
            total: 2,
            msg_id: 3,
        };
        let mut b = f.encode().to_vec();
        b.extend_from_slice(&[0; 3]);
        assert!(FirstHdr::decode(&b).is_err(), "fragment longer than total");
    }
}
