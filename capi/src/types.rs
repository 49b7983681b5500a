//! `#[repr(C)]` mirrors of UCX 1.13's structs, and the constants of the
//! fields and flags this library reads.
//!
//! Layouts follow Debian's `libucx-dev` 1.13 headers (`ucp/api/ucp.h`,
//! `ucp_def.h`, `ucs/type/status.h`, `ucs/config/types.h`); the unit test
//! at the end checks sizes and offsets against numbers measured with a C
//! program compiled against those headers (`tests/c/layout_probe.c`).

use std::ffi::{c_char, c_int, c_uint, c_void};

/// `ucs_status_t`: a packed enum, one signed byte.
pub type StatusCode = i8;
/// `ucs_status_ptr_t`: NULL, a request, or a status cast to a pointer.
pub type StatusPtr = *mut c_void;
/// `ucs_thread_mode_t`.
pub type ThreadMode = c_int;
/// `ucp_datatype_t`.
pub type Datatype = u64;

/// `UCS_THREAD_MODE_SINGLE`.
pub const UCS_THREAD_MODE_SINGLE: ThreadMode = 0;
/// `UCS_THREAD_MODE_SERIALIZED`.
pub const UCS_THREAD_MODE_SERIALIZED: ThreadMode = 1;
/// `UCS_THREAD_MODE_MULTI`.
pub const UCS_THREAD_MODE_MULTI: ThreadMode = 2;

/// `UCP_PARAM_FIELD_FEATURES`.
pub const UCP_PARAM_FIELD_FEATURES: u64 = 1 << 0;
/// `UCP_PARAM_FIELD_REQUEST_SIZE`.
pub const UCP_PARAM_FIELD_REQUEST_SIZE: u64 = 1 << 1;
/// `UCP_PARAM_FIELD_REQUEST_INIT`.
pub const UCP_PARAM_FIELD_REQUEST_INIT: u64 = 1 << 2;
/// `UCP_PARAM_FIELD_REQUEST_CLEANUP`.
pub const UCP_PARAM_FIELD_REQUEST_CLEANUP: u64 = 1 << 3;
/// `UCP_PARAM_FIELD_MT_WORKERS_SHARED`.
pub const UCP_PARAM_FIELD_MT_WORKERS_SHARED: u64 = 1 << 5;
/// `UCP_PARAM_FIELD_NAME`.
pub const UCP_PARAM_FIELD_NAME: u64 = 1 << 8;

/// `UCP_ATTR_FIELD_REQUEST_SIZE`.
pub const UCP_ATTR_FIELD_REQUEST_SIZE: u64 = 1 << 0;
/// `UCP_ATTR_FIELD_THREAD_MODE`.
pub const UCP_ATTR_FIELD_THREAD_MODE: u64 = 1 << 1;
/// `UCP_ATTR_FIELD_MEMORY_TYPES`.
pub const UCP_ATTR_FIELD_MEMORY_TYPES: u64 = 1 << 2;
/// `UCP_ATTR_FIELD_NAME`.
pub const UCP_ATTR_FIELD_NAME: u64 = 1 << 3;

/// `UCP_WORKER_PARAM_FIELD_THREAD_MODE`.
pub const UCP_WORKER_PARAM_FIELD_THREAD_MODE: u64 = 1 << 0;
/// `UCP_WORKER_PARAM_FIELD_USER_DATA`.
pub const UCP_WORKER_PARAM_FIELD_USER_DATA: u64 = 1 << 3;
/// `UCP_WORKER_PARAM_FIELD_EVENT_FD`.
pub const UCP_WORKER_PARAM_FIELD_EVENT_FD: u64 = 1 << 4;
/// `UCP_WORKER_PARAM_FIELD_NAME`.
pub const UCP_WORKER_PARAM_FIELD_NAME: u64 = 1 << 6;

