//! Streams without a copy and their polling: `ucp_stream_recv_data_nb`,
//! `ucp_stream_data_release` and `ucp_stream_worker_poll`.
//!
//! `ucp_stream_recv_data_nb` hands C the oldest bytes waiting on an
//! endpoint's stream, as rucx's `stream_recv_data` took them from the
//! wire. The buffer they are in is kept, by address, in a table of the
//! library until `ucp_stream_data_release` drops it; its bytes do not
//! move meanwhile (a `Vec`'s heap memory stays where it is when the `Vec`
//! moves into the table).

use crate::ep::Endpoint;
use crate::status::{self, guard, guard_ptr};
use crate::types::*;
use crate::worker::Worker;
use parking_lot::Mutex;
use std::collections::BTreeMap;
use std::ffi::{c_uint, c_void};

/// `ucp_stream_poll_ep_t`: one endpoint with stream data waiting.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct StreamPollEp {
    /// The endpoint.
    pub ep: *mut Endpoint,
    /// Its user data (`ucp_ep_params_t::user_data`).
    pub user_data: *mut c_void,
    /// Reserved by UCX; 0.
    pub flags: c_uint,
    /// Reserved by UCX.
    pub reserved: [u8; 16],
}

/// The data C holds from `ucp_stream_recv_data_nb`, by the address it got.
static HELD: Mutex<BTreeMap<usize, Vec<u8>>> = Mutex::new(BTreeMap::new());

/// `ucp_stream_recv_data_nb`: the oldest bytes waiting on `ep`'s stream,
/// their count in `*length`, valid until `ucp_stream_data_release`. NULL
/// if none wait (or receives are posted, which come first); an error
/// pointer if the endpoint failed and nothing is left, or for a NULL
/// endpoint or `length` (`UCS_ERR_INVALID_PARAM`).
///
/// # Safety
///
/// `ep` is NULL or a live endpoint; `length` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn ucp_stream_recv_data_nb(
    ep: *mut Endpoint,
    length: *mut usize,
) -> StatusPtr {
    guard_ptr(|| {
        // SAFETY: NULL or live (contract).
        let Some(e) = (unsafe { ep.as_ref() }) else {
            return status::ptr(status::INVALID_PARAM);
        };
        if length.is_null() {
            return status::ptr(status::INVALID_PARAM);
        }
        let w = e.worker();
        let _g = w.enter();
        let rep = match e.rep() {
            Ok(r) => r,
            Err(st) => return status::ptr(st),
        };
        loop {
            match w.with(|rw| rw.stream_recv_data(rep)) {
                Ok(None) => return std::ptr::null_mut(),
                // Nothing to hand over: the next, if any.
                Ok(Some(v)) if v.is_empty() => continue,
                Ok(Some(v)) => {
                    let p = v.as_ptr().cast_mut().cast::<c_void>();
                    // SAFETY: checked non-NULL; writable (contract).
                    unsafe { *length = v.len() };
                    HELD.lock().insert(p as usize, v);
                    return p;
                }
                Err(err) => return status::ptr(status::of(&err)),
            }
        }
    })
}

/// `ucp_stream_data_release`: frees data from `ucp_stream_recv_data_nb`
/// (an address it did not return is ignored).
///
/// # Safety
///
/// `data` came from `ucp_stream_recv_data_nb` and is not used after.
#[no_mangle]
pub unsafe extern "C" fn ucp_stream_data_release(_ep: *mut Endpoint, data: *mut c_void) {
    guard((), || {
        let v = HELD.lock().remove(&(data as usize));
        drop(v);
    })
}

/// `ucp_stream_worker_poll`: up to `max_eps` endpoints of `worker` with
/// stream data waiting, each with its user data, in `poll_eps`; how many,
/// or `UCS_ERR_INVALID_PARAM` (negative) for a NULL worker or a NULL
/// array with room. Like UCX's, it does not progress the worker.
///
/// # Safety
///
/// `worker` is NULL or live; `poll_eps` is NULL or has `max_eps`
/// writable entries.
#[no_mangle]
pub unsafe extern "C" fn ucp_stream_worker_poll(
    worker: *mut Worker,
    poll_eps: *mut StreamPollEp,
    max_eps: usize,
    _flags: c_uint,
) -> isize {
    guard(status::IO_ERROR as isize, || {
        // SAFETY: NULL or live (contract).
        let Some(w) = (unsafe { worker.as_ref() }) else {
            return status::INVALID_PARAM as isize;
        };
        if poll_eps.is_null() && max_eps > 0 {
            return status::INVALID_PARAM as isize;
        }
        let _g = w.enter();
        let ready = w.with(|rw| rw.stream_worker_poll(max_eps));
        let mut n = 0;
        for ep in ready {
            let Some(c) = w.with_eps(|m| m.get(&ep.to_u64()).and_then(|v| v.first().copied()))
            else {
                continue;
            };
            // SAFETY: a C endpoint of the table is live until closed,
            // which removes it.
            let user_data = unsafe { (*c).err.arg };
            // SAFETY: `n < max_eps` entries are writable (contract).
            unsafe {
                poll_eps.add(n).write(StreamPollEp {
                    ep: c,
                    user_data,
                    flags: 0,
                    reserved: [0; 16],
                })
            };
            n += 1;
        }
        n as isize
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::mem::{offset_of, size_of};

    #[test]
    fn poll_entry_has_ucx_layout() {
        assert_eq!(size_of::<StreamPollEp>(), 40);
        assert_eq!(offset_of!(StreamPollEp, user_data), 8);
        assert_eq!(offset_of!(StreamPollEp, flags), 16);
        assert_eq!(offset_of!(StreamPollEp, reserved), 20);
    }
}
