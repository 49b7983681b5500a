//! rucx's `libucp.so` from C, one-sided (`tests/c/capi_rma.c`): memory
//! mapped by allocation and from the program's own, remote keys packed
//! and unpacked, put and get in every form with flushes, atomics of both
//! widths (posted, fetched, nbx), `ucp_mem_query`, `ucp_rkey_ptr`, wrong
//! arguments, and the UCM calls Open MPI makes first. Over the default
//! transports, TCP, shared memory and self (chosen with `UCX_TLS`, which the
//! library reads as `RUCX_TLS`).

mod capi_common;
mod common;

use capi_common::*;

#[test]
fn rma_and_atomics_from_c() {
    let (dir, exe) = match build_c_test("rma", "capi_rma") {
        Ok(v) => v,
        Err(e) => return common::skip_or_fail(&e),
    };
    for env in [
        vec![],
        vec![("UCX_TLS", "tcp")],
        vec![("UCX_TLS", "shm")],
        vec![("UCX_TLS", "self")],
    ] {
        let out = run(&exe, &[], &env, 120);
        let t = text(&out);
        assert!(out.status.success(), "{env:?}: {t}");
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(stdout.contains("capi_rma: ok"), "{env:?}: {t}");
        assert!(stdout.contains("user: atomics ok"), "{env:?}: {t}");
        // The program's own memory is never reached directly.
        assert!(
            stdout.contains("user: ucp_rkey_ptr: Destination is unreachable"),
            "{env:?}: {t}"
        );
        // Memory the library allocated in a shared segment is.
        if env.first().is_some_and(|(_, tls)| *tls == "shm") {
            assert!(
                stdout.contains("allocated: ucp_rkey_ptr: Success"),
                "{env:?}: {t}"
            );
        }
    }
    let _ = std::fs::remove_dir_all(dir);
}
