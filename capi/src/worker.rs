//! Workers: `ucp_worker_create`, `destroy`, `query`, `progress`,
//! addresses, `fence`, `print_info`; what is handed to C after progress
//! is `deliver.rs`.
//!
//! # Borrows
//! A C worker holds its Rust [`rucx::Worker`] and the C layer's state in
//! `UnsafeCell`s. Every access goes through a closure (`with`,
//! `with_pool`, ...) that calls no C code and no other accessor, so no two
//! borrows overlap; C callbacks run only from `deliver.rs`, between such
//! accesses. Single-thread use is the caller's promise in
//! `UCS_THREAD_MODE_SINGLE` and `SERIALIZED` (as UCX's); in `MULTI` every
//! entry point holds the worker's reentrant lock (`Worker::enter`), except
//! a short tag send that the endpoint's own send path takes
//! ([`rucx::ucp::SendPaths`], as a `SharedWorker`'s sends do).

use crate::config::write_stream;
use crate::context::{copy_name, Context};
use crate::ep::Endpoint;
use crate::request::{Header, Pool};
use crate::status::{self, guard, guard_status};
use crate::types::*;
use parking_lot::{ReentrantMutex, ReentrantMutexGuard};
use rucx::ucp::{Closing, Flushing};
use std::cell::{Cell, UnsafeCell};
use std::collections::{HashMap, HashSet};
use std::ffi::{c_uint, c_void};
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

/// An operation the worker moves on after each progress: its request
/// completes when it is over.
#[derive(Debug)]
pub(crate) enum Polled {
    /// A flush-mode endpoint close; `true`: of an endpoint without error
    /// handling, which ends well even if the peer went away
    /// ([`close_result`]).
    Close(Closing, bool),
    /// An endpoint or worker flush.
    Flush(Flushing),
}

/// Endpoint failures reported by the Rust error handlers, for C.
pub(crate) type Failures = crate::inbox::Inbox<(rucx::Ep, StatusCode)>;

/// `ucp_worker_h`.
#[derive(Debug)]
pub struct Worker {
    inner: UnsafeCell<rucx::Worker>,
    pool: UnsafeCell<Pool>,
    polled: UnsafeCell<Vec<(*mut Header, Polled)>>,
    /// The C endpoints of each Rust endpoint (by `Ep::to_u64`): several
    /// `ucp_ep_create` to one worker share one Rust endpoint.
    eps: UnsafeCell<HashMap<u64, Vec<*mut Endpoint>>>,
    /// Client endpoints whose connect is in progress.
    connecting: UnsafeCell<Vec<*mut Endpoint>>,
    /// The client endpoint a call waits for (`Endpoint::rep`), whose
    /// connect only that call looks at.
    pub(crate) waiting: std::cell::Cell<*mut Endpoint>,
    /// Requests that completed where no C callback may run, with their
    /// status and what they report: completed by the next progress.
    late: UnsafeCell<Vec<(*mut Header, StatusCode, TagRecvInfo)>>,
    /// The Rust endpoints of client-server connections (by `Ep::to_u64`):
    /// accepted from a connection request or connected by socket address.
    cm: UnsafeCell<HashSet<u64>>,
    pub(crate) failures: Failures,
    /// Active message handlers and the data C keeps.
    am: UnsafeCell<crate::am::AmState>,
    /// Active messages the Rust handlers queued, for C.
    pub(crate) am_queue: crate::am::Queue,
    /// Connection requests of this worker's listeners, for C.
    pub(crate) conn_queue: crate::listener::Queue,
    pub(crate) waker: rucx::Waker,
    /// Set by every push to `failures`, `am_queue` and `conn_queue`: one
    /// load tells an idle progress that none of them has anything.
    pub(crate) bell: Arc<AtomicBool>,
    /// `polled`, `connecting` or `late` may hold something: set by their
    /// accessors, recomputed by the delivery that looks at them.
    pub(crate) slow: Cell<bool>,
    lock: Option<ReentrantMutex<()>>,
    /// In `MULTI`: the endpoints' own send paths, which short sends try
    /// before they take the lock.
    paths: Option<rucx::ucp::SendPaths>,
    pub(crate) request_init: Option<RequestInitCb>,
    thread_mode: ThreadMode,
    name: String,
    /// The worker's address as C sees it ([`wrap_address`]).
    address: Vec<u8>,
}

