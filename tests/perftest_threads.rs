//! End-to-end tests of `rucx-perftest -T` (threads sharing one worker, or
//! each with its own with `--worker-per-thread`) and
//! `--busy-target` (a server that computes while its progress thread
//! serves the client's one-sided operations): runs over shm, tcp and
//! rc_iwarp as `--pair` and as separate processes, the rows UCX prints
//! for threads, bad command lines, and a server that vanishes.

mod perftest_util;

use perftest_util::*;
use std::io::Read;
use std::process::{Child, Output, Stdio};
use std::thread;

/// The final row of a run with threads, as `ucx_perftest -T` prints it:
/// the last line made of exactly four numbers (iterations, overall
/// latency, overall bandwidth, overall message rate).
fn threads_final(text: &str) -> Option<[f64; 4]> {
    text.lines().rev().find_map(|line| {
        let line = line.strip_prefix("Final:").unwrap_or(line).replace(',', "");
        let parts: Vec<f64> = line
            .split_whitespace()
            .map(|p| p.parse::<f64>().ok())
            .collect::<Option<_>>()?;
        parts.try_into().ok()
    })
}

/// A successful run with threads whose final row counts `iters`
/// iterations and has positive, finite figures; the row.
fn check_threads_success(out: &Output, iters: f64) -> [f64; 4] {
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "exit {:?}\nstdout:\n{stdout}\nstderr:\n{stderr}",
        out.status
    );
    let row = threads_final(&stdout).unwrap_or_else(|| panic!("no final row in:\n{stdout}"));
    assert_eq!(row[0], iters, "{stdout}");
    // Latency and message rate are positive; bandwidth may print as 0.00
    // for small messages.
    assert!(
        row[1..].iter().all(|n| n.is_finite() && *n >= 0.0),
        "{row:?}\n{stdout}"
    );
    assert!(row[1] > 0.0 && row[3] > 0.0, "{row:?}\n{stdout}");
    // No row of eight numbers: the threads' rows carry their prefix.
    assert!(final_numbers(&stdout).is_none(), "{stdout}");
    row
}

#[test]
fn pair_tag_tests_with_two_threads_over_shm_and_tcp() {
    for tls in ["shm", "tcp"] {
        for (test, size) in [
            ("tag_lat", "8"),
            ("tag_bw", "64"),
            ("tag_bw", "100000"),
            ("tag_sync_lat", "8"),
            ("tag_sync_bw", "4096"),
        ] {
            let out = run_on(
                tls,
                &[
                    "--pair", "-t", test, "-s", size, "-n", "400", "-w", "40", "-T", "2", "-V",
                    "-f",
                ],
            );
            check_threads_success(&out, 400.0);
            let stdout = String::from_utf8_lossy(&out.stdout);
            assert!(!stdout.contains("[thread"), "{tls} {test}: {stdout}");
        }
    }
}

#[test]
fn pair_one_sided_tests_with_two_threads() {
    for tls in ["shm", "tcp", "rc_iwarp"] {
        for (test, size) in [
            ("ucp_put_bw", "4096"),
            ("ucp_get", "4096"),
            ("ucp_put_lat", "64"),
            ("ucp_fadd", "8"),
            ("ucp_add", "4"),
        ] {
            let out = run_on(
                tls,
                &[
                    "--pair", "-t", test, "-s", size, "-n", "300", "-w", "30", "-T", "2", "-V",
                    "-f",
                ],
            );
            check_threads_success(&out, 300.0);
        }
    }
}

#[test]
fn more_threads_with_error_handling_and_a_listener() {
    let out = run_on(
        "tcp",
        &[
            "--pair",
            "-t",
            "tag_bw",
            "-s",
            "1000",
            "-n",
            "300",
            "-T",
            "4",
            "-e",
            "--sockaddr",
            "-V",
            "-f",
        ],
    );
    check_threads_success(&out, 300.0);
    let out = run_on(
        "tcp",
        &[
            "--pair",
            "-t",
            "ucp_get",
            "-s",
            "1000",
            "-n",
            "300",
            "-T",
            "3",
            "-e",
            "--sockaddr",
            "-V",
            "-v",
        ],
    );
    assert!(out.status.success(), "{out:?}");
    let stdout = String::from_utf8_lossy(&out.stdout);
    // UCX's CSV final row of a run with threads: four fields.
    let last = stdout.lines().last().unwrap_or_default();
    let fields: Vec<&str> = last.split(',').collect();
    assert_eq!(fields.len(), 4, "{stdout}");
    assert_eq!(fields[0], "300", "{stdout}");
}

