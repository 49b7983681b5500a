//! The initiator's operations on the worker.
#![allow(unsafe_code)]

use super::amo::Amo;
use super::atomic::{AtomicOp, AtomicValue};
use super::rkey::Rkey;
use super::target::MAX_GET_FRAGMENT;
use super::wire::{self, AtomicReq, GetReq, PUT_HDR, REPLY_HDR};
use super::{RmaSink, RmaState, ZcopyPlan};
use crate::proto::rndv_zcopy::Local;
use crate::request::buf::{RecvBuf, SendBuf};
use crate::request::{Info, Kind, Request};
use crate::uct::{Access, Caps, Iov, IovMut};
use crate::{Ep, Error, Op, Posted, ReqId, Result, Worker};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Dir {
    Put,
    Get,
}

impl Worker {
    /// Writes `len` bytes at `ptr` to `remote_addr` of the peer's memory
    /// named by `rkey` (unpacked on `ep`). Completes once the data is in
    /// the remote memory. May progress the worker while a transport is out
    /// of resources.
    ///
    /// # Safety
    ///
    /// Unless this returns `Posted::Done` or an error, the `len` bytes at
    /// `ptr` stay readable and unmodified until the request's completion
    /// has been observed or the worker is dropped.
    #[inline]
    pub unsafe fn put_raw(
        &mut self,
        ep: Ep,
        ptr: *const u8,
        len: usize,
        remote_addr: u64,
        rkey: &Rkey,
        op: Op,
    ) -> Result<Posted<()>> {
        let at = self.mapped_access(ep, rkey, remote_addr, len, Access::REMOTE_WRITE)?;
        if let Some(p) = at {
            // SAFETY: `len` bytes at `p` inside the mapping (checked), at
            // `ptr` by this function's contract.
            unsafe { copy_bytes(ptr, p, len) };
            return Ok(done_now(len));
        }
        self.rma_start(
            ep,
            Dir::Put,
            &[(ptr.cast_mut(), len)],
            remote_addr,
            rkey,
            op,
        )
    }

    /// Reads `len` bytes at `remote_addr` of the peer's memory named by
    /// `rkey` into `ptr`. Completes once the data is in the local buffer.
    ///
    /// # Safety
    ///
    /// Unless this returns `Posted::Done` or an error, the `len` bytes at
    /// `ptr` stay writable, and untouched by anyone else, until the
    /// request's completion has been observed or the worker is dropped.
    #[inline]
    pub unsafe fn get_raw(
        &mut self,
        ep: Ep,
        ptr: *mut u8,
        len: usize,
        remote_addr: u64,
        rkey: &Rkey,
        op: Op,
    ) -> Result<Posted<()>> {
        let at = self.mapped_access(ep, rkey, remote_addr, len, Access::REMOTE_READ)?;
        if let Some(p) = at {
            // SAFETY: `len` bytes at `p` inside the mapping (checked), at
            // `ptr` by this function's contract.
            unsafe { copy_bytes(p, ptr, len) };
            return Ok(done_now(len));
        }
        self.rma_start(ep, Dir::Get, &[(ptr, len)], remote_addr, rkey, op)
    }

    /// Writes the local ranges of `iov`, one after the other, to the
    /// contiguous remote range at `remote_addr` (UCX's iov datatype). One
    /// request for all of them.
    ///
    /// # Safety
    ///
    /// As for [`Worker::put_raw`], for every range of `iov`.
    pub unsafe fn put_iov_raw(
        &mut self,
        ep: Ep,
        iov: &[Iov],
        remote_addr: u64,
        rkey: &Rkey,
        op: Op,
    ) -> Result<Posted<()>> {
        let segs = iov_segs(iov)?;
        rkey.check(ep, remote_addr, total(&segs), Access::REMOTE_WRITE)?;
        self.rma_start(ep, Dir::Put, &segs, remote_addr, rkey, op)
    }

