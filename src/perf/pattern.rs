//! The data pattern of `-V`: every message gets bytes that depend on its
//! sequence number and on their offset, so a message delivered twice, in
//! the wrong order, shifted, cut short or mixed with another is caught.

/// A byte that differs from the pattern.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Mismatch {
    /// Offset in the message.
    pub offset: usize,
    /// The pattern's byte.
    pub expected: u8,
    /// The byte found.
    pub actual: u8,
}

/// Eight pattern bytes for 8-byte word `word` of message `sn`.
#[inline]
fn word(sn: u64, word: u64) -> [u8; 8] {
    // splitmix64 of a value that mixes both numbers.
    let mut z = sn
        .wrapping_mul(0x9e37_79b9_7f4a_7c15)
        .wrapping_add(word.wrapping_mul(0xd1b5_4a32_d192_ed03))
        .wrapping_add(0x2545_f491_4f6c_dd1d);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    (z ^ (z >> 31)).to_le_bytes()
}

/// Fills `buf` with the pattern of message `sn`.
pub fn fill(buf: &mut [u8], sn: u64) {
    for (i, chunk) in buf.chunks_mut(8).enumerate() {
        let w = word(sn, i as u64);
        chunk.copy_from_slice(&w[..chunk.len()]);
    }
}

/// Checks that `buf` holds the pattern of message `sn`; reports the first
/// byte that does not.
pub fn check(buf: &[u8], sn: u64) -> Result<(), Mismatch> {
    for (i, chunk) in buf.chunks(8).enumerate() {
        let w = word(sn, i as u64);
        if chunk != &w[..chunk.len()] {
            let (j, (&actual, &expected)) = chunk
                .iter()
                .zip(w.iter())
                .enumerate()
                .find(|(_, (a, e))| a != e)
                .unwrap_or((0, (&chunk[0], &w[0])));
            return Err(Mismatch {
                offset: i * 8 + j,
                expected,
                actual,
            });
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fill_then_check_passes() {
        for len in [0usize, 1, 7, 8, 9, 64, 1000] {
            let mut buf = vec![0u8; len];
            fill(&mut buf, 42);
            assert_eq!(check(&buf, 42), Ok(()), "len {len}");
        }
    }

    #[test]
    fn every_wrong_byte_is_found() {
        let mut buf = vec![0u8; 37];
        fill(&mut buf, 7);
        for pos in 0..buf.len() {
            let mut bad = buf.clone();
            bad[pos] ^= 0x01;
            let m = check(&bad, 7).unwrap_err();
            assert_eq!(m.offset, pos);
            assert_eq!(m.expected, buf[pos]);
            assert_eq!(m.actual, buf[pos] ^ 0x01);
        }
    }

    #[test]
    fn patterns_differ_between_messages_and_offsets() {
        let mut a = vec![0u8; 64];
        let mut b = vec![0u8; 64];
        fill(&mut a, 1);
        fill(&mut b, 2);
        assert_ne!(a, b);
        assert!(check(&a, 2).is_err());
        // A shifted message does not pass.
        assert!(check(&a[8..], 1).is_err());
        // Not a zero buffer.
        assert!(check(&[0u8; 16], 0).is_err());
    }
}
