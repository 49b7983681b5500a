//! MPA Request and Reply frames (RFC 5044 §7.1), with RFC 6581's
//! enhanced connection setup (revision 2, the S flag and the IRD/ORD word).
//!
//! ```text
//! 0      16     17     18         20
//! | key  | flags | rev | PD_Length | private data (PD_Length bytes) |
//! flags: 0x80 M (markers), 0x40 C (CRC), 0x20 R (reject), 0x10 S
//!        (enhanced, rev 2), 0x0f reserved
//! ```
//!
//! With rev 2 and S set the private data begins with a big-endian
//! [`EnhancedWord`]; PD_Length counts it.

use super::{be16, be32, WireError};

/// The key of an MPA Request.
pub const KEY_REQ: &[u8; 16] = b"MPA ID Req Frame";
/// The key of an MPA Reply.
pub const KEY_REP: &[u8; 16] = b"MPA ID Rep Frame";
/// Bytes before the private data.
pub const HEADER_LEN: usize = 20;
/// The most private data (enhanced word included) RFC 5044 allows.
pub const MAX_PRIVATE_DATA: usize = 512;
/// Length of RFC 6581's IRD/ORD word.
pub const ENHANCED_LEN: usize = 4;

const FLAG_M: u8 = 0x80;
const FLAG_C: u8 = 0x40;
const FLAG_R: u8 = 0x20;
const FLAG_S: u8 = 0x10;
const FLAG_RESERVED: u8 = 0x0f;

/// The largest IRD or ORD the word can carry (14 bits).
pub const MAX_IRD_ORD: u16 = 0x3fff;

/// RFC 6581's enhanced connection word:
///
/// ```text
/// bit 31 A | 30 B | 29..16 IRD | 15 C | 14 D | 13..0 ORD
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct EnhancedWord {
    /// A: peer-to-peer mode, a ready-to-receive (RTR) message follows the
    /// reply.
    pub p2p: bool,
    /// B: a zero-length Send is acceptable as the RTR message.
    pub rtr_send: bool,
    /// Inbound RDMA Read depth (14 bits; more is cut to 14 on encoding).
    pub ird: u16,
    /// C: a zero-length RDMA Write is acceptable as the RTR message.
    pub rtr_write: bool,
    /// D: a zero-length RDMA Read is acceptable as the RTR message.
    pub rtr_read: bool,
    /// Outbound RDMA Read depth (14 bits; more is cut to 14 on encoding).
    pub ord: u16,
}

impl EnhancedWord {
    /// The word as sent (write it big-endian).
    pub fn to_u32(self) -> u32 {
        (u32::from(self.p2p) << 31)
            | (u32::from(self.rtr_send) << 30)
            | (u32::from(self.ird & MAX_IRD_ORD) << 16)
            | (u32::from(self.rtr_write) << 15)
            | (u32::from(self.rtr_read) << 14)
            | u32::from(self.ord & MAX_IRD_ORD)
    }

    /// The word from its value on the wire.
    pub fn from_u32(v: u32) -> Self {
        Self {
            p2p: v & (1 << 31) != 0,
            rtr_send: v & (1 << 30) != 0,
            ird: ((v >> 16) as u16) & MAX_IRD_ORD,
            rtr_write: v & (1 << 15) != 0,
            rtr_read: v & (1 << 14) != 0,
            ord: (v as u16) & MAX_IRD_ORD,
        }
    }
}

/// An MPA Request or Reply.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MpaFrame {
    /// A Reply (key [`KEY_REP`]) rather than a Request.
    pub reply: bool,
    /// M: the sender wants markers in the FPDUs sent to it.
    pub markers: bool,
    /// C: the sender wants CRCs (used both ways if either side asks).
    pub crc: bool,
    /// R: the connection is rejected (replies only).
    pub reject: bool,
    /// Revision: 1 (RFC 5044) or 2 (RFC 6581); 0 is accepted too.
    pub rev: u8,
    /// RFC 6581's word: `Some` exactly when `rev` is 2 and S is set. On
    /// the wire it is the first 4 bytes of the private data.
    pub enhanced: Option<EnhancedWord>,
    /// The private data after the enhanced word, if any.
    pub private_data: Vec<u8>,
}

