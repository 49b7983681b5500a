//! The recording lanes.
#![allow(unsafe_code)]

use crate::proto::lanes::{no_iface, Lanes};
use crate::request::buf::{Lent, LentMut};
use crate::ucs;
use crate::uct::{
    AmId, AtomicCaps, AtomicOp, AtomicOps, AtomicWord, EpId, IfaceAttr, Posted, RemoteKey, Token,
};

/// One operation a core posted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Sent {
    /// An active message as its receiver's sink sees it (header, then
    /// payload); `token` for a zero-copy one.
    Am {
        ep: EpId,
        id: AmId,
        data: Vec<u8>,
        token: Option<Token>,
    },
    /// A zero-copy write of `len` bytes to `remote`.
    Put {
        ep: EpId,
        remote: u64,
        len: usize,
        token: Token,
    },
    /// A zero-copy read of `len` bytes from `remote`.
    Get {
        ep: EpId,
        remote: u64,
        len: usize,
        token: Token,
    },
    /// A request to be told when `ep` has room (what the executor asks
    /// of the transport for a `Command::AwaitRoom`).
    Pending { ep: EpId },
    /// A device atomic on the 8-byte word at `remote`: a fetch-and-add of
    /// `value`, or a compare-and-swap of `compare` for `value`.
    Amo {
        ep: EpId,
        cswap: bool,
        remote: u64,
        value: u64,
        compare: u64,
        token: Token,
    },
}

/// A recording [`Lanes`] with one iface (index 0).
#[derive(Debug)]
pub(crate) struct Rec {
    pub(crate) attr: IfaceAttr,
    pub(crate) sent: Vec<Sent>,
    /// Every operation answers `NoResource` (waiting for room still
    /// works).
    pub(crate) full: bool,
    /// Every operation fails with this.
    pub(crate) fail: Option<ucs::Error>,
    /// Zero-copy operations posted and not yet completed.
    pub(crate) inflight: Vec<Token>,
    /// If set, how many more operations the lane takes before it is full.
    pub(crate) room_for: Option<usize>,
    /// The lane's device executes 64-bit fetch-and-add and
    /// compare-and-swap (on the word at the remote address, in this
    /// process), in flight until completed like a zero-copy operation.
    pub(crate) atomics: bool,
}

impl Rec {
    /// `pending_add` on `(iface, ep)`, recorded; refused while every
    /// operation fails.
    pub(crate) fn room_asked(&mut self, iface: usize, ep: EpId) -> ucs::Result<()> {
        if iface != 0 {
            return Err(no_iface(iface));
        }
        if let Some(e) = &self.fail {
            return Err(e.duplicate());
        }
        self.sent.push(Sent::Pending { ep });
        Ok(())
    }

    fn check(&mut self, iface: usize) -> ucs::Result<Option<Posted>> {
        if iface != 0 {
            return Err(no_iface(iface));
        }
        if let Some(e) = &self.fail {
            return Err(e.duplicate());
        }
        if let Some(n) = &mut self.room_for {
            if *n == 0 {
                self.full = true;
            } else {
                *n -= 1;
            }
        }
        Ok(self.full.then_some(Posted::NoResource))
    }

    /// Records a zero-copy read or write (that `check` let through), in
    /// flight until completed.
    fn rma(&mut self, token: Token, op: impl FnOnce(Token) -> Sent) -> ucs::Result<Posted> {
        self.sent.push(op(token));
        self.inflight.push(token);
        Ok(Posted::InFlight)
    }

    /// The data of the active messages with id `id` sent so far.
    pub(crate) fn ams_of(&self, id: AmId) -> Vec<Vec<u8>> {
        self.ams()
            .into_iter()
            .filter_map(|(i, d)| (i == id).then_some(d))
            .collect()
    }

    /// The zero-copy reads (`get`) or writes (not `get`) posted so far, as
    /// (remote address, length, token).
    pub(crate) fn rmas(&self, get: bool) -> Vec<(u64, usize, Token)> {
        self.sent
            .iter()
            .filter_map(|s| match *s {
                Sent::Get {
                    remote, len, token, ..
                } if get => Some((remote, len, token)),
                Sent::Put {
                    remote, len, token, ..
                } if !get => Some((remote, len, token)),
                _ => None,
            })
            .collect()
    }

