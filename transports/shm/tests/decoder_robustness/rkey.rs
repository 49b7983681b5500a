//! Arbitrary bytes, and real packed keys with edits, into `rkey_unpack` of
//! the `shm` memory domain.
//!
//! A model of the documented key layout (`uct::KeyLayout` with tag
//! `b"shm\0"`, version 2 and a 12-byte owner, a process id, then for
//! memory the domain allocated a 44-byte segment entry: host id,
//! descriptor, segment length) says which bytes are a key and what it
//! declares. The checks:
//!
//! * no panic;
//! * a key is accepted exactly when the model accepts it, and then it
//!   names the `shm` domain, keeps the bytes as given, and declares the
//!   model's range and rights: a range whose end does not wrap and access
//!   bits the build knows; a refusal is `InvalidParam`;
//! * the packed key of a registration unpacks to that registration's
//!   range and rights (also after the registration ended: only its owner
//!   can tell); the key of an allocation also maps, through the domain's
//!   `rkey_ptr`, to that allocation's memory.
//!
//! Shared by the `decoder_robustness` test and the `shm_rkey` fuzz target,
//! so it uses the public API only.

#![allow(dead_code)]

use rucx_shm::COMPONENT;
use uct::{Access, Component, MemAlloc, MemHandle, MemoryDomain, Status};

/// Bytes of a packed `shm` key without segment entry.
pub(crate) const KEY_LEN: usize = 8 + 12 + 36;
/// Bytes of a packed `shm` key with a segment entry.
pub(crate) const SEG_KEY_LEN: usize = KEY_LEN + 32 + 4 + 8;
/// The first eight bytes of every key.
pub(crate) const HEADER: [u8; 8] = *b"shm\0\x02\0\0\0";

/// What a well-formed key declares: address, length, access bits.
pub(crate) fn model(k: &[u8]) -> Option<(u64, u64, u32)> {
    if (k.len() != KEY_LEN && k.len() != SEG_KEY_LEN) || k[..8] != HEADER {
        return None;
    }
    let u32_at = |at: usize| u32::from_le_bytes(k[at..at + 4].try_into().unwrap());
    let u64_at = |at: usize| u64::from_le_bytes(k[at..at + 8].try_into().unwrap());
    // Owner: pid, start time. Then index, generation, secret, address,
    // length, access.
    let (pid, addr, len, access) = (u32_at(8), u64_at(36), u64_at(44), u32_at(52));
    let known = Access::all().bits();
    let ok = pid != 0 && access & !known == 0 && addr.checked_add(len).is_some();
    // Segment entry: host (any 32 bytes), descriptor, segment length.
    let seg_ok = k.len() == KEY_LEN || {
        let (fd, seg_len) = (u32_at(88), u64_at(92));
        fd <= i32::MAX as u32 && seg_len != 0 && seg_len <= isize::MAX as u64 && len <= seg_len
    };
    (ok && seg_ok).then_some((addr, len, access))
}

/// A change to a key.
#[derive(Debug, Clone)]
pub(crate) enum Edit {
    Xor(u8, u8),
    Set(u8, u8),
    Truncate(u8),
    Append(Vec<u8>),
    /// A little-endian u64 at byte `at % 93`.
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
                let at = usize::from(*at) % (SEG_KEY_LEN - 7);
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
    /// Memory the domain allocated (the last keys of `real`).
    allocs: Vec<MemAlloc>,
}

impl Keys {
    /// Opens the memory domain and registers a few buffers: read-write,
    /// read-only, empty, and one whose registration ended; then allocates
    /// two (read-write, read-only).
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
        let mut allocs = Vec::new();
        let ops = md.mem_alloc_ops().expect("shm allocates memory");
        for (len, access) in [(8192, rw), (100, Access::REMOTE_READ)] {
            let a = ops.mem_alloc(len, access).expect("mem_alloc");
            let packed = md.mkey_pack(a.memh()).expect("mkey_pack");
            assert_eq!(packed.len(), SEG_KEY_LEN, "an allocation's key");
            real.push((packed, a.ptr() as u64, len as u64, access));
            allocs.push(a);
        }
        Keys {
            md,
            real,
            _memory: memory,
            allocs,
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
        let i = i % self.real.len();
        let (packed, addr, len, access) = &self.real[i];
        let edited = edit(packed.clone(), edits);
        let ok = self.check(&edited);
        let ptr = self.md.rkey_ptr_ops().expect("shm maps peers' memory");
        if edits.is_empty() {
            let key = self.md.rkey_unpack(packed).expect("a real key unpacks");
            assert_eq!((key.addr, key.len, key.access), (*addr, *len, *access));
            let mapped = ptr.rkey_ptr(&key).expect("rkey_ptr of a real key");
            let first_alloc = self.real.len() - self.allocs.len();
            match (mapped, i.checked_sub(first_alloc)) {
                (Some(m), Some(a)) => {
                    assert_eq!(m.remote_base(), *addr, "the mapping's base");
                    assert_eq!(m.len(), self.allocs[a].len(), "the mapping's length");
                }
                (None, None) => {}
                (m, a) => panic!("key {i}: mapping {m:?}, allocation {a:?}"),
            }
        } else if ok {
            // An accepted edited key maps or not, but never panics; what
            // it maps covers the whole declared range.
            let key = self.md.rkey_unpack(&edited).expect("accepted above");
            if let Ok(Some(m)) = ptr.rkey_ptr(&key) {
                assert!(m.len() as u64 >= key.len, "a mapping shorter than the key");
                assert_eq!(m.remote_base(), key.addr, "the mapping's base");
            }
        }
        ok
    }
}