/// The distinct workers that endpoints were made to, from the debug log.
fn workers_reached(stderr: &str) -> std::collections::BTreeSet<String> {
    stderr
        .lines()
        .filter_map(|l| l.split("endpoint to worker ").nth(1))
        .filter(|rest| rest.contains(": am lane"))
        .filter_map(|rest| rest.split(':').next())
        .map(str::to_owned)
        .collect()
}

#[test]
fn worker_per_thread_gives_each_thread_its_own_endpoint_pair() {
    for tls in ["shm", "tcp", "rc_iwarp"] {
        for (test, size) in [
            ("tag_bw", "64"),
            ("tag_lat", "8"),
            ("ucp_put_bw", "4096"),
            ("ucp_get", "4096"),
        ] {
            let what = format!("{tls} {test}");
            let mut counts = Vec::new();
            for per_thread in [false, true] {
                let mut args = vec![
                    "--pair", "-t", test, "-s", size, "-n", "300", "-w", "30", "-T", "3", "-V",
                    "-f",
                ];
                if per_thread {
                    args.push("--worker-per-thread");
                }
                let out = run_with(tls, &[("RUCX_LOG_LEVEL", "debug")], &args);
                check_threads_success(&out, 300.0);
                counts.push(workers_reached(&String::from_utf8_lossy(&out.stderr)).len());
            }
            // Both sides connect: one worker each when the threads share
            // it, three each with a worker per thread.
            assert_eq!(counts, [2, 6], "{what}");
        }
    }
    // A busy target: a progress thread for each of the server's workers.
    let out = run_on(
        "tcp",
        &[
            "--pair",
            "-t",
            "ucp_put_bw",
            "-s",
            "65536",
            "-n",
            "300",
            "-T",
            "2",
            "--worker-per-thread",
            "--busy-target",
            "-V",
            "-f",
        ],
    );
    check_threads_success(&out, 300.0);
    // Separate processes, with error handling and a listener.
    let (server, port) = start_server("tcp", &[], &[]);
    let client = run_on(
        "tcp",
        &[
            "127.0.0.1",
            "-p",
            &port,
            "-t",
            "tag_bw",
            "-s",
            "1000",
            "-T",
            "2",
            "-n",
            "2000",
            "-e",
            "--sockaddr",
            "--worker-per-thread",
            "-V",
        ],
    );
    check_threads_success(&client, 2000.0);
    server_output(server, "tcp tag_bw --worker-per-thread --sockaddr");
}

/// A server started the way scripts do, with its output collected.
fn start_server(tls: &str, env: &[(&str, &str)], args: &[&str]) -> (Child, String) {
    let port = free_port().to_string();
    let mut all = vec!["-p", port.as_str()];
    all.extend_from_slice(args);
    let server = perftest_on(tls, &all)
        .envs(env.iter().copied())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("start server");
    (server, port)
}

/// Waits for `server` to succeed; its standard output.
fn server_output(mut server: Child, what: &str) -> String {
    let mut stdout = server.stdout.take().expect("stdout");
    let reader = thread::spawn(move || {
        let mut s = String::new();
        let _ = stdout.read_to_string(&mut s);
        s
    });
    let status = wait_for(&mut server, RUN_TIMEOUT, what);
    let out = reader.join().expect("stdout reader");
    assert!(status.success(), "{what}: server exit {status:?}\n{out}");
    out
}

#[test]
fn separate_server_and_client_with_threads_print_ucx_rows() {
    for (tls, test, size) in [
        ("shm", "tag_bw", "8"),
        ("tcp", "tag_bw", "8"),
        ("shm", "ucp_put_bw", "4096"),
        ("tcp", "ucp_get", "4096"),
    ] {
        let what = format!("{tls} {test}");
        // The server takes the client's thread count (its own -T is
        // ignored, as ucx_perftest's server takes the client's parameters).
        let (server, port) = start_server(tls, &[], &["-T", "5"]);
        let client = run_on(
            tls,
            &[
                "127.0.0.1",
                "-p",
                &port,
                "-t",
                test,
                "-s",
                size,
                "-T",
                "2",
                "-n",
                "20000",
            ],
        );
        check_threads_success(&client, 20000.0);
        let stdout = String::from_utf8_lossy(&client.stdout);
        let last = stdout.lines().last().unwrap_or_default();
        assert!(last.starts_with("Final:"), "{what}: {stdout}");
        // Every report row is one thread's, with all eight figures, and
        // counts no more than the run's iterations.
        for line in stdout.lines().filter(|l| l.starts_with("[thread")) {
            let (who, figures) = line.split_once(']').expect("prefix");
            assert!(who == "[thread 0" || who == "[thread 1", "{line}");
            let figures: Vec<f64> = figures
                .split_whitespace()
                .map(|f| f.parse().expect("a number"))
                .collect();
            assert_eq!(figures.len(), 8, "{line}");
            assert!(figures[0] <= 20000.0, "{line}");
        }
        server_output(server, &what);
    }
}

