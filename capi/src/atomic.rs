//! Atomic operations on peers' memory: `ucp_atomic_post`,
//! `ucp_atomic_fetch_nb` and `ucp_atomic_op_nbx`, on 32- and 64-bit
//! words, over rucx's `atomic_post` and `atomic_fetch_exact_raw` (which
//! writes a result of exactly the operation's width, as C's `uint32_t`
//! or `uint64_t`).
//!
//! Compare-and-swap takes its operands as UCX does: in
//! `ucp_atomic_fetch_nb`, `value` is the value compared and `*result` the
//! one swapped in (and then the old value); in `ucp_atomic_op_nbx`,
//! `*buffer` is compared and `*reply_buffer` swapped in. A posting
//! operation completes on its own (a flush waits for it).
//!
//! On a client endpoint whose connect is under way, `ucp_atomic_op_nbx`
//! and `ucp_atomic_fetch_nb` return a request at once, `ucp_atomic_post`
//! `UCS_OK`, and the operation waits for the connect (`deferred.rs`); the
//! blocking calls wait for their request, progressing the worker.
//!
//! The blocking calls of the compatibility header are UCX's: `ucp_atomic_add32`
//! and `ucp_atomic_add64` are `ucp_atomic_post` (they return once
//! posted); the fetching ones (`fadd`, `swap`, `cswap`) post as
//! `ucp_atomic_fetch_nb` and progress the worker until the old value is
//! there, which `*result` gets only if the operation succeeded.

use crate::ep::{wait_ptr, Endpoint};
use crate::onesided::{atomic_target, post_atomic, post_keyed_nbi};
use crate::request::{Cb, Opts};
use crate::rkey::RkeyH;
use crate::status::{self, guard_ptr, guard_status};
use crate::types::*;
use rucx::{AtomicOp, AtomicValue};
use std::ffi::{c_uint, c_void};
use std::ptr;

/// `UCP_OP_ATTR_FIELD_REPLY_BUFFER`.
pub const UCP_OP_ATTR_FIELD_REPLY_BUFFER: u32 = 1 << 5;

/// `ucp_atomic_post_op_t`: ADD, AND, OR, XOR.
fn post_op(code: c_uint) -> Option<AtomicOp> {
    [AtomicOp::Add, AtomicOp::And, AtomicOp::Or, AtomicOp::Xor]
        .get(code as usize)
        .copied()
}

/// `ucp_atomic_fetch_op_t`: FADD, SWAP, CSWAP, FAND, FOR, FXOR.
fn fetch_op(code: c_uint) -> Option<AtomicOp> {
    [
        AtomicOp::Add,
        AtomicOp::Swap,
        AtomicOp::Cswap,
        AtomicOp::And,
        AtomicOp::Or,
        AtomicOp::Xor,
    ]
    .get(code as usize)
    .copied()
}

/// `ucp_atomic_op_t`: the same order as `ucp_atomic_fetch_op_t`.
fn nbx_op(code: c_uint) -> Option<AtomicOp> {
    fetch_op(code)
}

/// A value of `size` bytes (4 or 8) from the low bits of `v`.
fn value_of(size: usize, v: u64) -> Option<AtomicValue> {
    match size {
        4 => Some(AtomicValue::U32(v as u32)),
        8 => Some(AtomicValue::U64(v)),
        _ => None,
    }
}

/// Reads a word of `size` bytes (4 or 8) at `p`.
///
/// # Safety
///
/// `p` holds `size` readable bytes (any alignment).
unsafe fn read_word(p: *const c_void, size: usize) -> u64 {
    // SAFETY: readable (contract).
    unsafe {
        if size == 4 {
            u64::from(p.cast::<u32>().read_unaligned())
        } else {
            p.cast::<u64>().read_unaligned()
        }
    }
}

/// A fetching atomic: `op` with `value` (and `compare`) on the word at
/// `remote_addr`, its old value to `result` (`value.width()` bytes).
///
/// # Safety
///
/// `ep`, `rkey` NULL or live; `result` writable until completion.
#[allow(clippy::too_many_arguments)]
unsafe fn fetch(
    ep: *mut Endpoint,
    op: AtomicOp,
    value: AtomicValue,
    compare: u64,
    result: *mut c_void,
    remote_addr: u64,
    rkey: *mut RkeyH,
    o: &Opts,
) -> StatusPtr {
    // SAFETY: forwarded contract.
    let (e, k) = match unsafe { atomic_target(ep, rkey) } {
        Ok(t) => t,
        Err(st) => return status::ptr(st),
    };
    if result.is_null() {
        return status::ptr(status::INVALID_PARAM);
    }
    post_atomic(e, k, o, move |rw, rep, key, rop| {
        // SAFETY: the application keeps `result` writable until the
        // operation completes (UCX's contract).
        unsafe {
            rw.atomic_fetch_exact_raw(
                rep,
                op,
                value,
                compare,
                result.cast(),
                remote_addr,
                key,
                rop,
            )
        }
    })
}

