//! The peer's exposed buffer as [`UcpWorker`](super::UcpWorker) reaches
//! it, and the operands of atomic operations.

use crate::perf::error::{PerfError, Result};
use crate::perf::worker::AtomicKind;
use rucx_ucp::{AtomicOp, AtomicValue, Ep, Rkey};

/// The peer's exposed buffer as the endpoint reaches it. The key is
/// shared: a thread's post that may be handed to another thread takes a
/// reference, not a copy of the key's per-lane parts.
#[derive(Debug)]
pub(super) struct Remote {
    pub(super) addr: u64,
    pub(super) rkey: std::sync::Arc<Rkey>,
}

/// The endpoint and the peer's buffer, for a one-sided operation (a free
/// function, so that the worker can be borrowed beside it).
#[inline]
pub(super) fn target(ep: Option<Ep>, remote: &Option<Remote>) -> Result<(Ep, &Remote)> {
    match (ep, remote) {
        (Some(ep), Some(r)) => Ok((ep, r)),
        _ => Err(PerfError::Params(
            "the peer's buffer is not known (set_remote)".into(),
        )),
    }
}

/// The protocol layer's atomic operation of `op`.
#[inline]
pub(super) fn atomic_op(op: AtomicKind) -> AtomicOp {
    match op {
        AtomicKind::Add => AtomicOp::Add,
        AtomicKind::Swap => AtomicOp::Swap,
        AtomicKind::Cswap => AtomicOp::Cswap,
    }
}

/// The operand of a `width`-byte atomic operation.
#[inline]
pub(super) fn atomic_value(width: usize, value: u64) -> Result<AtomicValue> {
    match width {
        4 => Ok(AtomicValue::U32(value as u32)),
        8 => Ok(AtomicValue::U64(value)),
        _ => Err(PerfError::Params(format!(
            "atomic width {width} (4 or 8 bytes)"
        ))),
    }
}