    /// Takes the active messages with id `id` out of those sent (so that
    /// they are not delivered), returning their data.
    pub(crate) fn take_ams_of(&mut self, id: AmId) -> Vec<Vec<u8>> {
        let mut out = Vec::new();
        self.sent.retain(|s| match s {
            Sent::Am { id: i, data, .. } if *i == id => {
                out.push(data.clone());
                false
            }
            _ => true,
        });
        out
    }

    /// The ids of the active messages sent so far.
    pub(crate) fn am_ids(&self) -> Vec<AmId> {
        self.ams().into_iter().map(|(i, _)| i).collect()
    }

    /// The active messages sent so far, as (id, data).
    pub(crate) fn ams(&self) -> Vec<(AmId, Vec<u8>)> {
        self.sent
            .iter()
            .filter_map(|s| match s {
                Sent::Am { id, data, .. } => Some((*id, data.clone())),
                _ => None,
            })
            .collect()
    }
}

impl Rec {
    /// Records and executes a device atomic (which `check` let through);
    /// the old value goes to `result`, if any, at once.
    #[allow(clippy::too_many_arguments)]
    fn amo(
        &mut self,
        ep: EpId,
        (op, value, compare): (AtomicOp, AtomicWord, u64),
        result: Option<*mut u8>,
        remote: u64,
        rkey: &RemoteKey,
        token: Token,
    ) -> ucs::Result<Posted> {
        let AtomicWord::U64(v) = value else {
            return Err(ucs::Error::op_unsupported("rec", "32-bit atomics"));
        };
        let cswap = match op {
            AtomicOp::Add => false,
            AtomicOp::Cswap => true,
            _ => return Err(ucs::Error::op_unsupported("rec", "this atomic")),
        };
        assert!(
            rkey.covers(remote, 8) && remote % 8 == 0,
            "a device atomic outside its key's range or misaligned"
        );
        // SAFETY: both nodes of a test live in this process: the key's
        // range is a word the test keeps alive and accesses atomically.
        let w = unsafe { std::sync::atomic::AtomicU64::from_ptr(remote as *mut u64) };
        let o = std::sync::atomic::Ordering::SeqCst;
        let old = if cswap {
            w.compare_exchange(compare, v, o, o).unwrap_or_else(|x| x)
        } else {
            w.fetch_add(v, o)
        };
        if let Some(r) = result {
            // SAFETY: `atomic_fetch`'s caller keeps the 8 bytes writable
            // until the completion.
            unsafe { r.cast::<[u8; 8]>().write_unaligned(old.to_ne_bytes()) };
        }
        self.rma(token, |token| Sent::Amo {
            ep,
            cswap,
            remote,
            value: v,
            compare,
            token,
        })
    }

    /// The device atomics posted so far, as (compare-and-swap, remote
    /// address, value, compare, token).
    pub(crate) fn amos(&self) -> Vec<(bool, u64, u64, u64, Token)> {
        self.sent
            .iter()
            .filter_map(|s| match *s {
                Sent::Amo {
                    cswap,
                    remote,
                    value,
                    compare,
                    token,
                    ..
                } => Some((cswap, remote, value, compare, token)),
                _ => None,
            })
            .collect()
    }
}

impl AtomicOps for Rec {
    fn atomic_caps(&self) -> AtomicCaps {
        if self.atomics {
            AtomicCaps::ADD64 | AtomicCaps::FADD64 | AtomicCaps::CSWAP64
        } else {
            AtomicCaps::empty()
        }
    }

    fn atomic_post(
        &mut self,
        ep: EpId,
        op: AtomicOp,
        value: AtomicWord,
        remote_addr: u64,
        rkey: &RemoteKey,
        token: Token,
    ) -> ucs::Result<Posted> {
        if let Some(p) = self.check(0)? {
            return Ok(p);
        }
        self.amo(ep, (op, value, 0), None, remote_addr, rkey, token)
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
    ) -> ucs::Result<Posted> {
        if let Some(p) = self.check(0)? {
            return Ok(p);
        }
        let what = (op, value, compare);
        self.amo(ep, what, Some(result), remote_addr, rkey, token)
    }
}

impl Lanes for Rec {
    fn attr(&self, iface: usize) -> Option<&IfaceAttr> {
        (iface == 0).then_some(&self.attr)
    }

    fn atomic(&mut self, iface: usize) -> Option<&mut dyn AtomicOps> {
        (iface == 0 && self.atomics).then_some(self as &mut dyn AtomicOps)
    }

