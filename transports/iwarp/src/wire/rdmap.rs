//! RDMAP (RFC 5040): opcodes, the control byte every DDP header carries
//! (RV = 01 in the top two bits, two reserved bits, the opcode in the low
//! four) and the RDMA Read Request header.

use super::{be32, be64, WireError};

/// RDMAP message types (RFC 5040 §4.2; RFC 7306's are not supported).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum Opcode {
    /// RDMA Write (tagged).
    Write = 0,
    /// RDMA Read Request (untagged, queue 1).
    ReadRequest = 1,
    /// RDMA Read Response (tagged).
    ReadResponse = 2,
    /// Send (untagged, queue 0).
    Send = 3,
    /// Send with Invalidate (untagged, queue 0).
    SendInv = 4,
    /// Send with Solicited Event (untagged, queue 0).
    SendSe = 5,
    /// Send with Solicited Event and Invalidate (untagged, queue 0).
    SendSeInv = 6,
    /// Terminate (untagged, queue 2).
    Terminate = 7,
}

impl Opcode {
    /// All opcodes, in order.
    pub const ALL: [Opcode; 8] = [
        Opcode::Write,
        Opcode::ReadRequest,
        Opcode::ReadResponse,
        Opcode::Send,
        Opcode::SendInv,
        Opcode::SendSe,
        Opcode::SendSeInv,
        Opcode::Terminate,
    ];

    /// The opcode numbered `v`, if there is one.
    pub fn from_u8(v: u8) -> Option<Opcode> {
        Self::ALL.get(usize::from(v)).copied()
    }

    /// Whether the message goes in tagged DDP segments (RDMA Write and
    /// Read Response).
    pub fn is_tagged(self) -> bool {
        matches!(self, Opcode::Write | Opcode::ReadResponse)
    }

    /// The untagged queue the message goes to; `None` for tagged ones.
    pub fn qn(self) -> Option<u32> {
        match self {
            Opcode::Write | Opcode::ReadResponse => None,
            Opcode::ReadRequest => Some(super::ddp::QN_READ_REQ),
            Opcode::Terminate => Some(super::ddp::QN_TERMINATE),
            Opcode::Send | Opcode::SendInv | Opcode::SendSe | Opcode::SendSeInv => {
                Some(super::ddp::QN_SEND)
            }
        }
    }

    /// Whether the untagged header's Invalidate STag field is meaningful.
    pub fn invalidates(self) -> bool {
        matches!(self, Opcode::SendInv | Opcode::SendSeInv)
    }

    /// Whether the message asks for a solicited event.
    pub fn solicited(self) -> bool {
        matches!(self, Opcode::SendSe | Opcode::SendSeInv)
    }
}

/// The RDMAP version this implementation speaks (RV field).
pub const RDMAP_VERSION: u8 = 1;

/// The RDMAP control byte for `op`.
#[inline]
pub fn ctrl_byte(op: Opcode) -> u8 {
    (RDMAP_VERSION << 6) | op as u8
}

/// The opcode in an RDMAP control byte. Refuses a version other than 1
/// and an unknown opcode; the two reserved bits are ignored.
#[inline]
pub fn parse_ctrl(b: u8) -> Result<Opcode, WireError> {
    let rv = b >> 6;
    if rv != RDMAP_VERSION {
        return Err(WireError::BadRdmapVersion(rv));
    }
    Opcode::from_u8(b & 0x0f).ok_or(WireError::BadOpcode(b & 0x0f))
}

/// Length of the RDMA Read Request header (after the untagged DDP header).
pub const READ_REQ_LEN: usize = 28;

/// The RDMA Read Request header: read `size` bytes from the source
/// (responder's) memory at `src_stag`/`src_to` into the sink (requester's)
/// memory at `sink_stag`/`sink_to`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReadRequest {
    /// Data sink STag: where the Read Responses go.
    pub sink_stag: u32,
    /// Data sink tagged offset.
    pub sink_to: u64,
    /// Bytes to read.
    pub size: u32,
    /// Data source STag.
    pub src_stag: u32,
    /// Data source tagged offset.
    pub src_to: u64,
}

