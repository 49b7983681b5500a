//! Endpoints: `ucp_ep_create` from a worker address, closing
//! (`ucp_ep_close_nbx`, `ucp_ep_close_nb`, `ucp_ep_destroy`,
//! `ucp_disconnect_nb`) and `ucp_ep_print_info`.
//!
//! rucx keeps one endpoint per remote worker; each `ucp_ep_create` gets a
//! C endpoint of its own on it, and the Rust endpoint is closed with the
//! last of them. Error handlers: in `UCP_ERR_HANDLING_MODE_PEER` the Rust
//! endpoint's handler queues the failure, and `ucp_worker_progress` calls
//! the C handler of each C endpoint on it (with the endpoint's user data
//! as its argument when one was given, as UCX does), with UCX's status
//! for it (`UCS_ERR_ENDPOINT_TIMEOUT` for an endpoint by worker address,
//! see `worker::failure_status`); operations posted on it after that fail
//! at once with the same status, as UCX's do.

use crate::config::write_stream;
use crate::request::{self, Opts};
use crate::status::{self, guard, guard_ptr};
use crate::types::*;
use crate::worker::{self, Polled, Worker};
use rucx::ucp::CloseMode;
use rucx::{EpParams as RustEpParams, ErrMode};
use std::cell::RefCell;
use std::ffi::c_uint;
use std::ptr;
use std::sync::atomic::{AtomicU64, Ordering};

/// `ucp_ep_h`.
#[derive(Debug)]
pub struct Endpoint {
    pub(crate) worker: *const Worker,
    /// Written only through [`Endpoint::set_conn`] (and at creation).
    pub(crate) conn: RefCell<Conn>,
    /// The Rust endpoint while `conn` is `Ready` (`Ep::to_u64`), else
    /// [`NOT_READY`]: read without the worker's lock by the sends of
    /// `UCS_THREAD_MODE_MULTI` that try the endpoint's own send path.
    ready_ep: AtomicU64,
    pub(crate) err: ErrHandler,
    /// Created in `UCP_ERR_HANDLING_MODE_PEER`.
    pub(crate) peer: bool,
    /// Operations posted while its connect is under way ([`crate::deferred`]).
    pub(crate) deferred: RefCell<crate::deferred::List>,
}

/// Where a C endpoint's Rust endpoint is.
#[derive(Debug)]
pub(crate) enum Conn {
    /// Connected.
    Ready(rucx::Ep),
    /// A client's connect by socket address, not answered yet.
    Connecting(Box<rucx::ucp::Connecting>),
    /// The connect failed with this status.
    Failed(StatusCode),
    /// Connected, then failed: its error handler got this status, and
    /// later operations fail with it; the Rust endpoint is closed with it.
    Broken(rucx::Ep, StatusCode),
}

/// [`Endpoint::ready_ep`] of an endpoint that is not ready.
const NOT_READY: u64 = u64::MAX;

impl Endpoint {
    /// A C endpoint of `worker` in state `conn`.
    pub(crate) fn new(worker: *const Worker, conn: Conn, err: ErrHandler, peer: bool) -> Endpoint {
        let ready = match &conn {
            Conn::Ready(ep) => ep.to_u64(),
            _ => NOT_READY,
        };
        Endpoint {
            worker,
            conn: RefCell::new(conn),
            ready_ep: AtomicU64::new(ready),
            err,
            peer,
            deferred: RefCell::default(),
        }
    }

    /// Moves the endpoint to state `c`. An endpoint that becomes ready is
    /// not ready for sends without the lock until [`Endpoint::publish`]:
    /// the operations deferred while it connected go first.
    pub(crate) fn set_conn(&self, c: Conn) {
        *self.conn.borrow_mut() = c;
        self.ready_ep.store(NOT_READY, Ordering::Release);
    }

    /// The ready endpoint `ep` may take sends without the lock: every
    /// operation posted on it before is in the worker.
    pub(crate) fn publish(&self, ep: rucx::Ep) {
        self.ready_ep.store(ep.to_u64(), Ordering::Release);
    }

