//! A link taken down between two hosts mid-transfer: both sides' endpoints
//! fail within the configured time, and nothing hangs.
//!
//! Two network namespaces joined by a veth pair (see `hosts/netns.rs`),
//! a server in one and a client in the other (this test binary started
//! again in each, see `link_down/peer.rs`), over `tcp` and over
//! `rc_iwarp`. Both endpoints are in peer error mode with a handler, and
//! carry rendezvous tag messages both ways and the client's puts and gets
//! when the test takes one veth end down. Two settings per transport:
//!
//! * the protocol keepalive (`RUCX_KEEPALIVE_INTERVAL=300ms`, 3 misses)
//!   with the transport's TCP timeouts, the link going down on the
//!   server's side;
//! * the transport's TCP timeouts only (keepalive `inf`;
//!   `RUCX_{TCP,IWARP}_USER_TIMEOUT=1500ms`, `KEEPIDLE=1s`, `KEEPINTVL=1s`,
//!   `KEEPCNT=2`), the link going down on the client's side.
//!
//! Each side's handler must run within three times the configured
//! detection time plus 2 s (generous: debug builds on a busy machine), and
//! its sends, puts and gets must end. The measured times are printed.
//!
//! Needs root and `ip` (iproute2); without them it prints
//! `skipped: <why>`, or fails when `RUCX_REQUIRE_ALL=1`. The namespaces
//! are deleted when the test ends, also when it fails.

mod common;
mod hosts;
mod link_down;

use common::{is_child, skip_or_fail, wait_exit};
use hosts::netns::TwoHosts;
use hosts::procs::{Host, Logged, Scratch};
use std::sync::Mutex;
use std::time::{Duration, SystemTime};

/// One case: the settings, how long they give a side to notice, and
/// which host's veth end goes down (0 the server's, 1 the client's).
struct Case {
    label: &'static str,
    env: &'static [(&'static str, &'static str)],
    detect: Duration,
    down: usize,
}

/// TCP timeouts of both transports (their names differ in the prefix).
const TCP_TIMEOUTS: [(&str, &str); 4] = [
    ("USER_TIMEOUT", "1500ms"),
    ("KEEPIDLE", "1s"),
    ("KEEPINTVL", "1s"),
    ("KEEPCNT", "2"),
];

const CASES: [Case; 2] = [
    Case {
        label: "keepalive",
        env: &[
            ("RUCX_KEEPALIVE_INTERVAL", "300ms"),
            ("RUCX_KEEPALIVE_MISSES", "3"),
        ],
        // A round finds the third miss: (3 + 1) x 300 ms.
        detect: Duration::from_millis(1200),
        down: 0,
    },
    Case {
        label: "tcp timeouts",
        env: &[("RUCX_KEEPALIVE_INTERVAL", "inf")],
        // Unacknowledged data: the user timeout, 1.5 s; an idle socket:
        // keepalive probes from 1 s, given up by the user timeout's
        // count from the last answer or after 2 probes 1 s apart, 3 s.
        detect: Duration::from_secs(3),
        down: 1,
    },
];

/// The cases run one at a time: two cores, and the times are the point.
static SERIAL: Mutex<()> = Mutex::new(());

/// What a side printed when its endpoint failed.
#[derive(Debug)]
struct Report {
    handler: SystemTime,
    op_error: Option<SystemTime>,
    unfinished: usize,
    ok: u64,
    why: String,
}

fn parse(line: &str) -> Option<Report> {
    let rest = &line[line.find("report ")? + 7..];
    let field = |k: &str| {
        let at = rest.find(&format!("{k}="))? + k.len() + 1;
        rest[at..].split_whitespace().next()
    };
    let time = |k: &str| -> Option<SystemTime> {
        let ns: u64 = field(k)?.parse().ok()?;
        (ns > 0).then(|| SystemTime::UNIX_EPOCH + Duration::from_nanos(ns))
    };
    Some(Report {
        handler: time("handler_ns")?,
        op_error: time("op_error_ns"),
        unfinished: field("unfinished")?.parse().ok()?,
        ok: field("ok")?.parse().ok()?,
        why: rest[rest.find("why=")? + 4..].to_string(),
    })
}