    /// Reads the contiguous remote range at `remote_addr` into the local
    /// ranges of `iov`, one after the other. One request for all of them.
    ///
    /// # Safety
    ///
    /// As for [`Worker::get_raw`], for every range of `iov`.
    pub unsafe fn get_iov_raw(
        &mut self,
        ep: Ep,
        iov: &[IovMut],
        remote_addr: u64,
        rkey: &Rkey,
        op: Op,
    ) -> Result<Posted<()>> {
        let segs = crate::uct::with_iovs(iov, iov_segs)?;
        rkey.check(ep, remote_addr, total(&segs), Access::REMOTE_READ)?;
        self.rma_start(ep, Dir::Get, &segs, remote_addr, rkey, op)
    }

    /// Performs `op` with `value` on the word at `remote_addr` (aligned to
    /// the value's width) without fetching the old value. `Cswap` is not a
    /// posting operation (it needs the result to be of use) and is refused.
    pub fn atomic_post(
        &mut self,
        ep: Ep,
        op: AtomicOp,
        value: AtomicValue,
        remote_addr: u64,
        rkey: &Rkey,
        o: Op,
    ) -> Result<Posted<()>> {
        if op == AtomicOp::Cswap {
            return Err(Error::InvalidParam(
                "compare-and-swap is fetching only: use atomic_fetch_raw".into(),
            ));
        }
        let a = Amo {
            op,
            fetch: false,
            value,
            compare: 0,
            remote: remote_addr,
        };
        if let Some(lane) = self.amo_route(ep, &a, rkey)? {
            return self.atomic_device_start(ep, lane, a, None, o);
        }
        if let Some(r) = self.atomic_mapped(ep, op, value, 0, remote_addr, rkey) {
            r?;
            drop(o);
            return Ok(Posted::Done(
                Info {
                    tag: 0,
                    length: value.width(),
                },
                (),
            ));
        }
        self.atomic_start(ep, op, value, 0, remote_addr, rkey, RmaSink::None, o)
    }

    /// Performs `op` with `value` (and `compare`, for `Cswap`) on the word
    /// at `remote_addr` and writes its old value to `result` (a 32-bit
    /// word's value widened to 64 bits).
    ///
    /// # Safety
    ///
    /// Unless this returns an error, the 8 bytes at `result` stay writable,
    /// and untouched by anyone else, until the request's completion has
    /// been observed or the worker is dropped.
    #[allow(clippy::too_many_arguments)]
    pub unsafe fn atomic_fetch_raw(
        &mut self,
        ep: Ep,
        op: AtomicOp,
        value: AtomicValue,
        compare: u64,
        result: *mut u64,
        remote_addr: u64,
        rkey: &Rkey,
        o: Op,
    ) -> Result<Posted<()>> {
        // SAFETY: this function's caller keeps the 8 bytes at `result`
        // writable until completion.
        let word = unsafe { crate::request::buf::ResultWord::new(result) };
        self.atomic_fetch_into(ep, op, value, compare, word, remote_addr, rkey, o)
    }

    /// [`Worker::atomic_fetch_raw`] writing exactly the value's width at
    /// `result`: 4 bytes for [`AtomicValue::U32`], 8 for
    /// [`AtomicValue::U64`] (C's `uint32_t` or `uint64_t` result, as
    /// UCX's fetching atomics have).
    ///
    /// # Safety
    ///
    /// Unless this returns an error, `value.width()` bytes at `result`
    /// (any alignment) stay writable, and untouched by anyone else, until
    /// the request's completion has been observed or the worker is
    /// dropped.
    #[allow(clippy::too_many_arguments)]
    pub unsafe fn atomic_fetch_exact_raw(
        &mut self,
        ep: Ep,
        op: AtomicOp,
        value: AtomicValue,
        compare: u64,
        result: *mut u8,
        remote_addr: u64,
        rkey: &Rkey,
        o: Op,
    ) -> Result<Posted<()>> {
        // SAFETY: this function's caller keeps `value.width()` bytes at
        // `result` writable until completion.
        let word = unsafe { crate::request::buf::ResultWord::exact(result, value.width()) };
        self.atomic_fetch_into(ep, op, value, compare, word, remote_addr, rkey, o)
    }

