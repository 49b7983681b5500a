//! Packed remote keys of `virt` registrations.
//!
//! A key is [`KEY_LEN`] bytes, every field little-endian:
//!
//! | offset | bytes | field                                              |
//! |-------:|------:|----------------------------------------------------|
//! |      0 |     4 | tag `b"virt"`                                      |
//! |      4 |     1 | version, [`VERSION`]                               |
//! |      5 |     3 | reserved, zero                                     |
//! |      8 |     8 | net id (the net's device address starts with it)   |
//! |     16 |     4 | memory domain id within the net                    |
//! |     20 |     4 | registration index in the domain's table           |
//! |     24 |     4 | registration generation                            |
//! |     28 |     8 | registration secret, random per registration       |
//! |     36 |     8 | start address                                      |
//! |     44 |     8 | length                                             |
//! |     52 |     4 | access bits ([`Access`])                           |
//!
//! The net id names the world the key belongs to: an iface of another net
//! refuses it before sending anything. The memory domain id names the
//! owner: the target iface carries out an access only with keys of the
//! domain it was opened from. The secret ([`KeyFields::secret`]) must be
//! the registration's: index and generation alone are guessable, so
//! without it the key of one registration would lead to the others of the
//! domain. Address, length and rights are what the
//! owner declared when packing; the target ignores them and checks the
//! live registration instead.

use crate::{KeyFields, KeyLayout, Result};

/// Length of a packed key.
#[cfg(test)]
pub(super) const KEY_LEN: usize = 56;
/// Current layout version (2: the secret was added).
pub(super) const VERSION: u8 = 2;
const TAG: [u8; 4] = *b"virt";
#[cfg(test)]
const OFF_VERSION: usize = 4;
#[cfg(test)]
const OFF_NET: usize = 8;
#[cfg(test)]
const OFF_MD: usize = 16;
#[cfg(test)]
const OFF_INDEX: usize = 20;
#[cfg(test)]
const OFF_GEN: usize = 24;
#[cfg(test)]
const OFF_SECRET: usize = 28;
#[cfg(test)]
const OFF_ADDR: usize = 36;
#[cfg(test)]
const OFF_LEN: usize = 44;
#[cfg(test)]
const OFF_ACCESS: usize = 52;

/// A decoded key: whose it is and what it names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct VirtKey {
    /// Net id.
    pub(super) net: u64,
    /// Memory domain within the net.
    pub(super) md: u32,
    /// Registration, declared range and rights.
    pub(super) fields: KeyFields,
}

/// The layout (see [`KeyLayout`]): owner = net id, then domain id.
const LAYOUT: KeyLayout = KeyLayout {
    tag: TAG,
    version: VERSION,
    owner_len: 12,
    name: "virt",
};

/// Packs `k`.
pub(super) fn pack(k: &VirtKey) -> Vec<u8> {
    let mut owner = k.net.to_le_bytes().to_vec();
    owner.extend_from_slice(&k.md.to_le_bytes());
    LAYOUT.pack(&owner, &k.fields)
}

/// Checks a packed key: `InvalidParam` unless it is a well-formed key of
/// this version. Which net it belongs to is the caller's check.
pub(super) fn decode(packed: &[u8]) -> Result<VirtKey> {
    let (owner, fields) = LAYOUT.decode(packed)?;
    let mut net = [0u8; 8];
    net.copy_from_slice(&owner[..8]);
    let mut md = [0u8; 4];
    md.copy_from_slice(&owner[8..12]);
    Ok(VirtKey {
        net: u64::from_le_bytes(net),
        md: u32::from_le_bytes(md),
        fields,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Access;
    use crate::Status;

    fn sample() -> VirtKey {
        VirtKey {
            net: 0x7669_7274_0000_0005,
            md: 3,
            fields: KeyFields {
                index: 7,
                generation: 9,
                secret: 0xfedc_ba98_7654_3210,
                addr: 0x7f00_1234_5000,
                len: 4096,
                access: Access::REMOTE_READ | Access::REMOTE_WRITE,
            },
        }
    }

    fn status(k: &[u8]) -> Status {
        decode(k).unwrap_err().status()
    }

    #[test]
    fn round_trip_at_documented_offsets() {
        let k = sample();
        let b = pack(&k);
        assert_eq!(b.len(), KEY_LEN);
        assert_eq!(decode(&b).unwrap(), k);
        assert_eq!(&b[..4], b"virt");
        assert_eq!(b[OFF_VERSION..OFF_NET], [VERSION, 0, 0, 0]);
        assert_eq!(b[OFF_NET..OFF_MD], k.net.to_le_bytes());
        assert_eq!(b[OFF_MD..OFF_INDEX], 3u32.to_le_bytes());
        assert_eq!(b[OFF_INDEX..OFF_GEN], 7u32.to_le_bytes());
        assert_eq!(b[OFF_GEN..OFF_SECRET], 9u32.to_le_bytes());
        assert_eq!(
            b[OFF_SECRET..OFF_ADDR],
            0xfedc_ba98_7654_3210u64.to_le_bytes()
        );
        assert_eq!(b[OFF_ADDR..OFF_LEN], 0x7f00_1234_5000u64.to_le_bytes());
        assert_eq!(b[OFF_LEN..OFF_ACCESS], 4096u64.to_le_bytes());
        assert_eq!(b[OFF_ACCESS..], 6u32.to_le_bytes());
        let empty = VirtKey {
            fields: KeyFields {
                len: 0,
                access: Access::empty(),
                ..k.fields
            },
            ..k
        };
        assert_eq!(decode(&pack(&empty)).unwrap(), empty);
    }

    #[test]
    fn malformed_keys_are_refused() {
        let b = pack(&sample());
        for len in 0..KEY_LEN {
            assert_eq!(status(&b[..len]), Status::InvalidParam, "{len} bytes");
        }
        let mut long = b.clone();
        long.push(0);
        assert_eq!(status(&long), Status::InvalidParam);
        for at in 0..OFF_NET {
            let mut bad = b.clone();
            bad[at] ^= 0x10;
            assert_eq!(status(&bad), Status::InvalidParam, "byte {at}");
        }
        let mut bits = b.clone();
        bits[OFF_ACCESS + 2] = 1;
        assert!(decode(&bits).unwrap_err().to_string().contains("access"));
        let wraps = VirtKey {
            fields: KeyFields {
                addr: u64::MAX - 10,
                len: 11,
                ..sample().fields
            },
            ..sample()
        };
        assert_eq!(status(&pack(&wraps)), Status::InvalidParam);
        let edge = VirtKey {
            fields: KeyFields {
                len: 10,
                ..wraps.fields
            },
            ..wraps
        };
        assert!(decode(&pack(&edge)).is_ok());
    }
}
