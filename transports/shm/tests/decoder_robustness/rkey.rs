//! Arbitrary bytes, and real packed keys with edits, into `rkey_unpack` of
//! the `shm` memory domain.
//!
//! A model of the documented key layout (`uct::KeyLayout` with tag
//! `b"shm\0"`, version 1 and a 12-byte owner, a process id) says which
//! bytes are a key and what it declares. The checks:
//!
//! * no panic;
//! * a key is accepted exactly when the model accepts it, and then it
//!   names the `shm` domain, keeps the bytes as given, and declares the
//!   model's range and rights: a range whose end does not wrap and access
//!   bits the build knows; a refusal is `InvalidParam`;
//! * the packed key of a registration unpacks to that registration's
//!   range and rights (also after the registration ended: only its owner
//!   can tell).
//!
//! Shared by the `decoder_robustness` test and the `shm_rkey` fuzz target,
//! so it uses the public API only.

#![allow(dead_code)]

use rucx_shm::COMPONENT;
use uct::{Access, Component, MemHandle, MemoryDomain, Status};

/// Bytes of a packed `shm` key.
pub(crate) const KEY_LEN: usize = 8 + 12 + 36;

/// What a well-formed key declares: address, length, access bits.
pub(crate) fn model(k: &[u8]) -> Option<(u64, u64, u32)> {
    if k.len() != KEY_LEN || k[..8] != *b"shm\0\x01\0\0\0" {
        return None;
    }
    let u32_at = |at: usize| u32::from_le_bytes(k[at..at + 4].try_into().unwrap());
    let u64_at = |at: usize| u64::from_le_bytes(k[at..at + 8].try_into().unwrap());
    // Owner: pid, start time. Then index, generation, secret, address,
    // length, access.
    let (pid, addr, len, access) = (u32_at(8), u64_at(36), u64_at(44), u32_at(52));
    let known = Access::all().bits();
    (pid != 0 && access & !known == 0 && addr.checked_add(len).is_some())
        .then_some((addr, len, access))
}

/// A change to a key.
#[derive(Debug, Clone)]
pub(crate) enum Edit {
    Xor(u8, u8),
    Set(u8, u8),
    Truncate(u8),
    Append(Vec<u8>),
    /// A little-endian u64 at byte `at % 49`.
    U64(u8, u64),
}

/// Applies `edits` to `k`.
pub(crate) fn edit(mut k: Vec<u8>, edits: &[Edit]) -> Vec<u8> {
    for e in edits {
        match e {
            Edit::Xor(at, x) if !k.is_empty() => {
                let n = k.len();
                k[usize::from(*at) % n] ^= x;
            }
            Edit::Set(at, x) if !k.is_empty() => {
                let n = k.len();
                k[usize::from(*at) % n] = *x;
            }
            Edit::Truncate(n) => k.truncate(usize::from(*n)),
            Edit::Append(b) => k.extend_from_slice(b),
            Edit::U64(at, x) => {
                let at = usize::from(*at) % (KEY_LEN - 7);
                if let Some(w) = k.get_mut(at..at + 8) {
                    w.copy_from_slice(&x.to_le_bytes());
                }
            }
            _ => {}
        }
    }
    k
}

/// The memory domain and a few registrations with their packed keys.
#[derive(Debug)]
pub(crate) struct Keys {
    md: Box<dyn MemoryDomain>,
    /// Packed keys and the range and rights each must unpack to.
    pub(crate) real: Vec<(Vec<u8>, u64, u64, Access)>,
    _memory: Vec<Box<[u8]>>,
}

impl Keys {
    /// Opens the memory domain and registers a few buffers: read-write,
    /// read-only, empty, and one whose registration ended.
    pub(crate) fn open() -> Keys {
        let md = COMPONENT
            .md_open()
            .expect("open the shm memory domain")
            .remove(0);
        let mut memory = Vec::new();
        let mut real = Vec::new();
        let rw = Access::REMOTE_READ | Access::REMOTE_WRITE | Access::LOCAL_WRITE;
        for (len, access, end) in [
            (4096, rw, false),
            (100, Access::REMOTE_READ, false),
            (0, Access::REMOTE_READ, false),
            (64, Access::REMOTE_WRITE, true),
        ] {
            let mut m = vec![0u8; len].into_boxed_slice();
            // SAFETY: `m` is `len` writable bytes (a dangling, non-null
            // pointer for 0) that live in `Keys` (the heap block does not
            // move with the box) for as long as the registration, which is
            // never used for a transfer here.
            let h: MemHandle = unsafe { md.mem_reg(m.as_mut_ptr(), len, access) }.expect("mem_reg");
            let packed = md.mkey_pack(&h).expect("mkey_pack");
            if end {
                md.mem_dereg(&h).expect("mem_dereg");
            }
            real.push((packed, m.as_ptr() as u64, len as u64, access));
            memory.push(m);
        }
        Keys {
            md,
            real,
            _memory: memory,
        }
    }

    /// Unpacks `k`; panics with a description of the first broken
    /// property. Returns whether it was accepted.
    pub(crate) fn check(&self, k: &[u8]) -> bool {
        let want = model(k);
        match self.md.rkey_unpack(k) {
            Ok(key) => {
                let Some((addr, len, access)) = want else {
                    panic!("accepted a malformed key {k:02x?}: {key:?}");
                };
                assert_eq!(key.md_name, "shm");
                assert_eq!(&key.packed[..], k, "the key's bytes");
                assert_eq!((key.addr, key.len), (addr, len), "the declared range");
                assert_eq!(key.access.bits(), access, "the declared rights");
                assert!(key.addr.checked_add(key.len).is_some(), "range wraps");
                assert!(Access::all().contains(key.access), "unknown access bits");
                true
            }
            Err(e) => {
                assert!(want.is_none(), "refused a well-formed key {k:02x?}: {e}");
                assert_eq!(e.status(), Status::InvalidParam, "{e}");
                false
            }
        }
    }

    /// Checks the real key `i % n` with `edits`; unedited it must unpack
    /// to its registration.
    pub(crate) fn check_real(&self, i: usize, edits: &[Edit]) -> bool {
        let (packed, addr, len, access) = &self.real[i % self.real.len()];
        if edits.is_empty() {
            let key = self.md.rkey_unpack(packed).expect("a real key unpacks");
            assert_eq!((key.addr, key.len, key.access), (*addr, *len, *access));
        }
        self.check(&edit(packed.clone(), edits))
    }
}
