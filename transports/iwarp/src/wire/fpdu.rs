//! FPDU framing (RFC 5044 §4), without markers:
//!
//! ```text
//! | ULPDU_Length (u16, BE) | ULPDU | pad to a multiple of 4 | CRC (4) |
//! ```
//!
//! The CRC is CRC32c over the length field, the ULPDU and the pad, sent
//! least significant byte first. It is always there: zero when the
//! connection does not use CRCs, and then not checked. Pad bytes are sent
//! as zero and not checked (they count in the CRC).

use super::crc::Crc32c;
use super::WireError;

/// Length of the CRC trailer.
pub const CRC_LEN: usize = 4;
/// Length of the ULPDU_Length field.
pub const PREFIX_LEN: usize = 2;
/// The largest ULPDU [`mulpdu`] ever gives (the length field is 16 bits;
/// this is the largest such length that needs no pad).
pub const MAX_ULPDU: usize = 65534;
/// [`mulpdu`] treats a smaller MSS as this one.
pub const MIN_MSS: usize = 128;

/// Zeros to pad from.
const ZEROS: [u8; 3] = [0; 3];

/// The largest ULPDU that keeps an FPDU within one TCP segment of `mss`
/// bytes: `4 * (mss / 4) - 6` (1442 for an MSS of 1448). An MSS below
/// [`MIN_MSS`] counts as [`MIN_MSS`]; the result is at most [`MAX_ULPDU`].
pub fn mulpdu(mss: usize) -> usize {
    let mss = mss.max(MIN_MSS);
    (4 * (mss / 4) - PREFIX_LEN - CRC_LEN).min(MAX_ULPDU)
}

/// Pad bytes after a ULPDU of `ulpdu_len` bytes, so that
/// `2 + ulpdu_len + pad` is a multiple of 4.
#[inline]
pub fn pad_len(ulpdu_len: usize) -> usize {
    ulpdu_len.wrapping_add(PREFIX_LEN).wrapping_neg() & 3
}

/// Bytes an FPDU with a ULPDU of `ulpdu_len` bytes takes on the wire.
#[inline]
pub fn fpdu_len(ulpdu_len: usize) -> usize {
    PREFIX_LEN + ulpdu_len + pad_len(ulpdu_len) + CRC_LEN
}

/// The ULPDU_Length field; `ulpdu_len` must fit in 16 bits (debug builds
/// assert it).
#[inline]
pub fn prefix(ulpdu_len: usize) -> [u8; 2] {
    debug_assert!(ulpdu_len <= usize::from(u16::MAX), "ULPDU too long");
    (ulpdu_len as u16).to_be_bytes()
}

/// The CRC of an FPDU whose ULPDU is the concatenation of `ulpdu_parts`:
/// over the length field, the parts and the pad. Compare it with the
/// received trailer read by [`crc_from_trailer`].
pub fn fpdu_crc(ulpdu_parts: &[&[u8]]) -> u32 {
    let n: usize = ulpdu_parts.iter().map(|p| p.len()).sum();
    let mut c = Crc32c::new();
    c.update(&prefix(n));
    for p in ulpdu_parts {
        c.update(p);
    }
    c.update(&ZEROS[..pad_len(n)]);
    c.finish()
}

/// The CRC in a received trailer (least significant byte first).
#[inline]
pub fn crc_from_trailer(trailer: [u8; CRC_LEN]) -> u32 {
    u32::from_le_bytes(trailer)
}

/// The pad and CRC after a ULPDU that is the concatenation of `parts`:
/// the first `used` bytes of the array (pad + 4) follow the ULPDU. The CRC
/// is 0 if `!crc`.
pub fn trailer(parts: &[&[u8]], crc: bool) -> ([u8; 8], usize) {
    let n: usize = parts.iter().map(|p| p.len()).sum();
    let pad = pad_len(n);
    let mut out = [0u8; 8];
    if crc {
        out[pad..pad + CRC_LEN].copy_from_slice(&fpdu_crc(parts).to_le_bytes());
    }
    (out, pad + CRC_LEN)
}

/// Appends to `out` a whole FPDU whose ULPDU is the concatenation of
/// `parts` (at most 65535 bytes).
pub fn encode_fpdu(out: &mut Vec<u8>, parts: &[&[u8]], crc: bool) {
    let n: usize = parts.iter().map(|p| p.len()).sum();
    out.reserve(fpdu_len(n));
    out.extend_from_slice(&prefix(n));
    for p in parts {
        out.extend_from_slice(p);
    }
    let (t, used) = trailer(parts, crc);
    out.extend_from_slice(&t[..used]);
}