/// `UCP_WORKER_ATTR_FIELD_THREAD_MODE`.
pub const UCP_WORKER_ATTR_FIELD_THREAD_MODE: u64 = 1 << 0;
/// `UCP_WORKER_ATTR_FIELD_ADDRESS`.
pub const UCP_WORKER_ATTR_FIELD_ADDRESS: u64 = 1 << 1;
/// `UCP_WORKER_ATTR_FIELD_ADDRESS_FLAGS`.
pub const UCP_WORKER_ATTR_FIELD_ADDRESS_FLAGS: u64 = 1 << 2;
/// `UCP_WORKER_ATTR_FIELD_MAX_AM_HEADER`.
pub const UCP_WORKER_ATTR_FIELD_MAX_AM_HEADER: u64 = 1 << 3;
/// `UCP_WORKER_ATTR_FIELD_NAME`.
pub const UCP_WORKER_ATTR_FIELD_NAME: u64 = 1 << 4;
/// `UCP_WORKER_ATTR_FIELD_MAX_INFO_STRING`.
pub const UCP_WORKER_ATTR_FIELD_MAX_INFO_STRING: u64 = 1 << 5;

/// `UCP_EP_PARAM_FIELD_REMOTE_ADDRESS`.
pub const UCP_EP_PARAM_FIELD_REMOTE_ADDRESS: u64 = 1 << 0;
/// `UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE`.
pub const UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE: u64 = 1 << 1;
/// `UCP_EP_PARAM_FIELD_ERR_HANDLER`.
pub const UCP_EP_PARAM_FIELD_ERR_HANDLER: u64 = 1 << 2;
/// `UCP_EP_PARAM_FIELD_USER_DATA`.
pub const UCP_EP_PARAM_FIELD_USER_DATA: u64 = 1 << 3;
/// `UCP_EP_PARAM_FIELD_SOCK_ADDR`.
pub const UCP_EP_PARAM_FIELD_SOCK_ADDR: u64 = 1 << 4;
/// `UCP_EP_PARAM_FIELD_CONN_REQUEST`.
pub const UCP_EP_PARAM_FIELD_CONN_REQUEST: u64 = 1 << 6;

/// `UCP_ERR_HANDLING_MODE_NONE`.
pub const UCP_ERR_HANDLING_MODE_NONE: c_int = 0;
/// `UCP_ERR_HANDLING_MODE_PEER`.
pub const UCP_ERR_HANDLING_MODE_PEER: c_int = 1;

/// `UCP_EP_CLOSE_FLAG_FORCE` (in `ucp_request_param_t::flags`).
pub const UCP_EP_CLOSE_FLAG_FORCE: u32 = 1 << 0;
/// `UCP_EP_CLOSE_MODE_FORCE` (`ucp_ep_close_nb`).
pub const UCP_EP_CLOSE_MODE_FORCE: c_uint = 0;
/// `UCP_EP_CLOSE_MODE_FLUSH` (`ucp_ep_close_nb`).
pub const UCP_EP_CLOSE_MODE_FLUSH: c_uint = 1;

/// `UCP_OP_ATTR_FIELD_REQUEST`.
pub const UCP_OP_ATTR_FIELD_REQUEST: u32 = 1 << 0;
/// `UCP_OP_ATTR_FIELD_CALLBACK`.
pub const UCP_OP_ATTR_FIELD_CALLBACK: u32 = 1 << 1;
/// `UCP_OP_ATTR_FIELD_USER_DATA`.
pub const UCP_OP_ATTR_FIELD_USER_DATA: u32 = 1 << 2;
/// `UCP_OP_ATTR_FIELD_DATATYPE`.
pub const UCP_OP_ATTR_FIELD_DATATYPE: u32 = 1 << 3;
/// `UCP_OP_ATTR_FIELD_FLAGS`.
pub const UCP_OP_ATTR_FIELD_FLAGS: u32 = 1 << 4;
/// `UCP_OP_ATTR_FIELD_MEMORY_TYPE`.
pub const UCP_OP_ATTR_FIELD_MEMORY_TYPE: u32 = 1 << 6;
/// `UCP_OP_ATTR_FIELD_RECV_INFO`.
pub const UCP_OP_ATTR_FIELD_RECV_INFO: u32 = 1 << 7;
/// `UCP_OP_ATTR_FLAG_NO_IMM_CMPL`.
pub const UCP_OP_ATTR_FLAG_NO_IMM_CMPL: u32 = 1 << 16;
/// `UCP_OP_ATTR_FLAG_FORCE_IMM_CMPL`.
pub const UCP_OP_ATTR_FLAG_FORCE_IMM_CMPL: u32 = 1 << 18;

