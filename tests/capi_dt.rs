//! Generic datatypes of rucx's `libucp.so` from C, in one process
//! (`tests/c/capi_dt.c`): a strided datatype made with
//! `ucp_dt_create_generic` sent and received against contiguous, iovec
//! and itself at 0 B, 24 B, 64 KiB and 4 MiB (eager and rendezvous), the
//! data checked; a probed message received into it; a receive canceled
//! before it matched; `finish` exactly once per operation throughout.
//! Over the default transports, TCP and shared memory.

mod capi_common;
mod common;

use capi_common::*;

#[test]
fn generic_datatypes_from_c() {
    let (dir, exe) = match build_c_test("dt", "capi_dt") {
        Ok(v) => v,
        Err(e) => return common::skip_or_fail(&e),
    };
    run_over_tls(&exe, 180, &["capi_dt: ok"]);
    let _ = std::fs::remove_dir_all(dir);
}