/// Bytes before the Rust worker address in the address C gets: a magic
/// and the length, so that `ucp_ep_create` knows how much to read.
pub(crate) const ADDRESS_PREFIX: usize = 8;
const ADDRESS_MAGIC: [u8; 4] = *b"rcx1";
/// Longest address `ucp_ep_create` accepts.
const ADDRESS_MAX: usize = 1 << 16;

/// The address C gets for Rust worker address `a`.
fn wrap_address(a: &[u8]) -> Vec<u8> {
    let mut v = ADDRESS_MAGIC.to_vec();
    v.extend_from_slice(&(a.len() as u32).to_le_bytes());
    v.extend_from_slice(a);
    v
}

/// The Rust worker address inside C address `p`.
///
/// # Safety
///
/// `p` points to an address from `ucp_worker_get_address` (or at least
/// [`ADDRESS_PREFIX`] readable bytes).
pub(crate) unsafe fn unwrap_address<'a>(p: *const c_void) -> Option<&'a [u8]> {
    // SAFETY: at least the prefix is readable (contract).
    let head = unsafe { std::slice::from_raw_parts(p.cast::<u8>(), ADDRESS_PREFIX) };
    if head[..4] != ADDRESS_MAGIC {
        return None;
    }
    let len = u32::from_le_bytes([head[4], head[5], head[6], head[7]]) as usize;
    if len > ADDRESS_MAX {
        return None;
    }
    // SAFETY: an address from ucp_worker_get_address holds `len` bytes
    // after its prefix.
    Some(unsafe { std::slice::from_raw_parts(p.cast::<u8>().add(ADDRESS_PREFIX), len) })
}

impl Worker {
    /// The Rust worker, for `f`, which must call no C code and no other
    /// accessor of this worker.
    pub(crate) fn with<R>(&self, f: impl FnOnce(&mut rucx::Worker) -> R) -> R {
        // Released memory reported since the last call leaves the caches
        // before the worker can look a registration up.
        crate::ucm::drain();
        // SAFETY: accessors never nest (module doc) and the worker is used
        // by one thread at a time (thread mode contract or lock).
        f(unsafe { &mut *self.inner.get() })
    }

    /// The request pool, as [`Worker::with`].
    pub(crate) fn with_pool<R>(&self, f: impl FnOnce(&mut Pool) -> R) -> R {
        // SAFETY: as in `with`.
        f(unsafe { &mut *self.pool.get() })
    }

    /// The polled operations, as [`Worker::with`].
    pub(crate) fn with_polled<R>(&self, f: impl FnOnce(&mut Vec<(*mut Header, Polled)>) -> R) -> R {
        self.slow.set(true);
        // SAFETY: as in `with`.
        f(unsafe { &mut *self.polled.get() })
    }

    /// The endpoint table, as [`Worker::with`].
    pub(crate) fn with_eps<R>(
        &self,
        f: impl FnOnce(&mut HashMap<u64, Vec<*mut Endpoint>>) -> R,
    ) -> R {
        // SAFETY: as in `with`.
        f(unsafe { &mut *self.eps.get() })
    }

    /// The client endpoints whose connect is in progress.
    pub(crate) fn with_connecting<R>(&self, f: impl FnOnce(&mut Vec<*mut Endpoint>) -> R) -> R {
        self.slow.set(true);
        // SAFETY: as `with_eps`.
        f(unsafe { &mut *self.connecting.get() })
    }

    /// The requests that completed where no C callback may run, as
    /// [`Worker::with`].
    pub(crate) fn with_late<R>(
        &self,
        f: impl FnOnce(&mut Vec<(*mut Header, StatusCode, TagRecvInfo)>) -> R,
    ) -> R {
        self.slow.set(true);
        // SAFETY: as in `with`.
        f(unsafe { &mut *self.late.get() })
    }

    /// Whether `polled`, `connecting` or `late` holds something (no
    /// accessor: it does not set `slow`).
    pub(crate) fn slow_work(&self) -> bool {
        // SAFETY: as in `with`; shared reads that end here.
        unsafe {
            !(*self.polled.get()).is_empty()
                || !(*self.connecting.get()).is_empty()
                || !(*self.late.get()).is_empty()
        }
    }

