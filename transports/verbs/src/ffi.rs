//! Owned libibverbs handles that everything else hangs off: the device
//! list and an open device context, and the error helpers of the crate.
//!
//! Each handle frees its object in `Drop`; children hold their parent in
//! an `Arc`, so the parent is freed last (a context after its protection
//! domains, a protection domain after its regions and queue pairs).

use std::ffi::CStr;
use std::io;
use std::ptr::NonNull;

use rdma_sys as sys;
use uct::ucs::{Error, Result};

// Entry points that rdma-sys's bindings leave out (its allowlist takes
// `ibv_*` names only); the signatures are those of <infiniband/verbs.h>.
extern "C" {
    /// Reads the valid entries of every port's GID table, with their types
    /// and network interfaces (rdma-core 31 and later); returns how many,
    /// or a negative errno.
    pub(crate) fn _ibv_query_gid_table(
        context: *mut sys::ibv_context,
        entries: *mut sys::ibv_gid_entry,
        max_entries: usize,
        flags: u32,
        entry_size: usize,
    ) -> isize;
}

/// An error from a call that sets `errno` and returns -1 or NULL.
pub(crate) fn os_err(op: impl Into<String>) -> Error {
    Error::Io {
        op: op.into(),
        source: io::Error::last_os_error(),
    }
}

/// An error from a call that returns an errno value (`ibv_post_send`,
/// `ibv_modify_qp`, ...) rather than setting `errno`.
pub(crate) fn rc_err(op: impl Into<String>, rc: i32) -> Error {
    Error::Io {
        op: op.into(),
        source: io::Error::from_raw_os_error(rc.abs()),
    }
}

/// The list of `ibv_get_device_list`, freed on drop.
pub(crate) struct DeviceList {
    list: *mut *mut sys::ibv_device,
    len: usize,
}

impl DeviceList {
    /// The devices present. No device, or no kernel RDMA support at all
    /// (libibverbs then fails with `ENOSYS`), is an empty list.
    pub(crate) fn get() -> DeviceList {
        let mut n: libc::c_int = 0;
        // SAFETY: `n` is a valid out-pointer; the call allocates the list
        // (or returns NULL), which `Drop` frees.
        let list = unsafe { sys::ibv_get_device_list(&mut n) };
        let len = if list.is_null() { 0 } else { n.max(0) as usize };
        DeviceList { list, len }
    }

    /// The devices, valid while the list lives.
    pub(crate) fn iter(&self) -> impl Iterator<Item = *mut sys::ibv_device> + '_ {
        (0..self.len).map(move |i| {
            // SAFETY: the list holds `len` non-NULL entries (then a NULL).
            unsafe { *self.list.add(i) }
        })
    }
}

impl Drop for DeviceList {
    fn drop(&mut self) {
        if !self.list.is_null() {
            // SAFETY: the list came from ibv_get_device_list and is freed once.
            unsafe { sys::ibv_free_device_list(self.list) };
        }
    }
}

/// The kernel name of a device of a [`DeviceList`] (e.g. `rxe0`).
pub(crate) fn device_name(dev: *mut sys::ibv_device) -> String {
    // SAFETY: `dev` comes from a live device list; the name is a
    // NUL-terminated string inside it (or NULL).
    let p = unsafe { sys::ibv_get_device_name(dev) };
    if p.is_null() {
        return String::new();
    }
    // SAFETY: non-NULL, NUL-terminated, valid while the list lives; copied.
    unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned()
}

/// An open device (`ibv_context`), closed on drop after everything that
/// holds an `Arc` of it.
#[derive(Debug)]
pub(crate) struct Ctx {
    raw: NonNull<sys::ibv_context>,
    /// Kernel name of the device.
    pub(crate) name: String,
}

// SAFETY: an ibv_context may be used from any thread; libibverbs
// serializes what needs serializing inside the provider.
unsafe impl Send for Ctx {}
// SAFETY: as above; every verb that takes the context is thread-safe.
unsafe impl Sync for Ctx {}

impl Ctx {
    /// Opens device `name`, if present.
    pub(crate) fn open(name: &str) -> Result<Ctx> {
        let list = DeviceList::get();
        let dev = list
            .iter()
            .find(|d| device_name(*d) == name)
            .ok_or_else(|| Error::InvalidParam(format!("verbs: no device {name:?}")))?;
        // SAFETY: `dev` is an entry of a live list; the context it returns
        // stays valid after the list is freed (libibverbs keeps the device
        // referenced by the context).
        let raw = unsafe { sys::ibv_open_device(dev) };
        let raw = NonNull::new(raw).ok_or_else(|| os_err(format!("ibv_open_device {name}")))?;
        Ok(Ctx {
            raw,
            name: name.to_string(),
        })
    }

    /// The raw context, for verbs that take it.
    pub(crate) fn as_raw(&self) -> *mut sys::ibv_context {
        self.raw.as_ptr()
    }
    /// The file descriptor asynchronous events arrive on.
    pub(crate) fn async_fd(&self) -> libc::c_int {
        // SAFETY: the context is open; `async_fd` is a plain field.
        unsafe { (*self.raw.as_ptr()).async_fd }
    }
}

impl Drop for Ctx {
    fn drop(&mut self) {
        // SAFETY: opened by ibv_open_device, closed once; every child
        // (PD, CQ, QP, ...) holds an Arc of this and is gone by now.
        let rc = unsafe { sys::ibv_close_device(self.raw.as_ptr()) };
        if rc != 0 {
            tracing::debug!(dev = %self.name, rc, "verbs: ibv_close_device failed");
        }
    }
}

/// Sets `O_NONBLOCK` on `fd` (completion channels, the async fd, the
/// connection manager's channel), so that reading them never blocks.
pub(crate) fn set_nonblocking(fd: libc::c_int, what: &str) -> Result<()> {
    // SAFETY: fcntl on a descriptor we own; no memory is passed.
    let flags = unsafe { libc::fcntl(fd, libc::F_GETFL) };
    if flags < 0 {
        return Err(os_err(format!("fcntl {what}")));
    }
    // SAFETY: as above.
    if unsafe { libc::fcntl(fd, libc::F_SETFL, flags | libc::O_NONBLOCK) } < 0 {
        return Err(os_err(format!("fcntl {what}")));
    }
    Ok(())
}
