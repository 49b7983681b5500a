//! The wire format of active messages (`AM_USER`).
//!
//! Every fragment starts with a fixed header of [`AM_HDR`] bytes
//! (little-endian): the handler id (`u16`), flags (`u8`, [`FLAG_REPLY`]),
//! a zero byte, the length of the user header (`u32`), the message id
//! (`u64`, unique per sender), the total length of user header and data
//! (`u64`) and this fragment's offset in them (`u64`); then the
//! fragment's bytes of the user header followed by the data.
//!
//! A message that fits one active message goes as `AM_USER_ONLY` instead,
//! with the 8-byte [`AmOnly`] header.
//!
//! A rendezvous active message is announced by one `AM_USER_RTS` instead
//! (see [`AmRts`]): the tag protocol's request to send, wrapped with the
//! handler id, flags and the user header. The receiver hands the handler
//! a descriptor; the data moves when the handler (or the program, later)
//! receives it into a buffer, by the tag rendezvous of the wrapped kind.

use crate::ucs::PeerMisbehaved;
use crate::uct::AmId;

/// Active message id of user active messages.
pub const AM_USER: AmId = 21;
/// Length of a fragment's fixed header.
pub const AM_HDR: usize = 32;
/// The sender asks for the endpoint back to it to be given to the handler.
pub const FLAG_REPLY: u8 = 1;
/// Announcement flag: not an active message but a large stream send
/// (`stream_rndv.rs`), whose user header is its stream offset (`u64`).
pub const FLAG_STREAM: u8 = 2;
/// Largest user header plus data of one active message.
pub const AM_MAX: u64 = 256 << 20;
/// Active message id of a rendezvous active message's announcement.
pub const AM_USER_RTS: AmId = 23;
/// Length of [`AmRts`]'s encoding.
pub const AM_RTS_HDR: usize = 8;
/// Active message id of a message sent whole in one active message
/// (see [`AmOnly`]).
pub const AM_USER_ONLY: AmId = 26;
/// Length of [`AmOnly`]'s encoding.
pub const AM_ONLY_HDR: usize = 8;

/// A fragment's fixed header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AmFrag {
    /// The handler id.
    pub id: u16,
    /// [`FLAG_REPLY`] or 0.
    pub flags: u8,
    /// Length of the user header at the start of the message.
    pub hdr_len: u32,
    /// The sender's id of the message.
    pub msg_id: u64,
    /// User header plus data, in bytes.
    pub total: u64,
    /// Offset of this fragment's bytes in the message.
    pub offset: u64,
}

fn u64_at(b: &[u8], at: usize) -> u64 {
    let mut a = [0u8; 8];
    a.copy_from_slice(&b[at..at + 8]);
    u64::from_le_bytes(a)
}

impl AmFrag {
    /// The header's bytes.
    pub fn encode(&self) -> [u8; AM_HDR] {
        let mut b = [0u8; AM_HDR];
        b[0..2].copy_from_slice(&self.id.to_le_bytes());
        b[2] = self.flags;
        b[4..8].copy_from_slice(&self.hdr_len.to_le_bytes());
        b[8..16].copy_from_slice(&self.msg_id.to_le_bytes());
        b[16..24].copy_from_slice(&self.total.to_le_bytes());
        b[24..32].copy_from_slice(&self.offset.to_le_bytes());
        b
    }

    /// Decodes a fragment: its header and its bytes. Refuses what no
    /// sender writes: unknown flags, a user header longer than the
    /// message, a message over [`AM_MAX`], bytes beyond its end.
    pub fn decode(b: &[u8]) -> Result<(AmFrag, &[u8]), PeerMisbehaved> {
        if b.len() < AM_HDR {
            return Err(PeerMisbehaved::Truncated {
                what: "active message header",
                len: b.len(),
                min: AM_HDR,
            });
        }
        let mut h2 = [0u8; 2];
        h2.copy_from_slice(&b[0..2]);
        let mut h4 = [0u8; 4];
        h4.copy_from_slice(&b[4..8]);
        let f = AmFrag {
            id: u16::from_le_bytes(h2),
            flags: b[2],
            hdr_len: u32::from_le_bytes(h4),
            msg_id: u64_at(b, 8),
            total: u64_at(b, 16),
            offset: u64_at(b, 24),
        };
        let bad = |what: &'static str, detail: String| PeerMisbehaved::Invalid { what, detail };
        if f.flags & !FLAG_REPLY != 0 || b[3] != 0 {
            return Err(bad("active message flags", format!("{:#x}", f.flags)));
        }
        if f.total > AM_MAX {
            return Err(PeerMisbehaved::FrameTooLong {
                len: f.total.try_into().unwrap_or(usize::MAX),
                max: AM_MAX as usize,
            });
        }
        if u64::from(f.hdr_len) > f.total {
            return Err(bad(
                "active message header length",
                format!("{} of {}", f.hdr_len, f.total),
            ));
        }
        let bytes = &b[AM_HDR..];
        let end = f.offset.checked_add(bytes.len() as u64);
        if end.is_none_or(|e| e > f.total) {
            return Err(bad(
                "active message fragment",
                format!("{} bytes at {} of {}", bytes.len(), f.offset, f.total),
            ));
        }
        Ok((f, bytes))
    }
}

