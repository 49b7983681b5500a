//! Wire format of one-sided operations emulated over active messages.
//!
//! Used where no lane of the endpoint can reach the remote memory itself
//! (atomics always; put and get without a zero-copy lane). The target
//! executes each request against its own registration table and answers
//! with `RMA_REPLY`. All integers are little-endian.
//!
//! Every request names the target's registration by a key reference
//! (24 bytes): owner (the target context's nonce): u64, index: u32,
//! generation: u32, secret: u64.
//!
//! | AM id | name | header | then |
//! |---|---|---|---|
//! | 16 | `RMA_PUT` | request: u64, key reference, address: u64 | the data |
//! | 17 | `RMA_GET` | request: u64, key reference, address, length, offset: u64 each | — |
//! | 18 | `RMA_ATOMIC` | request: u64, key reference, address: u64, op: u8, width: u8, 6 zero bytes, value, compare: u64 each | — |
//! | 19 | `RMA_REPLY` | request, offset, value: u64 each, status: i32, 4 zero bytes | data read (get) |
//!
//! `request` is the initiator's request id, handed back in the reply;
//! `offset` (get) is where the reply's data goes in the initiator's buffer.
//! `status` is 0 or a UCX status code: the target refused the access and
//! touched nothing. Everything is decoded from untrusted bytes: a short
//! header, an unknown operation or width, non-zero padding is a
//! [`PeerMisbehaved`], never a panic.

use crate::rma::atomic::{op_code, op_of_code, AtomicOp, AtomicValue};
use crate::ucs::PeerMisbehaved;
use crate::uct::AmId;

/// Write data into the target's memory.
pub const AM_RMA_PUT: AmId = 16;
/// Read the target's memory.
pub const AM_RMA_GET: AmId = 17;
/// An atomic operation on the target's memory.
pub const AM_RMA_ATOMIC: AmId = 18;
/// The target's answer to any of the above.
pub const AM_RMA_REPLY: AmId = 19;

/// Bytes of [`KeyRef`] on the wire.
pub const KEY_REF_LEN: usize = 24;
/// Header bytes of `RMA_PUT` before the data.
pub const PUT_HDR: usize = 16 + KEY_REF_LEN;
/// Bytes of `RMA_GET`.
pub const GET_LEN: usize = 32 + KEY_REF_LEN;
/// Bytes of `RMA_ATOMIC`.
pub const ATOMIC_LEN: usize = 40 + KEY_REF_LEN;
/// Header bytes of `RMA_REPLY` before the data.
pub const REPLY_HDR: usize = 32;

/// Names a registration in the target's table.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KeyRef {
    /// The target context's nonce.
    pub owner: u64,
    /// Slot of the registration.
    pub index: u32,
    /// Generation of the slot.
    pub generation: u32,
    /// The registration's secret.
    pub secret: u64,
}

/// `RMA_GET` fields.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GetReq {
    /// Initiator's request.
    pub req: u64,
    /// The registration.
    pub key: KeyRef,
    /// Remote address to read.
    pub addr: u64,
    /// Bytes to read.
    pub len: u64,
    /// Where they go in the initiator's buffer.
    pub offset: u64,
}

/// `RMA_ATOMIC` fields.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AtomicReq {
    /// Initiator's request.
    pub req: u64,
    /// The registration.
    pub key: KeyRef,
    /// Remote address of the word.
    pub addr: u64,
    /// The operation.
    pub op: AtomicOp,
    /// The operand, with the word's width.
    pub value: AtomicValue,
    /// Compare value of `Cswap` (low bits for 32-bit words).
    pub compare: u64,
}

/// `RMA_REPLY` fields.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Reply {
    /// Initiator's request.
    pub req: u64,
    /// Offset of the data (get).
    pub offset: u64,
    /// Old value (atomics).
    pub value: u64,
    /// 0, or the status code of the refusal.
    pub status: i32,
}

fn short(what: &'static str, len: usize) -> PeerMisbehaved {
    PeerMisbehaved::Invalid {
        what,
        detail: format!("{len} bytes"),
    }
}

fn u64_at(b: &[u8], at: usize) -> u64 {
    let mut a = [0u8; 8];
    a.copy_from_slice(&b[at..at + 8]);
    u64::from_le_bytes(a)
}