/// `UCP_DATATYPE_SHIFT`: the element size of a contiguous datatype sits
/// above these bits.
pub const UCP_DATATYPE_SHIFT: u32 = 3;
/// `UCP_DATATYPE_CLASS_MASK`.
pub const UCP_DATATYPE_CLASS_MASK: u64 = (1 << UCP_DATATYPE_SHIFT) - 1;
/// `UCP_DATATYPE_CONTIG`.
pub const UCP_DATATYPE_CONTIG: u64 = 0;
/// `ucp_dt_make_contig(1)`: the default datatype of `_nbx` calls.
pub const DT_CONTIG_BYTES: Datatype = (1 << UCP_DATATYPE_SHIFT) | UCP_DATATYPE_CONTIG;

/// `UCS_MEMORY_TYPE_HOST`.
pub const UCS_MEMORY_TYPE_HOST: c_int = 0;
/// `UCS_MEMORY_TYPE_UNKNOWN`.
pub const UCS_MEMORY_TYPE_UNKNOWN: c_int = 5;

/// `UCS_CONFIG_PRINT_CONFIG`.
pub const UCS_CONFIG_PRINT_CONFIG: c_int = 1 << 0;
/// `UCS_CONFIG_PRINT_HEADER`.
pub const UCS_CONFIG_PRINT_HEADER: c_int = 1 << 1;
/// `UCS_CONFIG_PRINT_DOC`.
pub const UCS_CONFIG_PRINT_DOC: c_int = 1 << 2;
/// `UCS_CONFIG_PRINT_HIDDEN` (rucx has no hidden variables: no effect).
pub const UCS_CONFIG_PRINT_HIDDEN: c_int = 1 << 3;
/// `UCS_CONFIG_PRINT_COMMENT_DEFAULT`.
pub const UCS_CONFIG_PRINT_COMMENT_DEFAULT: c_int = 1 << 4;

/// `UCP_ENTITY_NAME_MAX`.
pub const UCP_ENTITY_NAME_MAX: usize = 32;

/// `ucp_request_init_callback_t` / `ucp_request_cleanup_callback_t`.
pub type RequestInitCb = unsafe extern "C" fn(request: *mut c_void);
/// `ucp_send_nbx_callback_t`.
pub type SendNbxCb =
    unsafe extern "C" fn(request: *mut c_void, status: StatusCode, user_data: *mut c_void);
/// `ucp_send_callback_t` (the legacy `_nb` calls).
pub type SendCb = unsafe extern "C" fn(request: *mut c_void, status: StatusCode);
/// `ucp_tag_recv_nbx_callback_t`.
pub type TagRecvNbxCb = unsafe extern "C" fn(
    request: *mut c_void,
    status: StatusCode,
    info: *const TagRecvInfo,
    user_data: *mut c_void,
);
/// `ucp_tag_recv_callback_t` (the legacy `_nb` calls).
pub type TagRecvCb =
    unsafe extern "C" fn(request: *mut c_void, status: StatusCode, info: *mut TagRecvInfo);
/// `ucp_am_recv_data_nbx_callback_t`.
pub type AmRecvDataCb = unsafe extern "C" fn(
    request: *mut c_void,
    status: StatusCode,
    length: usize,
    user_data: *mut c_void,
);
/// `ucp_am_callback_t` (the legacy handler).
pub type AmLegacyCb = unsafe extern "C" fn(
    arg: *mut c_void,
    data: *mut c_void,
    length: usize,
    reply_ep: *mut c_void,
    flags: c_uint,
) -> StatusCode;
/// `ucp_am_recv_callback_t`.
pub type AmRecvCb = unsafe extern "C" fn(
    arg: *mut c_void,
    header: *const c_void,
    header_length: usize,
    data: *mut c_void,
    length: usize,
    param: *const AmRecvParam,
) -> StatusCode;

/// `ucp_am_handler_param_t`.
#[repr(C)]
#[derive(Debug)]
pub struct AmHandlerParam {
    /// `UCP_AM_HANDLER_PARAM_FIELD_*`.
    pub field_mask: u64,
    /// The message id.
    pub id: c_uint,
    /// `UCP_AM_FLAG_*`.
    pub flags: u32,
    /// The handler (NULL removes it).
    pub cb: Option<AmRecvCb>,
    /// Its first argument.
    pub arg: *mut c_void,
}