impl MpaFrame {
    /// The frame's bytes. PD_Length counts the enhanced word too.
    ///
    /// The caller keeps `private_data` (with the word) within
    /// [`MAX_PRIVATE_DATA`] and sets `enhanced` only with `rev` 2, or the
    /// peer refuses the frame (debug builds assert both).
    pub fn encode(&self) -> Vec<u8> {
        let word_len = if self.enhanced.is_some() {
            ENHANCED_LEN
        } else {
            0
        };
        let pd_len = word_len + self.private_data.len();
        debug_assert!(pd_len <= MAX_PRIVATE_DATA, "MPA private data too long");
        debug_assert!(self.enhanced.is_none() || self.rev == 2);
        let mut out = Vec::with_capacity(HEADER_LEN + pd_len);
        out.extend_from_slice(if self.reply { KEY_REP } else { KEY_REQ });
        let mut flags = 0;
        for (set, bit) in [
            (self.markers, FLAG_M),
            (self.crc, FLAG_C),
            (self.reject, FLAG_R),
            (self.enhanced.is_some(), FLAG_S),
        ] {
            if set {
                flags |= bit;
            }
        }
        out.push(flags);
        out.push(self.rev);
        out.extend_from_slice(&(pd_len as u16).to_be_bytes());
        if let Some(w) = self.enhanced {
            out.extend_from_slice(&w.to_u32().to_be_bytes());
        }
        out.extend_from_slice(&self.private_data);
        out
    }

    /// Decodes the frame at the start of `buf`.
    ///
    /// `Ok(None)` while `buf` holds less than the whole frame (header and
    /// PD_Length bytes) and nothing seen so far is wrong; otherwise the
    /// frame and the bytes it took. Refused: a key that is neither
    /// [`KEY_REQ`] nor [`KEY_REP`] (as soon as a byte differs), reserved
    /// flags set (S counts as reserved below rev 2), rev above 2,
    /// PD_Length above [`MAX_PRIVATE_DATA`], rev 2 with S and fewer than
    /// 4 bytes of private data, R in a request. Markers are not refused
    /// here (the engine answers them with a rejecting reply); see
    /// [`check_no_markers`](Self::check_no_markers).
    ///
    /// RFC 5044 asks receivers not to check the reserved bits; they are
    /// checked here because no revision assigns them (siw's experimental
    /// GSO bit, 0x08, is off by default) and a frame using them would
    /// mean something this implementation does not do.
    pub fn decode(buf: &[u8]) -> Result<Option<(MpaFrame, usize)>, WireError> {
        let key_seen = &buf[..buf.len().min(KEY_REQ.len())];
        let reply = if KEY_REQ.starts_with(key_seen) {
            false
        } else if KEY_REP.starts_with(key_seen) {
            true
        } else {
            return Err(WireError::BadKey);
        };
        let (Some(&flags), Some(&rev), Some(pd_len)) = (buf.get(16), buf.get(17), be16(buf, 18))
        else {
            return Ok(None);
        };
        let pd_len = usize::from(pd_len);
        if rev > 2 {
            return Err(WireError::BadRev(rev));
        }
        let enhanced = flags & FLAG_S != 0;
        if flags & FLAG_RESERVED != 0 || (enhanced && rev < 2) {
            return Err(WireError::ReservedBits);
        }
        if pd_len > MAX_PRIVATE_DATA {
            return Err(WireError::PrivateDataTooLong(pd_len));
        }
        if enhanced && pd_len < ENHANCED_LEN {
            return Err(WireError::BadLength(pd_len));
        }
        let reject = flags & FLAG_R != 0;
        if reject && !reply {
            return Err(WireError::RejectInRequest);
        }
        let total = HEADER_LEN + pd_len;
        let Some(pd) = buf.get(HEADER_LEN..total) else {
            return Ok(None);
        };
        let (enhanced, private_data) = if enhanced {
            let w = be32(pd, 0).ok_or(WireError::BadLength(pd_len))?;
            (Some(EnhancedWord::from_u32(w)), &pd[ENHANCED_LEN..])
        } else {
            (None, pd)
        };
        let frame = MpaFrame {
            reply,
            markers: flags & FLAG_M != 0,
            crc: flags & FLAG_C != 0,
            reject,
            rev,
            enhanced,
            private_data: private_data.to_vec(),
        };
        Ok(Some((frame, total)))
    }

    /// `Err(WireError::Markers)` if the sender of this frame wants markers,
    /// which this implementation does not insert. Like Linux siw, answer
    /// such a request with a reply that has R set, and fail the connection
    /// on such a reply.
    pub fn check_no_markers(&self) -> Result<(), WireError> {
        if self.markers {
            Err(WireError::Markers)
        } else {
            Ok(())
        }
    }
}

