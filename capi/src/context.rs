//! `ucp_init_version`, `ucp_cleanup`, `ucp_context_query`,
//! `ucp_context_print_info` and the version calls.

use crate::config::{opt_str, write_stream, Config};
use crate::request::HEADER_SIZE;
use crate::status::{self, guard, guard_status};
use crate::types::*;
use std::ffi::{c_char, c_uint, CStr};

/// The UCX API version this library implements.
pub const API_MAJOR: c_uint = 1;
/// See [`API_MAJOR`].
pub const API_MINOR: c_uint = 13;
/// Release number reported by `ucp_get_version`.
pub const API_RELEASE: c_uint = 0;

/// `ucp_context_h`: a rucx context and what `ucp_params_t` asked.
#[derive(Debug)]
pub struct Context {
    pub(crate) ctx: rucx::Context,
    /// Bytes of the application's part of each request.
    pub(crate) request_size: usize,
    pub(crate) request_init: Option<RequestInitCb>,
    pub(crate) request_cleanup: Option<RequestInitCb>,
    pub(crate) mt_shared: bool,
    pub(crate) name: String,
}

/// Copies `name` into a `char[UCP_ENTITY_NAME_MAX]`, cut and terminated.
pub(crate) fn copy_name(dst: &mut [c_char; UCP_ENTITY_NAME_MAX], name: &str) {
    let n = name.len().min(UCP_ENTITY_NAME_MAX - 1);
    for (d, s) in dst.iter_mut().zip(name.as_bytes()[..n].iter()) {
        *d = *s as c_char;
    }
    dst[n] = 0;
}

/// `ucp_init_version` (the header's inline `ucp_init` calls it): a
/// context over rucx's built-in transports. A major version other than
/// 1 is `UCS_ERR_UNSUPPORTED`; features are not checked (all of them
/// are there or fail when used).
///
/// # Safety
///
/// `params` points to a `ucp_params_t` (its fields read as its
/// `field_mask` says); `config` is NULL or came from `ucp_config_read`;
/// `context_p` is writable.
#[no_mangle]
pub unsafe extern "C" fn ucp_init_version(
    api_major_version: c_uint,
    _api_minor_version: c_uint,
    params: *const Params,
    config: *const Config,
    context_p: *mut *mut Context,
) -> StatusCode {
    guard_status(|| {
        if api_major_version != API_MAJOR {
            return status::UNSUPPORTED;
        }
        // SAFETY: NULL or a valid ucp_params_t (contract).
        let Some(p) = (unsafe { params.as_ref() }) else {
            return status::INVALID_PARAM;
        };
        if context_p.is_null() {
            return status::INVALID_PARAM;
        }
        let has = |bit| p.field_mask & bit != 0;
        // SAFETY: NULL or a configuration from ucp_config_read (contract).
        let mut cfg = match unsafe { config.as_ref() } {
            Some(c) => c.clone(),
            None => Config::read(None, rucx::ucp::ucs::config::env_lookup),
        };
        cfg.cache_only_if_unmaps_reported(crate::ucm::unmaps_reported());
        let ucp_cfg = match cfg.parse() {
            Ok(c) => c,
            Err(e) => {
                eprintln!("rucx: {e}");
                return status::INVALID_PARAM;
            }
        };
        rucx::ucp::ucs::log::init();
        let ctx = match rucx::Context::with_config(ucp_cfg) {
            Ok(c) => c,
            Err(e) => {
                tracing::warn!("ucp_init: {e}");
                return status::of(&e);
            }
        };
        // ucm_vm_munmap reaches every live context, mapped memory or not.
        crate::ucm::register(&ctx);
        let name = match has(UCP_PARAM_FIELD_NAME) {
            // SAFETY: a C string when the field is set (contract).
            true => unsafe { opt_str(p.name) }.unwrap_or("rucx").to_string(),
            false => "rucx".to_string(),
        };
        let c = Context {
            ctx,
            request_size: if has(UCP_PARAM_FIELD_REQUEST_SIZE) {
                p.request_size
            } else {
                0
            },
            request_init: p.request_init.filter(|_| has(UCP_PARAM_FIELD_REQUEST_INIT)),
            request_cleanup: p
                .request_cleanup
                .filter(|_| has(UCP_PARAM_FIELD_REQUEST_CLEANUP)),
            mt_shared: has(UCP_PARAM_FIELD_MT_WORKERS_SHARED) && p.mt_workers_shared != 0,
            name,
        };
        // SAFETY: checked non-NULL; writable by contract.
        unsafe { *context_p = Box::into_raw(Box::new(c)) };
        status::OK
    })
}

