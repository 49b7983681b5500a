//! CRC32c (Castagnoli): reflected polynomial 0x82F63B78, initial value
//! all ones, result complemented. The check value of `"123456789"` is
//! 0xE3069283. MPA puts it on the wire least significant byte first.
//!
//! On x86_64 CPUs with SSE4.2 the `crc32` instruction computes it, eight
//! bytes at a time; elsewhere a slicing-by-8 table does. Both give the
//! same result (tested below).

/// The reflected Castagnoli polynomial.
const POLY: u32 = 0x82F6_3B78;

/// `TABLES[0]` is the byte-at-a-time table; `TABLES[k][b]` is the CRC of
/// byte `b` followed by `k` zero bytes, for slicing-by-8.
static TABLES: [[u32; 256]; 8] = make_tables();

const fn make_tables() -> [[u32; 256]; 8] {
    let mut t = [[0u32; 256]; 8];
    let mut i = 0;
    while i < 256 {
        let mut c = i as u32;
        let mut bit = 0;
        while bit < 8 {
            c = if c & 1 != 0 { (c >> 1) ^ POLY } else { c >> 1 };
            bit += 1;
        }
        t[0][i] = c;
        i += 1;
    }
    let mut k = 1;
    while k < 8 {
        let mut i = 0;
        while i < 256 {
            let prev = t[k - 1][i];
            t[k][i] = (prev >> 8) ^ t[0][(prev & 0xff) as usize];
            i += 1;
        }
        k += 1;
    }
    t
}

/// A CRC32c computed over data given in pieces.
///
/// ```
/// use rucx_iwarp::wire::crc::{crc32c, Crc32c};
/// let mut c = Crc32c::new();
/// c.update(b"1234");
/// c.update(b"56789");
/// assert_eq!(c.finish(), 0xE306_9283);
/// assert_eq!(crc32c(b"123456789"), 0xE306_9283);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Crc32c(u32);

impl Crc32c {
    /// A CRC over no data yet.
    pub fn new() -> Self {
        Self(!0)
    }

    /// Adds `data` to the CRC.
    #[inline]
    pub fn update(&mut self, data: &[u8]) {
        self.0 = update(self.0, data);
    }

    /// The CRC of everything given so far (the state is kept, so more data
    /// may follow).
    #[inline]
    pub fn finish(&self) -> u32 {
        !self.0
    }
}

impl Default for Crc32c {
    fn default() -> Self {
        Self::new()
    }
}

/// The CRC32c of `data`.
#[inline]
pub fn crc32c(data: &[u8]) -> u32 {
    !update(!0, data)
}

/// Runs the register `crc` (not complemented) over `data`.
#[inline]
fn update(crc: u32, data: &[u8]) -> u32 {
    #[cfg(target_arch = "x86_64")]
    {
        // std caches the CPUID result: after the first call this is one
        // relaxed atomic load and a bit test.
        if std::arch::is_x86_feature_detected!("sse4.2") {
            // SAFETY: the CPU has SSE4.2, the only requirement of
            // `update_sse42`.
            return unsafe { update_sse42(crc, data) };
        }
    }
    update_table(crc, data)
}

/// Slicing-by-8: eight table lookups per eight bytes.
fn update_table(mut crc: u32, data: &[u8]) -> u32 {
    let t = &TABLES;
    let mut chunks = data.chunks_exact(8);
    for c in &mut chunks {
        let lo = crc ^ u32::from_le_bytes([c[0], c[1], c[2], c[3]]);
        let hi = u32::from_le_bytes([c[4], c[5], c[6], c[7]]);
        crc = t[7][(lo & 0xff) as usize]
            ^ t[6][((lo >> 8) & 0xff) as usize]
            ^ t[5][((lo >> 16) & 0xff) as usize]
            ^ t[4][(lo >> 24) as usize]
            ^ t[3][(hi & 0xff) as usize]
            ^ t[2][((hi >> 8) & 0xff) as usize]
            ^ t[1][((hi >> 16) & 0xff) as usize]
            ^ t[0][(hi >> 24) as usize];
    }
    for &b in chunks.remainder() {
        crc = (crc >> 8) ^ t[0][((crc ^ u32::from(b)) & 0xff) as usize];
    }
    crc
}