/// The header of a message that fits one active message (`AM_USER_ONLY`):
/// the handler id (`u16`), flags (`u8`), a zero byte and the user
/// header's length (`u32`), little-endian; then the user header, then
/// the data. It needs none of a fragment's message id, total and offset,
/// so a small message costs 8 bytes of header instead of 32 and fits a
/// short send.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AmOnly {
    /// The handler id.
    pub id: u16,
    /// [`FLAG_REPLY`] or 0.
    pub flags: u8,
    /// Length of the user header.
    pub hdr_len: u32,
}

impl AmOnly {
    /// The header's bytes.
    pub fn encode(&self) -> [u8; AM_ONLY_HDR] {
        let mut b = [0u8; AM_ONLY_HDR];
        b[0..2].copy_from_slice(&self.id.to_le_bytes());
        b[2] = self.flags;
        b[4..8].copy_from_slice(&self.hdr_len.to_le_bytes());
        b
    }

    /// Decodes a whole message: its header and the user header and data
    /// that follow. Refuses unknown flags, a nonzero reserved byte, a user
    /// header beyond the message and a message over [`AM_MAX`].
    pub fn decode(b: &[u8]) -> Result<(AmOnly, &[u8]), PeerMisbehaved> {
        let Some((h, rest)) = b.split_first_chunk::<AM_ONLY_HDR>() else {
            return Err(PeerMisbehaved::Truncated {
                what: "active message header",
                len: b.len(),
                min: AM_ONLY_HDR,
            });
        };
        let m = AmOnly {
            id: u16::from_le_bytes([h[0], h[1]]),
            flags: h[2],
            hdr_len: u32::from_le_bytes([h[4], h[5], h[6], h[7]]),
        };
        let bad = |what: &'static str, detail: String| PeerMisbehaved::Invalid { what, detail };
        if m.flags & !FLAG_REPLY != 0 || h[3] != 0 {
            return Err(bad("active message flags", format!("{:#x}", m.flags)));
        }
        if rest.len() as u64 > AM_MAX {
            return Err(PeerMisbehaved::FrameTooLong {
                len: rest.len(),
                max: AM_MAX as usize,
            });
        }
        if m.hdr_len as usize > rest.len() {
            return Err(bad(
                "active message header length",
                format!("{} of {}", m.hdr_len, rest.len()),
            ));
        }
        Ok((m, rest))
    }
}

/// The wrapper of a rendezvous active message's request to send: the
/// wrapped request's active message id (`u8`: `RNDV_RTS`, `RNDV_RTS_PUT`
/// or `RNDV_RTS_GET`), flags (`u8`), the handler id (`u16`) and the user
/// header's length (`u32`); then the user header, then the wrapped
/// request's bytes (its tag is 0).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AmRts {
    /// The wrapped request's active message id.
    pub inner: AmId,
    /// [`FLAG_REPLY`] or 0.
    pub flags: u8,
    /// The handler id.
    pub id: u16,
    /// Length of the user header.
    pub hdr_len: u32,
}

impl AmRts {
    /// The wrapper's bytes.
    pub fn encode(&self) -> [u8; AM_RTS_HDR] {
        let mut b = [0u8; AM_RTS_HDR];
        b[0] = self.inner;
        b[1] = self.flags;
        b[2..4].copy_from_slice(&self.id.to_le_bytes());
        b[4..8].copy_from_slice(&self.hdr_len.to_le_bytes());
        b
    }