    /// The client-server endpoints, as [`Worker::with`].
    pub(crate) fn with_cm<R>(&self, f: impl FnOnce(&mut HashSet<u64>) -> R) -> R {
        // SAFETY: as in `with`.
        f(unsafe { &mut *self.cm.get() })
    }

    /// The active message state, as [`Worker::with`].
    pub(crate) fn with_am<R>(&self, f: impl FnOnce(&mut crate::am::AmState) -> R) -> R {
        // SAFETY: as in `with`.
        f(unsafe { &mut *self.am.get() })
    }

    /// Whether threads share the worker (`UCS_THREAD_MODE_MULTI`): then
    /// every entry point takes its lock.
    #[inline]
    pub(crate) fn is_multi(&self) -> bool {
        self.lock.is_some()
    }

    /// In `UCS_THREAD_MODE_MULTI`, the endpoints' own send paths.
    #[inline]
    pub(crate) fn send_paths(&self) -> Option<&rucx::ucp::SendPaths> {
        self.paths.as_ref()
    }

    /// Takes the worker's lock in `UCS_THREAD_MODE_MULTI`.
    #[inline]
    pub(crate) fn enter(&self) -> Option<ReentrantMutexGuard<'_, ()>> {
        self.lock.as_ref().map(|l| l.lock())
    }

    /// Whether the C layer has work of its own pending (for `arm`/`wait`).
    pub(crate) fn pending(&self) -> bool {
        !self.failures.is_empty()
            || !self.am_queue.is_empty()
            || !self.conn_queue.is_empty()
            || self.slow_work()
    }
}

pub(crate) use crate::deliver::{close_result, close_status, deliver, poll_connect, progress};

/// `ucp_worker_create`: a worker with one iface per transport resource
/// of the context. `UCP_WORKER_PARAM_FIELD_EVENT_FD` (an external event
/// fd) is `UCS_ERR_UNSUPPORTED`.
///
/// # Safety
///
/// `context` came from `ucp_init`; `params` points to a
/// `ucp_worker_params_t`; `worker_p` is writable.
#[no_mangle]
pub unsafe extern "C" fn ucp_worker_create(
    context: *mut Context,
    params: *const WorkerParams,
    worker_p: *mut *mut Worker,
) -> StatusCode {
    guard_status(|| {
        // SAFETY: NULL or valid (contract).
        let (Some(c), Some(p)) = (unsafe { context.as_ref() }, unsafe { params.as_ref() }) else {
            return status::INVALID_PARAM;
        };
        if worker_p.is_null() {
            return status::INVALID_PARAM;
        }
        let has = |bit| p.field_mask & bit != 0;
        if has(UCP_WORKER_PARAM_FIELD_EVENT_FD) {
            return status::UNSUPPORTED;
        }
        let thread_mode = match has(UCP_WORKER_PARAM_FIELD_THREAD_MODE) {
            true if (UCS_THREAD_MODE_SINGLE..=UCS_THREAD_MODE_MULTI).contains(&p.thread_mode) => {
                p.thread_mode
            }
            true => return status::INVALID_PARAM,
            false => UCS_THREAD_MODE_SINGLE,
        };
        let name = match has(UCP_WORKER_PARAM_FIELD_NAME) {
            // SAFETY: a C string when the field is set (contract).
            true => unsafe { crate::config::opt_str(p.name) }.map(str::to_string),
            false => None,
        };
        let mut rw = match c.ctx.create_worker() {
            Ok(w) => w,
            Err(e) => return status::of(&e),
        };
        let waker = match rw.waker() {
            Ok(k) => k,
            Err(e) => return status::of(&e),
        };
        rw.set_completion_hook(Some(crate::deliver::mark_done));
        let address = wrap_address(&rw.address());
        let multi = thread_mode == UCS_THREAD_MODE_MULTI;
        let paths = multi.then(|| rw.send_paths());
        let bell = Arc::new(AtomicBool::new(false));
        let w = Worker {
            name: name.unwrap_or_else(|| format!("{}:{}", c.name, std::process::id())),
            inner: UnsafeCell::new(rw),
            pool: UnsafeCell::new(Pool::new(c.request_size, c.request_cleanup)),
            polled: UnsafeCell::new(Vec::new()),
            eps: UnsafeCell::new(HashMap::new()),
            connecting: UnsafeCell::new(Vec::new()),
            late: UnsafeCell::new(Vec::new()),
            waiting: std::cell::Cell::new(std::ptr::null_mut()),
            cm: UnsafeCell::new(HashSet::new()),
            failures: Failures::with_bell(Some(bell.clone())),
            am: UnsafeCell::new(crate::am::AmState::default()),
            am_queue: crate::am::Queue::with_bell(Some(bell.clone())),
            conn_queue: crate::listener::Queue::with_bell(Some(bell.clone())),
            waker,
            bell,
            slow: Cell::new(false),
            lock: multi.then(|| ReentrantMutex::new(())),
            paths,
            request_init: c.request_init,
            thread_mode,
            address,
        };
        // SAFETY: checked non-NULL; writable (contract).
        unsafe { *worker_p = Box::into_raw(Box::new(w)) };
        status::OK
    })
}

