//! Many endpoints per worker, and an incast to a slow receiver, run
//! through the `rucx-scale` benchmark (which checks every answer and the
//! order of every incast message, and fails otherwise).
//!
//! * `tcp_many_endpoints`: one worker, `RUCX_TEST_SCALE_N` (default
//!   10,000; 1,000 in a debug build) tcp endpoints over `lo` to as many workers in four processes;
//!   one descriptor per endpoint on each side.
//! * `rc_iwarp_many_endpoints`: the same over rc_iwarp (eight processes:
//!   a remote worker holds a few descriptors of its own).
//! * `shm_more_than_1024_peers`: 1,100 posix peers send to one worker
//!   (more than the 1,024 senders a receiver used to accept).
//! * `lane_fallback_when_shm_is_full`: with `RUCX_MM_MAX_SENDERS=40`, the
//!   61st and later peers cannot get a posix slot in the driver's segment;
//!   their endpoints fall back to tcp (logged at info) and every round trip
//!   still completes.
//! * `incast_is_bounded`: two, then eight senders stream 64-byte tag
//!   messages to a receiver taking 1,000 per second; with
//!   `RUCX_UNEXPECTED_MAX=8m` what its unexpected messages hold stays
//!   within the limit plus each sender's initial credit and announcements,
//!   its memory growth under twice the limit, and every message arrives
//!   in order.
//! * `ucx_scale_builds_and_runs`: `benches/ucx-scale.c`, the same
//!   benchmark against UCX, compiles against `libucx-dev` and prints a
//!   result line in the same format.

use std::process::Command;
use std::sync::Mutex;

mod common;

/// The columns of the endpoint report, by name.
struct Row(Vec<f64>);

impl Row {
    fn col(&self, i: usize) -> f64 {
        self.0[i]
    }
}

const N: usize = 0;
const FDS_PER_EP: usize = 8;
const REMOTE_FDS_PER_EP: usize = 10;

fn scale(args: &[&str], env: &[(&str, &str)]) -> (Row, String) {
    let _one = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_rucx-scale"));
    cmd.args(args).arg("-H");
    for var in ["RUCX_TLS", "RUCX_NET_DEVICES", "RUCX_UNEXPECTED_MAX"] {
        cmd.env_remove(var);
    }
    for (k, v) in env {
        cmd.env(k, v);
    }
    let out = cmd.output().expect("run rucx-scale");
    let stdout = String::from_utf8_lossy(&out.stdout).to_string();
    let stderr = String::from_utf8_lossy(&out.stderr).to_string();
    assert!(
        out.status.success(),
        "rucx-scale {args:?} failed: {stdout}\n{stderr}"
    );
    let line = stdout
        .lines()
        .rfind(|l| !l.starts_with('#'))
        .expect("a result line");
    let nums = line
        .split_whitespace()
        .skip(1)
        .map(|x| x.parse::<f64>().expect("a number"))
        .collect();
    println!("{line}");
    (Row(nums), stderr)
}

/// Endpoints of the tcp and rc_iwarp runs: 10,000 in a release build,
/// 1,000 in a debug build (CI runs the release build too).
fn scale_n() -> String {
    let default = if cfg!(debug_assertions) {
        "1000"
    } else {
        "10000"
    };
    std::env::var("RUCX_TEST_SCALE_N").unwrap_or_else(|_| default.into())
}

/// One run at a time: they share the descriptor limit, the ports and the
/// two cores.
static SERIAL: Mutex<()> = Mutex::new(());

#[test]
fn tcp_many_endpoints() {
    let n = scale_n();
    let (row, _) = scale(
        &["-n", &n, "-P", "4"],
        &[("RUCX_TLS", "tcp"), ("RUCX_NET_DEVICES", "lo")],
    );
    assert_eq!(row.col(N), n.parse::<f64>().unwrap());
    assert!(
        row.col(FDS_PER_EP) <= 1.01,
        "fds/ep {}",
        row.col(FDS_PER_EP)
    );
    assert!(row.col(REMOTE_FDS_PER_EP) <= 1.01);
}

#[test]
fn shm_more_than_1024_peers() {
    let (row, _) = scale(&["-n", "1100", "-P", "4"], &[("RUCX_TLS", "posix")]);
    assert_eq!(row.col(N), 1100.0);
    assert_eq!(row.col(FDS_PER_EP), 0.0, "shm needs no descriptor per peer");
}

