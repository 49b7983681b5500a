//! The packed-key layout shared by memory domains that check remote
//! accesses with a [`RegTable`](super::RegTable) (`self`, `virt`, the TCP
//! put emulation). Every field is little-endian:
//!
//! | offset | bytes | field |
//! |-------:|------:|-------|
//! | 0 | 4 | tag naming the transport |
//! | 4 | 1 | layout version |
//! | 5 | 3 | reserved, zero |
//! | 8 | `n` | owner: whose registration (transport-defined) |
//! | 8+n | 4 | registration index |
//! | 12+n | 4 | registration generation |
//! | 16+n | 8 | registration secret |
//! | 24+n | 8 | declared start address |
//! | 32+n | 8 | declared length |
//! | 40+n | 4 | declared access bits |
//!
//! Decoding checks the form only (length, tag, version, reserved bytes,
//! access bits, a range that does not wrap); whether the owner is right and
//! the registration live is for the transport and the target to check.

use super::{Access, KeyFields};
use crate::{Error, Result};
use std::collections::hash_map::RandomState;
use std::hash::{BuildHasher, Hasher};
use std::sync::OnceLock;

/// Bytes of the registration fields after the owner.
const FIELDS_LEN: usize = 36;

/// One transport's key layout.
#[derive(Debug, Clone, Copy)]
pub struct KeyLayout {
    /// The first four bytes.
    pub tag: [u8; 4],
    /// Layout version.
    pub version: u8,
    /// Bytes of the owner field.
    pub owner_len: usize,
    /// Transport name in errors (`"<name>: invalid remote key: ..."`).
    pub name: &'static str,
}

impl KeyLayout {
    /// Length of a packed key.
    pub const fn key_len(&self) -> usize {
        8 + self.owner_len + FIELDS_LEN
    }

    /// Offset of the registration fields (the index).
    pub const fn fields_at(&self) -> usize {
        8 + self.owner_len
    }

    fn invalid(&self, what: &str) -> Error {
        Error::InvalidParam(format!("{}: invalid remote key: {what}", self.name))
    }

    /// Packs `f` as registration of `owner` (`owner_len` bytes; a wrong
    /// length is padded or cut, which a debug build reports).
    pub fn pack(&self, owner: &[u8], f: &KeyFields) -> Vec<u8> {
        debug_assert_eq!(owner.len(), self.owner_len);
        let mut k = Vec::with_capacity(self.key_len());
        k.extend_from_slice(&self.tag);
        k.extend_from_slice(&[self.version, 0, 0, 0]);
        let mut o = owner.to_vec();
        o.resize(self.owner_len, 0);
        k.extend_from_slice(&o);
        k.extend_from_slice(&f.index.to_le_bytes());
        k.extend_from_slice(&f.generation.to_le_bytes());
        k.extend_from_slice(&f.secret.to_le_bytes());
        k.extend_from_slice(&f.addr.to_le_bytes());
        k.extend_from_slice(&f.len.to_le_bytes());
        k.extend_from_slice(&f.access.bits().to_le_bytes());
        k
    }

    /// The owner bytes and registration fields of a well-formed key;
    /// `InvalidParam` naming what is wrong otherwise.
    pub fn decode<'a>(&self, packed: &'a [u8]) -> Result<(&'a [u8], KeyFields)> {
        if packed.len() != self.key_len() {
            let n = packed.len();
            return Err(self.invalid(&format!("{n} bytes, expected {}", self.key_len())));
        }
        if packed[..4] != self.tag {
            return Err(self.invalid(&format!("not a {} key", self.name)));
        }
        if packed[4] != self.version {
            return Err(self.invalid(&format!("version {}", packed[4])));
        }
        if packed[5..8] != [0, 0, 0] {
            return Err(self.invalid("reserved bytes set"));
        }
        let at = self.fields_at();
        let u32_at = |o: usize| {
            let mut b = [0u8; 4];
            b.copy_from_slice(&packed[at + o..at + o + 4]);
            u32::from_le_bytes(b)
        };
        let u64_at = |o: usize| {
            let mut b = [0u8; 8];
            b.copy_from_slice(&packed[at + o..at + o + 8]);
            u64::from_le_bytes(b)
        };
        let bits = u32_at(32);
        let access = Access::from_bits(bits)
            .ok_or_else(|| self.invalid(&format!("access bits {bits:#x}")))?;
        let fields = KeyFields {
            index: u32_at(0),
            generation: u32_at(4),
            secret: u64_at(8),
            addr: u64_at(16),
            len: u64_at(24),
            access,
        };
        if fields.addr.checked_add(fields.len).is_none() {
            return Err(self.invalid("range overflows"));
        }
        Ok((&packed[8..at], fields))
    }
}

/// A random number fixed for the life of this process, to tell its keys
/// from those of an earlier process with the same pid.
pub fn process_nonce() -> u64 {
    static NONCE: OnceLock<u64> = OnceLock::new();
    // A hasher with fresh random keys that hashed nothing.
    *NONCE.get_or_init(|| RandomState::new().build_hasher().finish())
}

#[cfg(test)]
mod tests {
    use super::*;

    const L: KeyLayout = KeyLayout {
        tag: *b"test",
        version: 3,
        owner_len: 5,
        name: "test",
    };

    fn sample() -> KeyFields {
        KeyFields {
            index: 7,
            generation: 9,
            secret: 0x1122_3344_5566_7788,
            addr: 0x1000,
            len: 64,
            access: Access::REMOTE_WRITE,
        }
    }

    #[test]
    fn round_trip_at_documented_offsets() {
        let k = L.pack(b"owner", &sample());
        assert_eq!(k.len(), L.key_len());
        assert_eq!(&k[..8], b"test\x03\0\0\0");
        assert_eq!(&k[8..13], b"owner");
        assert_eq!(k[13], 7);
        assert_eq!(k[21], 0x88);
        let (owner, f) = L.decode(&k).unwrap();
        assert_eq!((owner, f), (&b"owner"[..], sample()));
    }

    #[test]
    fn malformed_keys_are_refused() {
        let k = L.pack(b"owner", &sample());
        let mut bad = vec![k[..k.len() - 1].to_vec()];
        for (at, v) in [(0, b'x'), (4, 2), (6, 1)] {
            let mut b = k.clone();
            b[at] = v;
            bad.push(b);
        }
        let mut b = k.clone();
        let n = b.len();
        b[n - 1] = 0xff; // unknown access bits
        bad.push(b);
        let mut f = sample();
        f.addr = u64::MAX;
        bad.push(L.pack(b"owner", &f));
        for b in bad {
            let e = L.decode(&b).unwrap_err();
            assert!(matches!(e, Error::InvalidParam(_)), "{e:?}");
        }
    }
}
