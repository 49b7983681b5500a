//! End-to-end tests of the `rucx-perftest` binary over the TCP transport
//! (and shared memory for the one-sided tests): `--pair` runs with data
//! validation, a separate server and client as scripts start them,
//! loopback, bad command lines, and peers that vanish.

mod perftest_util;

use perftest_util::*;
use std::io::{BufRead, BufReader};
use std::process::Stdio;
use std::time::Duration;

#[test]
fn pair_tag_lat_with_validation() {
    let out = run(&[
        "--pair", "-t", "tag_lat", "-s", "8", "-n", "300", "-w", "30", "-V", "-f",
    ]);
    let nums = check_success(&out, 300.0);
    // Latency columns are positive for a real exchange.
    assert!(nums[1] > 0.0 && nums[3] > 0.0, "{nums:?}");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("tag match latency"), "{stdout}");
}

#[test]
fn pair_tag_bw_with_validation() {
    let out = run(&[
        "--pair", "-t", "tag_bw", "-s", "4096", "-n", "500", "-V", "-f", "-N",
    ]);
    let nums = check_success(&out, 500.0);
    assert!(nums[5] > 0.0 && nums[7] > 0.0, "{nums:?}");
}

#[test]
fn pair_tag_sync_tests_with_validation() {
    let out = run(&[
        "--pair",
        "-t",
        "tag_sync_lat",
        "-s",
        "8",
        "-n",
        "300",
        "-w",
        "30",
        "-V",
        "-f",
    ]);
    check_success(&out, 300.0);
    let out = run(&[
        "--pair",
        "-t",
        "tag_sync_bw",
        "-s",
        "70000",
        "-n",
        "200",
        "-w",
        "20",
        "-V",
        "-f",
    ]);
    check_success(&out, 200.0);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("tag sync match bandwidth"), "{stdout}");
}

#[test]
fn pair_tag_bw_large_messages_with_validation() {
    let out = run(&[
        "--pair", "-t", "tag_bw", "-s", "200000", "-n", "20", "-w", "2", "-V", "-f",
    ]);
    check_success(&out, 20.0);
}

#[test]
fn pair_csv_output() {
    let out = run(&["--pair", "-t", "tag_lat", "-n", "100", "-v"]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{stdout}");
    assert!(
        stdout.contains("iterations,50.0_percentile_lat,avg_lat,overall_lat,avg_bw,overall_bw,avg_mr,overall_mr\n"),
        "{stdout}"
    );
    let last = stdout.lines().last().unwrap_or_default();
    assert_eq!(last.split(',').count(), 8, "{last}");
    assert!(last.starts_with("100,"), "{last}");
}

#[test]
fn loopback_runs_both_tests() {
    for test in ["tag_lat", "tag_bw"] {
        let out = run(&["-l", "-t", test, "-s", "64", "-n", "200", "-V", "-f"]);
        check_success(&out, 200.0);
    }
}

#[test]
fn separate_server_and_client_like_vs_ucx() {
    let port = free_port().to_string();
    let mut server = perftest(&["-p", &port])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("start server");
    let client = run(&[
        "localhost",
        "-p",
        &port,
        "-t",
        "tag_bw",
        "-s",
        "1024",
        "-f",
        "-n",
        "200",
        "-w",
        "20",
    ]);
    check_success(&client, 200.0);
    let status = wait_for(&mut server, RUN_TIMEOUT, "server");
    assert!(status.success(), "server exit {status:?}");
}

/// The one-sided tests: name, message size, what the test box calls it,
/// and the label of the time columns.
const ONE_SIDED: [(&str, &str, &str, &str); 7] = [
    ("ucp_put_lat", "8", "put latency", "latency"),
    ("ucp_put_bw", "65536", "put bandwidth", "overhead"),
    (
        "ucp_get",
        "4096",
        "get latency / bandwidth / message rate",
        "latency",
    ),
    (
        "ucp_add",
        "8",
        "atomic add bandwidth / message rate",
        "overhead",
    ),
    (
        "ucp_fadd",
        "4",
        "atomic fetch-and-add latency / bandwidth / rate",
        "latency",
    ),
    (
        "ucp_swap",
        "8",
        "atomic swap latency / bandwidth / rate",
        "latency",
    ),
    (
        "ucp_cswap",
        "8",
        "atomic compare-and-swap latency / bandwidth / rate",
        "latency",
    ),
];

/// Stream and active message tests: test, size, description.
const STREAM_AND_AM: [(&str, &str, &str); 5] = [
    ("stream_lat", "8", "stream latency"),
    ("stream_bw", "100000", "stream bandwidth"),
    ("ucp_am_lat", "8", "am latency"),
    ("ucp_am_bw", "4096", "am bandwidth / message rate"),
    ("ucp_am_bw", "300000", "am bandwidth / message rate"),
];

/// Runs `test` of `size` bytes as a validated `--pair` over `tls`, checks
/// its final row and header, and returns its output.
fn pair_validated(tls: &str, test: &str, size: &str, desc: &str) -> String {
    let out = run_on(
        tls,
        &[
            "--pair", "-t", test, "-s", size, "-n", "300", "-w", "30", "-V", "-f",
        ],
    );
    let nums = check_success(&out, 300.0);
    assert!(nums[3] > 0.0 && nums[7] > 0.0, "{tls} {test}: {nums:?}");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        stdout.contains(&format!("| Test:         {desc} ")),
        "{stdout}"
    );
    stdout
}