#[test]
fn bad_thread_options_are_usage_errors() {
    for (args, why) in [
        (&["--pair", "-t", "tag_bw", "-T", "0"][..], "-T"),
        (&["--pair", "-t", "tag_bw", "-T", "65"][..], "1..64"),
        (&["--pair", "-t", "tag_bw", "-T", "two"][..], "-T"),
        (
            &["localhost", "-t", "stream_bw", "-T", "2"][..],
            "more than one thread",
        ),
        (
            &["--pair", "-t", "ucp_am_bw", "-T", "2"][..],
            "more than one thread",
        ),
        (&["-l", "-t", "tag_lat", "-T", "2"][..], "loopback"),
        (
            &["--pair", "-t", "tag_bw", "-D", "iov", "-T", "2"][..],
            "-D iov",
        ),
        (
            &["--pair", "-t", "put_bw", "-T", "2"][..],
            "not implemented",
        ),
        (
            &["--pair", "-t", "tag_bw", "--busy-target"][..],
            "--busy-target",
        ),
        (&["-l", "-t", "ucp_get", "--busy-target"][..], "loopback"),
        (&["--busy-target=1"][..], "doesn't allow an argument"),
        (
            &["--pair", "-t", "tag_bw", "--worker-per-thread"][..],
            "-T 2 or more",
        ),
        (
            &[
                "--pair",
                "-t",
                "tag_bw",
                "-T",
                "2",
                "--worker-per-thread=yes",
            ][..],
            "doesn't allow an argument",
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
fn client_with_threads_exits_when_its_server_is_killed() {
    let (_, stderr) =
        client_fails_when_server_killed("tcp", &["-t", "tag_bw", "-n", "0", "-T", "2"]);
    assert!(stderr.contains("error"), "{stderr}");
}

#[test]
fn busy_target_serves_one_sided_tests_from_its_progress_thread() {
    // RUCX_ASYNC_PROGRESS=n: the option starts the progress thread itself.
    let env = [("RUCX_ASYNC_PROGRESS", "n")];
    for tls in ["tcp", "rc_iwarp"] {
        for (test, size, threads) in [
            ("ucp_put_bw", "1048576", "1"),
            ("ucp_get", "1048576", "1"),
            ("ucp_put_lat", "64", "1"),
            ("ucp_put_bw", "65536", "2"),
            ("ucp_fadd", "8", "1"),
        ] {
            let what = format!("{tls} {test} -s {size} -T {threads}");
            let (server, port) = start_server(tls, &env, &["--busy-target"]);
            let client = run_with(
                tls,
                &env,
                &[
                    "127.0.0.1",
                    "-p",
                    &port,
                    "-t",
                    test,
                    "-s",
                    size,
                    "-n",
                    "100",
                    "-w",
                    "10",
                    "-T",
                    threads,
                    "-V",
                    "-f",
                ],
            );
            if threads == "1" {
                let nums = check_success(&client, 100.0);
                assert!(nums[3] > 0.0 && nums[7] > 0.0, "{what}: {nums:?}");
            } else {
                check_threads_success(&client, 100.0);
            }
            let out = server_output(server, &what);
            assert!(out.contains("Busy target: computing"), "{what}: {out}");
        }
    }
}

#[test]
fn busy_target_travels_from_client_to_pair_server() {
    let out = run_on(
        "tcp",
        &[
            "--pair",
            "--busy-target",
            "-t",
            "ucp_put_bw",
            "-s",
            "100000",
            "-n",
            "200",
            "-V",
            "-f",
        ],
    );
    check_success(&out, 200.0);
}

#[test]
fn busy_server_rejects_a_two_sided_test() {
    let (server, port) = start_server("tcp", &[], &["--busy-target"]);
    let client = run_on(
        "tcp",
        &["127.0.0.1", "-p", &port, "-t", "tag_bw", "-n", "10"],
    );
    assert_eq!(client.status.code(), Some(1), "{client:?}");
    let stderr = String::from_utf8_lossy(&client.stderr);
    assert!(
        stderr.contains("rejected") && stderr.contains("--busy-target"),
        "{stderr}"
    );
    let mut server = server;
    let status = wait_for(&mut server, RUN_TIMEOUT, "busy server");
    assert!(!status.success(), "{status:?}");
}
