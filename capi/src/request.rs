//! Requests in UCX's memory model, and the `ucp_request_*` entry points.
//!
//! A request handle points at the application's area of a block: rucx's
//! `Header` fills the first [`HEADER_SIZE`] bytes, the application's
//! `request_size` bytes follow. Blocks come from a per-worker `Pool`
//! that runs the application's `request_init` on the area once, when it
//! creates a block, and `request_cleanup` when it frees one (at
//! `ucp_worker_destroy`). Memory the application passes itself
//! (`UCP_OP_ATTR_FIELD_REQUEST`, the `_nbr` calls) has the header in the
//! `HEADER_SIZE` bytes before the pointer, as UCX's has its own.
//!
//! A request is *completed* once its status is known and *released* once
//! the application freed it; it goes back to the pool when both hold. A
//! request freed in flight still has its callback run at completion (as
//! UCX's implementation does, whatever its documentation says) and is
//! recycled then.

use crate::status::{self, guard};
use crate::types::*;
use crate::worker::Worker;
use rucx::{Op, ReqId};
use std::alloc::Layout;
use std::ffi::{c_int, c_void};
use std::ptr::{self, NonNull};

/// How a request reports its completion to C.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Cb {
    /// Polling only (`ucp_request_check_status`).
    None,
    /// `ucp_send_nbx_callback_t` with its user data.
    Send(SendNbxCb, *mut c_void),
    /// `ucp_tag_recv_nbx_callback_t` with its user data.
    Recv(TagRecvNbxCb, *mut c_void),
    /// `ucp_am_recv_data_nbx_callback_t` with its user data.
    AmRecv(AmRecvDataCb, *mut c_void),
    /// `ucp_stream_recv_nbx_callback_t` (the same arguments as
    /// `ucp_am_recv_data_nbx_callback_t`) with its user data.
    StreamRecv(AmRecvDataCb, *mut c_void),
    /// `ucp_send_callback_t` of the legacy calls.
    SendLegacy(SendCb),
    /// `ucp_tag_recv_callback_t` of the legacy calls.
    RecvLegacy(TagRecvCb),
    /// `ucp_stream_recv_callback_t` of the legacy calls.
    StreamRecvLegacy(crate::stream::StreamRecvCb),
}

impl Cb {
    /// The callback of parameters `p` (with its user data); `recv` picks
    /// the receive member of the callback union.
    #[inline]
    pub(crate) fn of_param(p: &RequestParam, recv: bool) -> Cb {
        if p.op_attr_mask & UCP_OP_ATTR_FIELD_CALLBACK == 0 {
            return Cb::None;
        }
        let user_data = if p.op_attr_mask & UCP_OP_ATTR_FIELD_USER_DATA != 0 {
            p.user_data
        } else {
            ptr::null_mut()
        };
        // SAFETY: every member of the union is one function pointer; the
        // operation says which one C wrote.
        unsafe {
            match (recv, p.cb.send, p.cb.recv) {
                (false, Some(f), _) => Cb::Send(f, user_data),
                (true, _, Some(f)) => Cb::Recv(f, user_data),
                _ => Cb::None,
            }
        }
    }
}

/// rucx's part of a request, before the application's area.
#[repr(C)]
#[derive(Debug)]
pub(crate) struct Header {
    /// The worker whose pool the block belongs to, or that runs it.
    pub(crate) worker: *const Worker,
    /// The Rust request while in flight.
    pub(crate) id: Option<ReqId>,
    pub(crate) cb: Cb,
    /// What a receive reports.
    pub(crate) info: TagRecvInfo,
    pub(crate) status: StatusCode,
    pub(crate) flags: u8,
}

/// The status is known.
pub(crate) const COMPLETED: u8 = 1;
/// The application freed the request.
pub(crate) const RELEASED: u8 = 2;
/// The block belongs to its worker's pool.
pub(crate) const POOLED: u8 = 4;