#[test]
fn pair_stream_and_am_tests_with_validation() {
    for tls in ["shm", "tcp", "rc_iwarp"] {
        for (test, size, desc) in STREAM_AND_AM {
            pair_validated(tls, test, size, desc);
        }
    }
}

/// Without `-V` the active message handler consumes eager messages in
/// place and receives rendezvous data into one scratch buffer: every
/// iteration still has to be counted, with a window of messages in flight.
#[test]
fn pair_am_tests_unvalidated_count_every_message() {
    for tls in ["shm", "tcp"] {
        for (test, size) in [
            ("ucp_am_bw", "8"),
            ("ucp_am_bw", "300000"),
            ("ucp_am_lat", "300000"),
        ] {
            let out = run_on(tls, &["--pair", "-t", test, "-s", size, "-n", "400", "-f"]);
            check_success(&out, 400.0);
        }
    }
}

#[test]
fn pair_one_sided_tests_over_shm_tcp_and_rc_iwarp() {
    for tls in ["shm", "tcp", "rc_iwarp"] {
        for (test, size, desc, label) in ONE_SIDED {
            let stdout = pair_validated(tls, test, size, desc);
            assert!(stdout.contains(&format!("{label} (usec)")), "{stdout}");
        }
    }
}

#[test]
fn rc_iwarp_runs_with_small_socket_buffers() {
    // With 64 KiB kernel buffers most writes are partial: FPDUs resume in
    // the middle, and a batch is still being written after the READs that
    // its first Read Responses completed (whose sources may then be
    // deregistered).
    let env = [("RUCX_IWARP_SNDBUF", "64k"), ("RUCX_IWARP_RCVBUF", "64k")];
    for (test, size) in [
        ("tag_bw", "1048576"),
        ("tag_bw", "100000"),
        ("ucp_get", "1048576"),
        ("ucp_put_bw", "1048576"),
    ] {
        let args = ["--pair", "-t", test, "-s", size, "-n", "300", "-V", "-f"];
        let out = run_with("rc_iwarp", &env, &args);
        let nums = check_success(&out, 300.0);
        assert!(nums[5] > 0.0, "{test} {size}: {nums:?}");
    }
}