#[test]
fn lane_fallback_when_shm_is_full() {
    let (row, log) = scale(
        &["-n", "60", "-P", "2"],
        &[
            ("RUCX_TLS", "posix,tcp"),
            ("RUCX_NET_DEVICES", "lo"),
            ("RUCX_MM_MAX_SENDERS", "40"),
            ("RUCX_LOG_LEVEL", "info"),
        ],
    );
    assert_eq!(row.col(N), 60.0);
    let fell_back = log
        .lines()
        .filter(|l| {
            l.contains("lane posix/memory not created") && l.contains("trying the next lane")
        })
        .count();
    assert!(fell_back >= 20, "{fell_back} fallbacks logged:\n{log}");
}

#[test]
fn incast_is_bounded() {
    let limit_kb = 8.0 * 1024.0;
    for senders in [2.0, 8.0] {
        let m = format!("{senders}");
        let (row, _) = scale(
            &["--incast", &m, "--seconds", "2"],
            &[
                ("RUCX_TLS", "tcp"),
                ("RUCX_NET_DEVICES", "lo"),
                ("RUCX_UNEXPECTED_MAX", "8m"),
            ],
        );
        // senders, messages, peak_rss_kB, kB per 1k messages, drain ms,
        // peak_unexp_kB
        let (messages, peak_kb, unexp_kb) = (row.col(1), row.col(2), row.col(5));
        assert!(messages > 0.0);
        // The limit, each sender's initial credit (128 KiB) and the
        // announcements of the 256 rendezvous sends a sender keeps in
        // flight (under 200 bytes each).
        let bound_kb = limit_kb + senders * (128.0 + 256.0 * 0.2);
        assert!(
            unexp_kb <= bound_kb,
            "{senders} senders: unexpected messages held {unexp_kb} kB, bound {bound_kb} kB"
        );
        assert!(
            peak_kb < 2.0 * limit_kb,
            "{senders} senders: peak growth {peak_kb} kB with a limit of {limit_kb} kB ({messages} messages)"
        );
    }
}

#[test]
fn rc_iwarp_many_endpoints() {
    let n = scale_n();
    // 10,000 handshakes from 8 processes on a loaded 2-core machine can
    // queue past the default 10 s MPA timeout: this test measures what
    // the endpoints hold, so the handshakes get time.
    let (row, _) = scale(
        &["-n", &n, "-P", "8"],
        &[("RUCX_TLS", "rc_iwarp"), ("RUCX_IWARP_MPA_TIMEOUT", "120s")],
    );
    assert_eq!(row.col(N), n.parse::<f64>().unwrap());
    assert!(
        row.col(FDS_PER_EP) <= 1.01,
        "fds/ep {}",
        row.col(FDS_PER_EP)
    );
}

#[test]
fn ucx_scale_builds_and_runs() {
    if !std::path::Path::new("/usr/include/ucp/api/ucp.h").exists() {
        common::skip_or_fail("libucx-dev is not installed");
        return;
    }
    let _one = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let exe = std::env::temp_dir().join(format!("ucx-scale-{}", std::process::id()));
    let src = concat!(env!("CARGO_MANIFEST_DIR"), "/benches/ucx-scale.c");
    let cc = Command::new("cc")
        .args(["-O2", "-Wall", "-Werror", "-o"])
        .arg(&exe)
        .arg(src)
        .args(["-lucp", "-lucs"])
        .output()
        .expect("run cc");
    assert!(
        cc.status.success(),
        "{}",
        String::from_utf8_lossy(&cc.stderr)
    );
    let out = Command::new(&exe)
        .args(["-n", "20", "-P", "2", "-H"])
        .env("UCX_TLS", "tcp")
        .env("UCX_NET_DEVICES", "lo")
        .output()
        .expect("run ucx-scale");
    let _ = std::fs::remove_file(&exe);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let fields: Vec<&str> = stdout.split_whitespace().collect();
    assert_eq!(fields.len(), 12, "{stdout}");
    assert_eq!((fields[0], fields[1], fields[2]), ("tcp", "20", "2"));
}
