//! Listeners and connection requests: `ucp_listener_create`,
//! `ucp_listener_destroy`, `ucp_listener_query`, `ucp_listener_reject`
//! and `ucp_conn_request_query`.
//!
//! The Rust listener's handler runs inside the Rust progress, so it only
//! queues the connection request on the worker; `ucp_worker_progress`
//! calls the C connection handler for each after the Rust progress, with
//! no borrow of the worker alive, so the handler may call
//! `ucp_ep_create` or `ucp_listener_reject` at once or later.

use crate::status::{self, guard, guard_status};
use crate::types::*;
use crate::worker::Worker;
use std::ffi::c_void;
use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr, SocketAddrV4, SocketAddrV6};

/// `UCP_LISTENER_PARAM_FIELD_SOCK_ADDR`.
pub const UCP_LISTENER_PARAM_FIELD_SOCK_ADDR: u64 = 1 << 0;
/// `UCP_LISTENER_PARAM_FIELD_ACCEPT_HANDLER`.
pub const UCP_LISTENER_PARAM_FIELD_ACCEPT_HANDLER: u64 = 1 << 1;
/// `UCP_LISTENER_PARAM_FIELD_CONN_HANDLER`.
pub const UCP_LISTENER_PARAM_FIELD_CONN_HANDLER: u64 = 1 << 2;
/// `UCP_LISTENER_ATTR_FIELD_SOCKADDR`.
pub const UCP_LISTENER_ATTR_FIELD_SOCKADDR: u64 = 1 << 0;
/// `UCP_CONN_REQUEST_ATTR_FIELD_CLIENT_ADDR`.
pub const UCP_CONN_REQUEST_ATTR_FIELD_CLIENT_ADDR: u64 = 1 << 0;
/// `UCP_CONN_REQUEST_ATTR_FIELD_CLIENT_ID`.
pub const UCP_CONN_REQUEST_ATTR_FIELD_CLIENT_ID: u64 = 1 << 1;

/// `ucp_listener_conn_callback_t`.
pub type ConnCb = unsafe extern "C" fn(conn_request: *mut ConnRequest, arg: *mut c_void);

/// `ucp_listener_conn_handler_t`.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct ConnHandler {
    /// Called for each client; may be NULL.
    pub cb: Option<ConnCb>,
    /// Its second argument.
    pub arg: *mut c_void,
}

/// `ucp_listener_accept_handler_t` (not supported: its callback would get
/// an endpoint made without the application's parameters).
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct AcceptHandler {
    /// `ucp_listener_accept_callback_t`.
    pub cb: *const c_void,
    /// Its argument.
    pub arg: *mut c_void,
}

/// `ucp_listener_params_t`.
#[repr(C)]
#[derive(Debug)]
pub struct ListenerParams {
    /// `UCP_LISTENER_PARAM_FIELD_*`.
    pub field_mask: u64,
    /// The address to listen on.
    pub sockaddr: SockAddr,
    /// The legacy accept handler.
    pub accept_handler: AcceptHandler,
    /// The connection handler.
    pub conn_handler: ConnHandler,
}

/// `ucp_listener_attr_t`.
#[repr(C)]
#[derive(Debug)]
pub struct ListenerAttr {
    /// `UCP_LISTENER_ATTR_FIELD_*`.
    pub field_mask: u64,
    /// The bound address.
    pub sockaddr: libc::sockaddr_storage,
}

/// `ucp_conn_request_attr_t`.
#[repr(C)]
#[derive(Debug)]
pub struct ConnRequestAttr {
    /// `UCP_CONN_REQUEST_ATTR_FIELD_*`.
    pub field_mask: u64,
    /// The client's address.
    pub client_address: libc::sockaddr_storage,
    /// The client's id (its worker's uuid).
    pub client_id: u64,
}

/// `ucp_listener_h`.
#[derive(Debug)]
pub struct Listener {
    worker: *const Worker,
    id: Option<rucx::ucp::Listener>,
    handler: ConnHandler,
}

/// `ucp_conn_request_h`: a client waiting for an answer.
#[derive(Debug)]
pub struct ConnRequest {
    pub(crate) req: rucx::ucp::ConnRequest,
}

/// Connection requests the Rust handlers queued: the C listener (by
/// address) and the request, in arrival order.
pub(crate) type Queue = crate::inbox::Inbox<(usize, rucx::ucp::ConnRequest)>;

