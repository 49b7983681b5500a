//! Helpers of the `rucx-perftest` end-to-end tests: running the binary
//! with a timeout, reading its final row, and peers that vanish.
#![allow(dead_code)]

use std::io::{BufRead, BufReader, Read};
use std::process::{Child, Command, ExitStatus, Output, Stdio};
use std::thread;
use std::time::{Duration, Instant};

#[path = "../port_util/mod.rs"]
mod port_util;
#[allow(unused_imports)]
pub(crate) use port_util::free_port;

pub(crate) const EXE: &str = env!("CARGO_BIN_EXE_rucx-perftest");

/// Generous: debug builds on a loaded machine.
pub(crate) const RUN_TIMEOUT: Duration = Duration::from_secs(120);

/// The binary with `args` over TCP, output piped.
pub(crate) fn perftest(args: &[&str]) -> Command {
    perftest_on("tcp", args)
}

/// The binary with `args` and `RUCX_TLS=tls`, output piped.
pub(crate) fn perftest_on(tls: &str, args: &[&str]) -> Command {
    let mut cmd = Command::new(EXE);
    cmd.args(args)
        .env("RUCX_TLS", tls)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    cmd
}

/// Waits for `child` up to `timeout`; kills it and fails the test after.
pub(crate) fn wait_for(child: &mut Child, timeout: Duration, what: &str) -> ExitStatus {
    let deadline = Instant::now() + timeout;
    loop {
        if let Some(status) = child.try_wait().expect("try_wait") {
            return status;
        }
        if Instant::now() >= deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("{what} did not exit within {timeout:?}");
        }
        thread::sleep(Duration::from_millis(20));
    }
}

/// Runs to completion with a timeout; collects the output.
pub(crate) fn run(args: &[&str]) -> Output {
    run_on("tcp", args)
}

/// [`run`] with `RUCX_TLS=tls`.
pub(crate) fn run_on(tls: &str, args: &[&str]) -> Output {
    run_with(tls, &[], args)
}

/// [`run_on`] with more environment variables.
pub(crate) fn run_with(tls: &str, env: &[(&str, &str)], args: &[&str]) -> Output {
    let mut cmd = perftest_on(tls, args);
    cmd.envs(env.iter().copied());
    let mut child = cmd.spawn().expect("start rucx-perftest");
    let mut stdout = child.stdout.take().expect("stdout");
    let mut stderr = child.stderr.take().expect("stderr");
    let out = thread::spawn(move || {
        let mut v = Vec::new();
        let _ = stdout.read_to_end(&mut v);
        v
    });
    let err = thread::spawn(move || {
        let mut v = Vec::new();
        let _ = stderr.read_to_end(&mut v);
        v
    });
    let status = wait_for(
        &mut child,
        RUN_TIMEOUT,
        &format!("RUCX_TLS={tls} {env:?} rucx-perftest {args:?}"),
    );
    Output {
        status,
        stdout: out.join().expect("stdout reader"),
        stderr: err.join().expect("stderr reader"),
    }
}

/// What `vs-ucx` takes: the last line made of exactly eight numbers once
/// commas are removed.
pub(crate) fn final_numbers(text: &str) -> Option<Vec<f64>> {
    text.lines().rev().find_map(|line| {
        let cleaned = line.replace(',', "");
        let parts: Vec<&str> = cleaned.split_whitespace().collect();
        if parts.len() != 8 {
            return None;
        }
        parts.iter().map(|p| p.parse::<f64>().ok()).collect()
    })
}

pub(crate) fn check_success(out: &Output, iters: f64) -> Vec<f64> {
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "exit {:?}\nstdout:\n{stdout}\nstderr:\n{stderr}",
        out.status
    );
    let nums = final_numbers(&stdout).unwrap_or_else(|| panic!("no final row in:\n{stdout}"));
    assert_eq!(nums[0], iters, "{stdout}");
    assert!(nums.iter().all(|n| n.is_finite() && *n >= 0.0), "{nums:?}");
    nums
}

/// Starts a server the way `--pair` does and returns it with its port.
pub(crate) fn start_pair_server(tls: &str) -> (Child, u16) {
    start_pair_server_with(tls, &[])
}

/// [`start_pair_server`] with more environment variables.
pub(crate) fn start_pair_server_with(tls: &str, env: &[(&str, &str)]) -> (Child, u16) {
    let mut server = perftest_on(tls, &["--pair-server"])
        .envs(env.iter().copied())
        .stderr(Stdio::null())
        .spawn()
        .expect("start server");
    let stdout = server.stdout.take().expect("stdout");
    let mut lines = BufReader::new(stdout).lines();
    let port = lines
        .next()
        .and_then(|l| l.ok())
        .and_then(|l| l.strip_prefix("rucx-perftest-port: ").map(str::to_string))
        .and_then(|p| p.trim().parse().ok())
        .expect("port line");
    // Keep draining so the server never blocks on a full pipe.
    thread::spawn(move || for _ in lines {});
    (server, port)
}

/// How a client ends that runs `args` against a `--pair-server` over
/// `tls` (both with `env`) when, after 1.5 s, the server gets `signal`
/// (`"KILL"` or `"STOP"`): its exit status, how long after the signal it
/// exited, and its standard error. The server is killed in the end.
pub(crate) fn client_after_server_signal(
    tls: &str,
    env: &[(&str, &str)],
    args: &[&str],
    signal: &str,
) -> (ExitStatus, Duration, String) {
    let (mut server, port) = start_pair_server_with(tls, env);
    let port = port.to_string();
    let mut all = vec!["127.0.0.1", "-p", &port];
    all.extend_from_slice(args);
    let mut client = perftest_on(tls, &all)
        .envs(env.iter().copied())
        .stdout(Stdio::null())
        .spawn()
        .expect("start client");
    let mut stderr = client.stderr.take().expect("stderr");
    let err = thread::spawn(move || {
        let mut v = String::new();
        let _ = stderr.read_to_string(&mut v);
        v
    });
    thread::sleep(Duration::from_millis(1500));
    if signal == "KILL" {
        server.kill().expect("kill server");
    } else {
        let sent = Command::new("kill")
            .args(["-s", signal, &server.id().to_string()])
            .status()
            .expect("run kill");
        assert!(sent.success(), "kill -s {signal}");
    }
    let signalled = Instant::now();
    let status = wait_for(&mut client, Duration::from_secs(30), "client");
    let took = signalled.elapsed();
    let _ = server.kill();
    let _ = server.wait();
    (status, took, err.join().expect("stderr reader"))
}

/// Runs an endless client with `args` against a server over `tls`, kills
/// the server after 1.5 s and checks the client then exits with an error;
/// returns how long that took and the client's standard error.
pub(crate) fn client_fails_when_server_killed(tls: &str, args: &[&str]) -> (Duration, String) {
    let (status, took, stderr) = client_after_server_signal(tls, &[], args, "KILL");
    assert!(
        !status.success(),
        "{tls} {args:?}: client exit {status:?}\n{stderr}"
    );
    (took, stderr)
}
