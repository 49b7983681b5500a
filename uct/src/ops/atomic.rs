//! Atomic operations done by a device ([`AtomicOps`], reached through
//! [`Iface::atomic`](crate::Iface::atomic)), and the bits saying which
//! ([`AtomicCaps`]).
//!
//! UCX's set: posted `add`, `and`, `or`, `xor` and fetching `fadd`,
//! `fand`, `for`, `fxor`, `swap`, `cswap`, on 32- and 64-bit words. A
//! transport offers the family only for operations that the hardware
//! executes at the target without the target's CPU (RDMA atomics). The
//! protocol layer decides which memory takes device atomics (a word must
//! never see both kinds); on such memory it builds the operations a
//! device lacks from its 64-bit fetch-add and compare-and-swap, on other
//! memory the target's CPU executes every atomic.

use crate::iface::{EpId, Posted, Token};
use crate::{RemoteKey, Result};

/// An atomic operation (UCX's `uct_atomic_op_t`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum AtomicOp {
    /// `*p += v`.
    Add,
    /// `*p &= v`.
    And,
    /// `*p |= v`.
    Or,
    /// `*p ^= v`.
    Xor,
    /// `*p = v` (fetching only).
    Swap,
    /// `if *p == compare { *p = v }` (fetching only).
    Cswap,
}

impl AtomicOp {
    /// Every operation.
    pub const ALL: [AtomicOp; 6] = [
        AtomicOp::Add,
        AtomicOp::And,
        AtomicOp::Or,
        AtomicOp::Xor,
        AtomicOp::Swap,
        AtomicOp::Cswap,
    ];

    /// Every (operation, fetching) form UCX has, in UCX's order: the
    /// posted `add`, `and`, `or`, `xor`, then the fetching `fadd`, `fand`,
    /// `for`, `fxor`, `swap`, `cswap`.
    pub const FORMS: [(AtomicOp, bool); 10] = [
        (AtomicOp::Add, false),
        (AtomicOp::And, false),
        (AtomicOp::Or, false),
        (AtomicOp::Xor, false),
        (AtomicOp::Add, true),
        (AtomicOp::And, true),
        (AtomicOp::Or, true),
        (AtomicOp::Xor, true),
        (AtomicOp::Swap, true),
        (AtomicOp::Cswap, true),
    ];

    /// Name as UCX prints it, posted form (`add`) or fetching (`fadd`).
    pub fn name(self, fetch: bool) -> &'static str {
        match (self, fetch) {
            (AtomicOp::Add, false) => "add",
            (AtomicOp::And, false) => "and",
            (AtomicOp::Or, false) => "or",
            (AtomicOp::Xor, false) => "xor",
            (AtomicOp::Add, true) => "fadd",
            (AtomicOp::And, true) => "fand",
            (AtomicOp::Or, true) => "for",
            (AtomicOp::Xor, true) => "fxor",
            (AtomicOp::Swap, _) => "swap",
            (AtomicOp::Cswap, _) => "cswap",
        }
    }
}

/// The operand of an atomic operation; its width is the remote word's.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum AtomicWord {
    /// A 32-bit word.
    U32(u32),
    /// A 64-bit word.
    U64(u64),
}

impl AtomicWord {
    /// Width in bytes.
    pub fn width(self) -> usize {
        match self {
            AtomicWord::U32(_) => 4,
            AtomicWord::U64(_) => 8,
        }
    }
}

bitflags::bitflags! {
    /// Which atomic operations a device executes: one bit per operation,
    /// form (posted or fetching) and width. Posted `swap` and `cswap` do
    /// not exist (their use is the old value).
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
    pub struct AtomicCaps: u32 {
        /// Posted 32-bit add.
        const ADD32 = 1 << 0;
        /// Posted 32-bit and.
        const AND32 = 1 << 1;
        /// Posted 32-bit or.
        const OR32 = 1 << 2;
        /// Posted 32-bit xor.
        const XOR32 = 1 << 3;
        /// Fetching 32-bit add.
        const FADD32 = 1 << 4;
        /// Fetching 32-bit and.
        const FAND32 = 1 << 5;
        /// Fetching 32-bit or.
        const FOR32 = 1 << 6;
        /// Fetching 32-bit xor.
        const FXOR32 = 1 << 7;
        /// 32-bit swap.
        const SWAP32 = 1 << 8;
        /// 32-bit compare-and-swap.
        const CSWAP32 = 1 << 9;
        /// Posted 64-bit add.
        const ADD64 = 1 << 16;
        /// Posted 64-bit and.
        const AND64 = 1 << 17;
        /// Posted 64-bit or.
        const OR64 = 1 << 18;
        /// Posted 64-bit xor.
        const XOR64 = 1 << 19;
        /// Fetching 64-bit add.
        const FADD64 = 1 << 20;
        /// Fetching 64-bit and.
        const FAND64 = 1 << 21;
        /// Fetching 64-bit or.
        const FOR64 = 1 << 22;
        /// Fetching 64-bit xor.
        const FXOR64 = 1 << 23;
        /// 64-bit swap.
        const SWAP64 = 1 << 24;
        /// 64-bit compare-and-swap.
        const CSWAP64 = 1 << 25;
    }
}

impl AtomicCaps {
    /// Every operation of both widths.
    pub const FULL: AtomicCaps = AtomicCaps::all();