    fn ep_create(&mut self, iface: usize, _dev: &[u8], _addr: &[u8]) -> ucs::Result<EpId> {
        Err(ucs::Error::Unsupported(format!(
            "the recorder makes no endpoints (iface {iface})"
        )))
    }

    fn am_short(
        &mut self,
        iface: usize,
        ep: EpId,
        id: AmId,
        header: u64,
        payload: &[u8],
    ) -> ucs::Result<Posted> {
        if let Some(p) = self.check(iface)? {
            return Ok(p);
        }
        let data = [&header.to_le_bytes()[..], payload].concat();
        self.sent.push(Sent::Am {
            ep,
            id,
            data,
            token: None,
        });
        Ok(Posted::Done)
    }

    fn am_bcopy(
        &mut self,
        iface: usize,
        ep: EpId,
        id: AmId,
        parts: &[&[u8]],
    ) -> ucs::Result<(Posted, usize)> {
        if let Some(p) = self.check(iface)? {
            return Ok((p, 0));
        }
        let data = parts.concat();
        let n = data.len();
        self.sent.push(Sent::Am {
            ep,
            id,
            data,
            token: None,
        });
        Ok((Posted::Done, n))
    }

    fn am_zcopy(
        &mut self,
        iface: usize,
        ep: EpId,
        id: AmId,
        header: &[u8],
        lent: Lent,
        token: Token,
    ) -> ucs::Result<Posted> {
        if let Some(p) = self.check(iface)? {
            return Ok(p);
        }
        let mut data = header.to_vec();
        let v = lent.iov();
        if v.len > 0 {
            // SAFETY: a lent range is valid until its operation completes.
            data.extend_from_slice(unsafe { std::slice::from_raw_parts(v.ptr, v.len) });
        }
        self.sent.push(Sent::Am {
            ep,
            id,
            data,
            token: Some(token),
        });
        self.inflight.push(token);
        Ok(Posted::InFlight)
    }

    fn put_zcopy(
        &mut self,
        iface: usize,
        ep: EpId,
        src: Lent,
        remote_addr: u64,
        rkey: &RemoteKey,
        token: Token,
    ) -> ucs::Result<Posted> {
        if let Some(p) = self.check(iface)? {
            return Ok(p);
        }
        let local = [(src.iov().ptr.cast_mut(), src.iov().len)];
        // SAFETY: both nodes of a test live in this process: the key's
        // range is the peer's buffer, which its test keeps alive, and a
        // lent range is valid until its operation completes.
        let len = unsafe { move_bytes(rkey, remote_addr, &local, true) };
        self.rma(token, |token| Sent::Put {
            ep,
            remote: remote_addr,
            len,
            token,
        })
    }

    fn get_zcopy(
        &mut self,
        iface: usize,
        ep: EpId,
        dst: LentMut,
        remote_addr: u64,
        rkey: &RemoteKey,
        token: Token,
    ) -> ucs::Result<Posted> {
        if let Some(p) = self.check(iface)? {
            return Ok(p);
        }
        let local = [(dst.iov().ptr, dst.iov().len)];
        // SAFETY: as for `put_zcopy`.
        let len = unsafe { move_bytes(rkey, remote_addr, &local, false) };
        self.rma(token, |token| Sent::Get {
            ep,
            remote: remote_addr,
            len,
            token,
        })
    }
}

/// Moves the bytes of a one-sided operation between the `local` ranges,
/// in turn, and the remote memory from `remote` on: local to remote for
/// a `put`, else remote to local. Checks first that each remote range
/// lies in the range `rkey` declares. Returns the bytes moved.
///
/// # Safety
///
/// The local ranges and the remote memory they map to are valid for the
/// copy.
unsafe fn move_bytes(
    rkey: &RemoteKey,
    remote: u64,
    local: &[(*mut u8, usize)],
    put: bool,
) -> usize {
    let mut at = remote;
    for &(p, len) in local {
        assert!(
            rkey.covers(at, len),
            "a one-sided access of {len} bytes outside its key's range"
        );
        let r = at as *mut u8;
        let (from, to) = if put {
            (p.cast_const(), r)
        } else {
            (r.cast_const(), p)
        };
        if len > 0 {
            // SAFETY: the caller's contract.
            unsafe { std::ptr::copy(from, to, len) };
        }
        at += len as u64;
    }
    (at - remote) as usize
}
