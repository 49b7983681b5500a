//! Statuses at the C boundary: `ucs_status_string`, the `UCS_PTR_*`
//! encoding, and the guards that keep panics on the Rust side.
//!
//! Rust errors become `ucs_status_t` through the one table of `ucs`
//! ([`Status`], via [`rucx::Error::status`]); this module adds no table of
//! its own.

use crate::types::{StatusCode, StatusPtr};
use rucx::ucp::ucs::Status;
use std::ffi::{c_char, c_void, CStr};
use std::panic::{catch_unwind, AssertUnwindSafe};

/// `UCS_OK`.
pub const OK: StatusCode = Status::Ok as StatusCode;
/// `UCS_INPROGRESS`.
pub const INPROGRESS: StatusCode = Status::InProgress as StatusCode;
/// `UCS_ERR_INVALID_PARAM`.
pub const INVALID_PARAM: StatusCode = Status::InvalidParam as StatusCode;
/// `UCS_ERR_NO_RESOURCE`.
pub const NO_RESOURCE: StatusCode = Status::NoResource as StatusCode;
/// `UCS_ERR_NO_MEMORY`.
pub const NO_MEMORY: StatusCode = Status::NoMemory as StatusCode;
/// `UCS_ERR_IO_ERROR`: what an entry point returns if rucx panicked.
pub const IO_ERROR: StatusCode = Status::IoError as StatusCode;
/// `UCS_ERR_UNSUPPORTED`.
pub const UNSUPPORTED: StatusCode = Status::Unsupported as StatusCode;
/// `UCS_ERR_BUSY`.
pub const BUSY: StatusCode = Status::Busy as StatusCode;
/// `UCS_ERR_NO_ELEM`.
pub const NO_ELEM: StatusCode = Status::NoElem as StatusCode;
/// `UCS_ERR_INVALID_ADDR`.
pub const INVALID_ADDR: StatusCode = Status::InvalidAddr as StatusCode;
/// `UCS_ERR_CANCELED`.
pub const CANCELED: StatusCode = Status::Canceled as StatusCode;

/// The status of a Rust error.
pub fn of(e: &rucx::Error) -> StatusCode {
    e.status().code()
}

/// `UCS_STATUS_PTR(status)`.
pub fn ptr(status: StatusCode) -> StatusPtr {
    status as isize as *mut c_void
}

/// The status `p` encodes: `Some(UCS_OK)` for NULL, the error for an
/// error pointer (`UCS_PTR_IS_ERR`), `None` for a request.
pub fn of_ptr(p: StatusPtr) -> Option<StatusCode> {
    match p as isize {
        0 => Some(OK),
        c if (-100..0).contains(&c) => Some(c as StatusCode),
        _ => None,
    }
}

/// Runs `f`, turning a panic into `on_panic` (logged on stderr).
#[inline(always)]
pub(crate) fn guard<T>(on_panic: T, f: impl FnOnce() -> T) -> T {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(v) => v,
        Err(e) => {
            report_panic(e);
            on_panic
        }
    }
}

/// Logs the panic [`guard`] caught (out of line: the entry points stay
/// small).
#[cold]
#[inline(never)]
fn report_panic(e: Box<dyn std::any::Any + Send>) {
    let what = e
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| e.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "panic".to_string());
    eprintln!("rucx: internal error in the C API: {what}");
}

/// [`guard`] for entry points that return a status.
pub(crate) fn guard_status(f: impl FnOnce() -> StatusCode) -> StatusCode {
    guard(IO_ERROR, f)
}

/// [`guard`] for entry points that return a status pointer.
pub(crate) fn guard_ptr(f: impl FnOnce() -> StatusPtr) -> StatusPtr {
    guard(ptr(IO_ERROR), f)
}

/// The message of codes that name no status (UCX adds the number, in a
/// buffer of its own; this one is static).
static UNKNOWN: &CStr = c"Unknown error";

/// NUL-terminated copies of the status messages, made once.
fn message(status: StatusCode) -> *const c_char {
    use std::sync::OnceLock;
    static TABLE: OnceLock<Vec<(StatusCode, std::ffi::CString)>> = OnceLock::new();
    let table = TABLE.get_or_init(|| {
        Status::ALL
            .iter()
            .filter_map(|s| Some((s.code(), std::ffi::CString::new(s.as_str()).ok()?)))
            .collect()
    });
    match table.iter().find(|(c, _)| *c == status) {
        Some((_, m)) => m.as_ptr(),
        None => UNKNOWN.as_ptr(),
    }
}

/// `ucs_status_string`: UCX's message for `status`.
///
/// # Safety
///
/// None: any value is accepted; the string is static.
#[no_mangle]
pub unsafe extern "C" fn ucs_status_string(status: StatusCode) -> *const c_char {
    guard(UNKNOWN.as_ptr(), || message(status))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn text(s: StatusCode) -> String {
        // SAFETY: the result is a static NUL-terminated string.
        unsafe { CStr::from_ptr(ucs_status_string(s)) }
            .to_string_lossy()
            .into_owned()
    }

    #[test]
    fn messages_and_pointers_are_ucx_s() {
        assert_eq!(text(0), "Success");
        assert_eq!(text(-16), "Request canceled");
        assert_eq!(text(-5), "Invalid parameter");
        assert_eq!(text(-80), "Endpoint timeout");
        assert_eq!(
            text(-13),
            "Failed to connect some of the requested endpoints"
        );
        assert_eq!(text(-61), "Unknown error");
        assert_eq!(text(-99), "Unknown error");
        // UCS_PTR_IS_ERR: at or above (uintptr_t)UCS_ERR_LAST.
        let p = ptr(CANCELED) as usize;
        assert!(p >= (-100isize) as usize);
        assert_eq!(p as isize as StatusCode, CANCELED);
        assert_eq!(of_ptr(ptr(CANCELED)), Some(CANCELED));
        assert_eq!(of_ptr(std::ptr::null_mut()), Some(OK));
        let mut x = 0u64;
        assert_eq!(of_ptr((&mut x as *mut u64).cast()), None);
        assert_eq!(guard_status(|| panic!("boom")), IO_ERROR);
    }
}