    /// The Rust endpoint if connected and not failed, read without the
    /// worker's lock.
    #[inline]
    pub(crate) fn ready_unlocked(&self) -> Option<rucx::Ep> {
        match self.ready_ep.load(Ordering::Acquire) {
            NOT_READY => None,
            v => Some(rucx::Ep::from_u64(v)),
        }
    }

    /// In `UCS_THREAD_MODE_MULTI`: the endpoint's own send paths and the
    /// Rust endpoint, if it is connected; short sends try them before
    /// they take the worker's lock.
    #[inline]
    pub(crate) fn paths(&self) -> Option<(&rucx::ucp::SendPaths, rucx::Ep)> {
        let paths = self.worker().send_paths()?;
        Some((paths, self.ready_unlocked()?))
    }

    /// The Rust endpoint; while a client's connect is in progress, waits
    /// for it, progressing the worker (C callbacks run, a listener's too,
    /// but this endpoint's connect is looked at only here: its failure is
    /// reported to its handler by a later `ucp_worker_progress`, not
    /// inside this call); the status if it failed.
    #[inline]
    pub(crate) fn rep(&self) -> Result<rucx::Ep, StatusCode> {
        if let Ok(Conn::Ready(ep)) = self.conn.try_borrow().as_deref() {
            return Ok(*ep);
        }
        self.rep_slow()
    }

    /// The Rust endpoint if connected and not failed (no waiting).
    #[inline(always)]
    pub(crate) fn ready(&self) -> Option<rucx::Ep> {
        match self.conn.try_borrow().as_deref() {
            Ok(Conn::Ready(ep)) => Some(*ep),
            _ => None,
        }
    }

    /// [`Endpoint::rep`] of an endpoint not ready.
    #[cold]
    fn rep_slow(&self) -> Result<rucx::Ep, StatusCode> {
        let w = self.worker();
        let me = (self as *const Endpoint).cast_mut();
        let outer = w.waiting.replace(me);
        let r = loop {
            match &*self.conn.borrow() {
                Conn::Ready(ep) => break Ok(*ep),
                Conn::Failed(st) | Conn::Broken(_, st) => break Err(*st),
                Conn::Connecting(_) => {}
            }
            let mut n = w.with(|rw| rw.progress());
            if worker::poll_connect(w, me).is_some() {
                continue;
            }
            n += worker::deliver(w);
            if n == 0 {
                std::thread::sleep(std::time::Duration::from_micros(50));
            }
        };
        w.waiting.set(outer);
        r
    }

    /// Whether its connect (a client's, by socket address) is under way.
    pub(crate) fn is_connecting(&self) -> bool {
        matches!(&*self.conn.borrow(), Conn::Connecting(_))
    }

    /// The endpoint's worker.
    pub(crate) fn worker(&self) -> &Worker {
        // SAFETY: a worker outlives its endpoints (ucp_worker_destroy
        // frees them with it).
        unsafe { &*self.worker }
    }
}