/// Bytes of rucx's header before each request handle (what
/// `ucp_context_query` reports as `request_size`); a multiple of 16, so
/// that the application's area is as aligned as `malloc`'s memory.
pub const HEADER_SIZE: usize = (std::mem::size_of::<Header>() + 15) & !15;

/// The handle C sees for header `h`.
pub(crate) fn user_ptr(h: *mut Header) -> *mut c_void {
    h.cast::<u8>().wrapping_add(HEADER_SIZE).cast()
}

/// The header of handle `req` (no check).
pub(crate) fn header_of(req: *mut c_void) -> *mut Header {
    req.cast::<u8>().wrapping_sub(HEADER_SIZE).cast()
}

/// A worker's request blocks.
#[derive(Debug)]
pub(crate) struct Pool {
    free: Vec<NonNull<Header>>,
    layout: Layout,
    cleanup: Option<RequestInitCb>,
}

impl Pool {
    /// A pool of blocks with `user_size` bytes for the application.
    pub(crate) fn new(user_size: usize, cleanup: Option<RequestInitCb>) -> Pool {
        let size = HEADER_SIZE + ((user_size + 15) & !15);
        let layout = Layout::from_size_align(size, 16).unwrap_or(Layout::new::<[u128; 8]>());
        Pool {
            free: Vec::new(),
            layout,
            cleanup,
        }
    }

    /// A block: a free one, or a new one (`true`: the caller runs
    /// `request_init` on it, outside any borrow of the worker).
    pub(crate) fn get(&mut self) -> Option<(NonNull<Header>, bool)> {
        if let Some(h) = self.free.pop() {
            return Some((h, false));
        }
        // SAFETY: the layout has a non-zero size.
        let p = unsafe { std::alloc::alloc_zeroed(self.layout) };
        NonNull::new(p.cast::<Header>()).map(|h| (h, true))
    }

    /// Takes block `h` back.
    pub(crate) fn put(&mut self, h: NonNull<Header>) {
        self.free.push(h);
    }
}

impl Drop for Pool {
    fn drop(&mut self) {
        for h in self.free.drain(..) {
            if let Some(f) = self.cleanup {
                // SAFETY: the application's callback on its own area of a
                // block this pool made.
                unsafe { f(user_ptr(h.as_ptr())) };
            }
            // SAFETY: allocated by `get` with this layout, freed once.
            unsafe { std::alloc::dealloc(h.as_ptr().cast(), self.layout) };
        }
    }
}

/// How an operation wants its request (from `ucp_request_param_t`).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Opts {
    pub(crate) cb: Cb,
    /// Request memory of the application.
    pub(crate) external: *mut c_void,
    /// `UCP_OP_ATTR_FLAG_NO_IMM_CMPL`: return a completed request rather
    /// than NULL, after running the callback.
    pub(crate) no_imm: bool,
    /// `UCP_OP_ATTR_FLAG_FORCE_IMM_CMPL`: complete while posted or fail
    /// with `UCS_ERR_NO_RESOURCE`, posting nothing ([`Op::immediate`]).
    pub(crate) force_imm: bool,
    /// Where a receive that completes at once reports.
    pub(crate) recv_info: *mut TagRecvInfo,
    pub(crate) datatype: Datatype,
    pub(crate) flags: u32,
}

impl Opts {
    /// Plain options: no callback, pooled request, contiguous bytes.
    pub(crate) fn new(cb: Cb) -> Opts {
        Opts {
            cb,
            external: ptr::null_mut(),
            no_imm: false,
            force_imm: false,
            recv_info: ptr::null_mut(),
            datatype: DT_CONTIG_BYTES,
            flags: 0,
        }
    }

