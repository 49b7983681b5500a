//! Memory for one-sided access: `ucp_mem_map`, `ucp_mem_unmap`,
//! `ucp_mem_query`, `ucp_mem_advise`, `ucp_mem_print_info`; its keys are
//! in `rkey.rs`.
//!
//! A `ucp_mem_h` holds a rucx [`MemMap`] (the caller's memory, or memory
//! rucx allocates with `UCP_MEM_MAP_ALLOCATE`); a map of 0 bytes is
//! accepted, as UCX does, and holds none.

use crate::config::write_stream;
use crate::context::Context;
use crate::status::{self, guard, guard_status};
use crate::types::StatusCode;
use rucx::{Access, MemMap};
use std::ffi::{c_char, c_int, c_uint, c_void, CStr};
use std::ptr;

/// `UCP_MEM_MAP_PARAM_FIELD_ADDRESS`.
pub const UCP_MEM_MAP_PARAM_FIELD_ADDRESS: u64 = 1 << 0;
/// `UCP_MEM_MAP_PARAM_FIELD_LENGTH`.
pub const UCP_MEM_MAP_PARAM_FIELD_LENGTH: u64 = 1 << 1;
/// `UCP_MEM_MAP_PARAM_FIELD_FLAGS`.
pub const UCP_MEM_MAP_PARAM_FIELD_FLAGS: u64 = 1 << 2;
/// `UCP_MEM_MAP_PARAM_FIELD_PROT`.
pub const UCP_MEM_MAP_PARAM_FIELD_PROT: u64 = 1 << 3;
/// `UCP_MEM_MAP_PARAM_FIELD_MEMORY_TYPE`.
pub const UCP_MEM_MAP_PARAM_FIELD_MEMORY_TYPE: u64 = 1 << 4;
/// `UCP_MEM_MAP_ALLOCATE`.
pub const UCP_MEM_MAP_ALLOCATE: c_uint = 1 << 1;
/// `UCP_MEM_MAP_FIXED`.
pub const UCP_MEM_MAP_FIXED: c_uint = 1 << 2;
/// `UCP_MEM_MAP_PROT_REMOTE_READ`.
pub const UCP_MEM_MAP_PROT_REMOTE_READ: c_uint = 1 << 8;
/// `UCP_MEM_MAP_PROT_REMOTE_WRITE`.
pub const UCP_MEM_MAP_PROT_REMOTE_WRITE: c_uint = 1 << 9;
/// `UCP_MEM_ATTR_FIELD_ADDRESS`.
pub const UCP_MEM_ATTR_FIELD_ADDRESS: u64 = 1 << 0;
/// `UCP_MEM_ATTR_FIELD_LENGTH`.
pub const UCP_MEM_ATTR_FIELD_LENGTH: u64 = 1 << 1;
/// `UCP_MEM_ATTR_FIELD_MEM_TYPE`.
pub const UCP_MEM_ATTR_FIELD_MEM_TYPE: u64 = 1 << 2;
/// `UCS_MEMORY_TYPE_HOST`: the only memory type rucx maps.
pub const UCS_MEMORY_TYPE_HOST: c_int = 0;
/// `UCS_MEMORY_TYPE_UNKNOWN` (`UCS_MEMORY_TYPE_LAST`, 5 in UCX 1.13):
/// "find out", taken as host memory.
pub const UCS_MEMORY_TYPE_UNKNOWN: c_int = 5;

/// `ucp_mem_map_params_t`.
#[repr(C)]
#[derive(Debug)]
pub struct MemMapParams {
    /// `UCP_MEM_MAP_PARAM_FIELD_*` bits: the fields that are set.
    pub field_mask: u64,
    /// The memory to map (or, with `UCP_MEM_MAP_ALLOCATE`, a hint).
    pub address: *mut c_void,
    /// Its length.
    pub length: usize,
    /// `UCP_MEM_MAP_NONBLOCK`, `ALLOCATE`, `FIXED`.
    pub flags: c_uint,
    /// `UCP_MEM_MAP_PROT_*` bits.
    pub prot: c_uint,
    /// `ucs_memory_type_t`.
    pub memory_type: c_int,
}

