//! Packed remote keys of `tcp` registrations, and who owns them.
//!
//! A key is [`KEY_LEN`] bytes, every field little-endian:
//!
//! | offset | bytes | field                                              |
//! |-------:|------:|----------------------------------------------------|
//! |      0 |     4 | tag `b"tcp\0"`                                     |
//! |      4 |     1 | version, [`VERSION`]                               |
//! |      5 |     3 | reserved, zero                                     |
//! |      8 |     8 | host id (`ucs::sys::host_id`)                      |
//! |     16 |     4 | process id                                         |
//! |     20 |     8 | process nonce, random per process                  |
//! |     28 |     4 | registration index in the table                    |
//! |     32 |     4 | registration generation                            |
//! |     36 |     8 | registration secret, random per registration       |
//! |     44 |     8 | start address                                      |
//! |     52 |     8 | length                                             |
//! |     60 |     4 | access bits ([`Access`])                           |
//!
//! Host id, pid and nonce ([`Owner`]) name the process that packed the key.
//! The initiator of a put cannot check them (the key is its peer's), so
//! [`decode`] checks only the format; the target compares the owner with
//! its own ([`Owner::is_me`]) when a put arrives, so that a key packed by
//! another process (say, an earlier one that listened on the same port)
//! names nothing. The secret ([`KeyFields::secret`]) travels in each PUT
//! header and must be the registration's: index and generation alone are
//! guessable, and a peer that got one key of the process knows the owner
//! fields, so without it one key would lead to every registration of the
//! process. Address, length and rights are what the owner declared
//! when packing; the target ignores them and checks the live registration.

use std::sync::OnceLock;

use uct::ucs::Result;
use uct::{KeyFields, KeyLayout};

/// Length of a packed key.
#[cfg(test)]
pub(crate) const KEY_LEN: usize = 64;
/// Current layout version (2: the secret was added).
pub(crate) const VERSION: u8 = 2;
const TAG: [u8; 4] = *b"tcp\0";
#[cfg(test)]
const OFF_VERSION: usize = 4;
#[cfg(test)]
const OFF_HOST: usize = 8;
#[cfg(test)]
const OFF_PID: usize = 16;
#[cfg(test)]
const OFF_NONCE: usize = 20;
#[cfg(test)]
const OFF_INDEX: usize = 28;
#[cfg(test)]
const OFF_GEN: usize = 32;
#[cfg(test)]
const OFF_SECRET: usize = 36;
#[cfg(test)]
const OFF_ADDR: usize = 44;
#[cfg(test)]
const OFF_LEN: usize = 52;
#[cfg(test)]
const OFF_ACCESS: usize = 60;

/// The process a key belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Owner {
    pub(crate) host_id: u64,
    pub(crate) pid: u32,
    pub(crate) nonce: u64,
}

impl Owner {
    /// This process.
    pub(crate) fn me() -> Owner {
        static ME: OnceLock<Owner> = OnceLock::new();
        *ME.get_or_init(|| Owner {
            host_id: uct::ucs::sys::host_id(),
            pid: std::process::id(),
            nonce: uct::process_nonce(),
        })
    }

    /// Whether this is the current process.
    pub(crate) fn is_me(&self) -> bool {
        *self == Owner::me()
    }
}

/// A key as its format defines it: the owner and the registration.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Key {
    pub(crate) owner: Owner,
    pub(crate) fields: KeyFields,
}

/// Packs a key for a registration of this process.
pub(crate) fn pack(f: &KeyFields) -> Vec<u8> {
    pack_as(&Owner::me(), f)
}

/// The layout (see [`KeyLayout`]): owner = host id, pid, nonce.
const LAYOUT: KeyLayout = KeyLayout {
    tag: TAG,
    version: VERSION,
    owner_len: 20,
    name: "tcp",
};

/// Packs a key as process `owner` would.
pub(crate) fn pack_as(owner: &Owner, f: &KeyFields) -> Vec<u8> {
    let mut o = owner.host_id.to_le_bytes().to_vec();
    o.extend_from_slice(&owner.pid.to_le_bytes());
    o.extend_from_slice(&owner.nonce.to_le_bytes());
    LAYOUT.pack(&o, f)
}

/// Checks the format of a packed key (`InvalidParam` if it is not a
/// well-formed key of this version): length, tag, version, reserved
/// bytes, access bits, a declared range that does not wrap. Whose key it
/// is, and whether its registration is live, is the target's to check.
pub(crate) fn decode(packed: &[u8]) -> Result<Key> {
    let (o, fields) = LAYOUT.decode(packed)?;
    let mut host = [0u8; 8];
    host.copy_from_slice(&o[..8]);
    let mut pid = [0u8; 4];
    pid.copy_from_slice(&o[8..12]);
    let mut nonce = [0u8; 8];
    nonce.copy_from_slice(&o[12..20]);
    let owner = Owner {
        host_id: u64::from_le_bytes(host),
        pid: u32::from_le_bytes(pid),
        nonce: u64::from_le_bytes(nonce),
    };
    Ok(Key { owner, fields })
}

#[cfg(test)]
mod tests {
    use super::*;
    use uct::ucs::Status;
    use uct::Access;