    /// The options `param` gives (NULL: the defaults); `recv` picks the
    /// receive member of the callback union.
    ///
    /// # Safety
    ///
    /// `param` is NULL or a valid `ucp_request_param_t`.
    pub(crate) unsafe fn from_param(param: *const RequestParam, recv: bool) -> Opts {
        let mut o = Opts::new(Cb::None);
        // SAFETY: NULL or valid (contract).
        let Some(p) = (unsafe { param.as_ref() }) else {
            return o;
        };
        let has = |bit| p.op_attr_mask & bit != 0;
        o.cb = Cb::of_param(p, recv);
        if has(UCP_OP_ATTR_FIELD_REQUEST) {
            o.external = p.request;
        }
        if has(UCP_OP_ATTR_FIELD_DATATYPE) {
            o.datatype = p.datatype;
        }
        if has(UCP_OP_ATTR_FIELD_FLAGS) {
            o.flags = p.flags;
        }
        if has(UCP_OP_ATTR_FIELD_RECV_INFO) && recv {
            o.recv_info = p.recv_info.cast();
        }
        o.no_imm = has(UCP_OP_ATTR_FLAG_NO_IMM_CMPL);
        o.force_imm = has(UCP_OP_ATTR_FLAG_FORCE_IMM_CMPL);
        o
    }

    /// `op`, made [`Op::immediate`] if these options force an immediate
    /// completion.
    pub(crate) fn op(&self, op: Op) -> Op {
        match self.force_imm {
            true => op.immediate(),
            false => op,
        }
    }
}

/// A fresh header for an operation of `w`: in the application's memory
/// if `o` has some, else from the pool. `Err` with a status if there is
/// none (or the application's memory is misaligned).
pub(crate) fn alloc(w: &Worker, o: &Opts) -> Result<*mut Header, StatusCode> {
    let (h, flags) = if o.external.is_null() {
        let (h, fresh) = w.with_pool(|p| p.get()).ok_or(status::NO_MEMORY)?;
        if fresh {
            if let Some(init) = w.request_init {
                // SAFETY: the application's callback on its area of a new
                // block; no borrow of the worker is alive.
                unsafe { init(user_ptr(h.as_ptr())) };
            }
        }
        (h.as_ptr(), POOLED)
    } else {
        if !aligned(o.external) {
            return Err(status::INVALID_PARAM);
        }
        (header_of(o.external), 0)
    };
    let hdr = Header {
        worker: w,
        id: None,
        cb: o.cb,
        info: TagRecvInfo::default(),
        status: status::INPROGRESS,
        flags,
    };
    // SAFETY: `h` is a block of the pool or the HEADER_SIZE bytes the
    // application left before its request (contract of the calls that
    // take request memory), aligned for a Header (checked).
    unsafe { ptr::write(h, hdr) };
    Ok(h)
}

/// Whether the header of the application's request memory `req` is
/// aligned for a [`Header`].
#[inline]
pub(crate) fn aligned(req: *mut c_void) -> bool {
    header_of(req) as usize % std::mem::align_of::<Header>() == 0
}

/// Marks the application's request memory `req` as a request of `w` that
/// completed well with `info` when posted: a later test reports it, and
/// no callback runs (UCX's behaviour for an operation done at once).
///
/// # Safety
///
/// `req` is [`aligned`] application request memory with a header's room
/// before it, not in use by a request in flight.
#[inline]
pub(crate) unsafe fn write_done(w: &Worker, req: *mut c_void, info: TagRecvInfo) {
    let hdr = Header {
        worker: w,
        id: None,
        cb: Cb::None,
        info,
        status: status::OK,
        flags: COMPLETED,
    };
    // SAFETY: the header's room, aligned (contract).
    unsafe { ptr::write(header_of(req), hdr) };
}