/// `ucp_atomic_post`: ADD, AND, OR or XOR of `value` (`op_size` 4 or 8
/// bytes) on the word at `remote_addr`, not fetched. `UCS_OK` once
/// posted; a flush waits for it to complete.
///
/// # Safety
///
/// `ep` and `rkey` live (the key unpacked on `ep`).
#[no_mangle]
pub unsafe extern "C" fn ucp_atomic_post(
    ep: *mut Endpoint,
    opcode: c_uint,
    value: u64,
    op_size: usize,
    remote_addr: u64,
    rkey: *mut RkeyH,
) -> StatusCode {
    guard_status(|| {
        let (Some(op), Some(v)) = (post_op(opcode), value_of(op_size, value)) else {
            return status::INVALID_PARAM;
        };
        // SAFETY: forwarded contract.
        let (e, k) = match unsafe { atomic_target(ep, rkey) } {
            Ok(t) => t,
            Err(st) => return st,
        };
        let _g = e.worker().enter();
        let rep = match crate::deferred::target(e) {
            Ok(r) => r,
            Err(st) => return st,
        };
        match post_keyed_nbi(e, k, rep, move |rw, rep, key, rop| {
            rw.atomic_post(rep, op, v, remote_addr, key, rop)
        }) {
            status::INPROGRESS => status::OK,
            st => st,
        }
    })
}

/// `ucp_atomic_fetch_nb` (legacy): `op_size` bytes of old value to
/// `result`; for CSWAP, `value` is compared and `*result` swapped in.
/// NULL if done at once, a request whose `cb` runs at completion, or an
/// error pointer.
///
/// # Safety
///
/// `ep` and `rkey` live; `result` holds `op_size` bytes, writable until
/// completion.
#[no_mangle]
pub unsafe extern "C" fn ucp_atomic_fetch_nb(
    ep: *mut Endpoint,
    opcode: c_uint,
    value: u64,
    result: *mut c_void,
    op_size: usize,
    remote_addr: u64,
    rkey: *mut RkeyH,
    cb: Option<SendCb>,
) -> StatusPtr {
    guard_ptr(|| {
        let Some(op) = fetch_op(opcode) else {
            return status::ptr(status::INVALID_PARAM);
        };
        if result.is_null() || value_of(op_size, 0).is_none() {
            return status::ptr(status::INVALID_PARAM);
        }
        let (v, compare) = if op == AtomicOp::Cswap {
            // SAFETY: `result` holds op_size readable bytes (contract).
            (unsafe { read_word(result, op_size) }, value)
        } else {
            (value, 0)
        };
        let Some(v) = value_of(op_size, v) else {
            return status::ptr(status::INVALID_PARAM);
        };
        let o = Opts::new(cb.map_or(Cb::None, Cb::SendLegacy));
        // SAFETY: forwarded contract.
        unsafe { fetch(ep, op, v, compare, result, remote_addr, rkey, &o) }
    })
}

