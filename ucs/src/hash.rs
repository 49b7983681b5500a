//! A fast hasher for maps keyed by small integers (request ids, source
//! ids, fragment keys) on hot paths.
//!
//! `std`'s default SipHash resists collision attacks at about 20 ns per
//! small key. These maps are keyed by values this process assigns (slab
//! ids) or by a peer's ids that are already bounded per source, so a
//! multiply-and-rotate hash in the manner of rustc's `FxHasher` is enough:
//! a few cycles per word.

use std::hash::{BuildHasherDefault, Hasher};

/// Multiply-rotate hasher over 64-bit words.
#[derive(Debug, Default, Clone, Copy)]
pub struct FxHasher {
    hash: u64,
}

const SEED: u64 = 0x51_7c_c1_b7_27_22_0a_95;

impl FxHasher {
    #[inline]
    fn add(&mut self, word: u64) {
        self.hash = (self.hash.rotate_left(5) ^ word).wrapping_mul(SEED);
    }
}

impl Hasher for FxHasher {
    #[inline]
    fn write(&mut self, bytes: &[u8]) {
        let mut chunks = bytes.chunks_exact(8);
        for c in &mut chunks {
            let mut w = [0u8; 8];
            w.copy_from_slice(c);
            self.add(u64::from_le_bytes(w));
        }
        let rest = chunks.remainder();
        if !rest.is_empty() {
            let mut w = [0u8; 8];
            w[..rest.len()].copy_from_slice(rest);
            self.add(u64::from_le_bytes(w));
        }
    }

    #[inline]
    fn write_u8(&mut self, i: u8) {
        self.add(u64::from(i));
    }

    #[inline]
    fn write_u16(&mut self, i: u16) {
        self.add(u64::from(i));
    }

    #[inline]
    fn write_u32(&mut self, i: u32) {
        self.add(u64::from(i));
    }

    #[inline]
    fn write_u64(&mut self, i: u64) {
        self.add(i);
    }

    #[inline]
    fn write_usize(&mut self, i: usize) {
        self.add(i as u64);
    }

    #[inline]
    fn finish(&self) -> u64 {
        self.hash
    }
}

/// `BuildHasher` for [`FxHasher`].
pub type FxBuildHasher = BuildHasherDefault<FxHasher>;

/// A `HashMap` with [`FxHasher`].
pub type FxHashMap<K, V> = std::collections::HashMap<K, V, FxBuildHasher>;

#[cfg(test)]
mod tests {
    use super::*;
    use std::hash::{BuildHasher, Hash};

    fn h<T: Hash>(v: T) -> u64 {
        FxBuildHasher::default().hash_one(v)
    }

    #[test]
    fn distinct_small_keys_hash_apart_and_maps_work() {
        let hashes: std::collections::HashSet<u64> = (0u64..10_000).map(h).collect();
        assert_eq!(hashes.len(), 10_000);
        assert_ne!(h((1usize, 2u32)), h((2usize, 1u32)));
        assert_ne!(h(b"abcdefghi".as_slice()), h(b"abcdefghj".as_slice()));
        let mut m: FxHashMap<(usize, u32), u64> = FxHashMap::default();
        for i in 0..1000u32 {
            m.insert((i as usize % 7, i), u64::from(i));
        }
        assert_eq!(m.len(), 1000);
        assert_eq!(m.remove(&(3, 500)), Some(500));
        assert_eq!(m.get(&(3, 500)), None);
    }
}
