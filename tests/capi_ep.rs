//! rucx's `libucp.so` from C (`tests/c/capi_ep.c`): worker queries and
//! thread modes, the legacy `_nb` calls, a receive done at once with
//! `recv_info`, flushes and fence, closing endpoints in every mode, and
//! an endpoint in peer error mode whose handler runs, with the
//! endpoint's user data, when the peer worker is destroyed. Over the
//! default transports, TCP and shared memory.

mod capi_common;
mod common;

use capi_common::*;

#[test]
fn endpoints_close_flush_and_report_failures_from_c() {
    let (dir, exe) = match build_c_test("ep", "capi_ep") {
        Ok(v) => v,
        Err(e) => return common::skip_or_fail(&e),
    };
    run_over_tls(&exe, 120, &["capi_ep: ok"]);
    let _ = std::fs::remove_dir_all(dir);
}
