//! rucx's `libucp.so` from C with `UCP_OP_ATTR_FLAG_FORCE_IMM_CMPL`
//! (`tests/c/capi_force_imm.c`): tag sends and receives, a put from a
//! stack buffer and a stream receive either complete inside their call
//! or return `UCS_ERR_NO_RESOURCE` having posted nothing. Over TCP (where
//! the put is refused and writes nothing) and shared memory (where it is
//! done at once into the mapped segment).

mod capi_common;
mod common;

use capi_common::*;

#[test]
fn forced_immediate_completion_from_c() {
    let (dir, exe) = match build_c_test("force_imm", "capi_force_imm") {
        Ok(v) => v,
        Err(e) => return common::skip_or_fail(&e),
    };
    for (tls, put) in [("tcp", "put: refused"), ("shm", "put: done")] {
        let out = run(&exe, &[], &[("UCX_TLS", tls)], 120);
        let t = text(&out);
        assert!(out.status.success(), "{tls}: {t}");
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(stdout.contains("capi_force_imm: ok"), "{tls}: {t}");
        assert!(stdout.contains(put), "{tls}: {t}");
    }
    let _ = std::fs::remove_dir_all(dir);
}
