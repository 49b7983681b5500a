//! Queries and small entry points: `ucp_ep_query`, `ucp_ep_modify_nb`,
//! `ucp_ep_evaluate_perf`, `ucp_request_query`, `ucp_request_alloc`,
//! `ucp_worker_address_query`, `ucp_worker_wait_mem`, `ucp_lib_query`,
//! and libucs's name tables
//! `ucs_memory_type_names`, `ucs_memory_type_descs`,
//! `ucs_thread_mode_names`.
//!
//! Each follows UCX 1.13.1 (Debian's build, measured): a field not in a
//! query's `field_mask` is left alone; `ucp_request_alloc` returns NULL,
//! as UCX 1.13's does (request memory for the `_nbx` calls comes with
//! `UCP_OP_ATTR_FIELD_REQUEST`); `ucp_ep_modify_nb` changes the error
//! handler and user data only.

use crate::context::copy_name;
use crate::ep::{Conn, Endpoint};
use crate::request::{header_of, COMPLETED, RELEASED};
use crate::status::{self, guard, guard_ptr, guard_status};
use crate::types::*;
use crate::worker::{unwrap_address, Worker};
use rucx::ucp::ucs::Status;
use std::ffi::{c_char, c_void, CStr};
use std::net::SocketAddr;
use std::ptr;

/// `UCS_ERR_NOT_CONNECTED`: a socket address of an endpoint that was
/// not made through one.
const NOT_CONNECTED: StatusCode = Status::NotConnected as StatusCode;

/// The longest debug string of a request, with its terminating NUL:
/// what `ucp_worker_query` reports as `max_debug_string` (200, as UCX
/// 1.13's), and the most `ucp_request_query` writes.
pub(crate) const MAX_DEBUG_STRING: usize = 200;

/// A C array of static strings, exported as a data symbol.
#[repr(transparent)]
#[derive(Debug)]
pub struct Names<const N: usize>([*const c_char; N]);

// SAFETY: the pointers are to static, immutable strings.
unsafe impl<const N: usize> Sync for Names<N> {}

/// `ucs_memory_type_names`: by `ucs_memory_type_t`, `"unknown"` at
/// `UCS_MEMORY_TYPE_LAST`, then NULL (as UCX's).
#[no_mangle]
pub static ucs_memory_type_names: Names<7> = Names([
    c"host".as_ptr(),
    c"cuda".as_ptr(),
    c"cuda-managed".as_ptr(),
    c"rocm".as_ptr(),
    c"rocm-managed".as_ptr(),
    c"unknown".as_ptr(),
    ptr::null(),
]);

/// `ucs_memory_type_descs`: by `ucs_memory_type_t`, UCX's texts.
#[no_mangle]
pub static ucs_memory_type_descs: Names<6> = Names([
    c"System memory".as_ptr(),
    c"NVIDIA GPU memory".as_ptr(),
    c"NVIDIA GPU managed/unified memory".as_ptr(),
    c"AMD/ROCm GPU memory".as_ptr(),
    c"AMD/ROCm GPU managed memory".as_ptr(),
    c"unknown".as_ptr(),
]);

/// `ucs_thread_mode_names`: by `ucs_thread_mode_t`.
#[no_mangle]
pub static ucs_thread_mode_names: Names<3> = Names([
    c"single".as_ptr(),
    c"serialized".as_ptr(),
    c"multi".as_ptr(),
]);