/// A C socket address as Rust's; `None` if it is neither IPv4 nor IPv6
/// or too short.
///
/// # Safety
///
/// `a.addr` is NULL or points to `a.addrlen` readable bytes.
pub(crate) unsafe fn from_c(a: &SockAddr) -> Option<SocketAddr> {
    if a.addr.is_null() {
        return None;
    }
    let len = a.addrlen as usize;
    // SAFETY: a readable sockaddr (contract); the family is its first field.
    let family = unsafe { (*a.addr).sa_family } as libc::c_int;
    match family {
        libc::AF_INET if len >= std::mem::size_of::<libc::sockaddr_in>() => {
            // SAFETY: long enough for a sockaddr_in (checked); may be unaligned.
            let s = unsafe { std::ptr::read_unaligned(a.addr.cast::<libc::sockaddr_in>()) };
            let ip = Ipv4Addr::from(u32::from_be(s.sin_addr.s_addr));
            Some(SocketAddr::V4(SocketAddrV4::new(
                ip,
                u16::from_be(s.sin_port),
            )))
        }
        libc::AF_INET6 if len >= std::mem::size_of::<libc::sockaddr_in6>() => {
            // SAFETY: long enough for a sockaddr_in6 (checked); may be unaligned.
            let s = unsafe { std::ptr::read_unaligned(a.addr.cast::<libc::sockaddr_in6>()) };
            let ip = Ipv6Addr::from(s.sin6_addr.s6_addr);
            Some(SocketAddr::V6(SocketAddrV6::new(
                ip,
                u16::from_be(s.sin6_port),
                s.sin6_flowinfo,
                s.sin6_scope_id,
            )))
        }
        _ => None,
    }
}

/// Rust's socket address as a C `sockaddr_storage`.
fn to_c(a: SocketAddr) -> libc::sockaddr_storage {
    // SAFETY: all zeroes is a valid sockaddr_storage.
    let mut st: libc::sockaddr_storage = unsafe { std::mem::zeroed() };
    match a {
        SocketAddr::V4(v4) => {
            // SAFETY: sockaddr_storage is large and aligned enough for any
            // sockaddr.
            let s = unsafe {
                &mut *(&mut st as *mut libc::sockaddr_storage).cast::<libc::sockaddr_in>()
            };
            s.sin_family = libc::AF_INET as libc::sa_family_t;
            s.sin_port = v4.port().to_be();
            s.sin_addr.s_addr = u32::from(*v4.ip()).to_be();
        }
        SocketAddr::V6(v6) => {
            // SAFETY: as above.
            let s = unsafe {
                &mut *(&mut st as *mut libc::sockaddr_storage).cast::<libc::sockaddr_in6>()
            };
            s.sin6_family = libc::AF_INET6 as libc::sa_family_t;
            s.sin6_port = v6.port().to_be();
            s.sin6_addr.s6_addr = v6.ip().octets();
            s.sin6_flowinfo = v6.flowinfo();
            s.sin6_scope_id = v6.scope_id();
        }
    }
    st
}

/// `ucp_listener_create`: `UCP_LISTENER_PARAM_FIELD_SOCK_ADDR` (IPv4 or
/// IPv6; port 0 picks one) and `UCP_LISTENER_PARAM_FIELD_CONN_HANDLER`;
/// the accept handler gives `UCS_ERR_UNSUPPORTED`.
///
/// # Safety
///
/// `worker` is a live worker; `params` a valid `ucp_listener_params_t`
/// whose socket address is readable; `listener_p` writable.
#[no_mangle]
pub unsafe extern "C" fn ucp_listener_create(
    worker: *mut Worker,
    params: *const ListenerParams,
    listener_p: *mut *mut Listener,
) -> StatusCode {
    guard_status(|| {
        // SAFETY: NULL or valid (contract).
        let (Some(w), Some(p)) = (unsafe { worker.as_ref() }, unsafe { params.as_ref() }) else {
            return status::INVALID_PARAM;
        };
        if listener_p.is_null() || p.field_mask & UCP_LISTENER_PARAM_FIELD_SOCK_ADDR == 0 {
            return status::INVALID_PARAM;
        }
        if p.field_mask & UCP_LISTENER_PARAM_FIELD_ACCEPT_HANDLER != 0 {
            return status::UNSUPPORTED;
        }
        let handler = match p.field_mask & UCP_LISTENER_PARAM_FIELD_CONN_HANDLER != 0 {
            true => p.conn_handler,
            false => return status::INVALID_PARAM,
        };
        // SAFETY: a readable socket address (contract).
        let Some(addr) = (unsafe { from_c(&p.sockaddr) }) else {
            return status::INVALID_PARAM;
        };
        let _g = w.enter();
        let l = Box::into_raw(Box::new(Listener {
            worker: w,
            id: None,
            handler,
        }));
        let key = l as usize;
        let q = w.conn_queue.clone();
        match w.with(|rw| rw.listen(addr, move |_, req| q.push((key, req)))) {
            Ok(id) => {
                // SAFETY: just boxed, not shared yet.
                unsafe { (*l).id = Some(id) };
                // SAFETY: checked non-NULL; writable (contract).
                unsafe { *listener_p = l };
                status::OK
            }
            Err(e) => {
                // SAFETY: boxed above, not given out.
                drop(unsafe { Box::from_raw(l) });
                status::of(&e)
            }
        }
    })
}