/// Looks at the FPDU at the start of `buf`: `Ok(None)` until all of it is
/// there, then its ULPDU length. The FPDU takes `fpdu_len(ulpdu_len)`
/// bytes and its ULPDU is `buf[2..2 + ulpdu_len]`. When `crc`, the CRC is
/// checked ([`WireError::BadCrc`] on a mismatch). Whether the ULPDU is a
/// well-formed DDP segment is for [`DdpHeader::decode`] to say.
///
/// [`DdpHeader::decode`]: super::ddp::DdpHeader::decode
pub fn check_fpdu(buf: &[u8], crc: bool) -> Result<Option<usize>, WireError> {
    let Some(n) = super::be16(buf, 0) else {
        return Ok(None);
    };
    let n = usize::from(n);
    let total = fpdu_len(n);
    let Some(fpdu) = buf.get(..total) else {
        return Ok(None);
    };
    if crc {
        let (covered, tail) = fpdu.split_at(total - CRC_LEN);
        let expected = super::crc::crc32c(covered);
        let got = crc_from_trailer(tail.try_into().map_err(|_| WireError::BadLength(n))?);
        if expected != got {
            return Err(WireError::BadCrc { expected, got });
        }
    }
    Ok(Some(n))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn sizes() {
        assert_eq!(mulpdu(1448), 1442);
        assert_eq!(mulpdu(1460), 1454);
        assert_eq!(mulpdu(1450), 1442);
        assert_eq!(mulpdu(0), 122);
        assert_eq!(mulpdu(65483), 65474);
        assert_eq!(mulpdu(usize::MAX), MAX_ULPDU);
        for n in 0..64 {
            assert_eq!((PREFIX_LEN + n + pad_len(n)) % 4, 0);
            assert!(pad_len(n) < 4);
        }
        assert_eq!(pad_len(2), 0);
        assert_eq!(pad_len(18), 0);
        assert_eq!(pad_len(14), 0);
        assert_eq!(pad_len(19), 3);
        assert_eq!(fpdu_len(18), 24);
        assert_eq!(fpdu_len(23), 32);
        assert_eq!(prefix(0x1234), [0x12, 0x34]);
    }

    /// A Send of "hi" (untagged, last, QN 0, MSN 1, MO 0): its FPDU with
    /// the CRC computed independently of [`crc32c`](crate::wire::crc).
    #[test]
    fn known_fpdu_crc_lsb_first() {
        let ulpdu = [
            0x41, 0x43, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, b'h', b'i',
        ];
        let mut got = Vec::new();
        encode_fpdu(&mut got, &[&ulpdu[..8], &ulpdu[8..]], true);
        let mut want = vec![0x00, 0x14];
        want.extend_from_slice(&ulpdu);
        want.extend_from_slice(&[0, 0]); // pad
                                         // CRC32c of the 24 bytes above is 0x92b33a0b; LSB first.
        want.extend_from_slice(&[0x0b, 0x3a, 0xb3, 0x92]);
        assert_eq!(got, want);
        assert_eq!(check_fpdu(&want, true), Ok(Some(20)));
        let mut bad = want.clone();
        bad[27] ^= 0xff;
        assert_eq!(
            check_fpdu(&bad, true),
            Err(WireError::BadCrc {
                expected: 0x92b3_3a0b,
                got: 0x6db3_3a0b
            })
        );
        assert_eq!(check_fpdu(&bad, false), Ok(Some(20)));
        for n in 0..want.len() {
            assert_eq!(check_fpdu(&want[..n], true), Ok(None));
        }
        let mut plain = Vec::new();
        encode_fpdu(&mut plain, &[&ulpdu], false);
        assert_eq!(plain[..24], want[..24]);
        assert_eq!(plain[24..], [0, 0, 0, 0]);
    }

    proptest! {
        #[test]
        fn round_trip(
            ulpdu in proptest::collection::vec(any::<u8>(), 0..200),
            cut in any::<prop::sample::Index>(),
            crc in any::<bool>(),
            tail in proptest::collection::vec(any::<u8>(), 0..8),
        ) {
            let (a, b) = ulpdu.split_at(cut.index(ulpdu.len() + 1));
            let mut buf = Vec::new();
            encode_fpdu(&mut buf, &[a, b], crc);
            prop_assert_eq!(buf.len(), fpdu_len(ulpdu.len()));
            let t = &buf[buf.len() - CRC_LEN..];
            let want_crc = if crc { fpdu_crc(&[&ulpdu]) } else { 0 };
            prop_assert_eq!(crc_from_trailer(t.try_into().unwrap()), want_crc);
            buf.extend_from_slice(&tail);
            prop_assert_eq!(check_fpdu(&buf, crc), Ok(Some(ulpdu.len())));
            prop_assert_eq!(&buf[2..2 + ulpdu.len()], &ulpdu[..]);
        }
    }
}