/// `ucp_worker_destroy`: closes the worker's endpoints at once and frees
/// its pooled requests (running `request_cleanup` on each). Requests
/// still held by the application are not freed.
///
/// # Safety
///
/// `worker` came from `ucp_worker_create`, is not in use by any thread
/// and is not used after; neither are its endpoints.
#[no_mangle]
pub unsafe extern "C" fn ucp_worker_destroy(worker: *mut Worker) {
    guard((), || {
        if worker.is_null() {
            return;
        }
        // SAFETY: made by Box::into_raw in ucp_worker_create, freed once.
        let w = unsafe { Box::from_raw(worker) };
        let eps = w.with_eps(std::mem::take);
        let connecting = w.with_connecting(std::mem::take);
        for p in eps.into_values().flatten().chain(connecting) {
            // SAFETY: each endpoint was boxed by ucp_ep_create and is in
            // the table until closed; freed once here.
            drop(unsafe { Box::from_raw(p) });
        }
        drop(w);
    })
}

/// `ucp_worker_progress`: progresses the transports, then runs the
/// callbacks of what completed. Returns how many events it handled.
///
/// # Safety
///
/// `worker` is a live worker.
#[no_mangle]
pub unsafe extern "C" fn ucp_worker_progress(worker: *mut Worker) -> c_uint {
    guard(0, || {
        // SAFETY: NULL or live (contract).
        let Some(w) = (unsafe { worker.as_ref() }) else {
            return 0;
        };
        let _g = w.enter();
        progress(w).min(c_uint::MAX as usize) as c_uint
    })
}

/// A `malloc`ed copy of `w`'s address (freed by
/// `ucp_worker_release_address`).
fn address_copy(w: &Worker) -> Option<(*mut c_void, usize)> {
    let n = w.address.len();
    // SAFETY: plain allocation; checked below.
    let p = unsafe { libc::malloc(n) };
    if p.is_null() {
        return None;
    }
    // SAFETY: `p` has `n` writable bytes, distinct from the source.
    unsafe { std::ptr::copy_nonoverlapping(w.address.as_ptr(), p.cast::<u8>(), n) };
    Some((p, n))
}

/// `ucp_worker_get_address`.
///
/// # Safety
///
/// `worker` is a live worker; `address_p` and `address_length_p` are
/// writable.
#[no_mangle]
pub unsafe extern "C" fn ucp_worker_get_address(
    worker: *mut Worker,
    address_p: *mut *mut c_void,
    address_length_p: *mut usize,
) -> StatusCode {
    guard_status(|| {
        // SAFETY: NULL or live (contract).
        let Some(w) = (unsafe { worker.as_ref() }) else {
            return status::INVALID_PARAM;
        };
        if address_p.is_null() || address_length_p.is_null() {
            return status::INVALID_PARAM;
        }
        let Some((p, n)) = address_copy(w) else {
            return status::NO_MEMORY;
        };
        // SAFETY: writable (contract, checked non-NULL).
        unsafe {
            *address_p = p;
            *address_length_p = n;
        }
        status::OK
    })
}

