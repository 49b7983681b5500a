//! The index part of steering tags, made unguessable.
//!
//! A region's slot number is small and sequential; a peer holding STags of
//! some regions could otherwise compute those of others. The 24-bit index
//! on the wire is the slot number run through a keyed permutation (a
//! four-round Feistel network on two 12-bit halves, round keys drawn at
//! random per device), so consecutive slots give unrelated indices, and
//! decoding is exact. This is no cryptography: with 24 bits of index and
//! an 8-bit key, a peer that guesses blindly succeeds about once in 2^32
//! tries, each failure ending its connection with a Terminate.

use std::collections::hash_map::RandomState;
use std::hash::{BuildHasher, Hasher};

const MASK12: u32 = 0xfff;

/// A keyed permutation of the numbers below 2^24.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Scramble {
    keys: [u32; 4],
}

impl Default for Scramble {
    /// Fresh random round keys.
    fn default() -> Self {
        let mut keys = [0u32; 4];
        for (i, k) in keys.iter_mut().enumerate() {
            let mut h = RandomState::new().build_hasher();
            h.write_usize(i);
            *k = h.finish() as u32;
        }
        Scramble { keys }
    }
}

fn round(x: u32, k: u32) -> u32 {
    let h = (x ^ k).wrapping_mul(0x9e37_79b1);
    (h ^ (h >> 15)).wrapping_mul(0x85eb_ca6b) >> 20 & MASK12
}

impl Scramble {
    #[cfg(test)]
    pub(crate) fn with_keys(keys: [u32; 4]) -> Scramble {
        Scramble { keys }
    }

    /// The permuted value of `v` (24 bits).
    pub(crate) fn encode(&self, v: u32) -> u32 {
        let (mut l, mut r) = ((v >> 12) & MASK12, v & MASK12);
        for &k in &self.keys {
            (l, r) = (r, l ^ round(r, k));
        }
        (l << 12) | r
    }

    /// The inverse of [`Scramble::encode`].
    pub(crate) fn decode(&self, v: u32) -> u32 {
        let (mut l, mut r) = ((v >> 12) & MASK12, v & MASK12);
        for &k in self.keys.iter().rev() {
            (l, r) = (r ^ round(l, k), l);
        }
        (l << 12) | r
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn is_a_permutation_with_an_exact_inverse() {
        let s = Scramble::with_keys([1, 0xdead_beef, 77, 0x1234_5678]);
        let mut seen = vec![false; 1 << 24];
        for v in 0..(1u32 << 24) {
            let e = s.encode(v);
            assert!(e < 1 << 24);
            assert!(!seen[e as usize], "{v} collides");
            seen[e as usize] = true;
            assert_eq!(s.decode(e), v);
        }
    }

    #[test]
    fn consecutive_values_do_not_extrapolate() {
        let s = Scramble::default();
        let hits = (1..1000u32)
            .filter(|&i| {
                let (a, b, c) = (s.encode(i), s.encode(i + 1), s.encode(i + 2));
                (2 * b).wrapping_sub(a) & 0xff_ffff == c
            })
            .count();
        assert!(hits < 5, "{hits} of 999 steps were linear");
    }
}