    #[allow(clippy::too_many_arguments)]
    fn atomic_fetch_into(
        &mut self,
        ep: Ep,
        op: AtomicOp,
        value: AtomicValue,
        compare: u64,
        word: crate::request::buf::ResultWord,
        remote_addr: u64,
        rkey: &Rkey,
        o: Op,
    ) -> Result<Posted<()>> {
        let width = value.width();
        let a = Amo {
            op,
            fetch: true,
            value,
            compare,
            remote: remote_addr,
        };
        if let Some(lane) = self.amo_route(ep, &a, rkey)? {
            return self.atomic_device_start(ep, lane, a, Some(word), o);
        }
        if let Some(r) = self.atomic_mapped(ep, op, value, compare, remote_addr, rkey) {
            let old = r?;
            word.write(old.as_u64());
            drop(o);
            return Ok(Posted::Done(
                Info {
                    tag: 0,
                    length: width,
                },
                (),
            ));
        }
        let sink = RmaSink::Fetch { word, width };
        self.atomic_start(ep, op, value, compare, remote_addr, rkey, sink, o)
    }

    /// [`Worker::put_raw`] of `data`, waiting for completion.
    pub fn put_blocking(
        &mut self,
        ep: Ep,
        data: &[u8],
        remote_addr: u64,
        rkey: &Rkey,
    ) -> Result<()> {
        // SAFETY: `data` is borrowed until the request completed, which
        // `wait_rma` waits for.
        let p =
            unsafe { self.put_raw(ep, data.as_ptr(), data.len(), remote_addr, rkey, Op::new()) }?;
        self.wait_rma(p).map(|_| ())
    }

    /// [`Worker::get_raw`] into `buf`, waiting for completion.
    pub fn get_blocking(
        &mut self,
        ep: Ep,
        buf: &mut [u8],
        remote_addr: u64,
        rkey: &Rkey,
    ) -> Result<()> {
        // SAFETY: `buf` is borrowed mutably until the request completed.
        let p = unsafe {
            self.get_raw(
                ep,
                buf.as_mut_ptr(),
                buf.len(),
                remote_addr,
                rkey,
                Op::new(),
            )
        }?;
        self.wait_rma(p).map(|_| ())
    }

    /// [`Worker::atomic_fetch_raw`], waiting for the old value.
    pub fn atomic_blocking(
        &mut self,
        ep: Ep,
        op: AtomicOp,
        value: AtomicValue,
        compare: u64,
        remote_addr: u64,
        rkey: &Rkey,
    ) -> Result<AtomicValue> {
        let mut old = 0u64;
        // SAFETY: `old` lives until the request completed.
        let p = unsafe {
            self.atomic_fetch_raw(
                ep,
                op,
                value,
                compare,
                &mut old,
                remote_addr,
                rkey,
                Op::new(),
            )
        }?;
        self.wait_rma(p)?;
        AtomicValue::of_width(value.width(), old)
            .ok_or_else(|| Error::InvalidParam("atomic width".into()))
    }

    /// Waits until every one-sided operation posted before has completed:
    /// operations posted after it see their effects (UCX's strong fence).
    pub fn fence(&mut self) -> Result<()> {
        let f = self.fence_start();
        self.flush_wait(f)
    }

    /// The atomic done at once on the peer's segment mapped here, if the
    /// word is in one: its old value, or why it was refused. `None`: take
    /// the general way.
    #[inline(always)]
    fn atomic_mapped(
        &self,
        ep: Ep,
        op: AtomicOp,
        value: AtomicValue,
        compare: u64,
        remote_addr: u64,
        rkey: &Rkey,
    ) -> Option<Result<AtomicValue>> {
        let width = value.width();
        if remote_addr % width as u64 != 0 {
            return None;
        }
        let p = rkey.mapped_ptr(remote_addr, width)?;
        let checked = rkey
            .check(ep, remote_addr, width, Access::REMOTE_ATOMIC)
            .and_then(|()| self.ep_usable(ep));
        Some(checked.map(|()| {
            // SAFETY: `width` bytes inside the mapping, aligned (the
            // segment is page-aligned in both processes); peers reach such
            // words only with atomics.
            unsafe { super::atomic::apply(p, op, value, compare) }
        }))
    }

