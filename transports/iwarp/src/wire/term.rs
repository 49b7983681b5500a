//! Terminate messages (RFC 5040 §4.8, §7) with the error codes of the IANA
//! RDDP registry (RFC 6580, and RFC 6581's three MPA codes).
//!
//! The body that follows the untagged DDP header (QN 2, MSN 1, MO 0):
//!
//! ```text
//! 0: layer << 4 | error type    1: error code
//! 2: u16 BE: 0x8000 M (segment length valid), 0x4000 D (DDP header
//!    included), 0x2000 R (RDMAP header included), 13 reserved bits
//! 4: u16 BE DDP segment length, present when any of M, D, R is set
//! 6: the offending DDP header (D; 14 or 18 bytes by its T bit)
//! then: the offending RDMAP header (R; e.g. a Read Request's 28 bytes)
//! ```
//!
//! Linux siw sends the segment length field whenever it includes a header,
//! with M set alongside D; Wireshark reads it whenever D is set. This
//! module writes it whenever any of the three bits is set (zero without
//! M) and reads it the same way.

use std::fmt;

use super::ddp::{header_len_from_first_byte, DdpHeader, QN_TERMINATE};
use super::rdmap::{Opcode, READ_REQ_LEN};
use super::WireError;

/// The layer that detected an error.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum Layer {
    /// RDMAP (RFC 5040).
    Rdmap = 0,
    /// DDP (RFC 5041).
    Ddp = 1,
    /// The lower layer, MPA (RFC 5044).
    Llp = 2,
}

impl Layer {
    /// The layer numbered `v`, if there is one.
    pub fn from_u8(v: u8) -> Option<Layer> {
        match v {
            0 => Some(Layer::Rdmap),
            1 => Some(Layer::Ddp),
            2 => Some(Layer::Llp),
            _ => None,
        }
    }
}

/// What a Terminate reports: layer, error type (4 bits) and code.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct TermCause {
    /// The layer that found the error.
    pub layer: Layer,
    /// Error type within the layer (4 bits).
    pub etype: u8,
    /// Error code within the type.
    pub code: u8,
}

const fn cause(layer: Layer, etype: u8, code: u8) -> TermCause {
    TermCause { layer, etype, code }
}

/// Names of error codes: (code, name).
type CodeNames = &'static [(u8, &'static str)];

/// The registry's names: (layer, type, type name, its codes).
const NAMES: &[(Layer, u8, &str, CodeNames)] = &[
    (
        Layer::Rdmap,
        0,
        "RDMAP local catastrophic error",
        &[(0x00, "catastrophic")],
    ),
    (
        Layer::Rdmap,
        1,
        "RDMAP remote protection error",
        &[
            (0x00, "invalid STag"),
            (0x01, "base or bounds violation"),
            (0x02, "access rights violation"),
            (0x03, "STag not associated with RDMAP stream"),
            (0x04, "TO wrap"),
            (0x09, "STag cannot be invalidated"),
            (0xff, "unspecified error"),
        ],
    ),
    (
        Layer::Rdmap,
        2,
        "RDMAP remote operation error",
        &[
            (0x05, "invalid RDMAP version"),
            (0x06, "unexpected opcode"),
            (0x07, "catastrophic error, localized to RDMAP stream"),
            (0x08, "catastrophic error, global"),
            (0x09, "STag cannot be invalidated"),
            (0xff, "unspecified error"),
        ],
    ),
    (
        Layer::Ddp,
        0,
        "DDP local catastrophic error",
        &[(0x00, "catastrophic")],
    ),
    (
        Layer::Ddp,
        1,
        "DDP tagged buffer error",
        &[
            (0x00, "invalid STag"),
            (0x01, "base or bounds violation"),
            (0x02, "STag not associated with DDP stream"),
            (0x03, "TO wrap"),
            (0x04, "invalid DDP version"),
        ],
    ),
    (
        Layer::Ddp,
        2,
        "DDP untagged buffer error",
        &[
            (0x01, "invalid QN"),
            (0x02, "invalid MSN, no buffer available"),
            (0x03, "invalid MSN, MSN range is not valid"),
            (0x04, "invalid MO"),
            (0x05, "message too long for available buffer"),
            (0x06, "invalid DDP version"),
        ],
    ),
    (
        Layer::Llp,
        0,
        "MPA error",
        &[
            (0x01, "TCP connection closed, reset or lost"),
            (0x02, "CRC error"),
            (0x03, "marker and ULPDU length mismatch"),
            (0x04, "invalid MPA request or reply"),
            (0x05, "local catastrophic error"),
            (0x06, "insufficient IRD resources"),
            (0x07, "no matching RTR"),
        ],
    ),
];