/// `a` as a `struct sockaddr_storage`.
fn storage_of(a: SocketAddr) -> libc::sockaddr_storage {
    // SAFETY: all-zero bytes are a valid sockaddr_storage.
    let mut s: libc::sockaddr_storage = unsafe { std::mem::zeroed() };
    match a {
        SocketAddr::V4(v4) => {
            let sin = libc::sockaddr_in {
                sin_family: libc::AF_INET as libc::sa_family_t,
                sin_port: v4.port().to_be(),
                sin_addr: libc::in_addr {
                    s_addr: u32::from_ne_bytes(v4.ip().octets()),
                },
                sin_zero: [0; 8],
            };
            // SAFETY: a sockaddr_in fits in a sockaddr_storage.
            unsafe { ptr::write((&mut s as *mut libc::sockaddr_storage).cast(), sin) };
        }
        SocketAddr::V6(v6) => {
            let sin6 = libc::sockaddr_in6 {
                sin6_family: libc::AF_INET6 as libc::sa_family_t,
                sin6_port: v6.port().to_be(),
                sin6_flowinfo: v6.flowinfo().to_be(),
                sin6_addr: libc::in6_addr {
                    s6_addr: v6.ip().octets(),
                },
                sin6_scope_id: v6.scope_id(),
            };
            // SAFETY: a sockaddr_in6 fits in a sockaddr_storage.
            unsafe { ptr::write((&mut s as *mut libc::sockaddr_storage).cast(), sin6) };
        }
    }
    s
}

/// `ucp_ep_query`: the name (the handle as `%p`, as UCX's release builds
/// give it); the local and remote socket addresses of an endpoint made
/// by a client's connect or a server's accept (of a client's connect
/// still under way, those of its handshake, at once, as UCX's),
/// `UCS_ERR_NOT_CONNECTED` for the others.
///
/// # Safety
///
/// `ep` is a live endpoint; `attr` points to a `ucp_ep_attr_t`.
#[no_mangle]
pub unsafe extern "C" fn ucp_ep_query(ep: *mut Endpoint, attr: *mut EpAttr) -> StatusCode {
    guard_status(|| {
        // SAFETY: NULL or valid (contract).
        let (Some(e), Some(a)) = (unsafe { ep.as_ref() }, unsafe { attr.as_mut() }) else {
            return status::INVALID_PARAM;
        };
        let has = |bit| a.field_mask & bit != 0;
        if has(UCP_EP_ATTR_FIELD_NAME) {
            copy_name(&mut a.name, &format!("{ep:p}"));
        }
        if !has(UCP_EP_ATTR_FIELD_LOCAL_SOCKADDR | UCP_EP_ATTR_FIELD_REMOTE_SOCKADDR) {
            return status::OK;
        }
        let w = e.worker();
        let _g = w.enter();
        let connecting = match &*e.conn.borrow() {
            Conn::Connecting(c) => Some(c.sockaddrs()),
            _ => None,
        };
        match connecting {
            Some(Some(pair)) => return fill_sockaddrs(a, pair),
            Some(None) => return NOT_CONNECTED,
            None => {}
        }
        let rep = match e.rep() {
            Ok(r) => r,
            Err(st) => return st,
        };
        match w.with(|rw| rw.ep_sockaddrs(rep)) {
            Ok(Some(pair)) => fill_sockaddrs(a, pair),
            Ok(None) => NOT_CONNECTED,
            Err(e) => status::of(&e),
        }
    })
}

/// Writes the socket addresses `(local, remote)` the query asks for.
fn fill_sockaddrs(a: &mut EpAttr, (local, remote): (SocketAddr, SocketAddr)) -> StatusCode {
    if a.field_mask & UCP_EP_ATTR_FIELD_LOCAL_SOCKADDR != 0 {
        a.local_sockaddr = storage_of(local);
    }
    if a.field_mask & UCP_EP_ATTR_FIELD_REMOTE_SOCKADDR != 0 {
        a.remote_sockaddr = storage_of(remote);
    }
    status::OK
}

