//! DDP segment headers (RFC 5041 §4), each with the RDMAP control byte in
//! its second byte (RFC 5040 §4). Offsets are from the start of the
//! ULPDU.
//!
//! ```text
//! tagged (14):   | ctrl | rdmap | STag (4) | TO (8) |
//! untagged (18): | ctrl | rdmap | Inv STag (4) | QN (4) | MSN (4) | MO (4) |
//! ctrl: 0x80 T (tagged), 0x40 L (last), 0x3c reserved, 0x03 DV (= 1)
//! ```

use super::rdmap::{ctrl_byte, parse_ctrl, Opcode};
use super::WireError;

/// Length of a tagged header.
pub const TAGGED_HDR_LEN: usize = 14;
/// Length of an untagged header.
pub const UNTAGGED_HDR_LEN: usize = 18;
/// The longer of the two.
pub const MAX_HDR_LEN: usize = 18;

/// Untagged queue of Sends.
pub const QN_SEND: u32 = 0;
/// Untagged queue of RDMA Read Requests.
pub const QN_READ_REQ: u32 = 1;
/// Untagged queue of Terminates.
pub const QN_TERMINATE: u32 = 2;

/// The DDP version this implementation speaks (DV field).
pub const DDP_VERSION: u8 = 1;

const FLAG_T: u8 = 0x80;
const FLAG_L: u8 = 0x40;
const DV_MASK: u8 = 0x03;

/// The header of one DDP segment.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DdpHeader {
    /// Tagged buffer model: data placed at `to` in the sink's registration
    /// `stag` (RDMA Write, Read Response).
    Tagged {
        /// L: the message's last segment.
        last: bool,
        /// The RDMAP message.
        opcode: Opcode,
        /// Data sink STag.
        stag: u32,
        /// Tagged offset of this segment's first byte.
        to: u64,
    },
    /// Untagged buffer model: data placed at offset `mo` of the message
    /// numbered `msn` on queue `qn`.
    Untagged {
        /// L: the message's last segment.
        last: bool,
        /// The RDMAP message.
        opcode: Opcode,
        /// STag to invalidate (Send with Invalidate), else 0.
        inv_stag: u32,
        /// Queue number.
        qn: u32,
        /// Message sequence number (from 1, per queue).
        msn: u32,
        /// Message offset of this segment's first byte.
        mo: u32,
    },
}

/// The header length a segment starting with DDP control byte `b` has:
/// [`TAGGED_HDR_LEN`] if its T bit is set, else [`UNTAGGED_HDR_LEN`].
#[inline]
pub fn header_len_from_first_byte(b: u8) -> usize {
    if b & FLAG_T != 0 {
        TAGGED_HDR_LEN
    } else {
        UNTAGGED_HDR_LEN
    }
}

impl DdpHeader {
    /// The header's length on the wire: 14 or 18.
    #[inline]
    #[allow(clippy::len_without_is_empty)] // A header is never empty.
    pub fn len(&self) -> usize {
        match self {
            Self::Tagged { .. } => TAGGED_HDR_LEN,
            Self::Untagged { .. } => UNTAGGED_HDR_LEN,
        }
    }

    /// The RDMAP opcode.
    #[inline]
    pub fn opcode(&self) -> Opcode {
        match *self {
            Self::Tagged { opcode, .. } | Self::Untagged { opcode, .. } => opcode,
        }
    }

    /// Whether this is the message's last segment.
    #[inline]
    pub fn last(&self) -> bool {
        match *self {
            Self::Tagged { last, .. } | Self::Untagged { last, .. } => last,
        }
    }

    /// Writes the header to the start of `out`; returns its length.
    /// Reserved bits are written as zero.
    pub fn encode(&self, out: &mut [u8; MAX_HDR_LEN]) -> usize {
        let last = if self.last() { FLAG_L } else { 0 };
        match *self {
            Self::Tagged {
                opcode, stag, to, ..
            } => {
                out[0] = FLAG_T | last | DDP_VERSION;
                out[1] = ctrl_byte(opcode);
                out[2..6].copy_from_slice(&stag.to_be_bytes());
                out[6..14].copy_from_slice(&to.to_be_bytes());
                TAGGED_HDR_LEN
            }
            Self::Untagged {
                opcode,
                inv_stag,
                qn,
                msn,
                mo,
                ..
            } => {
                out[0] = last | DDP_VERSION;
                out[1] = ctrl_byte(opcode);
                out[2..6].copy_from_slice(&inv_stag.to_be_bytes());
                out[6..10].copy_from_slice(&qn.to_be_bytes());
                out[10..14].copy_from_slice(&msn.to_be_bytes());
                out[14..18].copy_from_slice(&mo.to_be_bytes());
                UNTAGGED_HDR_LEN
            }
        }
    }

    /// The header's bytes: the first `len` of the array.
    pub fn to_bytes(&self) -> ([u8; MAX_HDR_LEN], usize) {
        let mut b = [0u8; MAX_HDR_LEN];
        let n = self.encode(&mut b);
        (b, n)
    }