/// `ucp_am_recv_param_t`.
#[repr(C)]
#[derive(Debug)]
pub struct AmRecvParam {
    /// `UCP_AM_RECV_ATTR_*` fields and flags.
    pub recv_attr: u64,
    /// The endpoint back to the sender (`UCP_AM_RECV_ATTR_FIELD_REPLY_EP`).
    pub reply_ep: *mut c_void,
}

/// `UCP_AM_HANDLER_PARAM_FIELD_ID`.
pub const UCP_AM_HANDLER_PARAM_FIELD_ID: u64 = 1 << 0;
/// `UCP_AM_HANDLER_PARAM_FIELD_FLAGS`.
pub const UCP_AM_HANDLER_PARAM_FIELD_FLAGS: u64 = 1 << 1;
/// `UCP_AM_HANDLER_PARAM_FIELD_CB`.
pub const UCP_AM_HANDLER_PARAM_FIELD_CB: u64 = 1 << 2;
/// `UCP_AM_HANDLER_PARAM_FIELD_ARG`.
pub const UCP_AM_HANDLER_PARAM_FIELD_ARG: u64 = 1 << 3;
/// `UCP_AM_RECV_ATTR_FIELD_REPLY_EP`.
pub const UCP_AM_RECV_ATTR_FIELD_REPLY_EP: u64 = 1 << 0;
/// `UCP_AM_RECV_ATTR_FLAG_DATA`: the handler may keep the data.
pub const UCP_AM_RECV_ATTR_FLAG_DATA: u64 = 1 << 16;
/// `UCP_AM_RECV_ATTR_FLAG_RNDV`: the data is a descriptor.
pub const UCP_AM_RECV_ATTR_FLAG_RNDV: u64 = 1 << 17;
/// `UCP_AM_SEND_FLAG_REPLY` (and the legacy `UCP_AM_SEND_REPLY`).
pub const UCP_AM_SEND_FLAG_REPLY: u32 = 1 << 0;
/// `UCP_AM_SEND_FLAG_EAGER`.
pub const UCP_AM_SEND_FLAG_EAGER: u32 = 1 << 1;
/// `UCP_AM_SEND_FLAG_RNDV`.
pub const UCP_AM_SEND_FLAG_RNDV: u32 = 1 << 2;
/// `UCP_CB_PARAM_FLAG_DATA`: a legacy handler may keep the data.
pub const UCP_CB_PARAM_FLAG_DATA: c_uint = 1 << 0;

/// `ucp_err_handler_cb_t`.
pub type ErrHandlerCb = unsafe extern "C" fn(arg: *mut c_void, ep: *mut c_void, status: StatusCode);

/// `ucp_params_t`.
#[repr(C)]
#[derive(Debug)]
pub struct Params {
    /// Which of the fields below are set (`UCP_PARAM_FIELD_*`).
    pub field_mask: u64,
    /// `UCP_FEATURE_*` bits.
    pub features: u64,
    /// Bytes the application keeps in each request.
    pub request_size: usize,
    /// Runs once on each request block the pool creates.
    pub request_init: Option<RequestInitCb>,
    /// Runs on each request block the pool frees.
    pub request_cleanup: Option<RequestInitCb>,
    /// Bits of the tag that name the sender.
    pub tag_sender_mask: u64,
    /// Whether workers are shared by threads.
    pub mt_workers_shared: c_int,
    /// Expected number of endpoints.
    pub estimated_num_eps: usize,
    /// Expected number of processes per node.
    pub estimated_num_ppn: usize,
    /// Context name.
    pub name: *const c_char,
}

/// `ucp_context_attr_t`.
#[repr(C)]
#[derive(Debug)]
pub struct ContextAttr {
    /// Which fields to fill (`UCP_ATTR_FIELD_*`).
    pub field_mask: u64,
    /// Bytes of rucx's header before a request handle.
    pub request_size: usize,
    /// Thread mode of the context.
    pub thread_mode: ThreadMode,
    /// Memory types supported (bits of `ucs_memory_type_t`).
    pub memory_types: u64,
    /// Context name.
    pub name: [c_char; UCP_ENTITY_NAME_MAX],
}

/// `ucs_cpu_set_t`: 1024 bits.
#[repr(C)]
#[derive(Debug)]
pub struct CpuSet {
    /// The bits.
    pub bits: [u64; 16],
}

