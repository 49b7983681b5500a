//! The soft-RoCE guest harness, `tests/verbs_guest/run.sh`: boots a QEMU
//! guest (virtme-ng, no KVM), creates `rxe0` on its loopback device and
//! checks that libibverbs finds it with an active port.
//!
//! Needs qemu-system-x86_64, vng (PyPI `virtme-ng`), busybox, a kernel
//! image under /boot and `ibv_devinfo` (ibverbs-utils, with the rxe
//! provider from ibverbs-providers); without them it prints
//! `skipped: <why>`, or fails when `RUCX_REQUIRE_ALL=1`. The boot takes
//! about half a minute.

mod common;

use common::skip_or_fail;
use std::path::Path;
use std::process::Command;

/// Whether `tool` is an executable file in one of `PATH`'s directories.
fn on_path(tool: &str) -> bool {
    std::env::var_os("PATH")
        .is_some_and(|paths| std::env::split_paths(&paths).any(|dir| dir.join(tool).is_file()))
}

#[test]
#[ignore = "boots a QEMU guest (tests/verbs_guest/run.sh); CI runs it once the verbs provider lands"]
fn ibv_devinfo_finds_rxe0_in_the_guest() {
    for tool in ["bash", "ibv_devinfo"] {
        if !on_path(tool) {
            skip_or_fail(&format!("{tool} not found"));
            return;
        }
    }
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/verbs_guest/run.sh");
    // The script reports what it lacks as "skipped: <why>"; whether that
    // is a skip or a failure is decided here, by the usual rule.
    let out = Command::new("bash")
        .arg(&script)
        .args(["--net", "lo", "--timeout", "600", "ibv_devinfo -d rxe0"])
        .env_remove("RUCX_REQUIRE_ALL")
        .output()
        .expect("run tests/verbs_guest/run.sh");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    if let Some(why) = stdout.lines().find_map(|l| l.strip_prefix("skipped: ")) {
        skip_or_fail(why);
        return;
    }
    assert!(
        out.status.success(),
        "run.sh failed ({}):\n{stdout}\n{stderr}",
        out.status
    );
    assert!(
        stdout.contains("hca_id:\trxe0") && stdout.contains("PORT_ACTIVE"),
        "ibv_devinfo in the guest did not show rxe0 with an active port:\n{stdout}"
    );
    println!("{stdout}");
}