    /// Checks an access of `len` bytes at `remote_addr` with right `need`
    /// against the key; where the peer's segment is mapped here (and `ep`
    /// is usable), also where those bytes are in this process.
    #[inline(always)]
    fn mapped_access(
        &self,
        ep: Ep,
        rkey: &Rkey,
        remote_addr: u64,
        len: usize,
        need: Access,
    ) -> Result<Option<*mut u8>> {
        rkey.check(ep, remote_addr, len, need)?;
        match rkey.mapped_ptr(remote_addr, len) {
            Some(p) => self.ep_usable(ep).map(|()| Some(p)),
            None => Ok(None),
        }
    }

    /// Fails if `ep` is unknown or failed.
    #[inline(always)]
    pub(super) fn ep_usable(&self, ep: Ep) -> Result<()> {
        match self.core.eps.get(ep.0) {
            Some(st) if st.failed.is_none() => Ok(()),
            _ => Err(self.ep_unusable(ep)),
        }
    }

    /// Why [`Worker::ep_usable`] refused `ep` (kept out of the fast path).
    #[cold]
    #[inline(never)]
    fn ep_unusable(&self, ep: Ep) -> Error {
        match self.core.eps.get(ep.0) {
            Some(st) if st.failed.is_some() => st
                .failed
                .as_deref()
                .cloned()
                .unwrap_or(Error::InvalidHandle),
            _ => Error::InvalidHandle,
        }
    }

    fn wait_rma(&mut self, p: Posted<()>) -> Result<Info> {
        match p {
            Posted::Done(info, ()) => Ok(info),
            Posted::InFlight(id) => self.request_wait(id),
        }
    }

    /// A new RMA request of `ep`, still posting.
    pub(super) fn rma_request(
        &mut self,
        ep: Ep,
        len: usize,
        sink: RmaSink,
        op: Op,
    ) -> crate::ucs::slab::SlabId {
        let st = RmaState {
            ep: ep.0,
            pending: 0,
            posting: true,
            len,
            error: None,
            sink,
            zcopy: Vec::new(),
            zcopy_inflight: 0,
            amo: None,
        };
        self.core.reqs.insert(Request::new(Kind::Rma(st), op))
    }

    /// Ends posting of request `id`: finished at once (`Done`, the slot
    /// freed) or in flight.
    pub(super) fn rma_posted(&mut self, id: crate::ucs::slab::SlabId) -> Result<Posted<()>> {
        let Some(req) = self.core.reqs.get_mut(id) else {
            return Err(Error::InvalidHandle);
        };
        if req.result.is_some() {
            return Ok(Posted::InFlight(ReqId(id)));
        }
        let Kind::Rma(s) = &mut req.kind else {
            return Err(Error::InvalidHandle);
        };
        s.posting = false;
        if s.pending > 0 || s.zcopy.iter().any(|z| z.off < z.len) || s.amo.is_some() {
            return Ok(Posted::InFlight(ReqId(id)));
        }
        let (len, err) = (s.len, s.error.take());
        self.core.reqs.remove(id);
        match err {
            Some(e) => Err(e),
            None => Ok(Posted::Done(
                Info {
                    tag: 0,
                    length: len,
                },
                (),
            )),
        }
    }

    pub(super) fn add_pending(&mut self, id: crate::ucs::slab::SlabId) {
        if let Some(Request {
            kind: Kind::Rma(s), ..
        }) = self.core.reqs.get_mut(id)
        {
            s.pending += 1;
        }
    }

    pub(super) fn set_error(&mut self, id: crate::ucs::slab::SlabId, e: Error) {
        if let Some(Request {
            kind: Kind::Rma(s), ..
        }) = self.core.reqs.get_mut(id)
        {
            s.error.get_or_insert(e);
        }
    }