    /// Decodes an announcement: the wrapper, the user header and the
    /// wrapped request. Refuses unknown wrapped ids and flags and a user
    /// header beyond the message.
    pub fn decode(b: &[u8]) -> Result<(AmRts, &[u8], &[u8]), PeerMisbehaved> {
        if b.len() < AM_RTS_HDR {
            return Err(PeerMisbehaved::Truncated {
                what: "rendezvous active message",
                len: b.len(),
                min: AM_RTS_HDR,
            });
        }
        let mut h4 = [0u8; 4];
        h4.copy_from_slice(&b[4..8]);
        let r = AmRts {
            inner: b[0],
            flags: b[1],
            id: u16::from_le_bytes([b[2], b[3]]),
            hdr_len: u32::from_le_bytes(h4),
        };
        let bad = |what: &'static str, detail: String| PeerMisbehaved::Invalid { what, detail };
        use crate::proto::wire::{AM_RNDV_RTS, AM_RNDV_RTS_GET, AM_RNDV_RTS_PUT};
        if ![AM_RNDV_RTS, AM_RNDV_RTS_GET, AM_RNDV_RTS_PUT].contains(&r.inner) {
            return Err(bad("rendezvous active message kind", format!("{}", r.inner)));
        }
        if r.flags & !(FLAG_REPLY | FLAG_STREAM) != 0 {
            return Err(bad("active message flags", format!("{:#x}", r.flags)));
        }
        let rest = &b[AM_RTS_HDR..];
        let n = r.hdr_len as usize;
        if n > rest.len() {
            return Err(bad(
                "rendezvous active message header length",
                format!("{n} of {}", rest.len()),
            ));
        }
        if r.flags & FLAG_STREAM != 0 && n != 8 {
            return Err(bad("stream rendezvous offset", format!("{n} bytes")));
        }
        Ok((r, &rest[..n], &rest[n..]))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frag(hdr_len: u32, total: u64, offset: u64) -> AmFrag {
        AmFrag {
            id: 7,
            flags: FLAG_REPLY,
            hdr_len,
            msg_id: 99,
            total,
            offset,
        }
    }

    #[test]
    fn round_trip() {
        let f = frag(3, 10, 4);
        let mut b = f.encode().to_vec();
        b.extend_from_slice(b"abcdef");
        assert_eq!(AmFrag::decode(&b).unwrap(), (f, &b"abcdef"[..]));
    }

    #[test]
    fn what_no_sender_writes_is_refused() {
        assert!(AmFrag::decode(&[0; AM_HDR - 1]).is_err());
        let with = |f: AmFrag, n: usize| {
            let mut b = f.encode().to_vec();
            b.extend(std::iter::repeat_n(0u8, n));
            AmFrag::decode(&b).map(|_| ())
        };
        assert!(with(frag(3, 10, 4), 6).is_ok());
        assert!(with(frag(3, 10, 5), 6).is_err(), "past the end");
        assert!(with(frag(11, 10, 0), 0).is_err(), "header longer than all");
        assert!(with(frag(0, AM_MAX + 1, 0), 0).is_err(), "too large");
        assert!(with(frag(0, 10, u64::MAX), 1).is_err(), "offset overflow");
        let mut b = frag(0, 1, 0).encode().to_vec();
        b[2] = 0x80;
        assert!(AmFrag::decode(&b).is_err(), "unknown flag");
    }

    #[test]
    fn whole_messages_round_trip_and_refuse_nonsense() {
        let m = AmOnly {
            id: 0x1337,
            flags: FLAG_REPLY,
            hdr_len: 2,
        };
        let mut b = m.encode().to_vec();
        b.extend_from_slice(b"hdata");
        assert_eq!(AmOnly::decode(&b).unwrap(), (m, &b"hdata"[..]));
        assert_eq!(AmOnly::decode(&b[..AM_ONLY_HDR + 2]).unwrap().1, b"hd");
        assert!(AmOnly::decode(&b[..AM_ONLY_HDR + 1]).is_err(), "header beyond the end");
        assert!(AmOnly::decode(&b[..AM_ONLY_HDR - 1]).is_err(), "short");
        for (at, v) in [(2, 0x80), (3, 1)] {
            let mut bad = b.clone();
            bad[at] = v;
            assert!(AmOnly::decode(&bad).is_err(), "byte {at} = {v:#x}");
        }
    }

    #[test]
    fn rendezvous_announcements_round_trip_and_refuse_nonsense() {
        use crate::proto::wire::{AM_RNDV_RTS_GET, AM_WIREUP};
        let r = AmRts {
            inner: AM_RNDV_RTS_GET,
            flags: FLAG_REPLY,
            id: 300,
            hdr_len: 3,
        };
        let mut b = r.encode().to_vec();
        b.extend_from_slice(b"hdrrts");
        assert_eq!(AmRts::decode(&b).unwrap(), (r, &b"hdr"[..], &b"rts"[..]));
        assert!(AmRts::decode(&b[..7]).is_err(), "short");
        let mut bad = b.clone();
        bad[0] = AM_WIREUP;
        assert!(AmRts::decode(&bad).is_err(), "not a request to send");
        let mut bad = b.clone();
        bad[1] = 4;
        assert!(AmRts::decode(&bad).is_err(), "unknown flag");
        let mut bad = b;
        bad[4] = 7;
        assert!(AmRts::decode(&bad).is_err(), "header beyond the end");
    }
}