/// `ucp_ep_create`: by `UCP_EP_PARAM_FIELD_REMOTE_ADDRESS`, by
/// `UCP_EP_PARAM_FIELD_CONN_REQUEST` (the server accepts a client), or
/// by `UCP_EP_PARAM_FIELD_SOCK_ADDR` (the client side: it returns at
/// once, the connection completes in `ucp_worker_progress`, a send posted
/// meanwhile is deferred until then (`deferred.rs`), and a rejected or refused connection
/// calls the error handler with `UCS_ERR_REJECTED`,
/// `UCS_ERR_UNREACHABLE`, ...).
///
/// # Safety
///
/// `worker` is a live worker; `params` points to a `ucp_ep_params_t`
/// whose address (if set) came from `ucp_worker_get_address`; `ep_p` is
/// writable.
#[no_mangle]
pub unsafe extern "C" fn ucp_ep_create(
    worker: *mut Worker,
    params: *const EpParams,
    ep_p: *mut *mut Endpoint,
) -> StatusCode {
    status::guard_status(|| {
        // SAFETY: NULL or valid (contract).
        let (Some(w), Some(p)) = (unsafe { worker.as_ref() }, unsafe { params.as_ref() }) else {
            return status::INVALID_PARAM;
        };
        if ep_p.is_null() {
            return status::INVALID_PARAM;
        }
        let _g = w.enter();
        let has = |bit| p.field_mask & bit != 0;
        let peer_mode =
            has(UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE) && p.err_mode == UCP_ERR_HANDLING_MODE_PEER;
        let mut err = match has(UCP_EP_PARAM_FIELD_ERR_HANDLER) {
            true => p.err_handler,
            false => ErrHandler {
                cb: None,
                arg: ptr::null_mut(),
            },
        };
        if has(UCP_EP_PARAM_FIELD_USER_DATA) {
            err.arg = p.user_data;
        }
        let rust_params = || match peer_mode {
            true => {
                let failures = w.failures.clone();
                RustEpParams::new()
                    .err_mode(ErrMode::Peer)
                    .on_error(move |_, ep, e| failures.push((ep, e.status().code())))
            }
            false => RustEpParams::new(),
        };
        let made = if has(UCP_EP_PARAM_FIELD_REMOTE_ADDRESS) {
            if p.address.is_null() {
                return status::INVALID_PARAM;
            }
            // SAFETY: an address from ucp_worker_get_address (contract).
            let Some(addr) = (unsafe { worker::unwrap_address(p.address) }) else {
                return status::INVALID_ADDR;
            };
            w.with(|rw| rw.connect(addr)).and_then(|ep| {
                if peer_mode {
                    w.with(|rw| rw.connect_with(addr, rust_params()))?;
                }
                Ok(ep)
            })
        } else if has(UCP_EP_PARAM_FIELD_CONN_REQUEST) {
            if p.conn_request.is_null() {
                return status::INVALID_PARAM;
            }
            // SAFETY: an unanswered request from a listener's handler
            // (contract); freed here, once.
            let r = unsafe { Box::from_raw(p.conn_request.cast::<crate::listener::ConnRequest>()) };
            let made = w.with(|rw| rw.accept(r.req, rust_params()));
            if let Ok(ep) = &made {
                w.with_cm(|s| s.insert(ep.to_u64()));
            }
            made
        } else if has(UCP_EP_PARAM_FIELD_SOCK_ADDR) {
            // SAFETY: a readable socket address (contract).
            let Some(addr) = (unsafe { crate::listener::from_c(&p.sockaddr) }) else {
                return status::INVALID_PARAM;
            };
            // A connect that fails at once (refused) fails the endpoint
            // in the next progress, as one that fails later.
            let conn = match w.with(|rw| rw.connect_start(addr, rust_params())) {
                Ok(c) => Conn::Connecting(Box::new(c)),
                Err(e) => Conn::Failed(status::of(&e)),
            };
            let c = Box::into_raw(Box::new(Endpoint::new(w, conn, err, peer_mode)));
            w.with_connecting(|v| v.push(c));
            // SAFETY: checked non-NULL; writable (contract).
            unsafe { *ep_p = c };
            return status::OK;
        } else {
            return status::INVALID_PARAM;
        };
        let ep = match made {
            Ok(ep) => ep,
            Err(e) => return status::of(&e),
        };
        let c = Box::into_raw(Box::new(Endpoint::new(w, Conn::Ready(ep), err, peer_mode)));
        w.with_eps(|m| m.entry(ep.to_u64()).or_default().push(c));
        // SAFETY: checked non-NULL; writable (contract).
        unsafe { *ep_p = c };
        status::OK
    })
}

/// Posts a request that completes when polled operation `op` ends, or
/// returns at once if it ended (see [`request::done_at_once`]). The
/// callback of `o` runs at completion.
pub(crate) fn post_polled(w: &Worker, mut op: Polled, o: &Opts) -> StatusPtr {
    let r = w.with(|rw| match &mut op {
        Polled::Close(c, lenient) => worker::close_result(rw.ep_close_poll(c), *lenient),
        Polled::Flush(f) => rw.flush_poll(f),
    });
    if let Some(r) = r {
        return request::done_at_once(w, o, worker::close_status(r), TagRecvInfo::default());
    }
    match request::alloc(w, o) {
        Ok(h) => {
            w.with_polled(|v| v.push((h, op)));
            request::user_ptr(h)
        }
        Err(st) => status::ptr(st),
    }
}