    fn sample() -> KeyFields {
        KeyFields {
            index: 7,
            generation: 3,
            secret: 0x0123_4567_89ab_cdef,
            addr: 0x7f00_1234_5000,
            len: 4096,
            access: Access::REMOTE_READ | Access::REMOTE_WRITE,
        }
    }

    fn status(k: &[u8]) -> Status {
        decode(k).unwrap_err().status()
    }

    #[test]
    fn round_trip() {
        let f = sample();
        let k = pack(&f);
        assert_eq!(k.len(), KEY_LEN);
        assert_eq!(&k[..4], b"tcp\0");
        let d = decode(&k).unwrap();
        assert_eq!(d.fields, f);
        assert!(d.owner.is_me());
        let empty = KeyFields {
            len: 0,
            access: Access::empty(),
            ..f
        };
        assert_eq!(decode(&pack(&empty)).unwrap().fields, empty);
        let edge = KeyFields {
            addr: u64::MAX - 10,
            len: 10,
            ..f
        };
        assert_eq!(decode(&pack(&edge)).unwrap().fields, edge);
    }

    #[test]
    fn layout_is_little_endian_at_documented_offsets() {
        let k = pack(&sample());
        let me = Owner::me();
        assert_eq!(k[OFF_VERSION], VERSION);
        assert_eq!(k[OFF_HOST..OFF_PID], me.host_id.to_le_bytes());
        assert_eq!(k[OFF_PID..OFF_NONCE], std::process::id().to_le_bytes());
        assert_eq!(k[OFF_NONCE..OFF_INDEX], me.nonce.to_le_bytes());
        assert_eq!(k[OFF_INDEX..OFF_GEN], 7u32.to_le_bytes());
        assert_eq!(k[OFF_GEN..OFF_SECRET], 3u32.to_le_bytes());
        assert_eq!(
            k[OFF_SECRET..OFF_ADDR],
            0x0123_4567_89ab_cdefu64.to_le_bytes()
        );
        assert_eq!(k[OFF_ADDR..OFF_LEN], 0x7f00_1234_5000u64.to_le_bytes());
        assert_eq!(k[OFF_LEN..OFF_ACCESS], 4096u64.to_le_bytes());
        assert_eq!(k[OFF_ACCESS..], 6u32.to_le_bytes());
    }

    #[test]
    fn wrong_length_is_refused() {
        let k = pack(&sample());
        for len in 0..KEY_LEN {
            assert_eq!(status(&k[..len]), Status::InvalidParam, "{len}");
        }
        let mut long = k.clone();
        long.push(0);
        assert_eq!(status(&long), Status::InvalidParam);
    }

    #[test]
    fn bad_tag_version_and_reserved_are_refused() {
        let k = pack(&sample());
        for at in 0..OFF_HOST {
            for bit in 0..8 {
                let mut bad = k.clone();
                bad[at] ^= 1 << bit;
                assert_eq!(status(&bad), Status::InvalidParam, "byte {at} bit {bit}");
            }
        }
        let mut v2 = k.clone();
        v2[OFF_VERSION] = VERSION + 1;
        assert!(decode(&v2).unwrap_err().to_string().contains("version"));
        let mut other = k;
        other[..4].copy_from_slice(b"self");
        assert!(decode(&other)
            .unwrap_err()
            .to_string()
            .contains("not a tcp"));
    }

    #[test]
    fn unknown_access_bits_and_overflow_are_refused() {
        for bit in 4..32 {
            let mut k = pack(&sample());
            k[OFF_ACCESS..].copy_from_slice(&(1u32 << bit).to_le_bytes());
            assert_eq!(status(&k), Status::InvalidParam, "bit {bit}");
        }
        let f = KeyFields {
            addr: u64::MAX - 10,
            len: 11,
            ..sample()
        };
        assert!(decode(&pack(&f))
            .unwrap_err()
            .to_string()
            .contains("overflows"));
    }

    #[test]
    fn other_processes_keys_decode_but_are_not_mine() {
        let me = Owner::me();
        for (what, other) in [
            (
                "host",
                Owner {
                    host_id: me.host_id ^ 1,
                    ..me
                },
            ),
            (
                "pid",
                Owner {
                    pid: me.pid ^ 1,
                    ..me
                },
            ),
            (
                "nonce",
                Owner {
                    nonce: me.nonce ^ (1 << 63),
                    ..me
                },
            ),
        ] {
            let d = decode(&pack_as(&other, &sample())).unwrap();
            assert_eq!(d.owner, other, "{what}");
            assert!(!d.owner.is_me(), "{what}");
        }
        assert!(decode(&pack_as(&me, &sample())).unwrap().owner.is_me());
    }

    #[test]
    fn random_bytes_never_panic() {
        let mut x = 0x1234_5678_9abc_def1u64;
        let mut next = || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        };
        let good = pack(&sample());
        for round in 0..2000 {
            let len = usize::from(next()) % (KEY_LEN + 8);
            let mut k: Vec<u8> = (0..len).map(|_| next()).collect();
            if round % 2 == 0 && len >= OFF_HOST {
                // Valid head, random rest: exercises the later checks.
                k[..OFF_HOST].copy_from_slice(&good[..OFF_HOST]);
            }
            if let Ok(d) = decode(&k) {
                assert_eq!(k.len(), KEY_LEN);
                assert_eq!(pack_as(&d.owner, &d.fields), k, "re-encodes");
            }
        }
    }
}