/// `ucp_worker_release_address`.
///
/// # Safety
///
/// `address` is NULL or came from `ucp_worker_get_address` or
/// `ucp_worker_query`, and is not used after.
#[no_mangle]
pub unsafe extern "C" fn ucp_worker_release_address(_worker: *mut Worker, address: *mut c_void) {
    // SAFETY: allocated with malloc by this library (contract).
    guard((), || unsafe { libc::free(address) })
}

/// `ucp_worker_query`: thread mode, address (release it with
/// `ucp_worker_release_address`), name, limits.
///
/// # Safety
///
/// `worker` is a live worker; `attr` points to a `ucp_worker_attr_t`.
#[no_mangle]
pub unsafe extern "C" fn ucp_worker_query(
    worker: *mut Worker,
    attr: *mut WorkerAttr,
) -> StatusCode {
    guard_status(|| {
        // SAFETY: NULL or valid (contract).
        let (Some(w), Some(a)) = (unsafe { worker.as_ref() }, unsafe { attr.as_mut() }) else {
            return status::INVALID_PARAM;
        };
        let has = |bit| a.field_mask & bit != 0;
        if has(UCP_WORKER_ATTR_FIELD_THREAD_MODE) {
            a.thread_mode = w.thread_mode;
        }
        if has(UCP_WORKER_ATTR_FIELD_ADDRESS) {
            let Some((p, n)) = address_copy(w) else {
                return status::NO_MEMORY;
            };
            a.address = p;
            a.address_length = n;
        }
        if has(UCP_WORKER_ATTR_FIELD_MAX_AM_HEADER) {
            a.max_am_header = u16::MAX as usize;
        }
        if has(UCP_WORKER_ATTR_FIELD_NAME) {
            copy_name(&mut a.name, &w.name);
        }
        if has(UCP_WORKER_ATTR_FIELD_MAX_INFO_STRING) {
            a.max_debug_string = crate::query::MAX_DEBUG_STRING;
        }
        status::OK
    })
}

/// `ucp_worker_print_info`: name, address length and transports.
///
/// # Safety
///
/// `worker` is a live worker; `stream` an open `FILE *`.
#[no_mangle]
pub unsafe extern "C" fn ucp_worker_print_info(worker: *mut Worker, stream: *mut libc::FILE) {
    guard((), || {
        // SAFETY: NULL or live (contract).
        let Some(w) = (unsafe { worker.as_ref() }) else {
            return;
        };
        let _g = w.enter();
        let mut out = format!(
            "#\n# UCP worker '{}'\n#\n#                 address: {} bytes\n#\n",
            w.name,
            w.address.len()
        );
        let tls: Vec<String> = w.with(|rw| {
            rw.ifaces()
                .map(|i| format!("{}/{}", i.tl_name(), i.dev_name()))
                .collect()
        });
        for (i, t) in tls.iter().enumerate() {
            out += &format!("#              iface {i:<2} :  {t}\n");
        }
        if let Some(p) = &w.paths {
            // rucx's own line: how many sends passed the worker's lock.
            out += &format!("#   endpoint path sends: {}\n", p.sends());
        }
        out += "#\n";
        // SAFETY: an open stream (contract).
        unsafe { write_stream(stream, out.as_bytes()) };
    })
}

/// `ucp_worker_fence`: returns once the one-sided operations posted so
/// far completed (rucx orders tag operations per endpoint already).
///
/// # Safety
///
/// `worker` is a live worker.
#[no_mangle]
pub unsafe extern "C" fn ucp_worker_fence(worker: *mut Worker) -> StatusCode {
    guard_status(|| {
        // SAFETY: NULL or live (contract).
        let Some(w) = (unsafe { worker.as_ref() }) else {
            return status::INVALID_PARAM;
        };
        let _g = w.enter();
        let mut f = w.with(|rw| rw.fence_start());
        loop {
            if let Some(r) = w.with(|rw| rw.flush_poll(&mut f)) {
                return close_status(r);
            }
            w.with(|rw| rw.progress());
        }
    })
}

/// Name of worker `w` (for endpoints' print_info).
pub(crate) fn name_of(w: &Worker) -> &str {
    &w.name
}