/// `ucp_ep_modify_nb` (legacy): sets the error handler
/// (`UCP_EP_PARAM_FIELD_ERR_HANDLER`) and the user data its callback gets
/// (`UCP_EP_PARAM_FIELD_USER_DATA`, which wins over the handler's `arg`);
/// the remote address, socket address and error handling mode cannot
/// change (`UCS_ERR_INVALID_PARAM`, as UCX 1.13's); other fields are
/// ignored. NULL when done (it always is at once), or an error pointer.
///
/// # Safety
///
/// `ep` is a live endpoint; `params` points to a `ucp_ep_params_t`.
#[no_mangle]
pub unsafe extern "C" fn ucp_ep_modify_nb(ep: *mut Endpoint, params: *const EpParams) -> StatusPtr {
    guard_ptr(|| {
        // SAFETY: NULL or valid (contract).
        let (Some(e), Some(p)) = (unsafe { ep.as_ref() }, unsafe { params.as_ref() }) else {
            return status::ptr(status::INVALID_PARAM);
        };
        let fixed = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS
            | UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE
            | UCP_EP_PARAM_FIELD_SOCK_ADDR;
        if p.field_mask & fixed != 0 {
            return status::ptr(status::INVALID_PARAM);
        }
        let _g = e.worker().enter();
        let mut err = e.err;
        if p.field_mask & UCP_EP_PARAM_FIELD_ERR_HANDLER != 0 {
            err = p.err_handler;
        }
        if p.field_mask & UCP_EP_PARAM_FIELD_USER_DATA != 0 {
            err.arg = p.user_data;
        }
        // SAFETY: a live endpoint (contract); no reference to it is held
        // across this write (the shared one above is not used after).
        unsafe { (*ep).err = err };
        ptr::null_mut()
    })
}

/// `ucp_ep_evaluate_perf`: the estimated time of a tag send of
/// `message_size` bytes (0 if the field is not set) on `ep`, from the
/// cost model of the protocol rucx selected for that size on the
/// endpoint's lanes. `UCP_EP_PERF_ATTR_FIELD_ESTIMATED_TIME` is required
/// (`UCS_ERR_INVALID_PARAM` without, as UCX's).
///
/// # Safety
///
/// `ep` is a live endpoint; `param` and `attr` point to their structs.
#[no_mangle]
pub unsafe extern "C" fn ucp_ep_evaluate_perf(
    ep: *mut Endpoint,
    param: *const EpEvaluatePerfParam,
    attr: *mut EpEvaluatePerfAttr,
) -> StatusCode {
    guard_status(|| {
        // SAFETY: NULL or valid (contract).
        let (Some(e), Some(p), Some(a)) =
            (unsafe { ep.as_ref() }, unsafe { param.as_ref() }, unsafe {
                attr.as_mut()
            })
        else {
            return status::INVALID_PARAM;
        };
        if a.field_mask & UCP_EP_PERF_ATTR_FIELD_ESTIMATED_TIME == 0 {
            return status::INVALID_PARAM;
        }
        let size = match p.field_mask & UCP_EP_PERF_PARAM_FIELD_MESSAGE_SIZE {
            0 => 0,
            _ => p.message_size,
        };
        let w = e.worker();
        let _g = w.enter();
        let rep = match e.rep() {
            Ok(r) => r,
            Err(st) => return st,
        };
        let tables = match w.with(|rw| rw.ep_protocols(rep)) {
            Ok(t) => t,
            Err(e) => return status::of(&e),
        };
        let Some(send) = tables.first() else {
            return status::UNSUPPORTED;
        };
        a.estimated_time = send.lookup(size).cost_at(size);
        status::OK
    })
}

/// The debug text of a request: its state and, once a receive
/// completed, its length; at most [`MAX_DEBUG_STRING`] - 1 bytes.
fn describe(done: bool, st: StatusCode, length: usize) -> String {
    let mut s = if done {
        // SAFETY: ucs_status_string returns a static C string.
        let text = unsafe { CStr::from_ptr(status::ucs_status_string(st)) };
        format!("completed ({})", text.to_string_lossy())
    } else {
        "in progress".to_string()
    };
    if done && length > 0 {
        s += &format!(" length {length}");
    }
    s += " host memory";
    let mut end = s.len().min(MAX_DEBUG_STRING - 1);
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    s.truncate(end);
    s
}