/// `ucp_worker_params_t`.
#[repr(C)]
#[derive(Debug)]
pub struct WorkerParams {
    /// Which fields are set (`UCP_WORKER_PARAM_FIELD_*`).
    pub field_mask: u64,
    /// Thread mode.
    pub thread_mode: ThreadMode,
    /// CPUs of the worker (ignored).
    pub cpu_mask: CpuSet,
    /// Wakeup events (ignored: every event wakes).
    pub events: c_uint,
    /// User data.
    pub user_data: *mut c_void,
    /// An external event fd (not supported).
    pub event_fd: c_int,
    /// `UCP_WORKER_FLAG_*`.
    pub flags: u64,
    /// Worker name.
    pub name: *const c_char,
    /// Active message alignment.
    pub am_alignment: usize,
    /// Client id sent with connection requests.
    pub client_id: u64,
}

/// `ucp_worker_attr_t`.
#[repr(C)]
#[derive(Debug)]
pub struct WorkerAttr {
    /// Which fields to fill (`UCP_WORKER_ATTR_FIELD_*`).
    pub field_mask: u64,
    /// Thread mode.
    pub thread_mode: ThreadMode,
    /// Address flags asked for.
    pub address_flags: u32,
    /// The worker's address (release with `ucp_worker_release_address`).
    pub address: *mut c_void,
    /// Its length.
    pub address_length: usize,
    /// Largest active message header.
    pub max_am_header: usize,
    /// Worker name.
    pub name: [c_char; UCP_ENTITY_NAME_MAX],
    /// Largest debug string.
    pub max_debug_string: usize,
}

/// `ucp_err_handler_t`.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct ErrHandler {
    /// Called when the endpoint fails; may be NULL.
    pub cb: Option<ErrHandlerCb>,
    /// Its first argument (replaced by the endpoint's user data if set).
    pub arg: *mut c_void,
}

/// `ucs_sock_addr_t`.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct SockAddr {
    /// `const struct sockaddr *`.
    pub addr: *const libc::sockaddr,
    /// `socklen_t`.
    pub addrlen: libc::socklen_t,
}

/// `ucp_ep_params_t`.
#[repr(C)]
#[derive(Debug)]
pub struct EpParams {
    /// Which fields are set (`UCP_EP_PARAM_FIELD_*`).
    pub field_mask: u64,
    /// Remote worker address.
    pub address: *const c_void,
    /// `ucp_err_handling_mode_t`.
    pub err_mode: c_int,
    /// Error handler.
    pub err_handler: ErrHandler,
    /// User data.
    pub user_data: *mut c_void,
    /// `UCP_EP_PARAMS_FLAGS_*`.
    pub flags: c_uint,
    /// Remote socket address.
    pub sockaddr: SockAddr,
    /// Connection request to accept.
    pub conn_request: *mut c_void,
    /// Endpoint name.
    pub name: *const c_char,
    /// Local socket address.
    pub local_sockaddr: SockAddr,
}

/// `ucp_tag_recv_info_t`.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TagRecvInfo {
    /// The sender's tag.
    pub sender_tag: u64,
    /// Bytes received.
    pub length: usize,
}

/// The callback union of `ucp_request_param_t`.
#[repr(C)]
#[derive(Clone, Copy)]
pub union RequestCb {
    /// `cb.send`.
    pub send: Option<SendNbxCb>,
    /// `cb.recv`.
    pub recv: Option<TagRecvNbxCb>,
    /// `cb.recv_am`.
    pub recv_am: Option<AmRecvDataCb>,
    /// Any member, as a pointer.
    pub raw: *const c_void,
}

impl std::fmt::Debug for RequestCb {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // SAFETY: every member is one pointer; reading it as a pointer is
        // valid whichever was written.
        write!(f, "{:p}", unsafe { self.raw })
    }
}

/// `ucp_request_param_t`.
#[repr(C)]
#[derive(Debug)]
pub struct RequestParam {
    /// `UCP_OP_ATTR_*` fields and flags.
    pub op_attr_mask: u32,
    /// Operation-specific flags.
    pub flags: u32,
    /// Request memory of the caller (rucx's header goes before it).
    pub request: *mut c_void,
    /// Completion callback.
    pub cb: RequestCb,
    /// Datatype.
    pub datatype: Datatype,
    /// Argument of the callback.
    pub user_data: *mut c_void,
    /// Reply buffer of fetching atomics.
    pub reply_buffer: *mut c_void,
    /// `ucs_memory_type_t` of the buffer.
    pub memory_type: c_int,
    /// `recv_info.length` / `recv_info.tag_info`.
    pub recv_info: *mut c_void,
    /// Memory handle.
    pub memh: *mut c_void,
}

