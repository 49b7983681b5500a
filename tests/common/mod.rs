//! Helpers shared by the integration tests.
#![allow(dead_code)]

use rucx::ucp::{Ep, UcpConfig, Worker};
use rucx::Context;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A context limited to the given transports. A child process also takes
/// `RUCX_RNDV_THRESH` from its parent through `RUCX_TEST_RNDV_THRESH`.
pub(crate) fn context(tls: &str) -> Context {
    let rndv = std::env::var("RUCX_TEST_RNDV_THRESH").ok();
    context_rndv(tls, rndv.as_deref())
}

/// A context limited to the given transports, with a rendezvous threshold.
pub(crate) fn context_rndv(tls: &str, rndv_thresh: Option<&str>) -> Context {
    match rndv_thresh {
        Some(t) => context_vars(&[("RUCX_TLS", tls), ("RUCX_RNDV_THRESH", t)]),
        None => context_vars(&[("RUCX_TLS", tls)]),
    }
}

/// Hex encoding for passing addresses through the environment.
pub(crate) fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

/// Inverse of [`hex`].
pub(crate) fn unhex(s: &str) -> Vec<u8> {
    (0..s.len() / 2)
        .map(|i| u8::from_str_radix(&s[2 * i..2 * i + 2], 16).expect("hex"))
        .collect()
}

/// A byte pattern that differs per message and per position.
pub(crate) fn pattern(len: usize, seed: u64) -> Vec<u8> {
    let mut x = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect()
}

/// A child process that is killed when the guard drops (also when the
/// test fails), so no test leaves a process behind.
pub(crate) struct ChildGuard(pub(crate) Child);

impl Drop for ChildGuard {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

impl std::ops::Deref for ChildGuard {
    type Target = Child;
    fn deref(&self) -> &Child {
        &self.0
    }
}

impl std::ops::DerefMut for ChildGuard {
    fn deref_mut(&mut self) -> &mut Child {
        &mut self.0
    }
}

/// Starts this test binary again as a child running test `name`, with
/// `RUCX_TEST_ROLE=child` and extra environment.
pub(crate) fn spawn_child(name: &str, env: &[(&str, String)]) -> ChildGuard {
    let exe = std::env::current_exe().expect("current_exe");
    let mut cmd = Command::new(exe);
    cmd.args([name, "--exact", "--nocapture", "--test-threads=1"])
        .env("RUCX_TEST_ROLE", "child")
        .stdin(Stdio::null())
        .stdout(Stdio::piped());
    for (k, v) in env {
        cmd.env(k, v);
    }
    ChildGuard(cmd.spawn().expect("spawn child"))
}

/// Whether this process is a child started by [`spawn_child`].
pub(crate) fn is_child() -> bool {
    std::env::var("RUCX_TEST_ROLE").is_ok_and(|v| v == "child")
}

/// Progresses `w` until `done` holds, failing after `secs` seconds.
pub(crate) fn progress_until(w: &mut Worker, secs: u64, mut done: impl FnMut(&mut Worker) -> bool) {
    let deadline = Instant::now() + Duration::from_secs(secs);
    while !done(w) {
        assert!(Instant::now() < deadline, "timed out after {secs} s");
        w.progress();
    }
}

/// Progresses `w` for `ms` milliseconds, whatever happens meanwhile.
pub(crate) fn progress_for(w: &mut Worker, ms: u64) {
    let until = Instant::now() + Duration::from_millis(ms);
    while Instant::now() < until {
        w.progress();
    }
}

/// Receives the peer's address (sent as the first message, tag 0) and
/// connects back to it.
pub(crate) fn accept_peer(w: &mut Worker) -> Ep {
    let mut addr = vec![0u8; 4096];
    let info = w
        .tag_recv_blocking(&mut addr, 0, u64::MAX)
        .expect("address");
    addr.truncate(info.length);
    w.connect(&addr).expect("connect back")
}

/// Forwards the child's standard output to ours, and signals on the
/// returned channel when a line equal to `line` appears.
pub(crate) fn watch_stdout(child: &mut Child, line: &str) -> std::sync::mpsc::Receiver<()> {
    use std::io::BufRead;
    let (tx, rx) = std::sync::mpsc::channel();
    let out = child.stdout.take().expect("child stdout is piped");
    let want = line.to_string();
    std::thread::spawn(move || {
        for l in std::io::BufReader::new(out).lines() {
            let Ok(l) = l else { break };
            println!("child: {l}");
            // The test harness may print its own words before ours.
            if !want.is_empty() && l.trim().ends_with(want.as_str()) {
                let _ = tx.send(());
            }
        }
    });
    rx
}

/// Reports a test that cannot run here: prints `skipped: <why>`, or fails
/// when `RUCX_REQUIRE_ALL=1` (as in CI, which installs what tests need).
pub(crate) fn skip_or_fail(why: &str) {
    if std::env::var("RUCX_REQUIRE_ALL").is_ok_and(|v| v == "1") {
        panic!("required but unavailable: {why}");
    }
    println!("skipped: {why}");
}

/// `rc_verbs`, when this build has it (the `verbs` feature) and an RDMA
/// device is usable (soft-RoCE in `tests/verbs_guest/run.sh --net dummy`,
/// or a NIC); otherwise `None`, after [`skip_or_fail`].
/// The tests that use it exist only in builds with the feature, so that a
/// default build under `RUCX_REQUIRE_ALL=1` does not fail for want of it.
#[cfg(feature = "verbs")]
pub(crate) fn rc_verbs() -> Option<&'static str> {
    use rucx_rdma::Provider;
    if rucx_verbs::PROVIDER.devices().is_ok_and(|d| !d.is_empty()) {
        return Some("rc_verbs");
    }
    skip_or_fail("no RDMA device");
    None
}