/// `ucp_atomic_op_nbx`: `opcode` with the word at `buffer` (`count` 1;
/// the parameters' datatype, required, is a contiguous one of 4 or 8
/// bytes). With `UCP_OP_ATTR_FIELD_REPLY_BUFFER` the old value goes
/// there (for CSWAP, required, it holds the value swapped in, `*buffer`
/// the one compared); without, the operation is posted and its request
/// completes once it was applied.
///
/// # Safety
///
/// `ep` and `rkey` live; `buffer` holds one element; `param` a valid
/// `ucp_request_param_t` whose reply buffer (if any) is writable until
/// completion.
#[no_mangle]
pub unsafe extern "C" fn ucp_atomic_op_nbx(
    ep: *mut Endpoint,
    opcode: c_uint,
    buffer: *const c_void,
    count: usize,
    remote_addr: u64,
    rkey: *mut RkeyH,
    param: *const RequestParam,
) -> StatusPtr {
    guard_ptr(|| {
        // SAFETY: NULL or valid (contract).
        let Some(p) = (unsafe { param.as_ref() }) else {
            return status::ptr(status::INVALID_PARAM);
        };
        let Some(op) = nbx_op(opcode) else {
            return status::ptr(status::INVALID_PARAM);
        };
        if p.op_attr_mask & UCP_OP_ATTR_FIELD_DATATYPE == 0
            || p.datatype & UCP_DATATYPE_CLASS_MASK != UCP_DATATYPE_CONTIG
            || count != 1
            || buffer.is_null()
        {
            return status::ptr(status::INVALID_PARAM);
        }
        let size = (p.datatype >> UCP_DATATYPE_SHIFT) as usize;
        if value_of(size, 0).is_none() {
            return status::ptr(status::INVALID_PARAM);
        }
        let reply = if p.op_attr_mask & UCP_OP_ATTR_FIELD_REPLY_BUFFER != 0 {
            p.reply_buffer
        } else {
            ptr::null_mut()
        };
        // SAFETY: `param` is valid (contract).
        let o = unsafe { Opts::from_param(param, false) };
        // SAFETY: `buffer` holds one element (contract).
        let operand = unsafe { read_word(buffer, size) };
        if reply.is_null() {
            if op == AtomicOp::Cswap {
                return status::ptr(status::INVALID_PARAM);
            }
            let Some(v) = value_of(size, operand) else {
                return status::ptr(status::INVALID_PARAM);
            };
            // SAFETY: forwarded contract.
            let (e, k) = match unsafe { atomic_target(ep, rkey) } {
                Ok(t) => t,
                Err(st) => return status::ptr(st),
            };
            return post_atomic(e, k, &o, move |rw, rep, key, rop| {
                rw.atomic_post(rep, op, v, remote_addr, key, rop)
            });
        }
        let (v, compare) = if op == AtomicOp::Cswap {
            // SAFETY: the reply buffer holds the value to swap in.
            (unsafe { read_word(reply, size) }, operand)
        } else {
            (operand, 0)
        };
        let Some(v) = value_of(size, v) else {
            return status::ptr(status::INVALID_PARAM);
        };
        // SAFETY: forwarded contract.
        unsafe { fetch(ep, op, v, compare, reply, remote_addr, rkey, &o) }
    })
}

/// A fetching atomic waited for: `opcode` (`ucp_atomic_fetch_op_t`) with
/// `value` on the `size`-byte word at `remote_addr` (for CSWAP, `value`
/// is compared and `swap` swapped in). The old value, or the status.
///
/// # Safety
///
/// `ep` and `rkey` NULL or live.
unsafe fn fetch_wait(
    ep: *mut Endpoint,
    opcode: c_uint,
    value: u64,
    swap: u64,
    size: usize,
    remote_addr: u64,
    rkey: *mut RkeyH,
) -> Result<u64, StatusCode> {
    // SAFETY: NULL or live (contract).
    let Some(e) = (unsafe { ep.as_ref() }) else {
        return Err(status::INVALID_PARAM);
    };
    let w = e.worker();
    let _g = w.enter();
    // The result word: it holds the value swapped in, then the old one.
    let mut word = [0u8; 8];
    if size == 4 {
        word[..4].copy_from_slice(&(swap as u32).to_ne_bytes());
    } else {
        word.copy_from_slice(&swap.to_ne_bytes());
    }
    let result: *mut c_void = word.as_mut_ptr().cast();
    // SAFETY: forwarded contract; `word` outlives the operation, which is
    // over when `wait_ptr` returns.
    let req =
        unsafe { ucp_atomic_fetch_nb(ep, opcode, value, result, size, remote_addr, rkey, None) };
    match wait_ptr(w, req) {
        // SAFETY: `word` holds 8 readable bytes.
        status::OK => Ok(unsafe { read_word(result, size) }),
        st => Err(st),
    }
}

/// Writes `v` to `result` as a `T` (NULL: `UCS_ERR_INVALID_PARAM`).
///
/// # Safety
///
/// `result` is NULL or writable.
unsafe fn store<T>(result: *mut T, v: Result<T, StatusCode>) -> StatusCode {
    match v {
        Ok(v) => {
            // SAFETY: writable (contract); checked non-NULL by the callers.
            unsafe { result.write_unaligned(v) };
            status::OK
        }
        Err(st) => st,
    }
}

/// `ucp_atomic_fetch_op_t` codes the blocking calls use.
const FADD: c_uint = 0;
const SWAP: c_uint = 1;
const CSWAP: c_uint = 2;