/// Closes C endpoint `ep`, force or flush, as `ucp_ep_close_nbx`.
///
/// # Safety
///
/// `ep` is a live endpoint; it is freed here, or, in flush mode while
/// its connect is under way, once the connect ended (`deferred.rs`).
pub(crate) unsafe fn close(ep: *mut Endpoint, force: bool, o: &Opts) -> StatusPtr {
    // SAFETY: live endpoint (contract).
    let (w, peer) = unsafe { ((*ep).worker(), (*ep).peer) };
    let _g = w.enter();
    // SAFETY: live endpoint (contract).
    // SAFETY: live endpoint (contract).
    let (rep, broken) = match &*unsafe { (*ep).conn.borrow() } {
        Conn::Ready(rep) => (Some(*rep), None),
        Conn::Broken(rep, st) => (Some(*rep), Some(*st)),
        _ => (None, None),
    };
    let Some(rep) = rep else {
        // SAFETY: live endpoint (contract).
        if !force && crate::deferred::waits_for_connect(unsafe { &*ep }) {
            // SAFETY: as above.
            return crate::deferred::defer_close(unsafe { &*ep }, o);
        }
        // Never connected: nothing on the Rust side; what was posted on
        // it is canceled.
        w.with_connecting(|v| v.retain(|&p| p != ep));
        // SAFETY: live endpoint (contract); freed only below.
        crate::deferred::fail(unsafe { &*ep }, status::CANCELED);
        // SAFETY: boxed by ucp_ep_create; in no table now, freed once.
        drop(unsafe { Box::from_raw(ep) });
        return request::done_at_once(w, o, status::OK, TagRecvInfo::default());
    };
    let last = w.with_eps(|m| {
        let key = rep.to_u64();
        let v = m.entry(key).or_default();
        v.retain(|&p| p != ep);
        let last = v.is_empty();
        if last {
            m.remove(&key);
        }
        last
    });
    if last {
        w.with_cm(|s| s.remove(&rep.to_u64()));
    }
    // SAFETY: boxed by ucp_ep_create; out of the table, freed once.
    drop(unsafe { Box::from_raw(ep) });
    let mode = if force {
        CloseMode::Force
    } else {
        CloseMode::Flush
    };
    let op = match last {
        false => None,
        true => match w.with(|rw| rw.ep_close_start(rep, mode)) {
            Ok(c) => Some(Polled::Close(c, !peer)),
            // Gone already (a failure closed it): nothing to close.
            Err(rucx::Error::InvalidHandle) => None,
            // Without error handling (UCX's default), the peer's going
            // away is not reported: the endpoint is closed all the same.
            Err(rucx::Error::EndpointFailed { .. }) if !peer => None,
            // Failed: with the status its error handler got, if it ran.
            Err(e) => return status::ptr(broken.unwrap_or_else(|| status::of(&e))),
        },
    };
    match op {
        Some(op) => post_polled(w, op, o),
        None => request::done_at_once(w, o, status::OK, TagRecvInfo::default()),
    }
}

/// `ucp_ep_close_nbx`: `UCP_EP_CLOSE_FLAG_FORCE` in the parameters'
/// flags releases the endpoint at once (what was posted on a client
/// endpoint still connecting is canceled); otherwise what was posted on
/// it leaves first, then the peer is told (a client endpoint still
/// connecting is closed once its connect ended, as UCX's).
///
/// # Safety
///
/// `ep` is a live endpoint, not used after; `param` is NULL or a valid
/// `ucp_request_param_t`.
#[no_mangle]
pub unsafe extern "C" fn ucp_ep_close_nbx(
    ep: *mut Endpoint,
    param: *const RequestParam,
) -> StatusPtr {
    guard_ptr(|| {
        if ep.is_null() {
            return status::ptr(status::INVALID_PARAM);
        }
        // SAFETY: NULL or valid (contract).
        let o = unsafe { Opts::from_param(param, false) };
        let force = o.flags & UCP_EP_CLOSE_FLAG_FORCE != 0;
        // SAFETY: live endpoint (contract).
        unsafe { close(ep, force, &o) }
    })
}