/// Starts this test binary on `host` as side `side` of the test.
fn side(host: &Host, side: &str, env: &[(String, String)], dir: &Scratch) -> Logged {
    let exe = std::env::current_exe().expect("current_exe");
    let mut cmd = host.command(exe.to_str().expect("a UTF-8 path"));
    cmd.args([
        "link_down_side",
        "--exact",
        "--nocapture",
        "--test-threads=1",
    ])
    .env("RUCX_TEST_ROLE", "child")
    .env("RUCX_TEST_SIDE", side)
    .envs(env.iter().map(|(k, v)| (k, v)));
    Logged::spawn(cmd, dir, side)
}

fn link_down(tls: &str, tag: &str, case: &Case) {
    let _one = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let two = match TwoHosts::create(tag, true) {
        Ok(t) => t,
        Err(why) => return skip_or_fail(&format!("no network namespaces: {why}")),
    };
    let dir = Scratch::new(&format!("link-down-{tag}"));
    let mut env = vec![("RUCX_TLS".to_string(), tls.to_string())];
    for (k, v) in TCP_TIMEOUTS {
        env.push((format!("RUCX_TCP_{k}"), v.to_string()));
        env.push((format!("RUCX_IWARP_{k}"), v.to_string()));
    }
    env.extend(case.env.iter().map(|(k, v)| (k.to_string(), v.to_string())));

    let mut server = side(&two.host(0), "server", &env, &dir);
    let addr = server
        .wait_line(false, 60, |l| {
            Some(l[l.find("addr=")? + 5..].trim().to_string())
        })
        .unwrap_or_else(|e| panic!("{tls}: no server address: {e}"));
    env.push(("RUCX_TEST_PEER".to_string(), addr));
    let mut client = side(&two.host(1), "client", &env, &dir);
    for (name, p) in [("server", &mut server), ("client", &mut client)] {
        p.wait_line(false, 60, |l| l.contains("flowing").then_some(()))
            .unwrap_or_else(|e| panic!("{tls}: the {name}'s traffic did not flow: {e}"));
    }
    std::thread::sleep(Duration::from_millis(300));

    let down = SystemTime::now();
    two.link_down(case.down)
        .unwrap_or_else(|e| panic!("{tls}: link down: {e}"));
    let bound = case.detect * 3 + Duration::from_secs(2);
    // Reports come after the operations in flight ended (10 s at most).
    let wait = (bound + Duration::from_secs(15)).as_secs();
    let where_ = ["server", "client"][case.down];
    for (name, p) in [("server", &mut server), ("client", &mut client)] {
        let r = p
            .wait_line(false, wait, parse)
            .unwrap_or_else(|e| panic!("{tls}, {}: the {name} did not fail: {e}", case.label));
        let took = r.handler.duration_since(down).unwrap_or_default();
        let op = r
            .op_error
            .map(|t| t.duration_since(down).unwrap_or_default());
        eprintln!(
            "{tls}, {} (link down on the {where_}'s side): {name} handler after {took:?}, \
             first failed operation after {op:?}, {} operations done; {}",
            case.label, r.ok, r.why
        );
        assert!(
            took <= bound,
            "{tls}, {}: the {name} noticed after {took:?}, bound {bound:?}",
            case.label
        );
        assert_eq!(r.unfinished, 0, "{tls}: the {name}'s operations hang");
        let st = wait_exit(&mut p.child, 10);
        assert!(st.success(), "{tls}: the {name} failed: {}", p.stderr());
    }
}

/// A side of the test, started by [`link_down`] in a namespace.
#[test]
fn link_down_side() {
    if !is_child() {
        return;
    }
    let side = std::env::var("RUCX_TEST_SIDE").expect("RUCX_TEST_SIDE");
    link_down::peer::run(side == "server");
}

#[test]
fn tcp_link_down_mid_transfer() {
    if is_child() {
        return;
    }
    link_down("tcp", "t0", &CASES[0]);
    link_down("tcp", "t1", &CASES[1]);
}

#[test]
fn rc_iwarp_link_down_mid_transfer() {
    if is_child() {
        return;
    }
    link_down("rc_iwarp", "i0", &CASES[0]);
    link_down("rc_iwarp", "i1", &CASES[1]);
}