/// A context configured only by `vars` (full `RUCX_*` names); everything
/// else takes its default, whatever the environment says.
pub(crate) fn context_vars(vars: &[(&str, &str)]) -> Context {
    let cfg = UcpConfig::from_lookup(|k| {
        vars.iter()
            .find(|(name, _)| *name == k)
            .map(|(_, v)| v.to_string())
    })
    .expect("config");
    Context::with_config(cfg).expect("context")
}

/// As [`spawn_child`], and also removes the variables `unset` from the
/// child's environment, pipes its standard input (for the test to tell it
/// when to go on), and pipes its standard error when `stderr` is set (to
/// read its log).
pub(crate) fn spawn_child_with(
    name: &str,
    env: &[(&str, String)],
    unset: &[&str],
    stderr: bool,
) -> ChildGuard {
    let exe = std::env::current_exe().expect("current_exe");
    let mut cmd = Command::new(exe);
    cmd.args([name, "--exact", "--nocapture", "--test-threads=1"])
        .env("RUCX_TEST_ROLE", "child")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped());
    if stderr {
        cmd.stderr(Stdio::piped());
    }
    for k in unset {
        cmd.env_remove(k);
    }
    for (k, v) in env {
        cmd.env(k, v);
    }
    ChildGuard(cmd.spawn().expect("spawn child"))
}

/// Waits for `child` to exit, at most `secs` seconds.
pub(crate) fn wait_exit(child: &mut ChildGuard, secs: u64) -> std::process::ExitStatus {
    let deadline = Instant::now() + Duration::from_secs(secs);
    loop {
        if let Some(st) = child.try_wait().expect("wait child") {
            return st;
        }
        assert!(Instant::now() < deadline, "child did not exit in {secs} s");
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// In a child: sleeps until killed, or exits once its parent is gone.
pub(crate) fn sleep_until_killed() -> ! {
    let ppid = std::os::unix::process::parent_id();
    loop {
        std::thread::sleep(Duration::from_millis(50));
        if std::os::unix::process::parent_id() != ppid {
            std::process::exit(3);
        }
    }
}

/// Progresses both workers until `done` holds (30 s at most).
pub(crate) fn until(
    a: &mut Worker,
    b: &mut Worker,
    mut done: impl FnMut(&mut Worker, &mut Worker) -> bool,
) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while !done(a, b) {
        assert!(Instant::now() < deadline, "timed out");
        a.progress();
        b.progress();
    }
}

/// A small deterministic generator (xorshift64), for test workloads.
pub(crate) struct Rng(pub(crate) u64);

impl Rng {
    /// The next value.
    pub(crate) fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    /// A value below `n`.
    pub(crate) fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// Receives sending thread `t`'s messages `0..n` on `w`, in order: message
/// `i` has tag `t << 32 | i`, `size(t, i)` bytes of `pattern(len, tag)`.
pub(crate) fn recv_in_order(
    w: &rucx::ucp::SharedWorker,
    t: u64,
    n: u64,
    size: impl Fn(u64, u64) -> usize,
) {
    for i in 0..n {
        let len = size(t, i);
        let (info, buf) = w
            .tag_recv(vec![0u8; len], t << 32, 0xffff_ffff_0000_0000)
            .expect("recv")
            .wait()
            .expect("recv done");
        assert_eq!(info.tag, t << 32 | i, "order of thread {t}");
        assert_eq!(info.length, len, "length of {t}/{i}");
        assert!(buf == pattern(len, t << 32 | i), "bytes of {t}/{i}");
    }
}