/// `ucp_listener_destroy`: stops listening; its clients not yet handed
/// to the connection handler see their connection close.
///
/// # Safety
///
/// `listener` is a live listener, not used after.
#[no_mangle]
pub unsafe extern "C" fn ucp_listener_destroy(listener: *mut Listener) {
    guard((), || {
        if listener.is_null() {
            return;
        }
        // SAFETY: live listener (contract); freed here, once.
        let l = unsafe { Box::from_raw(listener) };
        // SAFETY: a worker outlives its listeners.
        let w = unsafe { &*l.worker };
        let _g = w.enter();
        let key = listener as usize;
        let dropped = w.conn_queue.remove_where(|(k, _)| *k == key);
        drop(dropped);
        if let Some(id) = l.id {
            let _ = w.with(|rw| rw.listener_close(id));
        }
    })
}

/// `ucp_listener_query`: `UCP_LISTENER_ATTR_FIELD_SOCKADDR`, the bound
/// address (a port of 0 resolved).
///
/// # Safety
///
/// `listener` is live; `attr` a valid `ucp_listener_attr_t`.
#[no_mangle]
pub unsafe extern "C" fn ucp_listener_query(
    listener: *mut Listener,
    attr: *mut ListenerAttr,
) -> StatusCode {
    guard_status(|| {
        // SAFETY: NULL or valid (contract).
        let (Some(l), Some(a)) = (unsafe { listener.as_ref() }, unsafe { attr.as_mut() }) else {
            return status::INVALID_PARAM;
        };
        if a.field_mask & UCP_LISTENER_ATTR_FIELD_SOCKADDR != 0 {
            // SAFETY: a worker outlives its listeners.
            let w = unsafe { &*l.worker };
            let _g = w.enter();
            let Some(id) = l.id else {
                return status::INVALID_PARAM;
            };
            match w.with(|rw| rw.listener_addr(id)) {
                Ok(s) => a.sockaddr = to_c(s),
                Err(e) => return status::of(&e),
            }
        }
        status::OK
    })
}

/// `ucp_listener_reject`: the client's endpoint fails with
/// `UCS_ERR_REJECTED`; the request is freed.
///
/// # Safety
///
/// `conn_request` came from this listener's handler and was not
/// answered yet.
#[no_mangle]
pub unsafe extern "C" fn ucp_listener_reject(
    listener: *mut Listener,
    conn_request: *mut ConnRequest,
) -> StatusCode {
    guard_status(|| {
        if listener.is_null() || conn_request.is_null() {
            return status::INVALID_PARAM;
        }
        // SAFETY: an unanswered request (contract); freed here, once.
        let r = unsafe { Box::from_raw(conn_request) };
        match r.req.reject() {
            Ok(()) => status::OK,
            Err(e) => status::of(&e),
        }
    })
}

/// `ucp_conn_request_query`: the client's address and id (its worker's
/// uuid).
///
/// # Safety
///
/// `conn_request` is unanswered; `attr` a valid `ucp_conn_request_attr_t`.
#[no_mangle]
pub unsafe extern "C" fn ucp_conn_request_query(
    conn_request: *mut ConnRequest,
    attr: *mut ConnRequestAttr,
) -> StatusCode {
    guard_status(|| {
        // SAFETY: NULL or valid (contract).
        let (Some(r), Some(a)) = (unsafe { conn_request.as_ref() }, unsafe { attr.as_mut() })
        else {
            return status::INVALID_PARAM;
        };
        if a.field_mask & UCP_CONN_REQUEST_ATTR_FIELD_CLIENT_ADDR != 0 {
            a.client_address = to_c(r.req.client_addr());
        }
        if a.field_mask & UCP_CONN_REQUEST_ATTR_FIELD_CLIENT_ID != 0 {
            a.client_id = r.req.client_uuid();
        }
        status::OK
    })
}

/// Hands the queued connection requests to the C handlers, in arrival
/// order; how many.
pub(crate) fn deliver(w: &Worker) -> usize {
    let mut n = 0;
    loop {
        let Some((key, req)) = w.conn_queue.pop() else {
            return n;
        };
        n += 1;
        // SAFETY: a listener's requests leave the queue when it is
        // destroyed, so `key` is a live listener.
        let h = unsafe { (*(key as *const Listener)).handler };
        let Some(cb) = h.cb else {
            // No handler: the client sees its connection close.
            continue;
        };
        let c = Box::into_raw(Box::new(ConnRequest { req }));
        // SAFETY: a C handler, called with no borrow of the worker alive.
        unsafe { cb(c, h.arg) };
    }
}
