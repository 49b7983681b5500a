//! The soft-RoCE guest suite, `tests/verbs_guest/suite.sh`: builds the
//! verbs provider's tests, the protocol layer's rc_verbs tests and
//! `rucx-perftest` with the `verbs` feature, boots one QEMU guest
//! (virtme-ng, no KVM) with `rxed` and `rxed1` on dummy interfaces and
//! `rxea`/`rxeb` on a veth pair, and runs them all there: device tests,
//! the uct conformance suite on rc_verbs, the rc_verbs variants of the
//! in-process tests, two-process `rucx-perftest` runs with every byte
//! checked, the same across the veth pair with the RoCEv2 capture checked
//! by tshark afterwards, and rendezvous split over `rxed` and `rxed1`.
//!
//! Needs qemu-system-x86_64, vng (PyPI `virtme-ng`), busybox, iproute2's
//! `rdma`, a kernel image under /boot with `rdma_rxe`, rdma-core's headers
//! and libclang (to build), and python3; without them it prints
//! `skipped: <why>`, or fails when `RUCX_REQUIRE_ALL=1`. It takes a few
//! minutes (the build, a boot of about half a minute, and the guest's
//! emulated CPUs), hence `#[ignore]`: CI runs it with `--ignored`.

mod common;

use common::skip_or_fail;
use std::path::Path;
use std::process::Command;

#[test]
#[ignore = "builds with --features verbs and boots a QEMU guest for minutes; CI runs it with --ignored"]
fn rc_verbs_suite_passes_in_the_soft_roce_guest() {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/verbs_guest/suite.sh");
    // The script reports what it lacks as "skipped: <why>"; whether that
    // is a skip or a failure is decided here, by the usual rule.
    let out = match Command::new("bash")
        .arg(&script)
        .arg("--quiet")
        .env_remove("RUCX_REQUIRE_ALL")
        .output()
    {
        Ok(out) => out,
        Err(e) => {
            skip_or_fail(&format!("cannot run bash: {e}"));
            return;
        }
    };
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    if let Some(why) = stdout.lines().find_map(|l| l.strip_prefix("skipped: ")) {
        skip_or_fail(why);
        return;
    }
    assert!(
        out.status.success(),
        "suite.sh failed ({}):\n{stdout}\n{stderr}",
        out.status
    );
    // Every command of the suite reported, none failed.
    assert!(
        stdout.contains("result: ok") && !stdout.contains("[FAIL]"),
        "suite.sh did not report success:\n{stdout}"
    );
    println!("{stdout}");
}
