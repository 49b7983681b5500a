//! End-to-end tests of how `rucx-perftest` makes its endpoints, over TCP
//! and shared memory: with error handling (`-e`), and what it brings when
//! the server dies or stops; through the server's listener
//! (`--sockaddr`) in `--pair`, separate-process and loopback runs.

mod perftest_util;

use perftest_util::*;
use std::process::Stdio;
use std::time::Duration;

/// One test of each kind: tag, one-sided, stream, active messages.
const KINDS: [(&str, &str); 4] = [
    ("tag_lat", "8"),
    ("ucp_put_bw", "4096"),
    ("stream_bw", "4096"),
    ("ucp_am_bw", "4096"),
];

/// Transports: TCP, and shared memory (posix with cma).
const TLS: [&str; 2] = ["tcp", "posix,cma"];

/// Runs `--pair` with `extra` options for every kind over every
/// transport and checks the final rows.
fn pair_runs_every_kind(extra: &[&str]) {
    for tls in TLS {
        for (test, size) in KINDS {
            let mut args = vec!["--pair", "-t", test, "-s", size, "-n", "1000", "-f"];
            args.extend_from_slice(extra);
            check_success(&run_on(tls, &args), 1000.0);
        }
    }
}

#[test]
fn pair_runs_every_kind_of_test_with_error_handling() {
    pair_runs_every_kind(&["-e"]);
}

#[test]
fn loopback_and_separate_processes_run_with_error_handling() {
    check_success(
        &run_on(
            "posix,cma",
            &["-l", "-e", "-t", "tag_bw", "-n", "500", "-f"],
        ),
        500.0,
    );
    // Given to the client only, and to the server only.
    for (server_e, client_e) in [(false, true), (true, false)] {
        let port = free_port().to_string();
        let mut server_args = vec!["-p", port.as_str()];
        if server_e {
            server_args.push("-e");
        }
        let mut server = perftest(&server_args)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start server");
        let mut args = vec!["localhost", "-p", &port, "-t", "ucp_get", "-n", "300", "-f"];
        if client_e {
            args.push("-e");
        }
        check_success(&run(&args), 300.0);
        let status = wait_for(&mut server, RUN_TIMEOUT, "server");
        assert!(status.success(), "server exit {status:?}");
    }
}

#[test]
fn error_handling_client_exits_soon_when_its_server_is_killed() {
    for (tls, test) in [
        ("tcp", "tag_bw"),
        ("shm", "ucp_put_bw"),
        ("shm", "stream_lat"),
    ] {
        let (took, stderr) = client_fails_when_server_killed(tls, &["-e", "-t", test, "-n", "0"]);
        assert!(took < Duration::from_secs(10), "{tls} {test}: {took:?}");
        assert!(stderr.contains("error:"), "{tls} {test}: {stderr}");
    }
}

#[test]
fn error_handling_notices_a_server_that_stops_progressing() {
    // The server's sockets and memory stay open: only the keepalive of an
    // endpoint in peer error mode notices (without -e the client waits).
    let env = [("RUCX_KEEPALIVE_INTERVAL", "300ms")];
    for (tls, test) in [("tcp", "tag_lat"), ("posix,cma", "ucp_am_bw")] {
        let args = ["-e", "-t", test, "-n", "0"];
        let (status, took, stderr) = client_after_server_signal(tls, &env, &args, "STOP");
        assert!(!status.success(), "{tls} {test}: {status:?}\n{stderr}");
        assert!(took < Duration::from_secs(15), "{tls} {test}: {took:?}");
        assert!(stderr.contains("keepalive"), "{tls} {test}: {stderr}");
    }
}

#[test]
fn error_handling_keeps_a_busy_sender_answering_the_keepalive() {
    // A stream client whose sends finish at once still answers its
    // server's keepalive: nobody is declared dead.
    let env = [("RUCX_KEEPALIVE_INTERVAL", "200ms")];
    for (tls, test) in [("tcp", "tag_bw"), ("posix,cma", "ucp_put_bw")] {
        let args = [
            "--pair", "-e", "-t", test, "-s", "64", "-n", "300000", "-w", "0", "-f",
        ];
        check_success(&run_with(tls, &env, &args), 300000.0);
    }
}

#[test]
fn pair_runs_every_kind_of_test_through_a_listener() {
    pair_runs_every_kind(&["--sockaddr"]);
}

#[test]
fn pair_runs_through_a_listener_with_error_handling_and_validation() {
    for tls in TLS {
        for test in ["tag_bw", "ucp_get", "stream_lat", "ucp_am_lat"] {
            let args = [
                "--pair",
                "--sockaddr",
                "-e",
                "-V",
                "-t",
                test,
                "-n",
                "300",
                "-f",
            ];
            check_success(&run_on(tls, &args), 300.0);
        }
    }
}

#[test]
fn separate_server_and_client_through_a_listener() {
    // The server is started as usual; its client's parameters say how.
    for (tls, test, size) in [
        ("tcp", "tag_bw", "1024"),
        ("posix,cma", "ucp_put_bw", "100000"),
        ("tcp", "ucp_fadd", "8"),
    ] {
        let port = free_port().to_string();
        let mut server = perftest_on(tls, &["-p", &port])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start server");
        let args = [
            "localhost",
            "-p",
            &port,
            "--sockaddr",
            "-t",
            test,
            "-s",
            size,
            "-n",
            "200",
            "-f",
        ];
        check_success(&run_on(tls, &args), 200.0);
        let status = wait_for(&mut server, RUN_TIMEOUT, "server");
        assert!(status.success(), "{tls} {test}: server exit {status:?}");
    }
}

#[test]
fn loopback_connects_through_its_own_listener() {
    for (tls, test) in [("tcp", "tag_lat"), ("posix,cma", "ucp_get")] {
        let args = ["-l", "--sockaddr", "-t", test, "-n", "500", "-V", "-f"];
        check_success(&run_on(tls, &args), 500.0);
    }
}

#[test]
fn client_through_a_listener_exits_soon_when_its_server_is_killed() {
    for (tls, test) in [("tcp", "stream_bw"), ("shm", "ucp_am_bw")] {
        let args = ["--sockaddr", "-e", "-t", test, "-n", "0"];
        let (took, stderr) = client_fails_when_server_killed(tls, &args);
        assert!(took < Duration::from_secs(10), "{tls} {test}: {took:?}");
        assert!(stderr.contains("error:"), "{tls} {test}: {stderr}");
    }
}

#[test]
fn sockaddr_with_an_argument_is_a_usage_error() {
    let out = run(&["--pair", "--sockaddr=yes", "-t", "tag_lat"]);
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("'--sockaddr' doesn't allow an argument"),
        "{stderr}"
    );
    assert!(
        stderr.contains("Usage:") && stderr.contains("--sockaddr"),
        "{stderr}"
    );
    let help = run(&["-h"]);
    let text = String::from_utf8_lossy(&help.stdout);
    assert!(
        text.contains("--sockaddr") && text.contains("-e  "),
        "{text}"
    );
}
