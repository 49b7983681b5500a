//! Streams: not implemented yet. `ucp_stream_send_nbx` and
//! `ucp_stream_recv_nbx` exist so that programs which have a stream mode
//! besides others (UCX's `ucp_client_server.c`) link; they return
//! `UCS_ERR_UNSUPPORTED`.

use crate::ep::Endpoint;
use crate::status;
use crate::types::*;
use std::ffi::c_void;

/// `ucp_stream_send_nbx`: `UCS_ERR_UNSUPPORTED`.
///
/// # Safety
///
/// Nothing is read.
#[no_mangle]
pub unsafe extern "C" fn ucp_stream_send_nbx(
    _ep: *mut Endpoint,
    _buffer: *const c_void,
    _count: usize,
    _param: *const RequestParam,
) -> StatusPtr {
    status::ptr(status::UNSUPPORTED)
}

/// `ucp_stream_recv_nbx`: `UCS_ERR_UNSUPPORTED`.
///
/// # Safety
///
/// Nothing is read or written.
#[no_mangle]
pub unsafe extern "C" fn ucp_stream_recv_nbx(
    _ep: *mut Endpoint,
    _buffer: *mut c_void,
    _count: usize,
    _length: *mut usize,
    _param: *const RequestParam,
) -> StatusPtr {
    status::ptr(status::UNSUPPORTED)
}