/// `ucp_cleanup`: releases a context (its workers must be gone).
///
/// # Safety
///
/// `context` is NULL or came from `ucp_init` and is not used after.
#[no_mangle]
pub unsafe extern "C" fn ucp_cleanup(context: *mut Context) {
    guard((), || {
        if !context.is_null() {
            // SAFETY: made by Box::into_raw in ucp_init_version, freed once.
            drop(unsafe { Box::from_raw(context) });
        }
    })
}

/// `ucp_context_query`: `request_size` is the size of rucx's header that
/// sits before every request (what memory given with
/// `UCP_OP_ATTR_FIELD_REQUEST` or to the `_nbr` calls must leave room
/// for).
///
/// # Safety
///
/// `context` came from `ucp_init`; `attr` points to a `ucp_context_attr_t`.
#[no_mangle]
pub unsafe extern "C" fn ucp_context_query(
    context: *mut Context,
    attr: *mut ContextAttr,
) -> StatusCode {
    guard_status(|| {
        // SAFETY: NULL or valid (contract).
        let (Some(c), Some(a)) = (unsafe { context.as_ref() }, unsafe { attr.as_mut() }) else {
            return status::INVALID_PARAM;
        };
        if a.field_mask & UCP_ATTR_FIELD_REQUEST_SIZE != 0 {
            a.request_size = HEADER_SIZE;
        }
        if a.field_mask & UCP_ATTR_FIELD_THREAD_MODE != 0 {
            a.thread_mode = if c.mt_shared {
                UCS_THREAD_MODE_MULTI
            } else {
                UCS_THREAD_MODE_SINGLE
            };
        }
        if a.field_mask & UCP_ATTR_FIELD_MEMORY_TYPES != 0 {
            a.memory_types = 1 << UCS_MEMORY_TYPE_HOST;
        }
        if a.field_mask & UCP_ATTR_FIELD_NAME != 0 {
            copy_name(&mut a.name, &c.name);
        }
        status::OK
    })
}

/// The text of `ucp_context_print_info`, in UCX's layout (its
/// `# resource N : md M dev D flags -- tl/dev` lines are what Open MPI
/// scans for transports).
pub fn print_info(c: &Context) -> String {
    let mut out = String::from("#\n# UCP context\n#\n");
    let res = c.ctx.resources_by_md();
    let mut mds: Vec<(usize, &str)> = res.iter().map(|(i, n, _)| (*i, n.as_str())).collect();
    mds.dedup();
    for (i, name) in &mds {
        out += &format!("#            md {i:<2} :  component {i:<2} {name} \n");
    }
    out += "#\n";
    let mut devs: Vec<&str> = Vec::new();
    for (i, (md, _, r)) in res.iter().enumerate() {
        let dev = match devs.iter().position(|d| *d == r.dev_name) {
            Some(d) => d,
            None => {
                devs.push(&r.dev_name);
                devs.len() - 1
            }
        };
        out += &format!(
            "#      resource {i:<2} :  md {md:<2} dev {dev:<2} flags -- {}/{}\n",
            r.tl_name, r.dev_name
        );
    }
    out += "#\n";
    out
}

/// `ucp_context_print_info`.
///
/// # Safety
///
/// `context` came from `ucp_init`; `stream` is an open `FILE *`.
#[no_mangle]
pub unsafe extern "C" fn ucp_context_print_info(context: *const Context, stream: *mut libc::FILE) {
    guard((), || {
        // SAFETY: NULL or a live context (contract).
        if let Some(c) = unsafe { context.as_ref() } {
            // SAFETY: an open stream (contract).
            unsafe { write_stream(stream, print_info(c).as_bytes()) };
        }
    })
}

/// `ucp_get_version`: the UCX API version implemented (1.13.0).
///
/// # Safety
///
/// Each pointer is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn ucp_get_version(
    major_version: *mut c_uint,
    minor_version: *mut c_uint,
    release_number: *mut c_uint,
) {
    guard((), || {
        for (p, v) in [
            (major_version, API_MAJOR),
            (minor_version, API_MINOR),
            (release_number, API_RELEASE),
        ] {
            if !p.is_null() {
                // SAFETY: non-NULL and writable (contract).
                unsafe { *p = v };
            }
        }
    })
}

static VERSION: &CStr = c"1.13.0";

/// `ucp_get_version_string`: `"1.13.0"`.
///
/// # Safety
///
/// None; the string is static.
#[no_mangle]
pub unsafe extern "C" fn ucp_get_version_string() -> *const c_char {
    VERSION.as_ptr()
}
