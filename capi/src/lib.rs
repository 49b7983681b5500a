//! UCX 1.13's C API over rucx: `libucp.so.0`.
//!
//! This crate builds a shared library that exports `ucp_*` and `ucs_*`
//! functions with UCX 1.13's names, numeric values, struct layouts and
//! semantics, so that a C program written for UCX (compiled against
//! UCX's headers, or rucx's own at the same include paths) runs on rucx.
//! It is a thin layer over the raw tier of the Rust API ([`rucx::Worker`]'s
//! `tag_send_raw`, `tag_recv_raw`, completion queue, endpoint parameters,
//! event fd); statuses map through `ucs`'s one table
//! ([`rucx::ucp::ucs::Status`], via [`rucx::Error::status`]), and no panic
//! crosses the boundary: every entry point catches unwinding and returns a
//! status (or an error pointer, or nothing for `void` functions).
//!
//! # Map
//! * `types.rs`: `#[repr(C)]` mirrors of UCX's parameter and attribute
//!   structs and the constants (field-mask bits, flags) they use;
//! * `status.rs`: `ucs_status_string`, the `UCS_PTR_*` encoding and the
//!   guards that turn a panic into a status;
//! * `config.rs`: `ucp_config_*` (`UCX_` variables read as their `RUCX_`
//!   counterparts where the meaning is the same);
//! * `context.rs`: `ucp_init_version`, `ucp_cleanup`, queries, versions;
//! * `worker.rs`: workers, their state and `ucp_worker_progress`;
//!   `deliver.rs`: what progress hands to C after the Rust progress
//!   (completions, endpoint failures, connection requests, ended
//!   connects, closes and flushes);
//! * `wakeup.rs`: `ucp_worker_get_efd`, `arm`, `wait`, `signal`;
//! * `ep.rs`: endpoints (by worker address, connection request or socket
//!   address: a client's endpoint is returned at once, the worker's
//!   progress completes its connect or calls its error handler) and
//!   closing them; `deferred.rs`: the operations posted on a client
//!   endpoint while it connects (sends, one-sided operations, flushes, a
//!   flush-mode close) and the remote keys unpacked on it;
//! * `listener.rs`: `ucp_listener_*` and `ucp_conn_request_query`: the
//!   Rust listener's handler queues each client, `ucp_worker_progress`
//!   gives them to the C connection handler after the Rust progress;
//! * `flush.rs`: endpoint and worker flushes;
//! * `mem.rs`: memory maps (`ucp_mem_*`); `rkey.rs`: their remote keys;
//!   `rma.rs` and `atomic.rs`: one-sided operations with them, posted
//!   through `onesided.rs`;
//! * `query.rs`: `ucp_ep_query`, `ucp_ep_modify_nb`, `ucp_ep_evaluate_perf`,
//!   `ucp_request_query`, `ucp_request_alloc`, `ucp_worker_address_query`,
//!   `ucp_worker_wait_mem`, `ucp_lib_query` and
//!   libucs's name tables (`ucs_memory_type_names`, `ucs_memory_type_descs`,
//!   `ucs_thread_mode_names`);
//! * `request.rs`: requests in UCX's memory model (a per-worker pool of
//!   blocks, rucx's header before the user's `request_size` area) and the
//!   `ucp_request_*` entry points;
//! * `post.rs`: posting an operation with a request (taken only once
//!   it goes in flight) on a C endpoint, deferred while it connects;
//! * `tag.rs`: tag-matched sends, receives and probes; `dt.rs`: their
//!   datatypes (contiguous, iovec, generic: `ucp_dt_create_generic`,
//!   `ucp_dt_destroy`);
//! * `am.rs`: active messages (`ucp_worker_set_am_recv_handler`,
//!   `ucp_am_send_nbx`, `ucp_am_recv_data_nbx`, `ucp_am_data_release`,
//!   the legacy `ucp_worker_set_am_handler` and `ucp_am_send_nb`): Rust
//!   handlers queue the messages, `ucp_worker_progress` gives them to the
//!   C handlers after the Rust progress, in arrival order;
//! * `stream.rs`: streams (`ucp_stream_send_nbx`, `ucp_stream_recv_nbx`
//!   with `UCP_STREAM_RECV_FLAG_WAITALL`, the legacy `_nb` calls,
//!   `ucp_stream_recv_request_test`) with every datatype the tag calls
//!   take; `stream_data.rs`: `ucp_stream_recv_data_nb`,
//!   `ucp_stream_data_release` and `ucp_stream_worker_poll`.
//!
//! # Requests and callbacks
//! Every operation is posted to the Rust worker with [`rucx::Op::queue`];
//! one that goes in flight then gets a C request, whose address becomes
//! its user data ([`rucx::Worker::request_set_user_data`]; an operation
//! done when posted needs none and returns NULL). A C
//! request is a block `header + request_size`: the handle given to C
//! points just past rucx's header (whose size `ucp_context_query` reports
//! as `request_size`, as UCX does), at the user's area. Blocks come from a
//! per-worker pool that runs the user's `request_init` once per block when
//! it creates it and `request_cleanup` when it frees it. After the Rust
//! `progress` call returns, `ucp_worker_progress` drains the completion
//! queue and calls the C callbacks with no borrow of the worker alive, so
//! a callback may call any entry point (post, free, close). A request
//! without a callback that the application still holds is marked done
//! inside the Rust progress instead, by the worker's completion hook
//! (`deliver::mark_done`): that runs no C code. Endpoint
//! error handlers, listeners' connection handlers and active messages are
//! queued by Rust closures the same way (an `inbox.rs` queue, whose flag
//! progress reads without a lock) and handed to C after progress. As in
//! UCX's implementation, a request the application freed in flight still
//! gets its callback when it completes.
//!
//! # Not implemented yet
//! Strided datatypes (`UCS_ERR_UNSUPPORTED`), and iovec and generic
//! datatypes outside the tag, stream and active message calls (one-sided
//! calls take contiguous data only); a generic datatype is packed whole when its send starts, and an
//! `unpack` callback's error fails the receive with
//! `UCS_ERR_INVALID_PARAM` rather than its own status;
//! in active messages, `UCP_AM_SEND_FLAG_COPY_HEADER`
//! (not in UCX 1.13's header; the header is always copied), a
//! zero-length message by rendezvous (sent eagerly), and a kept eager buffer fetched with
//! `ucp_am_recv_data_nbx` into a non-contiguous datatype
//! (`UCS_ERR_UNSUPPORTED`); the legacy accept handler of listeners
//! (`UCS_ERR_UNSUPPORTED`), `UCP_EP_PARAM_FIELD_LOCAL_SOCK_ADDR` (not
//! read); `ucp_request_alloc` returns NULL, as UCX 1.13's does;
//! `ucp_ep_query` names an endpoint by its handle, as UCX's release
//! builds do (`UCP_EP_PARAM_FIELD_NAME` is not kept); `libucs.so` and
//! `libucm.so`. Thread mode `MULTI` takes
//! one lock around every entry point of a worker. On a client endpoint
//! whose connect is not answered yet, `ucp_ep_evaluate_perf` and
//! `ucp_ep_print_info` wait for it inside the call, progressing the
//! worker (the other calls are deferred, `deferred.rs`).

// C's names for C's types and functions.
#![allow(non_camel_case_types)]

pub mod am;
pub mod atomic;
pub mod config;
pub mod context;
mod deferred;
mod deliver;
pub mod dt;
pub mod ep;
pub mod flush;
mod inbox;
pub mod listener;
pub mod mem;
mod onesided;
mod post;
pub mod query;
pub mod request;
pub mod rkey;
pub mod rma;
pub mod status;
pub mod stream;
pub mod stream_data;
pub mod tag;
pub mod types;
pub mod ucm;
pub mod wakeup;
pub mod worker;
