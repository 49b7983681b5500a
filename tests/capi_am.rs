//! rucx's `libucp.so` active messages from C, in one process
//! (`tests/c/capi_am.c`): `ucp_worker_set_am_recv_handler` and
//! `ucp_am_send_nbx` with a user header at 0 B, 8 B, 64 KiB and 4 MiB
//! (rendezvous data fetched with `ucp_am_recv_data_nbx` from the handler
//! and after progress), data kept with `UCS_INPROGRESS` and released with
//! `ucp_am_data_release`, a reply on the reply endpoint, forced eager and
//! rendezvous, an iovec send; the legacy `ucp_worker_set_am_handler` and
//! `ucp_am_send_nb` with and without `UCP_AM_SEND_REPLY`, data kept;
//! wrong arguments and ids without a handler. Over the default
//! transports, TCP and shared memory (chosen with `UCX_TLS`, which the
//! library reads as `RUCX_TLS`).

mod capi_common;
mod common;

use capi_common::*;

#[test]
fn active_messages_from_c() {
    let (dir, exe) = match build_c_test("am", "capi_am") {
        Ok(v) => v,
        Err(e) => return common::skip_or_fail(&e),
    };
    // rucx's library (a variable of its own), not UCX's; the shared ones
    // under UCX's names.
    let lines = [
        "capi_am: ok",
        "close after the peer: ok",
        "\nRUCX_UNEXPECTED_MAX=",
        "\nUCX_TLS=",
        "am 4194304 B (rendezvous) (kept): ok",
    ];
    for (env, out) in run_over_tls(&exe, 120, &lines) {
        let t = text(&out);
        let stdout = String::from_utf8_lossy(&out.stdout);
        // The message to an id without a handler was dropped with a log
        // line.
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            stderr.contains("active message 9: no handler"),
            "{env:?}: {t}"
        );
        if let Some((_, tls)) = env.first() {
            let tl = if *tls == "shm" { "posix/" } else { "tcp/" };
            assert!(stdout.contains(&format!("flags -- {tl}")), "{env:?}: {t}");
        }
    }
    let _ = std::fs::remove_dir_all(dir);
}