/// `UCP_EP_ATTR_FIELD_NAME`.
pub const UCP_EP_ATTR_FIELD_NAME: u64 = 1 << 0;
/// `UCP_EP_ATTR_FIELD_LOCAL_SOCKADDR`.
pub const UCP_EP_ATTR_FIELD_LOCAL_SOCKADDR: u64 = 1 << 1;
/// `UCP_EP_ATTR_FIELD_REMOTE_SOCKADDR`.
pub const UCP_EP_ATTR_FIELD_REMOTE_SOCKADDR: u64 = 1 << 2;
/// `UCP_LIB_ATTR_FIELD_MAX_THREAD_LEVEL`.
pub const UCP_LIB_ATTR_FIELD_MAX_THREAD_LEVEL: u64 = 1 << 0;
/// `UCP_WORKER_ADDRESS_ATTR_FIELD_UID`.
pub const UCP_WORKER_ADDRESS_ATTR_FIELD_UID: u64 = 1 << 0;
/// `UCP_EP_PERF_PARAM_FIELD_MESSAGE_SIZE`.
pub const UCP_EP_PERF_PARAM_FIELD_MESSAGE_SIZE: u64 = 1 << 0;
/// `UCP_EP_PERF_ATTR_FIELD_ESTIMATED_TIME`.
pub const UCP_EP_PERF_ATTR_FIELD_ESTIMATED_TIME: u64 = 1 << 0;
/// `UCP_REQUEST_ATTR_FIELD_INFO_STRING`.
pub const UCP_REQUEST_ATTR_FIELD_INFO_STRING: u64 = 1 << 0;
/// `UCP_REQUEST_ATTR_FIELD_INFO_STRING_SIZE`.
pub const UCP_REQUEST_ATTR_FIELD_INFO_STRING_SIZE: u64 = 1 << 1;
/// `UCP_REQUEST_ATTR_FIELD_STATUS`.
pub const UCP_REQUEST_ATTR_FIELD_STATUS: u64 = 1 << 2;
/// `UCP_REQUEST_ATTR_FIELD_MEM_TYPE`.
pub const UCP_REQUEST_ATTR_FIELD_MEM_TYPE: u64 = 1 << 3;

/// `ucp_ep_attr_t`.
#[repr(C)]
#[derive(Debug)]
pub struct EpAttr {
    /// Which fields to fill (`UCP_EP_ATTR_FIELD_*`).
    pub field_mask: u64,
    /// Endpoint name.
    pub name: [c_char; UCP_ENTITY_NAME_MAX],
    /// Local socket address of a client-server endpoint.
    pub local_sockaddr: libc::sockaddr_storage,
    /// Remote socket address of a client-server endpoint.
    pub remote_sockaddr: libc::sockaddr_storage,
}

/// `ucp_lib_attr_t`.
#[repr(C)]
#[derive(Debug)]
pub struct LibAttr {
    /// Which fields to fill (`UCP_LIB_ATTR_FIELD_*`).
    pub field_mask: u64,
    /// Highest thread mode the library supports.
    pub max_thread_level: ThreadMode,
}

/// `ucp_worker_address_attr_t`.
#[repr(C)]
#[derive(Debug)]
pub struct WorkerAddressAttr {
    /// Which fields to fill (`UCP_WORKER_ADDRESS_ATTR_FIELD_*`).
    pub field_mask: u64,
    /// The unique id of the address's worker.
    pub worker_uid: u64,
}

/// `ucp_ep_evaluate_perf_param_t`.
#[repr(C)]
#[derive(Debug)]
pub struct EpEvaluatePerfParam {
    /// Which fields are set (`UCP_EP_PERF_PARAM_FIELD_*`).
    pub field_mask: u64,
    /// Bytes of the message to estimate.
    pub message_size: usize,
}