/// Writes the header `h` of the application's request memory for an
/// operation of `w` about to be posted, reporting through `cb`: in
/// flight, with no request yet ([`set_in_flight`] adds it once posted).
/// Written before the post, since the operation may complete inside its
/// own posting call and be marked done there ([`mark_polled`]).
///
/// # Safety
///
/// `h` is the [`aligned`] header room of application request memory not
/// in use by another request in flight.
#[inline]
pub(crate) unsafe fn write_in_flight(w: &Worker, h: *mut Header, cb: Cb) {
    let hdr = Header {
        worker: w,
        id: None,
        cb,
        info: TagRecvInfo::default(),
        status: status::INPROGRESS,
        flags: 0,
    };
    // SAFETY: the header's room, aligned (contract).
    unsafe { ptr::write(h, hdr) };
}

/// Names the Rust request `id` in header `h` of an operation its post
/// reported in flight, unless it completed meanwhile (inside the post, or
/// by a progress since, which leaves no request to name).
///
/// # Safety
///
/// `h` is a live header, its worker's lock held (or its worker used by
/// this thread only).
#[inline]
pub(crate) unsafe fn set_in_flight(h: *mut Header, id: ReqId) {
    // SAFETY: live header (contract).
    let hdr = unsafe { &mut *h };
    if hdr.flags & COMPLETED == 0 {
        hdr.id = Some(id);
    }
}

/// The outcome of an operation that ended when posted with status `st`:
/// NULL (or the error as a pointer), or with `UCP_OP_ATTR_FLAG_NO_IMM_CMPL`
/// a completed request whose callback ran already.
pub(crate) fn done_at_once(w: &Worker, o: &Opts, st: StatusCode, info: TagRecvInfo) -> StatusPtr {
    if !o.no_imm {
        return match st {
            status::OK => ptr::null_mut(),
            st => status::ptr(st),
        };
    }
    match alloc(w, o) {
        Ok(h) => {
            // SAFETY: a fresh header; no borrow of the worker is alive.
            unsafe { complete(h, st, info) };
            user_ptr(h)
        }
        Err(st) => status::ptr(st),
    }
}

/// Gives header `h`'s block back to its pool, if it came from one.
///
/// # Safety
///
/// `h` is a live header whose request is over; it is not used after.
pub(crate) unsafe fn recycle(h: *mut Header) {
    // SAFETY: live header (contract).
    let (flags, w) = unsafe { ((*h).flags, (*h).worker) };
    if flags & POOLED != 0 {
        if let Some(nn) = NonNull::new(h) {
            // SAFETY: a pooled block's worker outlives the block's use.
            unsafe { &*w }.with_pool(|p| p.put(nn));
        }
    }
}

/// Completes request `h` with `status` and `info`: runs its callback,
/// and recycles it if the application released it already.
///
/// A request released in flight still gets its callback, as UCX's
/// implementation does (its documentation says otherwise): MPICH frees
/// the request of every active message it sends right after posting it
/// and finishes the send in the callback. Such a request is marked
/// completed only after the callback, so that a `ucp_request_free` from
/// inside it does not recycle the block a second time.
///
/// # Safety
///
/// `h` is a live header not completed yet, and no borrow of its worker's
/// state is alive (the callback may call any entry point).
#[inline(always)]
pub(crate) unsafe fn complete(h: *mut Header, status: StatusCode, info: TagRecvInfo) {
    // SAFETY: forwarded contract.
    if unsafe { mark_polled(h, status, info) } {
        return;
    }
    // SAFETY: forwarded contract.
    unsafe { complete_with_cb(h, status, info) }
}

/// Completes request `h` if the application polls it (no callback) and
/// still holds it: records `status` and `info`, which runs no C code.
/// `false` (and nothing done) otherwise.
///
/// # Safety
///
/// `h` is a live header not completed yet.
#[inline(always)]
pub(crate) unsafe fn mark_polled(h: *mut Header, status: StatusCode, info: TagRecvInfo) -> bool {
    // SAFETY: live header (contract).
    let hdr = unsafe { &mut *h };
    if matches!(hdr.cb, Cb::None) && hdr.flags & RELEASED == 0 {
        hdr.status = status;
        hdr.info = info;
        hdr.id = None;
        hdr.flags |= COMPLETED;
        return true;
    }
    false
}