    fn rma_start(
        &mut self,
        ep: Ep,
        dir: Dir,
        segs: &[(*mut u8, usize)],
        remote: u64,
        rkey: &Rkey,
        op: Op,
    ) -> Result<Posted<()>> {
        let st = self.core.eps.get(ep.0).ok_or(Error::InvalidHandle)?;
        if let Some(e) = &st.failed {
            return Err(Error::clone(e));
        }
        let len = total(segs);
        let done = Posted::Done(
            Info {
                tag: 0,
                length: len,
            },
            (),
        );
        if len == 0 {
            return Ok(done);
        }
        if rkey.mapped_ptr(remote, len).is_some() {
            // The peer's segment is mapped here: copy directly (the key's
            // range and rights were checked by the caller).
            let mut at = remote;
            for &(ptr, n) in segs {
                let Some(p) = rkey.mapped_ptr(at, n) else {
                    continue;
                };
                // SAFETY: `p` has `n` bytes inside the mapping (checked);
                // `ptr` has them by the operation's contract.
                unsafe {
                    match dir {
                        Dir::Put => copy_bytes(ptr, p, n),
                        Dir::Get => copy_bytes(p, ptr, n),
                    }
                }
                at += n as u64;
            }
            return Ok(done);
        }
        if op.immediate {
            // The transport would carry it later.
            return Err(Error::NoResource);
        }
        let cap = match dir {
            Dir::Put => Caps::PUT_ZCOPY,
            Dir::Get => Caps::GET_ZCOPY,
        };
        let zlane = st
            .lanes
            .iter()
            .enumerate()
            .find_map(|(li, &(iface, uct_ep))| {
                if uct_ep == crate::proto::lazy_lanes::LAZY {
                    return None;
                }
                let key = rkey.lanes.get(li)?.as_ref()?;
                let a = self.ifaces[iface].attr();
                let max = if dir == Dir::Put {
                    a.max_put_zcopy
                } else {
                    a.max_get_zcopy
                };
                (a.caps.contains(cap) && max > 0).then(|| (iface, uct_ep, key.clone(), max))
            });
        let max_bcopy = self.core.ep_cfgs[st.iface].max_bcopy;
        let sink = match dir {
            Dir::Put => RmaSink::None,
            Dir::Get => RmaSink::Get {
                // SAFETY: `get_raw`'s caller keeps the ranges writable, and
                // untouched by anyone else, until the request completes.
                segs: segs
                    .iter()
                    .map(|&(p, n)| unsafe { RecvBuf::new(p, n) })
                    .collect(),
            },
        };
        let id = self.rma_request(ep, len, sink, op);
        match zlane {
            Some((iface, uct_ep, key, max)) => {
                let mut at = remote;
                let plans = segs
                    .iter()
                    .map(|&(ptr, n)| {
                        // SAFETY: the operation's caller keeps the range
                        // valid (for a get, writable and the request's
                        // alone) until the request completes.
                        let local = unsafe {
                            match dir {
                                Dir::Put => Local::Send(SendBuf::new(ptr, n), 0),
                                Dir::Get => Local::Recv(RecvBuf::new(ptr, n)),
                            }
                        };
                        let z = ZcopyPlan {
                            local,
                            iface,
                            uct_ep,
                            key: key.clone(),
                            max,
                            len: n,
                            remote: at,
                            off: 0,
                        };
                        at += n as u64;
                        z
                    })
                    .collect();
                if let Some(Request {
                    kind: Kind::Rma(s), ..
                }) = self.core.reqs.get_mut(id)
                {
                    s.zcopy = plans;
                }
                self.core.push_rma_zcopy(&mut self.ifaces, id);
            }
            None => {
                let mut logical = 0;
                for &(ptr, n) in segs {
                    let at = (remote + logical as u64, logical);
                    self.post_emulated(id, ep, dir, max_bcopy, (ptr, n), at, rkey);
                    logical += n;
                }
            }
        }
        self.rma_posted(id)
    }