/// `ucp_request_query`: the status (`UCS_INPROGRESS` while in flight), the
/// memory type (host: rucx moves host memory only) and a debug string cut
/// to the caller's buffer (`UCP_REQUEST_ATTR_FIELD_INFO_STRING` needs
/// `_INFO_STRING_SIZE`; a buffer of the worker's `max_debug_string` bytes
/// holds it whole). A request already freed is
/// `UCS_ERR_INVALID_PARAM`.
///
/// # Safety
///
/// `request` is a live request handle; `attr` points to a
/// `ucp_request_attr_t` whose debug string buffer (if asked for) holds
/// `debug_string_size` bytes.
#[no_mangle]
pub unsafe extern "C" fn ucp_request_query(
    request: *mut c_void,
    attr: *mut RequestAttr,
) -> StatusCode {
    guard_status(|| {
        // SAFETY: NULL or valid (contract).
        let Some(a) = (unsafe { attr.as_mut() }) else {
            return status::INVALID_PARAM;
        };
        if request.is_null() {
            return status::INVALID_PARAM;
        }
        let h = header_of(request);
        // SAFETY: a live handle has a header whose worker is alive.
        let _g = unsafe { &*(*h).worker }.enter();
        // SAFETY: live header (contract).
        let (flags, st, length) = unsafe { ((*h).flags, (*h).status, (*h).info.length) };
        if flags & RELEASED != 0 {
            return status::INVALID_PARAM;
        }
        let has = |bit| a.field_mask & bit != 0;
        let done = flags & COMPLETED != 0;
        if has(UCP_REQUEST_ATTR_FIELD_INFO_STRING) {
            if !has(UCP_REQUEST_ATTR_FIELD_INFO_STRING_SIZE)
                || (a.debug_string.is_null() && a.debug_string_size > 0)
            {
                return status::INVALID_PARAM;
            }
            let text = describe(done, st, length);
            if a.debug_string_size > 0 {
                let n = text.len().min(a.debug_string_size - 1);
                // SAFETY: the buffer holds debug_string_size bytes
                // (contract); n + 1 of them are written.
                unsafe {
                    ptr::copy_nonoverlapping(text.as_ptr(), a.debug_string.cast::<u8>(), n);
                    *a.debug_string.add(n) = 0;
                }
            }
        }
        if has(UCP_REQUEST_ATTR_FIELD_STATUS) {
            a.status = if done { st } else { status::INPROGRESS };
        }
        if has(UCP_REQUEST_ATTR_FIELD_MEM_TYPE) {
            a.mem_type = UCS_MEMORY_TYPE_HOST;
        }
        status::OK
    })
}

/// `ucp_request_alloc`: NULL, as UCX 1.13's (the application gives
/// request memory with `UCP_OP_ATTR_FIELD_REQUEST` instead).
///
/// # Safety
///
/// None: the worker is not read.
#[no_mangle]
pub unsafe extern "C" fn ucp_request_alloc(_worker: *mut Worker) -> *mut c_void {
    guard(ptr::null_mut(), ptr::null_mut)
}

/// `ucp_worker_address_query`: the uuid of the address's worker
/// (`UCS_ERR_INVALID_ADDR` if the bytes are no worker address). Without
/// `UCP_WORKER_ADDRESS_ATTR_FIELD_UID` nothing is read.
///
/// # Safety
///
/// `address` came from `ucp_worker_get_address` or `ucp_worker_query`
/// (of any process); `attr` points to a `ucp_worker_address_attr_t`.
#[no_mangle]
pub unsafe extern "C" fn ucp_worker_address_query(
    address: *mut c_void,
    attr: *mut WorkerAddressAttr,
) -> StatusCode {
    guard_status(|| {
        // SAFETY: NULL or valid (contract).
        let Some(a) = (unsafe { attr.as_mut() }) else {
            return status::INVALID_PARAM;
        };
        if a.field_mask & UCP_WORKER_ADDRESS_ATTR_FIELD_UID == 0 {
            return status::OK;
        }
        if address.is_null() {
            return status::INVALID_PARAM;
        }
        // SAFETY: an address from this library (contract).
        let Some(bytes) = (unsafe { unwrap_address(address) }) else {
            return status::INVALID_ADDR;
        };
        match rucx::Worker::address_uuid(bytes) {
            Ok(uid) => {
                a.worker_uid = uid;
                status::OK
            }
            Err(_) => status::INVALID_ADDR,
        }
    })
}