/// `ucp_mem_attr_t`.
#[repr(C)]
#[derive(Debug)]
pub struct MemAttr {
    /// `UCP_MEM_ATTR_FIELD_*` bits: the fields to fill.
    pub field_mask: u64,
    /// Start of the mapped memory.
    pub address: *mut c_void,
    /// Its length.
    pub length: usize,
    /// `ucs_memory_type_t`.
    pub mem_type: c_int,
}

/// `ucp_mem_advise_params_t`.
#[repr(C)]
#[derive(Debug)]
pub struct MemAdviseParams {
    /// `UCP_MEM_ADVISE_PARAM_FIELD_*` bits.
    pub field_mask: u64,
    /// Start of the advised range.
    pub address: *mut c_void,
    /// Its length.
    pub length: usize,
    /// `ucp_mem_advice_t`.
    pub advice: c_int,
}

/// `ucp_mem_h`: mapped memory.
#[derive(Debug)]
pub struct MemH {
    /// The registration; `None` for a map of 0 bytes.
    pub(crate) map: Option<MemMap>,
    address: *mut c_void,
    length: usize,
}

/// The rights `prot` grants (all of them if not given): writing implies
/// atomics, which UCX's protections do not name apart.
fn access_of(p: &MemMapParams) -> Access {
    let prot = if p.field_mask & UCP_MEM_MAP_PARAM_FIELD_PROT != 0 {
        p.prot
    } else {
        UCP_MEM_MAP_PROT_REMOTE_READ | UCP_MEM_MAP_PROT_REMOTE_WRITE
    };
    let mut a = Access::empty();
    if prot & UCP_MEM_MAP_PROT_REMOTE_READ != 0 {
        a |= Access::REMOTE_READ;
    }
    if prot & UCP_MEM_MAP_PROT_REMOTE_WRITE != 0 {
        a |= Access::REMOTE_WRITE | Access::REMOTE_ATOMIC;
    }
    a
}

/// `ucp_mem_map`: maps `length` bytes at `address`, or allocates them
/// with `UCP_MEM_MAP_ALLOCATE` (the address is then a hint, ignored;
/// `UCP_MEM_MAP_FIXED` is `UCS_ERR_UNSUPPORTED`). Host memory only.
///
/// # Safety
///
/// `context` is a live context; `params` NULL or a valid
/// `ucp_mem_map_params_t` whose memory (unless allocated) stays valid
/// until `ucp_mem_unmap`; `memh_p` writable.
#[no_mangle]
pub unsafe extern "C" fn ucp_mem_map(
    context: *mut Context,
    params: *const MemMapParams,
    memh_p: *mut *mut MemH,
) -> StatusCode {
    guard_status(|| {
        // SAFETY: NULL or valid (contract).
        let (Some(c), Some(p)) = (unsafe { context.as_ref() }, unsafe { params.as_ref() }) else {
            return status::INVALID_PARAM;
        };
        if memh_p.is_null() || p.field_mask & UCP_MEM_MAP_PARAM_FIELD_LENGTH == 0 {
            return status::INVALID_PARAM;
        }
        let has = |bit| p.field_mask & bit != 0;
        let flags = if has(UCP_MEM_MAP_PARAM_FIELD_FLAGS) {
            p.flags
        } else {
            0
        };
        let address = if has(UCP_MEM_MAP_PARAM_FIELD_ADDRESS) {
            p.address
        } else {
            ptr::null_mut()
        };
        if has(UCP_MEM_MAP_PARAM_FIELD_MEMORY_TYPE)
            && p.memory_type != UCS_MEMORY_TYPE_HOST
            && p.memory_type != UCS_MEMORY_TYPE_UNKNOWN
        {
            return status::UNSUPPORTED;
        }
        if flags & UCP_MEM_MAP_FIXED != 0 {
            return status::UNSUPPORTED;
        }
        let allocate = flags & UCP_MEM_MAP_ALLOCATE != 0;
        if !allocate && address.is_null() && p.length > 0 {
            return status::INVALID_PARAM;
        }
        crate::ucm::register(&c.ctx);
        crate::ucm::drain();
        let access = access_of(p);
        let (map, address) = if p.length == 0 {
            (None, address)
        } else if allocate {
            match c.ctx.mem_alloc(p.length, access) {
                Ok(m) => {
                    let a = m.ptr().cast();
                    (Some(m), a)
                }
                Err(e) => return status::of(&e),
            }
        } else {
            // SAFETY: the application keeps the memory valid until
            // ucp_mem_unmap and accesses it knowing peers may write it
            // (UCX's contract).
            match unsafe { c.ctx.mem_map(address.cast(), p.length, access) } {
                Ok(m) => (Some(m), address),
                Err(e) => return status::of(&e),
            }
        };
        let h = Box::new(MemH {
            map,
            address,
            length: p.length,
        });
        // SAFETY: writable (contract).
        unsafe { *memh_p = Box::into_raw(h) };
        status::OK
    })
}

