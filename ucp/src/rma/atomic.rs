//! Atomic operations as the target executes them.
#![allow(unsafe_code)]

use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};

/// An atomic operation on remote memory (UCX's `ucp_atomic_op_t`): the
/// transport layer's type, so that device atomics need no translation.
pub use crate::uct::AtomicOp;

/// The operation's code in an `RMA_ATOMIC` message: its place in
/// [`AtomicOp::ALL`].
pub(crate) fn op_code(op: AtomicOp) -> u8 {
    op as u8
}

/// The operation of a code, if any.
pub(crate) fn op_of_code(c: u8) -> Option<AtomicOp> {
    AtomicOp::ALL.get(usize::from(c)).copied()
}

/// An operand (and result) of an atomic operation: its width is the width
/// of the remote word.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum AtomicValue {
    /// A 32-bit word.
    U32(u32),
    /// A 64-bit word.
    U64(u64),
}

impl AtomicValue {
    /// Width in bytes.
    pub fn width(self) -> usize {
        match self {
            AtomicValue::U32(_) => 4,
            AtomicValue::U64(_) => 8,
        }
    }

    /// The value widened to 64 bits.
    pub fn as_u64(self) -> u64 {
        match self {
            AtomicValue::U32(v) => u64::from(v),
            AtomicValue::U64(v) => v,
        }
    }

    /// A value of `width` bytes (4 or 8) from the low bits of `v`.
    pub(crate) fn of_width(width: usize, v: u64) -> Option<AtomicValue> {
        match width {
            4 => Some(AtomicValue::U32(v as u32)),
            8 => Some(AtomicValue::U64(v)),
            _ => None,
        }
    }
}

/// `apply64` / `apply32`: one operation on an atomic word of one width.
macro_rules! apply_width {
    ($name:ident, $atomic:ty, $int:ty) => {
        fn $name(a: &$atomic, op: AtomicOp, v: $int, cmp: $int) -> $int {
            let o = Ordering::SeqCst;
            match op {
                AtomicOp::Add => a.fetch_add(v, o),
                AtomicOp::And => a.fetch_and(v, o),
                AtomicOp::Or => a.fetch_or(v, o),
                AtomicOp::Xor => a.fetch_xor(v, o),
                AtomicOp::Swap => a.swap(v, o),
                AtomicOp::Cswap => a.compare_exchange(cmp, v, o, o).unwrap_or_else(|x| x),
            }
        }
    };
}

apply_width!(apply64, AtomicU64, u64);
apply_width!(apply32, AtomicU32, u32);

/// Performs `op` on the word at `p` and returns its old value.
///
/// # Safety
///
/// `p` is valid for reads and writes of `value.width()` bytes, aligned to
/// that width, and every concurrent access to the word is atomic (other
/// processes' included: they use the same hardware atomics).
pub(crate) unsafe fn apply(p: *mut u8, op: AtomicOp, value: AtomicValue, cmp: u64) -> AtomicValue {
    match value {
        AtomicValue::U64(v) => {
            // SAFETY: valid, aligned and only accessed atomically (contract).
            let a = unsafe { AtomicU64::from_ptr(p.cast()) };
            AtomicValue::U64(apply64(a, op, v, cmp))
        }
        AtomicValue::U32(v) => {
            // SAFETY: as above, for 4 bytes.
            let a = unsafe { AtomicU32::from_ptr(p.cast()) };
            AtomicValue::U32(apply32(a, op, v, cmp as u32))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_op_on_both_widths() {
        for (op, want64, old_is_prev) in [
            (AtomicOp::Add, 0xf0 + 0x0f, true),
            (AtomicOp::And, 0xf0 & 0x0f, true),
            (AtomicOp::Or, 0xf0 | 0x0f, true),
            (AtomicOp::Xor, 0xf0 ^ 0x0f, true),
            (AtomicOp::Swap, 0x0f, true),
        ] {
            let mut w = 0xf0u64;
            // SAFETY: a local aligned word.
            let old = unsafe { apply((&mut w as *mut u64).cast(), op, AtomicValue::U64(0x0f), 0) };
            assert_eq!(
                (w, old_is_prev, old),
                (want64, true, AtomicValue::U64(0xf0))
            );
            let mut w = 0xf0u32;
            // SAFETY: as above.
            let old = unsafe { apply((&mut w as *mut u32).cast(), op, AtomicValue::U32(0x0f), 0) };
            assert_eq!((u64::from(w), old), (want64, AtomicValue::U32(0xf0)));
        }
        let mut w = 5u64;
        // SAFETY: as above.
        let old = unsafe {
            apply(
                (&mut w as *mut u64).cast(),
                AtomicOp::Cswap,
                AtomicValue::U64(9),
                4,
            )
        };
        assert_eq!((w, old), (5, AtomicValue::U64(5)), "no swap on mismatch");
        // SAFETY: as above.
        let old = unsafe {
            apply(
                (&mut w as *mut u64).cast(),
                AtomicOp::Cswap,
                AtomicValue::U64(9),
                5,
            )
        };
        assert_eq!((w, old), (9, AtomicValue::U64(5)));
        let mut w = u32::MAX;
        // SAFETY: as above.
        unsafe {
            apply(
                (&mut w as *mut u32).cast(),
                AtomicOp::Add,
                AtomicValue::U32(2),
                0,
            )
        };
        assert_eq!(w, 1, "32-bit add wraps at 32 bits");
    }

    #[test]
    fn codes_round_trip() {
        for op in AtomicOp::ALL {
            assert_eq!(op_of_code(op_code(op)), Some(op));
        }
        assert_eq!(op_of_code(6), None);
    }
}