#[allow(missing_docs)] // Each name is its registry entry; see `describe`.
impl TermCause {
    pub const RDMAP_LOCAL_CATASTROPHIC: Self = cause(Layer::Rdmap, 0, 0x00);
    pub const RDMAP_INVALID_STAG: Self = cause(Layer::Rdmap, 1, 0x00);
    pub const RDMAP_BASE_BOUNDS: Self = cause(Layer::Rdmap, 1, 0x01);
    pub const RDMAP_ACCESS_RIGHTS: Self = cause(Layer::Rdmap, 1, 0x02);
    pub const RDMAP_STAG_NOT_ASSOC: Self = cause(Layer::Rdmap, 1, 0x03);
    pub const RDMAP_TO_WRAP: Self = cause(Layer::Rdmap, 1, 0x04);
    pub const RDMAP_CANT_INVALIDATE: Self = cause(Layer::Rdmap, 1, 0x09);
    pub const RDMAP_PROTECTION_UNSPECIFIED: Self = cause(Layer::Rdmap, 1, 0xff);
    pub const RDMAP_BAD_VERSION: Self = cause(Layer::Rdmap, 2, 0x05);
    pub const RDMAP_UNEXPECTED_OPCODE: Self = cause(Layer::Rdmap, 2, 0x06);
    pub const RDMAP_CATASTROPHIC_STREAM: Self = cause(Layer::Rdmap, 2, 0x07);
    pub const RDMAP_CATASTROPHIC_GLOBAL: Self = cause(Layer::Rdmap, 2, 0x08);
    pub const RDMAP_OPERATION_UNSPECIFIED: Self = cause(Layer::Rdmap, 2, 0xff);
    pub const DDP_LOCAL_CATASTROPHIC: Self = cause(Layer::Ddp, 0, 0x00);
    pub const DDP_TAGGED_INVALID_STAG: Self = cause(Layer::Ddp, 1, 0x00);
    pub const DDP_TAGGED_BASE_BOUNDS: Self = cause(Layer::Ddp, 1, 0x01);
    pub const DDP_TAGGED_STAG_NOT_ASSOC: Self = cause(Layer::Ddp, 1, 0x02);
    pub const DDP_TAGGED_TO_WRAP: Self = cause(Layer::Ddp, 1, 0x03);
    pub const DDP_TAGGED_BAD_VERSION: Self = cause(Layer::Ddp, 1, 0x04);
    pub const DDP_UNTAGGED_INVALID_QN: Self = cause(Layer::Ddp, 2, 0x01);
    pub const DDP_UNTAGGED_NO_BUFFER: Self = cause(Layer::Ddp, 2, 0x02);
    pub const DDP_UNTAGGED_INVALID_MSN: Self = cause(Layer::Ddp, 2, 0x03);
    pub const DDP_UNTAGGED_INVALID_MO: Self = cause(Layer::Ddp, 2, 0x04);
    pub const DDP_UNTAGGED_TOO_LONG: Self = cause(Layer::Ddp, 2, 0x05);
    pub const DDP_UNTAGGED_BAD_VERSION: Self = cause(Layer::Ddp, 2, 0x06);
    pub const LLP_CONNECTION_LOST: Self = cause(Layer::Llp, 0, 0x01);
    pub const LLP_CRC: Self = cause(Layer::Llp, 0, 0x02);
    pub const LLP_MARKER: Self = cause(Layer::Llp, 0, 0x03);
    pub const LLP_BAD_MPA: Self = cause(Layer::Llp, 0, 0x04);
    pub const LLP_LOCAL_CATASTROPHIC: Self = cause(Layer::Llp, 0, 0x05);
    pub const LLP_INSUFFICIENT_IRD: Self = cause(Layer::Llp, 0, 0x06);
    pub const LLP_NO_RTR: Self = cause(Layer::Llp, 0, 0x07);
}

impl TermCause {
    /// A sentence for logs, e.g. "DDP tagged buffer error: invalid STag
    /// (layer 1, type 1, code 0x00)". Unknown types and codes are named
    /// as such.
    pub fn describe(&self) -> String {
        let entry = NAMES
            .iter()
            .find(|e| e.0 == self.layer && e.1 == self.etype);
        let etype = entry.map_or("unknown error type", |e| e.2);
        let code = entry
            .and_then(|e| e.3.iter().find(|c| c.0 == self.code))
            .map_or("unknown code", |c| c.1);
        format!(
            "{etype}: {code} (layer {}, type {}, code {:#04x})",
            self.layer as u8, self.etype, self.code
        )
    }

    /// The cause as the verbs layer reports it; `from_peer` if the peer
    /// sent the Terminate.
    pub fn to_verbs(&self, from_peer: bool) -> rucx_rdma::TerminateCause {
        rucx_rdma::TerminateCause {
            layer: self.layer as u8,
            etype: self.etype,
            code: self.code,
            from_peer,
        }
    }

    /// Whether the peer refused access to memory: an RDMAP remote
    /// protection error or a DDP tagged buffer error other than a bad
    /// version. These become access errors in completions, where other
    /// causes are fatal errors.
    pub fn is_access_error(&self) -> bool {
        match self.layer {
            Layer::Rdmap => self.etype == 1,
            Layer::Ddp => self.etype == 1 && self.code <= 0x03,
            Layer::Llp => false,
        }
    }
}

impl fmt::Display for TermCause {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.describe())
    }
}