/// `ucp_ep_evaluate_perf_attr_t`.
#[repr(C)]
#[derive(Debug)]
pub struct EpEvaluatePerfAttr {
    /// Which fields to fill (`UCP_EP_PERF_ATTR_FIELD_*`).
    pub field_mask: u64,
    /// Estimated time to send the message, in seconds.
    pub estimated_time: f64,
}

/// `ucp_request_attr_t`.
#[repr(C)]
#[derive(Debug)]
pub struct RequestAttr {
    /// Which fields to fill (`UCP_REQUEST_ATTR_FIELD_*`).
    pub field_mask: u64,
    /// The caller's buffer for the debug string.
    pub debug_string: *mut c_char,
    /// Its size in bytes.
    pub debug_string_size: usize,
    /// The request's status (`UCS_INPROGRESS` while in flight).
    pub status: StatusCode,
    /// `ucs_memory_type_t` of the request's buffer.
    pub mem_type: c_int,
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::mem::{offset_of, size_of};

    /// Measured with `tests/c/layout_probe.c` compiled against Debian's
    /// libucx-dev 1.13.1 headers on x86_64 (`cc -I/usr/include`).
    #[test]
    fn mirrors_match_ucx_1_13() {
        assert_eq!(size_of::<Params>(), 80);
        assert_eq!(offset_of!(Params, request_size), 16);
        assert_eq!(offset_of!(Params, request_init), 24);
        assert_eq!(offset_of!(Params, request_cleanup), 32);
        assert_eq!(offset_of!(Params, mt_workers_shared), 48);
        assert_eq!(offset_of!(Params, name), 72);

        assert_eq!(size_of::<ContextAttr>(), 64);
        assert_eq!(offset_of!(ContextAttr, thread_mode), 16);
        assert_eq!(offset_of!(ContextAttr, memory_types), 24);
        assert_eq!(offset_of!(ContextAttr, name), 32);

        assert_eq!(size_of::<WorkerParams>(), 200);
        assert_eq!(offset_of!(WorkerParams, cpu_mask), 16);
        assert_eq!(offset_of!(WorkerParams, events), 144);
        assert_eq!(offset_of!(WorkerParams, user_data), 152);
        assert_eq!(offset_of!(WorkerParams, event_fd), 160);
        assert_eq!(offset_of!(WorkerParams, flags), 168);
        assert_eq!(offset_of!(WorkerParams, name), 176);
        assert_eq!(offset_of!(WorkerParams, client_id), 192);

        assert_eq!(size_of::<WorkerAttr>(), 80);
        assert_eq!(offset_of!(WorkerAttr, address_flags), 12);
        assert_eq!(offset_of!(WorkerAttr, address), 16);
        assert_eq!(offset_of!(WorkerAttr, address_length), 24);
        assert_eq!(offset_of!(WorkerAttr, max_am_header), 32);
        assert_eq!(offset_of!(WorkerAttr, name), 40);
        assert_eq!(offset_of!(WorkerAttr, max_debug_string), 72);

        assert_eq!(size_of::<EpParams>(), 104);
        assert_eq!(offset_of!(EpParams, err_mode), 16);
        assert_eq!(offset_of!(EpParams, err_handler), 24);
        assert_eq!(offset_of!(EpParams, user_data), 40);
        assert_eq!(offset_of!(EpParams, flags), 48);
        assert_eq!(offset_of!(EpParams, sockaddr), 56);
        assert_eq!(offset_of!(EpParams, conn_request), 72);
        assert_eq!(offset_of!(EpParams, name), 80);
        assert_eq!(offset_of!(EpParams, local_sockaddr), 88);

        assert_eq!(size_of::<RequestParam>(), 72);
        assert_eq!(offset_of!(RequestParam, flags), 4);
        assert_eq!(offset_of!(RequestParam, request), 8);
        assert_eq!(offset_of!(RequestParam, cb), 16);
        assert_eq!(offset_of!(RequestParam, datatype), 24);
        assert_eq!(offset_of!(RequestParam, user_data), 32);
        assert_eq!(offset_of!(RequestParam, memory_type), 48);
        assert_eq!(offset_of!(RequestParam, recv_info), 56);
        assert_eq!(offset_of!(RequestParam, memh), 64);

        assert_eq!(size_of::<TagRecvInfo>(), 16);
        assert_eq!(size_of::<StatusCode>(), 1);
    }
}