/// `ucp_ep_close_nb`: `UCP_EP_CLOSE_MODE_FORCE` or `_FLUSH`.
///
/// # Safety
///
/// As `ucp_ep_close_nbx`.
#[no_mangle]
pub unsafe extern "C" fn ucp_ep_close_nb(ep: *mut Endpoint, mode: c_uint) -> StatusPtr {
    guard_ptr(|| {
        if ep.is_null() || mode > UCP_EP_CLOSE_MODE_FLUSH {
            return status::ptr(status::INVALID_PARAM);
        }
        let o = Opts::new(request::Cb::None);
        // SAFETY: live endpoint (contract).
        unsafe { close(ep, mode == UCP_EP_CLOSE_MODE_FORCE, &o) }
    })
}

/// `ucp_disconnect_nb` (legacy): `ucp_ep_close_nb` in flush mode.
///
/// # Safety
///
/// As `ucp_ep_close_nbx`.
#[no_mangle]
pub unsafe extern "C" fn ucp_disconnect_nb(ep: *mut Endpoint) -> StatusPtr {
    // SAFETY: forwarded contract.
    unsafe { ucp_ep_close_nb(ep, UCP_EP_CLOSE_MODE_FLUSH) }
}

/// Progresses `w` until request `req` (a status pointer) is over; frees
/// it and returns its status.
pub(crate) fn wait_ptr(w: &Worker, req: StatusPtr) -> StatusCode {
    if let Some(st) = status::of_ptr(req) {
        return st;
    }
    loop {
        // SAFETY: a live request of this library.
        let st = unsafe { request::ucp_request_check_status(req) };
        if st != status::INPROGRESS {
            // SAFETY: as above; not used after.
            unsafe { request::ucp_request_free(req) };
            return st;
        }
        worker::progress(w);
    }
}

/// `ucp_ep_destroy` (legacy): closes in flush mode and waits.
///
/// # Safety
///
/// As `ucp_ep_close_nbx`.
#[no_mangle]
pub unsafe extern "C" fn ucp_ep_destroy(ep: *mut Endpoint) {
    guard((), || {
        if ep.is_null() {
            return;
        }
        // SAFETY: live endpoint (contract).
        let w = unsafe { (*ep).worker() };
        let _g = w.enter();
        // SAFETY: live endpoint (contract); not used after.
        let req = unsafe { close(ep, false, &Opts::new(request::Cb::None)) };
        wait_ptr(w, req);
    })
}

/// `ucp_ep_print_info`: the remote worker and the protocol tables.
///
/// # Safety
///
/// `ep` is a live endpoint; `stream` an open `FILE *`.
#[no_mangle]
pub unsafe extern "C" fn ucp_ep_print_info(ep: *mut Endpoint, stream: *mut libc::FILE) {
    guard((), || {
        // SAFETY: NULL or live (contract).
        let Some(e) = (unsafe { ep.as_ref() }) else {
            return;
        };
        let w = e.worker();
        let _g = w.enter();
        let Ok(rep) = e.rep() else {
            return;
        };
        let (uuid, tables) = w.with(|rw| (rw.ep_remote_uuid(rep), rw.ep_protocols(rep)));
        let mut out = format!("#\n# UCP endpoint of worker '{}'\n#\n", worker::name_of(w));
        if let Ok(u) = uuid {
            out += &format!("#               peer: {u:#018x}\n");
        }
        for t in tables.unwrap_or_default() {
            for line in format!("{t}").lines() {
                out += &format!("# {line}\n");
            }
        }
        out += "#\n";
        // SAFETY: an open stream (contract).
        unsafe { write_stream(stream, out.as_bytes()) };
    })
}