/// The SSE4.2 `crc32` instruction, eight bytes per step.
///
/// # Safety
///
/// The CPU must support SSE4.2.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "sse4.2")]
// Since Rust 1.87 the intrinsics are safe inside a function with their
// target feature; the workspace's minimum (1.85) still needs the block.
#[allow(unused_unsafe)]
unsafe fn update_sse42(crc: u32, data: &[u8]) -> u32 {
    use std::arch::x86_64::{_mm_crc32_u64, _mm_crc32_u8};
    let mut c = u64::from(crc);
    let mut chunks = data.chunks_exact(8);
    for w in &mut chunks {
        let v = u64::from_le_bytes([w[0], w[1], w[2], w[3], w[4], w[5], w[6], w[7]]);
        // SAFETY: the caller guarantees SSE4.2.
        c = unsafe { _mm_crc32_u64(c, v) };
    }
    let mut crc = c as u32;
    for &b in chunks.remainder() {
        // SAFETY: as above.
        crc = unsafe { _mm_crc32_u8(crc, b) };
    }
    crc
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// Bit at a time, straight from the definition.
    fn reference(data: &[u8]) -> u32 {
        let mut c = !0u32;
        for &b in data {
            c ^= u32::from(b);
            for _ in 0..8 {
                c = if c & 1 != 0 { (c >> 1) ^ POLY } else { c >> 1 };
            }
        }
        !c
    }

    #[test]
    fn check_value() {
        assert_eq!(crc32c(b"123456789"), 0xE306_9283);
        assert_eq!(!update_table(!0, b"123456789"), 0xE306_9283);
        assert_eq!(reference(b"123456789"), 0xE306_9283);
        assert_eq!(crc32c(b""), 0);
        // RFC 3720 (iSCSI) B.4: 32 bytes of zeros, and of 0xff.
        assert_eq!(crc32c(&[0u8; 32]), 0x8A91_36AA);
        assert_eq!(crc32c(&[0xffu8; 32]), 0x62A8_AB43);
    }

    #[cfg(target_arch = "x86_64")]
    #[test]
    fn sse42_check_value() {
        if !std::arch::is_x86_feature_detected!("sse4.2") {
            eprintln!("skipped: no SSE4.2 on this CPU");
            return;
        }
        // SAFETY: SSE4.2 detected above.
        let c = unsafe { update_sse42(!0, b"123456789") };
        assert_eq!(!c, 0xE306_9283);
    }

    proptest! {
        #[test]
        fn paths_agree(data in proptest::collection::vec(any::<u8>(), 0..300)) {
            let want = reference(&data);
            prop_assert_eq!(!update_table(!0, &data), want);
            prop_assert_eq!(crc32c(&data), want);
            #[cfg(target_arch = "x86_64")]
            if std::arch::is_x86_feature_detected!("sse4.2") {
                // SAFETY: SSE4.2 detected.
                prop_assert_eq!(!unsafe { update_sse42(!0, &data) }, want);
            }
        }

        #[test]
        fn pieces_agree(
            data in proptest::collection::vec(any::<u8>(), 0..300),
            cuts in proptest::collection::vec(any::<prop::sample::Index>(), 0..5),
        ) {
            let mut at: Vec<usize> = cuts.iter().map(|i| i.index(data.len() + 1)).collect();
            at.sort_unstable();
            let mut c = Crc32c::new();
            let mut t = !0u32;
            let mut prev = 0;
            for &cut in at.iter().chain(std::iter::once(&data.len())) {
                c.update(&data[prev..cut]);
                t = update_table(t, &data[prev..cut]);
                prev = cut;
            }
            prop_assert_eq!(c.finish(), reference(&data));
            prop_assert_eq!(!t, reference(&data));
        }
    }
}