fn u32_at(b: &[u8], at: usize) -> u32 {
    let mut a = [0u8; 4];
    a.copy_from_slice(&b[at..at + 4]);
    u32::from_le_bytes(a)
}

impl KeyRef {
    fn put(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.owner.to_le_bytes());
        out.extend_from_slice(&self.index.to_le_bytes());
        out.extend_from_slice(&self.generation.to_le_bytes());
        out.extend_from_slice(&self.secret.to_le_bytes());
    }

    /// Decodes the 24 bytes at `b[at..]` (the caller checked the length).
    fn at(b: &[u8], at: usize) -> KeyRef {
        KeyRef {
            owner: u64_at(b, at),
            index: u32_at(b, at + 8),
            generation: u32_at(b, at + 12),
            secret: u64_at(b, at + 16),
        }
    }
}

/// Header of an `RMA_PUT` (the data follows it).
pub fn encode_put(req: u64, key: &KeyRef, addr: u64) -> Vec<u8> {
    let mut v = Vec::with_capacity(PUT_HDR);
    v.extend_from_slice(&req.to_le_bytes());
    key.put(&mut v);
    v.extend_from_slice(&addr.to_le_bytes());
    v
}

/// `(request, key, address, data)` of an `RMA_PUT`.
pub fn decode_put(b: &[u8]) -> Result<(u64, KeyRef, u64, &[u8]), PeerMisbehaved> {
    if b.len() < PUT_HDR {
        return Err(short("RMA put", b.len()));
    }
    Ok((
        u64_at(b, 0),
        KeyRef::at(b, 8),
        u64_at(b, 8 + KEY_REF_LEN),
        &b[PUT_HDR..],
    ))
}

impl GetReq {
    /// The message.
    pub fn encode(&self) -> Vec<u8> {
        let mut v = Vec::with_capacity(GET_LEN);
        v.extend_from_slice(&self.req.to_le_bytes());
        self.key.put(&mut v);
        for x in [self.addr, self.len, self.offset] {
            v.extend_from_slice(&x.to_le_bytes());
        }
        v
    }

    /// Decodes an `RMA_GET`.
    pub fn decode(b: &[u8]) -> Result<GetReq, PeerMisbehaved> {
        if b.len() != GET_LEN {
            return Err(short("RMA get", b.len()));
        }
        let k = 8 + KEY_REF_LEN;
        Ok(GetReq {
            req: u64_at(b, 0),
            key: KeyRef::at(b, 8),
            addr: u64_at(b, k),
            len: u64_at(b, k + 8),
            offset: u64_at(b, k + 16),
        })
    }
}

impl AtomicReq {
    /// The message.
    pub fn encode(&self) -> Vec<u8> {
        let mut v = Vec::with_capacity(ATOMIC_LEN);
        v.extend_from_slice(&self.req.to_le_bytes());
        self.key.put(&mut v);
        v.extend_from_slice(&self.addr.to_le_bytes());
        v.push(op_code(self.op));
        v.push(self.value.width() as u8);
        v.extend_from_slice(&[0; 6]);
        v.extend_from_slice(&self.value.as_u64().to_le_bytes());
        v.extend_from_slice(&self.compare.to_le_bytes());
        v
    }

    /// Decodes an `RMA_ATOMIC`.
    pub fn decode(b: &[u8]) -> Result<AtomicReq, PeerMisbehaved> {
        if b.len() != ATOMIC_LEN {
            return Err(short("RMA atomic", b.len()));
        }
        let k = 8 + KEY_REF_LEN;
        let bad = |what, detail: String| PeerMisbehaved::Invalid { what, detail };
        let op = op_of_code(b[k + 8])
            .ok_or_else(|| bad("RMA atomic operation", format!("{}", b[k + 8])))?;
        let width = usize::from(b[k + 9]);
        if b[k + 10..k + 16].iter().any(|&x| x != 0) {
            return Err(bad("RMA atomic padding", "not zero".into()));
        }
        let raw = u64_at(b, k + 16);
        let value = AtomicValue::of_width(width, raw)
            .ok_or_else(|| bad("RMA atomic width", format!("{width}")))?;
        if width == 4 && raw > u64::from(u32::MAX) {
            return Err(bad("RMA atomic operand", format!("{raw:#x} for 32 bits")));
        }
        Ok(AtomicReq {
            req: u64_at(b, 0),
            key: KeyRef::at(b, 8),
            addr: u64_at(b, k),
            op,
            value,
            compare: u64_at(b, k + 24),
        })
    }
}