const HDRCT_M: u16 = 0x8000;
const HDRCT_D: u16 = 0x4000;
const HDRCT_R: u16 = 0x2000;
/// Bytes before the optional parts: layer/type, code, header control.
const CTRL_LEN: usize = 4;
const SEG_LEN_LEN: usize = 2;

/// A Terminate message's body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Terminate {
    /// What went wrong.
    pub cause: TermCause,
    /// M: the length of the offending DDP segment.
    pub ddp_seg_len: Option<u16>,
    /// D: the offending segment's DDP header (14 or 18 bytes, by its T
    /// bit).
    pub ddp_hdr: Option<Vec<u8>>,
    /// R: the offending RDMAP header, e.g. the 28 bytes of a Read Request.
    pub rdmap_hdr: Option<Vec<u8>>,
}

impl Terminate {
    /// A Terminate with no headers attached.
    pub fn new(cause: TermCause) -> Self {
        Self {
            cause,
            ddp_seg_len: None,
            ddp_hdr: None,
            rdmap_hdr: None,
        }
    }

    /// The untagged DDP header a Terminate goes under: QN 2, MSN 1, MO 0,
    /// last.
    pub fn ddp_header() -> DdpHeader {
        DdpHeader::Untagged {
            last: true,
            opcode: Opcode::Terminate,
            inv_stag: 0,
            qn: QN_TERMINATE,
            msn: 1,
            mo: 0,
        }
    }

    /// The body that follows the DDP header.
    pub fn encode(&self) -> Vec<u8> {
        let mut hdrct = 0;
        for (set, bit) in [
            (self.ddp_seg_len.is_some(), HDRCT_M),
            (self.ddp_hdr.is_some(), HDRCT_D),
            (self.rdmap_hdr.is_some(), HDRCT_R),
        ] {
            if set {
                hdrct |= bit;
            }
        }
        let ddp = self.ddp_hdr.as_deref().unwrap_or_default();
        let rdmap = self.rdmap_hdr.as_deref().unwrap_or_default();
        let mut out = Vec::with_capacity(CTRL_LEN + SEG_LEN_LEN + ddp.len() + rdmap.len());
        out.push(((self.cause.layer as u8) << 4) | (self.cause.etype & 0x0f));
        out.push(self.cause.code);
        out.extend_from_slice(&hdrct.to_be_bytes());
        if hdrct != 0 {
            out.extend_from_slice(&self.ddp_seg_len.unwrap_or(0).to_be_bytes());
        }
        out.extend_from_slice(ddp);
        out.extend_from_slice(rdmap);
        out
    }

    /// The whole Terminate ULPDU: [`ddp_header`](Self::ddp_header), then
    /// [`encode`](Self::encode).
    pub fn encode_ulpdu(&self) -> Vec<u8> {
        let (h, n) = Self::ddp_header().to_bytes();
        let mut out = h[..n].to_vec();
        out.extend_from_slice(&self.encode());
        out
    }

    /// Decodes the body that follows a Terminate's DDP header.
    ///
    /// Refused: a body shorter than its header control bits announce
    /// ([`WireError::Truncated`]) and an unknown layer. Unknown types and
    /// codes are kept. With R, the RDMAP header is whatever follows, up to
    /// 28 bytes (siw sets R with nothing after a Send's DDP header, whose
    /// RDMAP header is its control byte). Bytes after the parts the
    /// control bits announce are ignored, as are the 13 reserved bits.
    pub fn decode(body: &[u8]) -> Result<Terminate, WireError> {
        let &[b0, code, h0, h1, ref rest @ ..] = body else {
            return Err(WireError::Truncated {
                need: CTRL_LEN,
                have: body.len(),
            });
        };
        let layer = Layer::from_u8(b0 >> 4).ok_or(WireError::BadTermLayer(b0 >> 4))?;
        let hdrct = u16::from_be_bytes([h0, h1]);
        let mut t = Terminate::new(TermCause {
            layer,
            etype: b0 & 0x0f,
            code,
        });
        if hdrct & (HDRCT_M | HDRCT_D | HDRCT_R) == 0 {
            return Ok(t);
        }
        let need = |n: usize| WireError::Truncated {
            need: n,
            have: body.len(),
        };
        let &[s0, s1, ref rest @ ..] = rest else {
            return Err(need(CTRL_LEN + SEG_LEN_LEN));
        };
        if hdrct & HDRCT_M != 0 {
            t.ddp_seg_len = Some(u16::from_be_bytes([s0, s1]));
        }
        let mut rest = rest;
        if hdrct & HDRCT_D != 0 {
            let first = rest
                .first()
                .copied()
                .ok_or(need(CTRL_LEN + SEG_LEN_LEN + 1))?;
            let len = header_len_from_first_byte(first);
            let (hdr, tail) = rest
                .split_at_checked(len)
                .ok_or(need(CTRL_LEN + SEG_LEN_LEN + len))?;
            t.ddp_hdr = Some(hdr.to_vec());
            rest = tail;
        }
        if hdrct & HDRCT_R != 0 {
            t.rdmap_hdr = Some(rest[..rest.len().min(READ_REQ_LEN)].to_vec());
        }
        Ok(t)
    }
}

#[cfg(test)]
mod tests;