/// Whether FPDUs carry CRCs, given both frames of a handshake: yes in both
/// directions if either side asked (RFC 5044 §7.1.2).
pub fn crc_in_use(request: &MpaFrame, reply: &MpaFrame) -> bool {
    request.crc || reply.crc
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// A request as Linux siw sends it by default: rev 2, S, no CRC, no
    /// markers, IRD = ORD = 16 and no other private data.
    fn siw_request() -> MpaFrame {
        MpaFrame {
            reply: false,
            markers: false,
            crc: false,
            reject: false,
            rev: 2,
            enhanced: Some(EnhancedWord {
                ird: 16,
                ord: 16,
                ..Default::default()
            }),
            private_data: Vec::new(),
        }
    }

    #[test]
    fn siw_default_request_bytes() {
        let mut want = b"MPA ID Req Frame".to_vec();
        want.extend_from_slice(&[0x10, 0x02, 0x00, 0x04, 0x00, 0x10, 0x00, 0x10]);
        assert_eq!(siw_request().encode(), want);
        assert_eq!(MpaFrame::decode(&want), Ok(Some((siw_request(), 24))));
    }

    #[test]
    fn rev1_reply_with_crc_and_private_data() {
        let f = MpaFrame {
            reply: true,
            markers: false,
            crc: true,
            reject: true,
            rev: 1,
            enhanced: None,
            private_data: b"no".to_vec(),
        };
        let mut want = b"MPA ID Rep Frame".to_vec();
        want.extend_from_slice(&[0x60, 0x01, 0x00, 0x02, b'n', b'o']);
        assert_eq!(f.encode(), want);
        assert_eq!(MpaFrame::decode(&want), Ok(Some((f, 22))));
    }

    #[test]
    fn rfc6581_bits() {
        let bit = |w: EnhancedWord| w.to_u32();
        let d = EnhancedWord::default();
        assert_eq!(bit(EnhancedWord { p2p: true, ..d }), 0x8000_0000);
        assert_eq!(
            bit(EnhancedWord {
                rtr_send: true,
                ..d
            }),
            0x4000_0000
        );
        assert_eq!(bit(EnhancedWord { ird: 0x3fff, ..d }), 0x3fff_0000);
        assert_eq!(
            bit(EnhancedWord {
                rtr_write: true,
                ..d
            }),
            0x0000_8000
        );
        assert_eq!(
            bit(EnhancedWord {
                rtr_read: true,
                ..d
            }),
            0x0000_4000
        );
        assert_eq!(bit(EnhancedWord { ord: 0x3fff, ..d }), 0x0000_3fff);
        assert_eq!(
            bit(EnhancedWord {
                ird: 0xffff,
                ord: 0xffff,
                ..d
            }),
            0x3fff_3fff
        );
        assert_eq!(
            EnhancedWord::from_u32(0xc001_c002),
            EnhancedWord {
                p2p: true,
                rtr_send: true,
                ird: 1,
                rtr_write: true,
                rtr_read: true,
                ord: 2,
            }
        );
    }

    #[test]
    fn partial_and_refused() {
        let full = siw_request().encode();
        for n in 0..full.len() {
            assert_eq!(MpaFrame::decode(&full[..n]), Ok(None), "prefix {n}");
        }
        assert_eq!(MpaFrame::decode(b"MPA ID Rex"), Err(WireError::BadKey));
        assert_eq!(
            MpaFrame::decode(b"GET / HTTP/1.1\r\n"),
            Err(WireError::BadKey)
        );
        let with = |at: usize, v: u8| {
            let mut b = full.clone();
            b[at] = v;
            MpaFrame::decode(&b)
        };
        assert_eq!(with(16, 0x11), Err(WireError::ReservedBits));
        assert_eq!(with(17, 3), Err(WireError::BadRev(3)));
        assert_eq!(with(17, 1), Err(WireError::ReservedBits)); // S below rev 2
        assert_eq!(with(16, 0x30), Err(WireError::RejectInRequest));
        assert_eq!(with(19, 3), Err(WireError::BadLength(3)));
        assert_eq!(with(18, 2), Err(WireError::PrivateDataTooLong(0x204)));
        // An error shows as soon as the header is there.
        let mut head = full[..HEADER_LEN].to_vec();
        head[17] = 9;
        assert_eq!(MpaFrame::decode(&head), Err(WireError::BadRev(9)));
        let mut m = siw_request();
        m.markers = true;
        let (d, _) = MpaFrame::decode(&m.encode()).unwrap().unwrap();
        assert_eq!(d.check_no_markers(), Err(WireError::Markers));
        assert_eq!(siw_request().check_no_markers(), Ok(()));
    }

    fn frame() -> impl Strategy<Value = MpaFrame> {
        (
            any::<[bool; 4]>(),
            0u8..=2,
            any::<bool>(),
            any::<u32>(),
            proptest::collection::vec(any::<u8>(), 0..=MAX_PRIVATE_DATA - ENHANCED_LEN),
        )
            .prop_map(|([reply, markers, crc, reject], rev, s, w, pd)| MpaFrame {
                reply,
                markers,
                crc,
                reject: reject && reply,
                rev,
                enhanced: (s && rev == 2).then(|| EnhancedWord::from_u32(w)),
                private_data: pd,
            })
    }

    proptest! {
        #[test]
        fn round_trip(f in frame(), tail in proptest::collection::vec(any::<u8>(), 0..8)) {
            let mut b = f.encode();
            let n = b.len();
            b.extend_from_slice(&tail);
            prop_assert_eq!(MpaFrame::decode(&b), Ok(Some((f, n))));
        }

        #[test]
        fn word_round_trip(w in any::<u32>()) {
            prop_assert_eq!(EnhancedWord::from_u32(w).to_u32(), w);
        }
    }
}