impl Reply {
    /// The header (data, if any, follows).
    pub fn encode(&self) -> Vec<u8> {
        let mut v = Vec::with_capacity(REPLY_HDR);
        for x in [self.req, self.offset, self.value] {
            v.extend_from_slice(&x.to_le_bytes());
        }
        v.extend_from_slice(&self.status.to_le_bytes());
        v.extend_from_slice(&[0; 4]);
        v
    }

    /// Decodes an `RMA_REPLY`: the fields and the data after them.
    pub fn decode(b: &[u8]) -> Result<(Reply, &[u8]), PeerMisbehaved> {
        if b.len() < REPLY_HDR {
            return Err(short("RMA reply", b.len()));
        }
        if b[28..32].iter().any(|&x| x != 0) {
            return Err(PeerMisbehaved::Invalid {
                what: "RMA reply padding",
                detail: "not zero".into(),
            });
        }
        let r = Reply {
            req: u64_at(b, 0),
            offset: u64_at(b, 8),
            value: u64_at(b, 16),
            status: u32_at(b, 24) as i32,
        };
        Ok((r, &b[REPLY_HDR..]))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const KEY: KeyRef = KeyRef {
        owner: 0x0102_0304_0506_0708,
        index: 9,
        generation: 10,
        secret: 0xdead_beef_cafe_f00d,
    };

    #[test]
    fn layouts_round_trip() {
        let mut p = encode_put(7, &KEY, 0x1000);
        assert_eq!(p.len(), PUT_HDR);
        p.extend_from_slice(b"abc");
        assert_eq!(decode_put(&p).unwrap(), (7, KEY, 0x1000, &b"abc"[..]));
        assert_eq!(
            &p[8..16],
            &KEY.owner.to_le_bytes(),
            "owner right after the request"
        );

        let g = GetReq {
            req: 1,
            key: KEY,
            addr: 2,
            len: 3,
            offset: 4,
        };
        let e = g.encode();
        assert_eq!(e.len(), GET_LEN);
        assert_eq!(GetReq::decode(&e).unwrap(), g);

        for value in [AtomicValue::U32(0xffff_ffff), AtomicValue::U64(u64::MAX)] {
            let a = AtomicReq {
                req: 5,
                key: KEY,
                addr: 8,
                op: AtomicOp::Cswap,
                value,
                compare: 6,
            };
            let e = a.encode();
            assert_eq!(e.len(), ATOMIC_LEN);
            assert_eq!(AtomicReq::decode(&e).unwrap(), a);
        }

        let r = Reply {
            req: 1,
            offset: 2,
            value: 3,
            status: -23,
        };
        let mut e = r.encode();
        e.extend_from_slice(b"xy");
        assert_eq!(Reply::decode(&e).unwrap(), (r, &b"xy"[..]));
    }

    #[test]
    fn malformed_messages_are_refused() {
        assert!(decode_put(&[0; PUT_HDR - 1]).is_err());
        assert!(GetReq::decode(&[0; GET_LEN + 1]).is_err());
        assert!(Reply::decode(&[0; REPLY_HDR - 1]).is_err());
        let a = AtomicReq {
            req: 5,
            key: KEY,
            addr: 8,
            op: AtomicOp::Add,
            value: AtomicValue::U32(1),
            compare: 0,
        }
        .encode();
        let k = 8 + KEY_REF_LEN;
        let mut bad_op = a.clone();
        bad_op[k + 8] = 6;
        let mut bad_width = a.clone();
        bad_width[k + 9] = 2;
        let mut bad_pad = a.clone();
        bad_pad[k + 12] = 1;
        let mut wide_operand = a.clone();
        wide_operand[k + 20] = 1;
        for m in [bad_op, bad_width, bad_pad, wide_operand] {
            assert!(AtomicReq::decode(&m).is_err());
        }
        let mut r = Reply {
            req: 0,
            offset: 0,
            value: 0,
            status: 0,
        }
        .encode();
        r[30] = 1;
        assert!(Reply::decode(&r).is_err());
    }
}