/// `ucp_mem_unmap`: ends the registrations (keys peers hold are refused
/// from then on) and frees memory `ucp_mem_map` allocated.
///
/// # Safety
///
/// `memh` came from `ucp_mem_map` and is not used after.
#[no_mangle]
pub unsafe extern "C" fn ucp_mem_unmap(_context: *mut Context, memh: *mut MemH) -> StatusCode {
    guard_status(|| {
        if memh.is_null() {
            return status::INVALID_PARAM;
        }
        // SAFETY: from ucp_mem_map's Box, freed once (contract).
        let h = unsafe { Box::from_raw(memh) };
        match h.map {
            Some(m) => match m.unmap() {
                Ok(()) => status::OK,
                Err(e) => status::of(&e),
            },
            None => status::OK,
        }
    })
}

/// `ucp_mem_query`: address, length and memory type (host).
///
/// # Safety
///
/// `memh` is a live memory handle; `attr` NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn ucp_mem_query(memh: *const MemH, attr: *mut MemAttr) -> StatusCode {
    guard_status(|| {
        // SAFETY: NULL or valid (contract).
        let (Some(h), Some(a)) = (unsafe { memh.as_ref() }, unsafe { attr.as_mut() }) else {
            return status::INVALID_PARAM;
        };
        if a.field_mask & UCP_MEM_ATTR_FIELD_ADDRESS != 0 {
            a.address = h.address;
        }
        if a.field_mask & UCP_MEM_ATTR_FIELD_LENGTH != 0 {
            a.length = h.length;
        }
        if a.field_mask & UCP_MEM_ATTR_FIELD_MEM_TYPE != 0 {
            a.mem_type = UCS_MEMORY_TYPE_HOST;
        }
        status::OK
    })
}

/// `ucp_mem_advise`: checks its arguments and returns `UCS_OK`, doing
/// nothing else: rucx maps memory eagerly, so there is nothing to fault
/// in ahead of use.
///
/// # Safety
///
/// `memh` is NULL or live; `params` NULL or a valid
/// `ucp_mem_advise_params_t`.
#[no_mangle]
pub unsafe extern "C" fn ucp_mem_advise(
    context: *mut Context,
    memh: *mut MemH,
    params: *mut MemAdviseParams,
) -> StatusCode {
    guard_status(|| {
        if context.is_null() || memh.is_null() || params.is_null() {
            return status::INVALID_PARAM;
        }
        status::OK
    })
}

