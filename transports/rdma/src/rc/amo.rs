//! Atomics of the RC iface: the device's 64-bit fetch-and-add and
//! compare-and-swap work requests, offered when the provider's device has
//! them ([`DeviceAttr::atomics`](crate::DeviceAttr::atomics)).
//!
//! The device writes the old value into a registered copy buffer of the
//! iface (a caller's word need not be registered); the completion copies
//! it to the caller's result. A posted add is a fetch-and-add whose old
//! value is dropped. Verbs have no other atomics, so the iface offers
//! exactly `add64`, `fadd64` and `cswap64`.

use crate::verbs::SendOp;
use uct::ucs::{AccessDenied, Error, Result};
use uct::{Access, AtomicCaps, AtomicOp, AtomicOps, AtomicWord, EpId, Posted, RemoteKey, Token};

use super::bufs::Owner;
use super::iface::{Op, RcIface};
use super::md::{device_atomics, key_stag};

/// The operation and form as a name, for errors.
fn name(op: AtomicOp, fetch: bool, value: AtomicWord) -> String {
    format!("{}{}", op.name(fetch), value.width() * 8)
}

impl RcIface {
    /// Checks and posts one atomic; `result` is where a fetching one's
    /// old value goes.
    #[allow(clippy::too_many_arguments)]
    fn post_atomic(
        &mut self,
        ep: EpId,
        (op, fetch): (AtomicOp, bool),
        value: AtomicWord,
        compare: u64,
        result: Option<u64>,
        (remote_addr, rkey): (u64, &RemoteKey),
        token: Token,
    ) -> Result<Posted> {
        let tl = &self.info.tl_name;
        let AtomicWord::U64(v) = value else {
            return Err(Error::op_unsupported(tl.clone(), "32-bit atomics"));
        };
        if !self.atomic_caps().offers(op, fetch, value) {
            tracing::debug!(op = %name(op, fetch, value), "rc: atomic not offered");
            let what = if fetch {
                "this fetching atomic"
            } else {
                "this posted atomic"
            };
            return Err(Error::op_unsupported(tl.clone(), what));
        }
        let stag =
            key_stag(rkey).ok_or_else(|| Error::InvalidParam("rc: not an rc remote key".into()))?;
        if remote_addr % 8 != 0 {
            return Err(Error::InvalidParam(format!(
                "rc: atomic on {remote_addr:#x}: not aligned to 8 bytes"
            )));
        }
        if !rkey.covers(remote_addr, 8) {
            return Err(Error::remote_access(
                tl.clone(),
                AccessDenied::OutOfRange {
                    addr: remote_addr,
                    len: 8,
                    reg_addr: rkey.addr,
                    reg_len: usize::try_from(rkey.len).unwrap_or(usize::MAX),
                },
            ));
        }
        if !rkey.access.contains(Access::REMOTE_ATOMIC) {
            return Err(Error::remote_access(
                tl.clone(),
                AccessDenied::Rights {
                    granted: format!("{:?}", rkey.access),
                    needed: format!("{:?}", Access::REMOTE_ATOMIC),
                },
            ));
        }
        let wop = if op == AtomicOp::Cswap {
            SendOp::CmpSwap {
                remote_addr,
                rkey: stag,
                compare,
                swap: v,
            }
        } else {
            // Add, the only other operation offered.
            SendOp::FetchAdd {
                remote_addr,
                rkey: stag,
                add: v,
            }
        };
        let Some(qp) = self.send_slot(ep, false, 1)? else {
            return Ok(Posted::NoResource);
        };
        let Some(buf) = self.bufs.take(Owner::Tx(qp)) else {
            return Ok(Posted::NoResource);
        };
        let sge = [self.bufs.sge(buf, 8)];
        // SAFETY: the result lands in the pool's buffer, held by the
        // operation until its completion.
        unsafe { self.post_one((qp, ep), wop, &sge, buf, result, token, false) }?;
        Ok(Posted::InFlight)
    }

    /// A successful atomic's old value, from its buffer to the caller's
    /// result (before the buffer goes back to the pool).
    pub(crate) fn deliver_atomic(&self, op: &Op) {
        let (Some(dst), Some(buf)) = (op.amo, op.buf) else {
            return;
        };
        let mut b = [0u8; 8];
        b.copy_from_slice(self.bufs.slice(buf, 8));
        // SAFETY: `atomic_fetch`'s caller keeps the 8 bytes at `dst`
        // writable until this completion is reported, which follows.
        unsafe { (dst as *mut u8).cast::<[u8; 8]>().write_unaligned(b) };
    }
}

impl AtomicOps for RcIface {
    fn atomic_caps(&self) -> AtomicCaps {
        device_atomics(self.device.attr().atomics)
    }

    fn atomic_post(
        &mut self,
        ep: EpId,
        op: AtomicOp,
        value: AtomicWord,
        remote_addr: u64,
        rkey: &RemoteKey,
        token: Token,
    ) -> Result<Posted> {
        let at = (remote_addr, rkey);
        self.post_atomic(ep, (op, false), value, 0, None, at, token)
    }

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
    ) -> Result<Posted> {
        let at = (remote_addr, rkey);
        let dst = Some(result as u64);
        self.post_atomic(ep, (op, true), value, compare, dst, at, token)
    }
}
