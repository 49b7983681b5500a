//! Copies of a few bytes without a call into `memcpy`.
//!
//! Protocol headers and small messages are 1 to 32 bytes; for those the
//! library `memcpy` costs more in its call and size dispatch than in the
//! copy. [`copy_small`] does such a copy with at most two loads and two
//! stores, and hands anything longer to `ptr::copy_nonoverlapping`.

use std::ptr;

/// Copies `len` bytes from `src` to `dst`.
///
/// # Safety
///
/// As for [`ptr::copy_nonoverlapping`]: `src` is valid for reads and `dst`
/// for writes of `len` bytes, and the two ranges do not overlap. No
/// alignment is required.
#[inline(always)]
pub unsafe fn copy_small(src: *const u8, dst: *mut u8, len: usize) {
    // SAFETY (every arm): each access is inside `0..len` of its range
    // (the two accesses of an arm may overlap each other, which is fine
    // as both loads happen before both stores and the ranges are
    // disjoint); unaligned accesses are used throughout.
    unsafe {
        match len {
            0 => {}
            1..=3 => {
                let (a, b, c) = (*src, *src.add(len / 2), *src.add(len - 1));
                *dst = a;
                *dst.add(len / 2) = b;
                *dst.add(len - 1) = c;
            }
            4..=7 => {
                let a = ptr::read_unaligned(src.cast::<u32>());
                let b = ptr::read_unaligned(src.add(len - 4).cast::<u32>());
                ptr::write_unaligned(dst.cast::<u32>(), a);
                ptr::write_unaligned(dst.add(len - 4).cast::<u32>(), b);
            }
            8..=16 => {
                let a = ptr::read_unaligned(src.cast::<u64>());
                let b = ptr::read_unaligned(src.add(len - 8).cast::<u64>());
                ptr::write_unaligned(dst.cast::<u64>(), a);
                ptr::write_unaligned(dst.add(len - 8).cast::<u64>(), b);
            }
            17..=32 => {
                let a = ptr::read_unaligned(src.cast::<u128>());
                let b = ptr::read_unaligned(src.add(len - 16).cast::<u128>());
                ptr::write_unaligned(dst.cast::<u128>(), a);
                ptr::write_unaligned(dst.add(len - 16).cast::<u128>(), b);
            }
            _ => ptr::copy_nonoverlapping(src, dst, len),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::copy_small;

    #[test]
    fn every_length_and_offset_up_to_80_bytes() {
        let src: Vec<u8> = (0..96u8)
            .map(|i| i.wrapping_mul(37).wrapping_add(1))
            .collect();
        for len in 0..=80 {
            for off in 0..8 {
                let mut dst = vec![0xeeu8; 96];
                // SAFETY: both ranges are inside their vectors and distinct.
                unsafe { copy_small(src.as_ptr().add(off), dst.as_mut_ptr().add(3), len) };
                assert_eq!(
                    &dst[3..3 + len],
                    &src[off..off + len],
                    "len {len} off {off}"
                );
                assert!(dst[..3].iter().all(|&b| b == 0xee), "before, len {len}");
                assert!(
                    dst[3 + len..].iter().all(|&b| b == 0xee),
                    "after, len {len}"
                );
            }
        }
    }
}