    /// Posts the active messages moving `len` bytes at `ptr` to or from
    /// `remote`; `base` is where they start in the operation's whole local
    /// data (the offset a get's replies carry).
    #[allow(clippy::too_many_arguments)]
    fn post_emulated(
        &mut self,
        id: crate::ucs::slab::SlabId,
        ep: Ep,
        dir: Dir,
        max_bcopy: usize,
        (ptr, len): (*mut u8, usize),
        (remote, base): (u64, usize),
        rkey: &Rkey,
    ) {
        let frag = match dir {
            Dir::Put => max_bcopy.saturating_sub(PUT_HDR),
            Dir::Get => max_bcopy
                .saturating_sub(REPLY_HDR)
                .min(MAX_GET_FRAGMENT as usize),
        };
        if frag == 0 {
            self.set_error(
                id,
                Error::Unsupported("the endpoint's lane carries no RMA messages".into()),
            );
            return;
        }
        let mut off = 0;
        while off < len {
            let n = frag.min(len - off);
            let at = remote + off as u64;
            let (am, msg) = match dir {
                Dir::Put => {
                    let mut m = wire::encode_put(id.to_u64(), &rkey.key, at);
                    // SAFETY: `off + n <= len` bytes at `ptr`, readable
                    // (put_raw's contract); copied now, so the fragment
                    // does not keep the buffer.
                    m.extend_from_slice(unsafe { std::slice::from_raw_parts(ptr.add(off), n) });
                    (wire::AM_RMA_PUT, m)
                }
                Dir::Get => {
                    let g = GetReq {
                        req: id.to_u64(),
                        key: rkey.key,
                        addr: at,
                        len: n as u64,
                        offset: (base + off) as u64,
                    };
                    (wire::AM_RMA_GET, g.encode())
                }
            };
            self.add_pending(id);
            self.core.send_ctrl(&mut self.ifaces, ep.0, am, msg);
            off += n;
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn atomic_start(
        &mut self,
        ep: Ep,
        op: AtomicOp,
        value: AtomicValue,
        compare: u64,
        remote: u64,
        rkey: &Rkey,
        sink: RmaSink,
        o: Op,
    ) -> Result<Posted<()>> {
        let width = value.width();
        if remote % width as u64 != 0 {
            return Err(Error::InvalidParam(format!(
                "atomic on {remote:#x}: not aligned to {width} bytes"
            )));
        }
        rkey.check(ep, remote, width, Access::REMOTE_ATOMIC)?;
        let st = self.core.eps.get(ep.0).ok_or(Error::InvalidHandle)?;
        if let Some(e) = &st.failed {
            return Err(Error::clone(e));
        }
        // (A word in a mapped segment was handled by `atomic_mapped`.)
        let id = self.rma_request(ep, width, sink, o);
        let msg = AtomicReq {
            req: id.to_u64(),
            key: rkey.key,
            addr: remote,
            op,
            value,
            compare,
        }
        .encode();
        self.add_pending(id);
        self.core
            .send_ctrl(&mut self.ifaces, ep.0, wire::AM_RMA_ATOMIC, msg);
        self.rma_posted(id)
    }
}

/// The ranges of `iov` as writable pointers (a get writes through them).
fn iov_segs(iov: &[Iov]) -> Result<Vec<(*mut u8, usize)>> {
    let segs: Vec<(*mut u8, usize)> = iov.iter().map(|v| (v.ptr.cast_mut(), v.len)).collect();
    if segs
        .iter()
        .try_fold(0usize, |a, &(_, n)| a.checked_add(n))
        .is_none()
    {
        return Err(Error::InvalidParam("the iov lengths overflow".into()));
    }
    Ok(segs)
}

/// Total length of ranges whose sum was checked not to overflow.
fn total(segs: &[(*mut u8, usize)]) -> usize {
    segs.iter().map(|&(_, n)| n).sum()
}

/// The outcome of a put or get of `len` bytes done at once (on a peer's
/// segment mapped here).
#[inline(always)]
fn done_now(len: usize) -> Posted<()> {
    Posted::Done(
        Info {
            tag: 0,
            length: len,
        },
        (),
    )
}

/// Copies `len` bytes between the caller's memory and a mapped segment.
/// Tolerates overlap (a caller may pass a pointer into the mapping): small
/// copies read everything before writing, larger ones are a memmove.
///
/// # Safety
///
/// Both ranges are valid for `len` bytes (reads at `src`, writes at `dst`).
#[inline(always)]
unsafe fn copy_bytes(src: *const u8, dst: *mut u8, len: usize) {
    // SAFETY: forwarded; `copy_small` reads both halves before writing
    // for lengths up to 32.
    unsafe {
        if len <= 32 {
            crate::ucs::copy::copy_small(src, dst, len);
        } else if (src as usize).abs_diff(dst as usize) >= len {
            crate::ucs::copy::copy_large(src, dst, len);
        } else {
            std::ptr::copy(src, dst, len);
        }
    }
}