    /// Decodes the DDP header (with the RDMAP control byte) at the start of
    /// a ULPDU; returns it and its length (the payload follows).
    ///
    /// Refused: a ULPDU shorter than the header its T bit announces
    /// ([`WireError::BadLength`] with the ULPDU's length), a DDP version
    /// other than 1, an RDMAP version other than 1, an unknown opcode, and
    /// an opcode whose buffer model disagrees with the T bit
    /// ([`WireError::WrongBufferModel`]). Reserved bits are ignored. The
    /// queue number is not checked against the opcode: that is the
    /// engine's "invalid QN" Terminate to send.
    pub fn decode(ulpdu: &[u8]) -> Result<(DdpHeader, usize), WireError> {
        let Some(&ctrl) = ulpdu.first() else {
            return Err(WireError::BadLength(0));
        };
        let tagged = ctrl & FLAG_T != 0;
        let len = header_len_from_first_byte(ctrl);
        // A fixed-size copy: every field access below is checked at
        // compile time.
        let mut b = [0u8; MAX_HDR_LEN];
        match ulpdu.get(..len) {
            Some(h) => b[..len].copy_from_slice(h),
            None => return Err(WireError::BadLength(ulpdu.len())),
        }
        if ctrl & DV_MASK != DDP_VERSION {
            return Err(WireError::BadDdpVersion(ctrl & DV_MASK));
        }
        let opcode = parse_ctrl(b[1])?;
        if opcode.is_tagged() != tagged {
            return Err(WireError::WrongBufferModel { opcode, tagged });
        }
        let last = ctrl & FLAG_L != 0;
        let u32_at = |at: usize| u32::from_be_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]]);
        let hdr = if tagged {
            Self::Tagged {
                last,
                opcode,
                stag: u32_at(2),
                to: (u64::from(u32_at(6)) << 32) | u64::from(u32_at(10)),
            }
        } else {
            Self::Untagged {
                last,
                opcode,
                inv_stag: u32_at(2),
                qn: u32_at(6),
                msn: u32_at(10),
                mo: u32_at(14),
            }
        };
        Ok((hdr, len))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn send_bytes() {
        let h = DdpHeader::Untagged {
            last: true,
            opcode: Opcode::Send,
            inv_stag: 0,
            qn: QN_SEND,
            msn: 1,
            mo: 0,
        };
        let (b, n) = h.to_bytes();
        assert_eq!(n, 18);
        assert_eq!(
            b,
            [0x41, 0x43, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0]
        );
        assert_eq!(DdpHeader::decode(&b), Ok((h, 18)));
    }

    #[test]
    fn write_last_segment_bytes() {
        let h = DdpHeader::Tagged {
            last: true,
            opcode: Opcode::Write,
            stag: 0x0bad_0001,
            to: 0x1000,
        };
        let (b, n) = h.to_bytes();
        assert_eq!(
            b[..n],
            [0xc1, 0x40, 0x0b, 0xad, 0x00, 0x01, 0, 0, 0, 0, 0, 0, 0x10, 0x00]
        );
        let mut ulpdu = b[..n].to_vec();
        ulpdu.extend_from_slice(b"payload");
        assert_eq!(DdpHeader::decode(&ulpdu), Ok((h, 14)));
        assert_eq!(header_len_from_first_byte(0xc1), 14);
        assert_eq!(header_len_from_first_byte(0x41), 18);
    }

    #[test]
    fn send_with_invalidate_middle_segment_bytes() {
        let h = DdpHeader::Untagged {
            last: false,
            opcode: Opcode::SendInv,
            inv_stag: 0x1122_3344,
            qn: 0,
            msn: 7,
            mo: 0x0102,
        };
        let (b, _) = h.to_bytes();
        assert_eq!(
            b,
            [0x01, 0x44, 0x11, 0x22, 0x33, 0x44, 0, 0, 0, 0, 0, 0, 0, 7, 0, 0, 0x01, 0x02]
        );
    }

    #[test]
    fn refused() {
        let send = [0x41, 0x43, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0];
        let with = |at: usize, v: u8| {
            let mut b = send;
            b[at] = v;
            DdpHeader::decode(&b)
        };
        assert_eq!(DdpHeader::decode(&[]), Err(WireError::BadLength(0)));
        assert_eq!(
            DdpHeader::decode(&send[..17]),
            Err(WireError::BadLength(17))
        );
        assert_eq!(with(0, 0x42), Err(WireError::BadDdpVersion(2)));
        assert_eq!(with(1, 0x83), Err(WireError::BadRdmapVersion(2)));
        assert_eq!(with(1, 0x4a), Err(WireError::BadOpcode(10)));
        assert_eq!(
            with(1, 0x40),
            Err(WireError::WrongBufferModel {
                opcode: Opcode::Write,
                tagged: false
            })
        );
        assert_eq!(
            with(0, 0xc1),
            Err(WireError::WrongBufferModel {
                opcode: Opcode::Send,
                tagged: true
            })
        );
        // Reserved bits are ignored.
        assert!(with(0, 0x41 | 0x3c).is_ok());
        assert!(with(1, 0x43 | 0x30).is_ok());
    }

    fn header() -> impl Strategy<Value = DdpHeader> {
        (any::<bool>(), 0u8..8, any::<(u32, u64, u32, u32, u32)>()).prop_map(
            |(last, op, (a, b, c, d, e))| {
                let opcode = Opcode::from_u8(op).unwrap();
                if opcode.is_tagged() {
                    DdpHeader::Tagged {
                        last,
                        opcode,
                        stag: a,
                        to: b,
                    }
                } else {
                    DdpHeader::Untagged {
                        last,
                        opcode,
                        inv_stag: a,
                        qn: c,
                        msn: d,
                        mo: e,
                    }
                }
            },
        )
    }

    proptest! {
        #[test]
        fn round_trip(h in header(), payload in proptest::collection::vec(any::<u8>(), 0..8)) {
            let (b, n) = h.to_bytes();
            prop_assert_eq!(n, h.len());
            prop_assert_eq!(header_len_from_first_byte(b[0]), n);
            let mut ulpdu = b[..n].to_vec();
            ulpdu.extend_from_slice(&payload);
            prop_assert_eq!(DdpHeader::decode(&ulpdu), Ok((h, n)));
        }
    }
}