/// [`complete`] of a request with a callback, or released already.
///
/// # Safety
///
/// As [`complete`].
#[inline(never)]
unsafe fn complete_with_cb(h: *mut Header, status: StatusCode, info: TagRecvInfo) {
    // SAFETY: live header (contract); the borrow ends before the callback.
    let (cb, released) = unsafe {
        let hdr = &mut *h;
        hdr.status = status;
        hdr.info = info;
        hdr.id = None;
        let released = hdr.flags & RELEASED != 0;
        if !released {
            hdr.flags |= COMPLETED;
        }
        (std::mem::replace(&mut hdr.cb, Cb::None), released)
    };
    let req = user_ptr(h);
    let mut info = info;
    // SAFETY: the application's callbacks with the arguments UCX gives
    // them; `h` is not touched after unless it was released before (then
    // the application gave it up, and it is ours to recycle).
    unsafe {
        match cb {
            Cb::None => {}
            Cb::Send(f, ud) => f(req, status, ud),
            Cb::Recv(f, ud) => f(req, status, &info, ud),
            Cb::AmRecv(f, ud) | Cb::StreamRecv(f, ud) => f(req, status, info.length, ud),
            Cb::StreamRecvLegacy(f) => f(req, status, info.length),
            Cb::SendLegacy(f) => f(req, status),
            Cb::RecvLegacy(f) => f(req, status, &mut info),
        }
    }
    if released {
        // SAFETY: released before and completed now: over.
        unsafe {
            (*h).flags |= COMPLETED;
            recycle(h);
        }
    }
}

/// The worker of a live request handle, for taking its lock.
///
/// # Safety
///
/// `req` is a live request handle.
pub(crate) unsafe fn worker_of<'a>(req: *mut c_void) -> &'a Worker {
    // SAFETY: a live handle has a header whose worker is alive.
    unsafe { &*(*header_of(req)).worker }
}

/// Status and info of a handle: `None` while in flight.
///
/// # Safety
///
/// `req` is a live request handle.
pub(crate) unsafe fn test(req: *mut c_void) -> Option<(StatusCode, TagRecvInfo)> {
    // SAFETY: live handle (contract).
    let h = unsafe { &*header_of(req) };
    (h.flags & COMPLETED != 0).then_some((h.status, h.info))
}

/// `ucp_request_check_status`: the status, or `UCS_INPROGRESS`.
///
/// # Safety
///
/// `request` is a live request handle.
#[no_mangle]
pub unsafe extern "C" fn ucp_request_check_status(request: *mut c_void) -> StatusCode {
    // SAFETY: forwarded contract.
    unsafe { test_request(request, ptr::null_mut()) }
}

/// `ucp_request_test` (legacy): as `ucp_request_check_status`, and fills
/// `info` (if not NULL) for a completed receive.
///
/// # Safety
///
/// `request` is a live request handle; `info` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn ucp_request_test(
    request: *mut c_void,
    info: *mut TagRecvInfo,
) -> StatusCode {
    // SAFETY: forwarded contract.
    unsafe { test_request(request, info) }
}

/// `ucp_tag_recv_request_test`.
///
/// # Safety
///
/// As `ucp_request_test`.
#[no_mangle]
pub unsafe extern "C" fn ucp_tag_recv_request_test(
    request: *mut c_void,
    info: *mut TagRecvInfo,
) -> StatusCode {
    // SAFETY: forwarded contract.
    unsafe { test_request(request, info) }
}