#[test]
fn separate_server_and_client_run_one_sided_tests() {
    for (tls, test, size) in [
        ("posix", "ucp_put_bw", "100000"),
        ("tcp", "ucp_get", "65536"),
    ] {
        let port = free_port().to_string();
        let mut server = perftest_on(tls, &["-p", &port])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start server");
        let client = run_on(
            tls,
            &[
                "localhost",
                "-p",
                &port,
                "-t",
                test,
                "-s",
                size,
                "-f",
                "-n",
                "100",
                "-w",
                "10",
            ],
        );
        check_success(&client, 100.0);
        let status = wait_for(&mut server, RUN_TIMEOUT, "server");
        assert!(status.success(), "{tls} {test}: server exit {status:?}");
    }
}

#[test]
fn loopback_runs_one_sided_tests() {
    for (test, size, _, _) in ONE_SIDED {
        let out = run_on(
            "shm",
            &["-l", "-t", test, "-s", size, "-n", "200", "-V", "-f"],
        );
        check_success(&out, 200.0);
    }
}

#[test]
fn bad_sizes_of_one_sided_tests_are_usage_errors() {
    for (args, why) in [
        (
            &["--pair", "-t", "ucp_fadd", "-s", "16"][..],
            "Atomic size should be either 32 or 64 bit",
        ),
        (
            &["localhost", "-t", "ucp_add", "-s", "2"][..],
            "Atomic size should be either 32 or 64 bit",
        ),
        (
            &["-l", "-t", "ucp_cswap", "-s", "4,2"][..],
            "Atomic size should be either 32 or 64 bit",
        ),
        (
            &["--pair", "-t", "ucp_put_lat", "-s", "0"][..],
            "Message size too small",
        ),
        (
            &["--pair", "-t", "ucp_get", "-s", "0"][..],
            "Message size too small",
        ),
    ] {
        let out = run(args);
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(stderr.contains(why), "{args:?}: {stderr}");
        assert!(stderr.contains("Usage:"), "{args:?}: {stderr}");
        assert!(out.stdout.is_empty(), "{args:?}");
    }
}

#[test]
fn wrong_option_is_a_usage_error() {
    for args in [
        &["-x"][..],
        &["--pair", "-t", "no_such_test"][..],
        &["--pair", "-t", "tag_lat", "-n", "many"][..],
        &["localhost"][..],
        &["--bogus"][..],
    ] {
        let out = run(args);
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(stderr.contains("Usage:"), "{args:?}: {stderr}");
        assert!(out.stdout.is_empty(), "{args:?}");
    }
    let help = run(&["-h"]);
    assert!(help.status.success());
    assert!(String::from_utf8_lossy(&help.stdout).contains("Usage:"));
}

#[test]
fn server_exits_with_error_when_its_client_vanishes() {
    // Over rc_iwarp the dead peer is seen as the RC connection closing.
    for tls in ["tcp", "rc_iwarp"] {
        let (mut server, port) = start_pair_server(tls);
        let port = port.to_string();
        let mut client = perftest_on(tls, &["127.0.0.1", "-p", &port, "-t", "tag_lat", "-n", "0"])
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("start client");
        // Wait for the first report row: the test is running.
        let stdout = client.stdout.take().expect("stdout");
        let mut lines = BufReader::new(stdout).lines();
        let started = lines.any(|l| {
            l.map(|l| l.split_whitespace().count() == 8)
                .unwrap_or(false)
        });
        assert!(started, "{tls}: the client never reported");
        client.kill().expect("kill client");
        let _ = client.wait();
        let status = wait_for(&mut server, Duration::from_secs(30), "server");
        assert!(!status.success(), "{tls}: server exit {status:?}");
    }
}

#[test]
fn client_exits_with_error_when_its_server_vanishes() {
    for tls in ["tcp", "rc_iwarp"] {
        client_fails_when_server_killed(tls, &["-t", "tag_bw", "-n", "0"]);
    }
}

#[test]
fn one_sided_client_exits_when_its_shm_server_is_killed() {
    // Puts and gets into memory mapped here never wait, so the loop must
    // look at the peer all the same.
    for test in ["ucp_put_bw", "ucp_get"] {
        client_fails_when_server_killed("shm", &["-t", test, "-s", "4096", "-n", "0"]);
    }
}
