//! iWARP wire formats, without I/O: MPA connection setup frames and FPDU
//! framing (RFC 5044, with RFC 6581's enhanced connection setup), DDP
//! segment headers (RFC 5041), RDMAP control bytes, Read Requests
//! (RFC 5040) and Terminate messages.
//!
//! # Map
//!
//! * [`crc`]: CRC32c, with the SSE4.2 instruction where the CPU has it.
//! * [`mpa`]: MPA Request/Reply frames and RFC 6581's IRD/ORD word.
//! * [`fpdu`]: FPDU framing: length prefix, pad, CRC trailer; MULPDU.
//! * [`ddp`]: tagged and untagged DDP headers (with the RDMAP control byte).
//! * [`rdmap`]: RDMAP opcodes, the control byte and the Read Request header.
//! * [`term`]: Terminate messages and their error codes.
//!
//! # Invariants
//!
//! * No decoder panics or indexes out of range, whatever the input; every
//!   refusal is a [`WireError`].
//! * Nothing on the per-FPDU path allocates ([`fpdu`], [`ddp`], [`rdmap`]);
//!   MPA frames and Terminates, which appear once per connection, do.
//! * Multi-byte fields are big-endian, except the FPDU CRC, which goes on
//!   the wire least significant byte first (as Linux siw sends it and
//!   Wireshark checks it).
//! * Reserved bits: MPA frames must have them clear (a frame is refused
//!   otherwise); in DDP and RDMAP headers and Terminates they are ignored
//!   on receipt and sent as zero, as RFC 5040 and 5041 ask.
//!
//! What this module does not do: connection state, MSN/MO/QN bookkeeping,
//! STag checks and deciding which Terminate to send all belong to the
//! engine; the decoders only say whether bytes are well formed.

use std::fmt;

pub mod crc;
pub mod ddp;
pub mod fpdu;
pub mod mpa;
pub mod rdmap;
pub mod term;

pub use ddp::DdpHeader;
pub use rdmap::{Opcode, ReadRequest};
pub use term::{Layer, TermCause, Terminate};

#[cfg(test)]
mod checks;
#[cfg(test)]
mod tests_tshark;

/// Why bytes from the wire were refused.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum WireError {
    /// A fixed-size structure needs `need` bytes, only `have` were given.
    Truncated {
        /// Bytes the structure takes.
        need: usize,
        /// Bytes given.
        have: usize,
    },
    /// An MPA frame starts with neither [`mpa::KEY_REQ`] nor
    /// [`mpa::KEY_REP`].
    BadKey,
    /// An MPA revision above 2.
    BadRev(u8),
    /// The peer asks for MPA markers, which this implementation does not
    /// do (see [`mpa::MpaFrame::check_no_markers`]).
    Markers,
    /// Reserved flag bits set in an MPA frame (including the enhanced bit
    /// in a frame below revision 2).
    ReservedBits,
    /// An MPA request with the reject bit set (only replies may have it).
    RejectInRequest,
    /// An MPA frame announces more private data than
    /// [`mpa::MAX_PRIVATE_DATA`].
    PrivateDataTooLong(usize),
    /// The CRC computed over an FPDU (`expected`) differs from its trailer
    /// (`got`).
    BadCrc {
        /// CRC computed over the received bytes.
        expected: u32,
        /// CRC found in the FPDU's trailer.
        got: u32,
    },
    /// A DDP version (DV) other than 1.
    BadDdpVersion(u8),
    /// An RDMAP version (RV) other than 1.
    BadRdmapVersion(u8),
    /// An RDMAP opcode this implementation does not know (8 and above).
    BadOpcode(u8),
    /// A tagged opcode in an untagged DDP segment, or the other way round.
    WrongBufferModel {
        /// The opcode in the RDMAP control byte.
        opcode: Opcode,
        /// Whether the segment's T bit was set.
        tagged: bool,
    },
    /// A length that cannot hold what it must: a ULPDU shorter than its
    /// DDP header, or rev 2 private data too short for the IRD/ORD word.
    BadLength(usize),
    /// A Terminate names a layer other than RDMAP, DDP and LLP.
    BadTermLayer(u8),
}

impl fmt::Display for WireError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Truncated { need, have } => {
                write!(f, "truncated: {need} bytes needed, {have} given")
            }
            Self::BadKey => f.write_str("not an MPA request or reply key"),
            Self::BadRev(r) => write!(f, "unsupported MPA revision {r}"),
            Self::Markers => f.write_str("MPA markers requested, not supported"),
            Self::ReservedBits => f.write_str("reserved MPA flag bits set"),
            Self::RejectInRequest => f.write_str("reject bit set in an MPA request"),
            Self::PrivateDataTooLong(n) => write!(
                f,
                "MPA private data of {n} bytes, more than {}",
                mpa::MAX_PRIVATE_DATA
            ),
            Self::BadCrc { expected, got } => {
                write!(f, "FPDU CRC {got:#010x}, computed {expected:#010x}")
            }
            Self::BadDdpVersion(v) => write!(f, "DDP version {v}, expected 1"),
            Self::BadRdmapVersion(v) => write!(f, "RDMAP version {v}, expected 1"),
            Self::BadOpcode(op) => write!(f, "unknown RDMAP opcode {op:#x}"),
            Self::WrongBufferModel { opcode, tagged } => write!(
                f,
                "RDMAP {opcode:?} in a {} DDP segment",
                if *tagged { "tagged" } else { "untagged" }
            ),
            Self::BadLength(n) => write!(f, "length {n} too short for its header"),
            Self::BadTermLayer(l) => write!(f, "Terminate names unknown layer {l}"),
        }
    }
}

impl std::error::Error for WireError {}

/// Reads a big-endian `u16` at `at`; `None` if `b` is too short.
fn be16(b: &[u8], at: usize) -> Option<u16> {
    Some(u16::from_be_bytes(b.get(at..at + 2)?.try_into().ok()?))
}

/// Reads a big-endian `u32` at `at`; `None` if `b` is too short.
fn be32(b: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_be_bytes(b.get(at..at + 4)?.try_into().ok()?))
}

/// Reads a big-endian `u64` at `at`; `None` if `b` is too short.
fn be64(b: &[u8], at: usize) -> Option<u64> {
    Some(u64::from_be_bytes(b.get(at..at + 8)?.try_into().ok()?))
}
