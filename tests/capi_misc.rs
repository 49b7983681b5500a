//! rucx's `libucp.so` from C, the queries and small entry points
//! (`tests/c/capi_misc.c`): `ucp_lib_query`, libucs's name tables, the
//! blocking atomics of `ucp_compat.h` against a second worker,
//! `ucp_worker_address_query`, `ucp_ep_query` (name and socket
//! addresses), `ucp_ep_evaluate_perf`, `ucp_ep_modify_nb`,
//! `ucp_request_alloc`, `ucp_request_query` (and the worker's
//! `max_debug_string`, 200 as UCX 1.13's), `ucp_mem_print_info`,
//! `ucp_worker_wait_mem`, and wrong arguments. Over the default
//! transports, TCP and shared memory (chosen with `UCX_TLS`, which the
//! library reads as `RUCX_TLS`).

mod capi_common;
mod common;

use capi_common::*;

#[test]
fn queries_and_blocking_atomics_from_c() {
    let (dir, exe) = match build_c_test("misc", "capi_misc") {
        Ok(v) => v,
        Err(e) => return common::skip_or_fail(&e),
    };
    run_over_tls(
        &exe,
        120,
        &[
            "atomics ok",
            "sockaddrs ok",
            "modify ok",
            "max_debug_string 200\n",
            "request completed: ",
            "capi_misc: ok",
        ],
    );
    let _ = std::fs::remove_dir_all(dir);
}
