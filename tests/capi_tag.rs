//! rucx's `libucp.so` from C, in one process (`tests/c/capi_tag.c`): a
//! context and two workers connected by address; tag messages of 0 B,
//! 8 B, 64 KiB and 4 MiB with callbacks; requests in the application's
//! `request_size` area (through `_nbr` and through `_nbx` with
//! `UCP_OP_ATTR_FIELD_REQUEST`, as Open MPI posts them), `request_init`
//! once per pooled block; a callback that posts the next send from
//! inside progress; probe and matched receive; cancel of an unmatched
//! receive; wrong arguments; sleeping on the event fd and in
//! `ucp_worker_wait` until a message arrives. Over
//! the default transports, TCP and shared memory (chosen with `UCX_TLS`,
//! which the library reads as `RUCX_TLS`).

mod capi_common;
mod common;

use capi_common::*;

#[test]
fn tag_messages_requests_and_wakeup_from_c() {
    let (dir, exe) = match build_c_test("tag", "capi_tag") {
        Ok(v) => v,
        Err(e) => return common::skip_or_fail(&e),
    };
    // rucx's library (a variable of its own), not UCX's; the shared ones
    // under UCX's names; the resource lines Open MPI scans.
    let lines = [
        "capi_tag: ok",
        "\nRUCX_UNEXPECTED_MAX=",
        "\nUCX_TLS=",
        "#      resource 0  :  md 0  dev 0  flags -- ",
    ];
    for (env, out) in run_over_tls(&exe, 120, &lines) {
        let t = text(&out);
        let stdout = String::from_utf8_lossy(&out.stdout);
        if let Some((_, tls)) = env.first() {
            let tl = if *tls == "shm" { "posix/" } else { "tcp/" };
            assert!(stdout.contains(&format!("flags -- {tl}")), "{env:?}: {t}");
            assert!(!stdout.contains("flags -- self/"), "{env:?}: {t}");
        }
    }
    let _ = std::fs::remove_dir_all(dir);
}
