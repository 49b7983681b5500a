//! Packed remote keys of `self` registrations.
//!
//! A key is [`KEY_LEN`] bytes, every field little-endian:
//!
//! | offset | bytes | field                                              |
//! |-------:|------:|----------------------------------------------------|
//! |      0 |     4 | tag `b"self"`                                      |
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
//! Host id, pid and nonce name the process: a key from another process is
//! refused, even one whose pid was reused on the same host. The secret
//! ([`KeyFields::secret`]) must be the registration's: index and generation
//! alone are guessable, so without it a key of one registration would lead
//! to the others. The address,
//! length and rights are what the owner declared when packing; the
//! operations ignore them and check the live registration instead.

use super::addr;
pub(super) use crate::KeyFields;
use crate::{process_nonce, Error, KeyLayout, Result};

/// Length of a packed key.
#[cfg(test)]
pub(super) const KEY_LEN: usize = 64;
/// Current layout version (2: the secret was added).
pub(super) const VERSION: u8 = 2;
const TAG: [u8; 4] = *b"self";
/// Offsets of the fields.
#[cfg(test)]
const OFF_VERSION: usize = 4;
#[cfg(test)]
const OFF_PROCESS: usize = 8;
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

/// The layout (see [`KeyLayout`]): owner = device address (host id and
/// pid) then the process nonce.
const LAYOUT: KeyLayout = KeyLayout {
    tag: TAG,
    version: VERSION,
    owner_len: addr::DEV_ADDR_LEN + 8,
    name: "self",
};

/// Packs a key for a registration of this process.
pub(super) fn pack(f: &KeyFields) -> Vec<u8> {
    pack_for(f, addr::device_addr(), process_nonce())
}

/// Packs a key as process `process` (host id + pid) with `nonce` would.
fn pack_for(f: &KeyFields, process: &[u8; addr::DEV_ADDR_LEN], nonce: u64) -> Vec<u8> {
    let mut owner = process.to_vec();
    owner.extend_from_slice(&nonce.to_le_bytes());
    LAYOUT.pack(&owner, f)
}

/// Checks a packed key: `InvalidParam` if it is not a well-formed key of
/// this version, `Unreachable` if it is one of another process.
pub(super) fn decode(packed: &[u8]) -> Result<KeyFields> {
    let (owner, fields) = LAYOUT.decode(packed)?;
    let (process, nonce) = owner.split_at(addr::DEV_ADDR_LEN);
    if process != &addr::device_addr()[..] || nonce != process_nonce().to_le_bytes() {
        return Err(Error::Unreachable(
            "self: remote key of another process".into(),
        ));
    }
    Ok(fields)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Access;
    use crate::Status;

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
        assert_eq!(&k[..4], b"self");
        assert_eq!(decode(&k).unwrap(), f);
        let empty = KeyFields {
            len: 0,
            access: Access::empty(),
            ..f
        };
        assert_eq!(decode(&pack(&empty)).unwrap(), empty);
    }

    #[test]
    fn layout_is_little_endian_at_documented_offsets() {
        let k = pack(&sample());
        assert_eq!(k[OFF_VERSION], VERSION);
        assert_eq!(k[OFF_INDEX..OFF_INDEX + 4], 7u32.to_le_bytes());
        assert_eq!(k[OFF_GEN..OFF_GEN + 4], 3u32.to_le_bytes());
        assert_eq!(
            k[OFF_SECRET..OFF_ADDR],
            0x0123_4567_89ab_cdefu64.to_le_bytes()
        );
        assert_eq!(k[OFF_ADDR..OFF_ADDR + 8], 0x7f00_1234_5000u64.to_le_bytes());
        assert_eq!(k[OFF_LEN..OFF_LEN + 8], 4096u64.to_le_bytes());
        assert_eq!(k[OFF_ACCESS..], 6u32.to_le_bytes());
        assert_eq!(
            k[OFF_PROCESS + 8..OFF_NONCE],
            std::process::id().to_le_bytes()
        );
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
        for at in 0..OFF_PROCESS {
            let mut bad = k.clone();
            bad[at] ^= 0x10;
            assert_eq!(status(&bad), Status::InvalidParam, "byte {at}");
        }
        let mut v2 = k.clone();
        v2[OFF_VERSION] = VERSION + 1;
        assert!(decode(&v2).unwrap_err().to_string().contains("version"));
    }

    #[test]
    fn unknown_access_bits_and_overflow_are_refused() {
        let mut k = pack(&sample());
        k[OFF_ACCESS + 1] = 1;
        assert_eq!(status(&k), Status::InvalidParam);
        let f = KeyFields {
            addr: u64::MAX - 10,
            len: 11,
            ..sample()
        };
        assert_eq!(status(&pack(&f)), Status::InvalidParam);
        let edge = KeyFields { len: 10, ..f };
        assert!(decode(&pack(&edge)).is_ok());
    }

    #[test]
    fn keys_of_other_processes_are_refused() {
        let me = *addr::device_addr();
        let mut other_host = me;
        other_host[0] ^= 1;
        let mut other_pid = me;
        other_pid[8] ^= 1;
        for (what, process, nonce) in [
            ("host", other_host, process_nonce()),
            ("pid", other_pid, process_nonce()),
            ("nonce", me, process_nonce() ^ 1),
        ] {
            let k = pack_for(&sample(), &process, nonce);
            assert_eq!(status(&k), Status::Unreachable, "{what}");
        }
        assert!(decode(&pack_for(&sample(), &me, process_nonce())).is_ok());
    }
}