/// `ucp_worker_wait_mem`: returns once the byte at `address` changed or
/// after a short wait (about 50 µs), as UCX's generic version (a no-op
/// outside ARM) allows: the caller checks its memory and progresses.
///
/// # Safety
///
/// `address` is NULL or readable.
#[no_mangle]
pub unsafe extern "C" fn ucp_worker_wait_mem(worker: *mut Worker, address: *mut c_void) {
    guard((), || {
        if worker.is_null() || address.is_null() {
            return;
        }
        let p = address.cast::<u8>();
        // SAFETY: readable (contract); volatile: another agent writes it.
        let first = unsafe { p.read_volatile() };
        let start = std::time::Instant::now();
        while start.elapsed() < std::time::Duration::from_micros(50) {
            // SAFETY: as above.
            if unsafe { p.read_volatile() } != first {
                return;
            }
            std::hint::spin_loop();
        }
        std::thread::yield_now();
    })
}

/// `ucp_lib_query`: the highest thread mode is `UCS_THREAD_MODE_MULTI`
/// (a worker created so takes a lock around each entry point).
///
/// # Safety
///
/// `attr` points to a `ucp_lib_attr_t`.
#[no_mangle]
pub unsafe extern "C" fn ucp_lib_query(attr: *mut LibAttr) -> StatusCode {
    guard_status(|| {
        // SAFETY: NULL or valid (contract).
        let Some(a) = (unsafe { attr.as_mut() }) else {
            return status::INVALID_PARAM;
        };
        if a.field_mask & UCP_LIB_ATTR_FIELD_MAX_THREAD_LEVEL != 0 {
            a.max_thread_level = UCS_THREAD_MODE_MULTI;
        }
        status::OK
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::mem::{offset_of, size_of};

    /// Measured with a C program against Debian's libucx-dev 1.13.1.
    #[test]
    fn layouts_and_names_are_ucx_s() {
        assert_eq!(size_of::<EpAttr>(), 296);
        assert_eq!(offset_of!(EpAttr, local_sockaddr), 40);
        assert_eq!(offset_of!(EpAttr, remote_sockaddr), 168);
        assert_eq!(size_of::<RequestAttr>(), 32);
        assert_eq!(offset_of!(RequestAttr, status), 24);
        assert_eq!(offset_of!(RequestAttr, mem_type), 28);
        assert_eq!(size_of::<LibAttr>(), 16);
        assert_eq!(size_of::<WorkerAddressAttr>(), 16);
        assert_eq!(size_of::<EpEvaluatePerfParam>(), 16);
        assert_eq!(size_of::<EpEvaluatePerfAttr>(), 16);
        // SAFETY: static C strings.
        let name = |p: *const c_char| unsafe { CStr::from_ptr(p) }.to_str().unwrap();
        assert_eq!(name(ucs_memory_type_names.0[2]), "cuda-managed");
        assert_eq!(name(ucs_memory_type_names.0[5]), "unknown");
        assert!(ucs_memory_type_names.0[6].is_null());
        assert_eq!(name(ucs_memory_type_descs.0[0]), "System memory");
        assert_eq!(name(ucs_thread_mode_names.0[1]), "serialized");
        let a: SocketAddr = "10.1.2.3:4567".parse().unwrap();
        let s = storage_of(a);
        assert_eq!(s.ss_family, libc::AF_INET as libc::sa_family_t);
        assert!(describe(true, status::OK, 8).contains("length 8"));
        for st in -120..=0 {
            let text = describe(true, st, usize::MAX);
            assert!(text.len() < MAX_DEBUG_STRING, "{text}");
        }
        assert_eq!(describe(false, 0, 0), "in progress host memory");
    }
}