/// `ucp_atomic_add32` (blocking, legacy): `ucp_atomic_post` of an ADD of
/// 4 bytes, as UCX's; a flush waits for it.
///
/// # Safety
///
/// `ep` and `rkey` live (the key unpacked on `ep`).
#[no_mangle]
pub unsafe extern "C" fn ucp_atomic_add32(
    ep: *mut Endpoint,
    add: u32,
    remote_addr: u64,
    rkey: *mut RkeyH,
) -> StatusCode {
    // SAFETY: forwarded contract.
    unsafe { ucp_atomic_post(ep, 0, u64::from(add), 4, remote_addr, rkey) }
}

/// `ucp_atomic_add64` (blocking, legacy): as `ucp_atomic_add32`, 8 bytes.
///
/// # Safety
///
/// As `ucp_atomic_add32`.
#[no_mangle]
pub unsafe extern "C" fn ucp_atomic_add64(
    ep: *mut Endpoint,
    add: u64,
    remote_addr: u64,
    rkey: *mut RkeyH,
) -> StatusCode {
    // SAFETY: forwarded contract.
    unsafe { ucp_atomic_post(ep, 0, add, 8, remote_addr, rkey) }
}

/// One blocking fetching atomic of width `$t`: `$op` with the arguments,
/// the old value to `*result`.
macro_rules! blocking_fetch {
    ($(#[$doc:meta])* $name:ident, $t:ty, $op:expr, ($($arg:ident),+), $value:expr, $swap:expr) => {
        $(#[$doc])*
        ///
        /// # Safety
        ///
        /// `ep` and `rkey` live (the key unpacked on `ep`); `result`
        /// writable.
        #[no_mangle]
        pub unsafe extern "C" fn $name(
            ep: *mut Endpoint,
            $($arg: $t,)+
            remote_addr: u64,
            rkey: *mut RkeyH,
            result: *mut $t,
        ) -> StatusCode {
            guard_status(|| {
                if result.is_null() {
                    return status::INVALID_PARAM;
                }
                let size = std::mem::size_of::<$t>();
                // SAFETY: forwarded contract.
                let old = unsafe {
                    fetch_wait(ep, $op, $value as u64, $swap as u64, size, remote_addr, rkey)
                };
                // SAFETY: checked non-NULL, writable (contract).
                unsafe { store(result, old.map(|v| v as $t)) }
            })
        }
    };
}

blocking_fetch!(
    /// `ucp_atomic_fadd32` (blocking, legacy): adds `add`, the old value
    /// to `*result`.
    ucp_atomic_fadd32, u32, FADD, (add), add, 0
);
blocking_fetch!(
    /// `ucp_atomic_fadd64` (blocking, legacy): as `ucp_atomic_fadd32`.
    ucp_atomic_fadd64, u64, FADD, (add), add, 0
);
blocking_fetch!(
    /// `ucp_atomic_swap32` (blocking, legacy): writes `swap`, the old
    /// value to `*result`.
    ucp_atomic_swap32, u32, SWAP, (swap), swap, 0
);
blocking_fetch!(
    /// `ucp_atomic_swap64` (blocking, legacy): as `ucp_atomic_swap32`.
    ucp_atomic_swap64, u64, SWAP, (swap), swap, 0
);
blocking_fetch!(
    /// `ucp_atomic_cswap32` (blocking, legacy): writes `swap` if the word
    /// is `compare`; the old value to `*result` either way.
    ucp_atomic_cswap32, u32, CSWAP, (compare, swap), compare, swap
);
blocking_fetch!(
    /// `ucp_atomic_cswap64` (blocking, legacy): as `ucp_atomic_cswap32`.
    ucp_atomic_cswap64, u64, CSWAP, (compare, swap), compare, swap
);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn opcodes_are_ucx_s() {
        assert_eq!(post_op(0), Some(AtomicOp::Add));
        assert_eq!(post_op(3), Some(AtomicOp::Xor));
        assert_eq!(post_op(4), None);
        assert_eq!(fetch_op(1), Some(AtomicOp::Swap));
        assert_eq!(fetch_op(2), Some(AtomicOp::Cswap));
        assert_eq!(fetch_op(5), Some(AtomicOp::Xor));
        assert_eq!(fetch_op(6), None);
        assert_eq!(nbx_op(3), Some(AtomicOp::And));
        assert_eq!(value_of(2, 1), None);
        let w: u64 = 0x1_0000_0002;
        // SAFETY: 8 readable bytes.
        assert_eq!(unsafe { read_word((&w as *const u64).cast(), 4) }, 2);
    }
}