/// The text of `ucp_mem_print_info`: maps `size` bytes (allocated by
/// rucx), prints where and on which memory domains, unmaps.
fn mem_info(c: *mut Context, size: usize) -> String {
    let params = MemMapParams {
        field_mask: UCP_MEM_MAP_PARAM_FIELD_LENGTH | UCP_MEM_MAP_PARAM_FIELD_FLAGS,
        address: ptr::null_mut(),
        length: size,
        flags: UCP_MEM_MAP_ALLOCATE,
        prot: 0,
        memory_type: UCS_MEMORY_TYPE_HOST,
    };
    let mut memh: *mut MemH = ptr::null_mut();
    // SAFETY: a live context (the caller's contract); valid parameters.
    let st = unsafe { ucp_mem_map(c, &params, &mut memh) };
    if st != status::OK {
        // SAFETY: ucs_status_string returns a static C string.
        let text = unsafe { CStr::from_ptr(status::ucs_status_string(st)) };
        return format!("<Failed to map memory: {}>\n", text.to_string_lossy());
    }
    let mut attr = MemAttr {
        field_mask: UCP_MEM_ATTR_FIELD_ADDRESS | UCP_MEM_ATTR_FIELD_LENGTH,
        address: ptr::null_mut(),
        length: 0,
        mem_type: 0,
    };
    // SAFETY: the handle just mapped.
    unsafe { ucp_mem_query(memh, &mut attr) };
    // SAFETY: no argument; -1 on error.
    let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) }.max(1) as usize;
    let size_text = rucx::ucp::proto::select::size_text;
    // SAFETY: a live context (the caller's contract).
    let ctx = unsafe { &*c };
    let mut mds: Vec<String> = ctx
        .ctx
        .resources_by_md()
        .into_iter()
        .map(|(_, n, _)| n)
        .collect();
    mds.dedup();
    let mut out = String::from("#\n# UCP memory allocation\n#\n");
    out += &format!(
        "#  allocated {} at address {:p}, pagesize: {}\n",
        size_text(attr.length),
        attr.address,
        size_text(page)
    );
    out += &format!("#  registered on: {} \n#\n", mds.join(" "));
    // SAFETY: the handle just mapped, unmapped once.
    unsafe { ucp_mem_unmap(c, memh) };
    out
}

/// `ucp_mem_print_info`: maps `mem_size` bytes (a size as UCX's
/// configuration writes it: `4k`, `1m`, ...), prints the mapping and
/// unmaps it; a size it cannot read prints
/// `<Failed to convert a memunits string>`, as UCX's.
///
/// # Safety
///
/// `mem_size` is NULL or a C string; `context` came from `ucp_init`;
/// `stream` is an open `FILE *`.
#[no_mangle]
pub unsafe extern "C" fn ucp_mem_print_info(
    mem_size: *const c_char,
    context: *mut Context,
    stream: *mut libc::FILE,
) {
    use rucx::ucp::ucs::config::{ConfigValue, MemUnits};
    guard((), || {
        if context.is_null() || stream.is_null() {
            return;
        }
        // SAFETY: NULL or a C string (contract).
        let text = unsafe { crate::config::opt_str(mem_size) };
        let size = text
            .and_then(|t| MemUnits::parse(t).ok())
            .and_then(MemUnits::bytes)
            .and_then(|b| usize::try_from(b).ok());
        let out = match size {
            Some(n) => mem_info(context, n),
            None => "<Failed to convert a memunits string>\n".to_string(),
        };
        // SAFETY: an open stream (contract).
        unsafe { write_stream(stream, out.as_bytes()) };
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::mem::{offset_of, size_of};

    /// The layouts of UCX 1.13's headers on x86_64.
    #[test]
    fn layouts_are_ucx_s() {
        assert_eq!(size_of::<MemMapParams>(), 40);
        assert_eq!(offset_of!(MemMapParams, flags), 24);
        assert_eq!(offset_of!(MemMapParams, memory_type), 32);
        assert_eq!(size_of::<MemAttr>(), 32);
        assert_eq!(offset_of!(MemAttr, mem_type), 24);
        assert_eq!(size_of::<MemAdviseParams>(), 32);
        assert_eq!(offset_of!(MemAdviseParams, advice), 24);
    }
}