    /// The bit of `op` in the given form on words of `width` bytes
    /// (4 or 8); empty for a combination that does not exist (posted
    /// `swap` or `cswap`, another width).
    pub fn of(op: AtomicOp, fetch: bool, width: usize) -> AtomicCaps {
        let i = match (op, fetch) {
            (AtomicOp::Add, false) => 0,
            (AtomicOp::And, false) => 1,
            (AtomicOp::Or, false) => 2,
            (AtomicOp::Xor, false) => 3,
            (AtomicOp::Add, true) => 4,
            (AtomicOp::And, true) => 5,
            (AtomicOp::Or, true) => 6,
            (AtomicOp::Xor, true) => 7,
            (AtomicOp::Swap, true) => 8,
            (AtomicOp::Cswap, true) => 9,
            (AtomicOp::Swap | AtomicOp::Cswap, false) => return AtomicCaps::empty(),
        };
        match width {
            4 => AtomicCaps::from_bits_retain(1 << i),
            8 => AtomicCaps::from_bits_retain(1 << (16 + i)),
            _ => AtomicCaps::empty(),
        }
    }

    /// Whether the device does `op` in that form on `word`'s width.
    pub fn offers(self, op: AtomicOp, fetch: bool, word: AtomicWord) -> bool {
        let bit = AtomicCaps::of(op, fetch, word.width());
        !bit.is_empty() && self.contains(bit)
    }

    /// The operations as UCX's `ucx_info` names them, e.g.
    /// `"add64 fadd64 cswap64"`; `"none"` when empty.
    pub fn names(self) -> String {
        let mut v = Vec::new();
        for width in [32usize, 64] {
            for (op, fetch) in AtomicOp::FORMS {
                if self.contains(AtomicCaps::of(op, fetch, width / 8)) {
                    v.push(format!("{}{width}", op.name(fetch)));
                }
            }
        }
        if v.is_empty() {
            "none".into()
        } else {
            v.join(" ")
        }
    }
}

/// Atomic operations executed by the device on a peer's registered memory
/// ([`crate::Caps::ATOMIC_DEVICE`]), reached through
/// [`Iface::atomic`](crate::Iface::atomic). Only the operations of
/// [`AtomicOps::atomic_caps`] are accepted; any other fails with
/// [`crate::Error::OpUnsupported`] before anything is sent.
///
/// The word at `remote_addr` is aligned to its width and lies inside the
/// range of `rkey`, whose registration grants
/// [`Access::REMOTE_ATOMIC`](crate::Access::REMOTE_ATOMIC); the target's
/// device checks again, and a refusal completes the operation with
/// [`crate::Error::RemoteAccess`] (and, where the connection cannot
/// survive it, fails the endpoint).
///
/// Both calls complete through [`AmSink::completed`](crate::AmSink::completed)
/// with the caller's token once the target executed the operation
/// (`InFlight`), or are refused for lack of resources (`NoResource`).
pub trait AtomicOps {
    /// The operations the device executes; never changes.
    fn atomic_caps(&self) -> AtomicCaps;

    /// Performs `op` (not `Swap` or `Cswap`) with `value` on the word at
    /// `remote_addr`, discarding the old value (UCX's `atomic_add64` and
    /// friends).
    fn atomic_post(
        &mut self,
        ep: EpId,
        op: AtomicOp,
        value: AtomicWord,
        remote_addr: u64,
        rkey: &RemoteKey,
        token: Token,
    ) -> Result<Posted>;

    /// Performs `op` with `value` (and `compare`, for `Cswap`) on the word
    /// at `remote_addr` and writes its old value to the 8 bytes at
    /// `result` (any alignment; a 32-bit word's value widened). The
    /// result is written during the `progress` call that reports the
    /// completion, just before the report, and only on success.
    ///
    /// # Safety
    ///
    /// Unless this returns an error or `NoResource`, the 8 bytes at
    /// `result` stay writable, and untouched by anyone else, until the
    /// completion with `token` has been reported (or the iface is
    /// dropped).
    #[allow(clippy::too_many_arguments)]
    unsafe fn atomic_fetch(
        &mut self,
        ep: EpId,
        op: AtomicOp,
        value: AtomicWord,
        compare: u64,
        result: *mut u8,
        remote_addr: u64,
        rkey: &RemoteKey,
        token: Token,
    ) -> Result<Posted>;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bits_are_distinct_and_named() {
        let mut seen = AtomicCaps::empty();
        for width in [4, 8] {
            for op in AtomicOp::ALL {
                for fetch in [false, true] {
                    let b = AtomicCaps::of(op, fetch, width);
                    if !fetch && matches!(op, AtomicOp::Swap | AtomicOp::Cswap) {
                        assert!(b.is_empty(), "posted {op:?} does not exist");
                        continue;
                    }
                    assert_eq!(b.bits().count_ones(), 1, "{op:?} {fetch} {width}");
                    assert!(!seen.intersects(b), "{op:?} {fetch} {width} twice");
                    seen |= b;
                }
            }
        }
        assert_eq!(seen, AtomicCaps::FULL);
        assert!(AtomicCaps::of(AtomicOp::Add, true, 2).is_empty());
        let rc = AtomicCaps::ADD64 | AtomicCaps::FADD64 | AtomicCaps::CSWAP64;
        assert_eq!(rc.names(), "add64 fadd64 cswap64");
        assert_eq!(AtomicCaps::empty().names(), "none");
        assert!(rc.offers(AtomicOp::Cswap, true, AtomicWord::U64(1)));
        assert!(!rc.offers(AtomicOp::Cswap, true, AtomicWord::U32(1)));
        assert!(!rc.offers(AtomicOp::Cswap, false, AtomicWord::U64(1)));
        assert!(!rc.offers(AtomicOp::Or, true, AtomicWord::U64(1)));
    }
}