impl ReadRequest {
    /// The header's bytes (all fields big-endian).
    pub fn encode(&self) -> [u8; READ_REQ_LEN] {
        let mut b = [0u8; READ_REQ_LEN];
        b[0..4].copy_from_slice(&self.sink_stag.to_be_bytes());
        b[4..12].copy_from_slice(&self.sink_to.to_be_bytes());
        b[12..16].copy_from_slice(&self.size.to_be_bytes());
        b[16..20].copy_from_slice(&self.src_stag.to_be_bytes());
        b[20..28].copy_from_slice(&self.src_to.to_be_bytes());
        b
    }

    /// Decodes the header at the start of `buf` ([`WireError::Truncated`]
    /// if shorter than [`READ_REQ_LEN`]). Bytes after it are not looked at:
    /// a Read Request message of another length is for the caller to
    /// refuse.
    pub fn decode(buf: &[u8]) -> Result<ReadRequest, WireError> {
        let short = || WireError::Truncated {
            need: READ_REQ_LEN,
            have: buf.len(),
        };
        Ok(ReadRequest {
            sink_stag: be32(buf, 0).ok_or_else(short)?,
            sink_to: be64(buf, 4).ok_or_else(short)?,
            size: be32(buf, 12).ok_or_else(short)?,
            src_stag: be32(buf, 16).ok_or_else(short)?,
            src_to: be64(buf, 20).ok_or_else(short)?,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn ctrl_bytes() {
        assert_eq!(ctrl_byte(Opcode::Send), 0x43);
        assert_eq!(ctrl_byte(Opcode::Write), 0x40);
        assert_eq!(ctrl_byte(Opcode::Terminate), 0x47);
        for op in Opcode::ALL {
            assert_eq!(parse_ctrl(ctrl_byte(op)), Ok(op));
            // Reserved bits are ignored.
            assert_eq!(parse_ctrl(ctrl_byte(op) | 0x30), Ok(op));
            assert_eq!(Opcode::from_u8(op as u8), Some(op));
            assert_eq!(op.qn().is_none(), op.is_tagged());
        }
        assert_eq!(parse_ctrl(0x03), Err(WireError::BadRdmapVersion(0)));
        assert_eq!(parse_ctrl(0x83), Err(WireError::BadRdmapVersion(2)));
        assert_eq!(parse_ctrl(0x48), Err(WireError::BadOpcode(8)));
        assert_eq!(Opcode::from_u8(8), None);
        assert_eq!(Opcode::ReadRequest.qn(), Some(1));
        assert_eq!(Opcode::Terminate.qn(), Some(2));
        assert_eq!(Opcode::SendSeInv.qn(), Some(0));
    }

    #[test]
    fn read_request_bytes() {
        let r = ReadRequest {
            sink_stag: 0x0102_0304,
            sink_to: 0x1112_1314_1516_1718,
            size: 0x2122_2324,
            src_stag: 0x3132_3334,
            src_to: 0x4142_4344_4546_4748,
        };
        let want = [
            0x01, 0x02, 0x03, 0x04, 0x11, 0x12, 0x13, 0x14, 0x15, 0x16, 0x17, 0x18, 0x21, 0x22,
            0x23, 0x24, 0x31, 0x32, 0x33, 0x34, 0x41, 0x42, 0x43, 0x44, 0x45, 0x46, 0x47, 0x48,
        ];
        assert_eq!(r.encode(), want);
        assert_eq!(ReadRequest::decode(&want), Ok(r));
        assert_eq!(
            ReadRequest::decode(&want[..27]),
            Err(WireError::Truncated { need: 28, have: 27 })
        );
    }

    proptest! {
        #[test]
        fn read_request_round_trip(v in any::<(u32, u64, u32, u32, u64)>()) {
            let r = ReadRequest { sink_stag: v.0, sink_to: v.1, size: v.2, src_stag: v.3, src_to: v.4 };
            prop_assert_eq!(ReadRequest::decode(&r.encode()), Ok(r));
        }

        #[test]
        fn ctrl_any_byte(b in any::<u8>()) {
            match parse_ctrl(b) {
                Ok(op) => prop_assert_eq!(ctrl_byte(op), b & !0x30),
                Err(_) => prop_assert!(b >> 6 != 1 || b & 0x0f > 7),
            }
        }
    }
}