/// The tests of a request: a few loads, no lock unless the worker is
/// shared by threads (`UCS_THREAD_MODE_MULTI`). Nothing here can panic,
/// so no guard is needed.
///
/// # Safety
///
/// `request` is NULL or a live request handle; `info` is NULL or
/// writable.
#[inline(always)]
unsafe fn test_request(request: *mut c_void, info: *mut TagRecvInfo) -> StatusCode {
    if request.is_null() {
        return status::INVALID_PARAM;
    }
    // SAFETY: live handle (contract).
    let w = unsafe { worker_of(request) };
    if w.is_multi() {
        // SAFETY: forwarded contract.
        return unsafe { test_locked(w, request, info) };
    }
    // SAFETY: forwarded contract; the worker is used by this thread only.
    unsafe { test_into(request, info) }
}

/// [`test_request`] under the lock of a worker shared by threads.
///
/// # Safety
///
/// As [`test_request`], `w` being the request's worker.
#[cold]
#[inline(never)]
unsafe fn test_locked(w: &Worker, request: *mut c_void, info: *mut TagRecvInfo) -> StatusCode {
    let _g = w.enter();
    // SAFETY: forwarded contract, under the lock.
    unsafe { test_into(request, info) }
}

/// The status of a live request, `info` filled if it completed.
///
/// # Safety
///
/// As [`test_request`], with the request's worker not in use elsewhere.
#[inline(always)]
unsafe fn test_into(request: *mut c_void, info: *mut TagRecvInfo) -> StatusCode {
    // SAFETY: live handle (contract).
    match unsafe { test(request) } {
        None => status::INPROGRESS,
        Some((s, i)) => {
            if !info.is_null() {
                // SAFETY: writable (contract).
                unsafe { *info = i };
            }
            s
        }
    }
}

/// `ucp_request_is_completed` (legacy).
///
/// # Safety
///
/// `request` is a live request handle.
#[no_mangle]
pub unsafe extern "C" fn ucp_request_is_completed(request: *mut c_void) -> c_int {
    // SAFETY: forwarded contract.
    c_int::from(unsafe { ucp_request_check_status(request) } != status::INPROGRESS)
}

/// `ucp_request_free`: a completed request goes back to the pool; one in
/// flight still has its callback run when it completes (as UCX's does) and
/// goes back then.
///
/// # Safety
///
/// `request` is a live request handle from this library (not memory the
/// application passed) and is not used after.
#[no_mangle]
pub unsafe extern "C" fn ucp_request_free(request: *mut c_void) {
    guard((), || {
        if request.is_null() {
            return;
        }
        // SAFETY: live handle (contract).
        let _g = unsafe { worker_of(request) }.enter();
        let h = header_of(request);
        // SAFETY: live header (contract).
        let done = unsafe {
            (*h).flags |= RELEASED;
            (*h).flags & COMPLETED != 0
        };
        if done {
            // SAFETY: completed and released: over.
            unsafe { recycle(h) };
        }
    })
}

/// `ucp_request_release` (legacy): `ucp_request_free`.
///
/// # Safety
///
/// As `ucp_request_free`.
#[no_mangle]
pub unsafe extern "C" fn ucp_request_release(request: *mut c_void) {
    // SAFETY: forwarded contract.
    unsafe { ucp_request_free(request) }
}

/// `ucp_request_cancel`: a receive not matched yet (or a send none of
/// which left) completes with `UCS_ERR_CANCELED`, its callback running
/// before this returns; anything else runs to its end.
///
/// # Safety
///
/// `worker` is a live worker; `request` a live request handle of it.
#[no_mangle]
pub unsafe extern "C" fn ucp_request_cancel(worker: *mut Worker, request: *mut c_void) {
    guard((), || {
        // SAFETY: NULL or live (contract).
        let Some(w) = (unsafe { worker.as_ref() }) else {
            return;
        };
        if request.is_null() {
            return;
        }
        let _g = w.enter();
        // SAFETY: live handle (contract).
        let id = unsafe { (*header_of(request)).id };
        if let Some(id) = id {
            if w.with(|rw| rw.request_cancel(id)) {
                crate::worker::deliver(w);
            }
        }
    })
}
