//! The keepalive of endpoints in peer error mode (`RUCX_KEEPALIVE_*`): a
//! peer that stops progressing while its sockets and memory stay open is
//! declared dead within the configured rounds, on every transport; live
//! peers that only progress stay connected; endpoints without error
//! handling are never pinged.

mod common;

use common::*;
use rucx::ucp::{EpParams, ErrMode};
use rucx::{Posted, Worker};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Keepalive every 100 ms, 3 rounds without an answer fail an endpoint.
fn ctx(tls: &str) -> rucx::Context {
    context_vars(&[
        ("RUCX_TLS", tls),
        ("RUCX_KEEPALIVE_INTERVAL", "100ms"),
        ("RUCX_KEEPALIVE_MISSES", "3"),
    ])
}

/// When the handler ran, and the error it got.
type Failed = Arc<Mutex<Option<(Instant, String)>>>;

/// `a` with a peer-mode endpoint to `b`, wired up both ways.
fn pair(tls: &str) -> (Worker, Worker, rucx::Ep, Failed) {
    let c = ctx(tls);
    let mut a = c.create_worker().expect("worker");
    let mut b = c.create_worker().expect("worker");
    let failed = Failed::default();
    let f = Arc::clone(&failed);
    let params = EpParams::new().on_error(move |_, _, e| {
        *f.lock().unwrap() = Some((Instant::now(), e.to_string()));
    });
    let ep = a.connect_with(&b.address(), params).expect("connect");
    a.tag_send_blocking(ep, b"hello", 1).expect("send");
    let buf = [0u8; 8];
    let deadline = Instant::now() + Duration::from_secs(10);
    let Posted::InFlight(r) = b
        .tag_recv(buf.to_vec(), 1, u64::MAX, rucx::Op::new())
        .unwrap()
    else {
        return (a, b, ep, failed);
    };
    while b.request_is_active(r) {
        assert!(Instant::now() < deadline, "no wireup");
        a.progress();
        b.progress();
    }
    let _ = b.take::<Vec<u8>>(r);
    (a, b, ep, failed)
}

/// Progresses `a` (and `b` if `both`) for `ms`, or until `a`'s endpoint
/// failed; returns when it failed.
fn run(a: &mut Worker, b: &mut Worker, both: bool, ms: u64, failed: &Failed) -> Option<Instant> {
    let end = Instant::now() + Duration::from_millis(ms);
    while Instant::now() < end {
        a.progress();
        if both {
            b.progress();
        }
        if let Some((at, _)) = &*failed.lock().unwrap() {
            return Some(*at);
        }
    }
    None
}

fn stops_progressing(tls: &str) {
    let (mut a, mut b, ep, failed) = pair(tls);
    // Both live: rounds come and go, nothing fails.
    assert_eq!(
        run(&mut a, &mut b, true, 800, &failed),
        None,
        "{tls}: a live peer failed"
    );
    assert!(a.ep_status(ep).is_ok());
    // The peer stops progressing but keeps everything open.
    let stopped = Instant::now();
    let at = run(&mut a, &mut b, false, 10_000, &failed)
        .unwrap_or_else(|| panic!("{tls}: the keepalive did not fire in 10 s"));
    let took = at - stopped;
    println!("{tls}: keepalive failed the endpoint {took:?} after the peer stopped");
    assert!(
        took >= Duration::from_millis(200),
        "{tls}: too early ({took:?})"
    );
    assert!(took < Duration::from_secs(3), "{tls}: too late ({took:?})");
    let why = failed.lock().unwrap().clone().unwrap().1;
    assert!(why.contains("keepalive"), "{tls}: {why}");
    assert!(a.ep_status(ep).is_err());
}

#[test]
fn tcp_peer_that_stops_progressing() {
    if is_child() {
        return;
    }
    stops_progressing("tcp");
}

#[test]
fn shm_peer_that_stops_progressing() {
    if is_child() {
        return;
    }
    stops_progressing("posix");
}

#[test]
fn rc_iwarp_peer_that_stops_progressing() {
    if is_child() {
        return;
    }
    stops_progressing("rc_iwarp");
}

#[test]
fn endpoints_without_error_handling_are_not_watched() {
    let c = ctx("tcp");
    let mut a = c.create_worker().expect("worker");
    let mut b = c.create_worker().expect("worker");
    let ep = a
        .connect_with(&b.address(), EpParams::new().err_mode(ErrMode::None))
        .expect("connect");
    let end = Instant::now() + Duration::from_millis(300);
    while Instant::now() < end {
        a.progress();
        b.progress();
    }
    // b stops; a has no keepalive on this endpoint, so it stays up.
    let end = Instant::now() + Duration::from_millis(800);
    while Instant::now() < end {
        a.progress();
    }
    assert!(
        a.ep_status(ep).is_ok(),
        "an endpoint without error handling failed"
    );
}

/// Child of [`killed_peer`]: prints its address, then progresses until
/// killed (so it answers the parent's keepalive).
#[test]
fn keepalive_child() {
    if !is_child() {
        return;
    }
    let tls = std::env::var("RUCX_TEST_TLS").expect("tls");
    let mut w = ctx(&tls).create_worker().expect("worker");
    println!("addr={}", hex(&w.address()));
    let ppid = std::os::unix::process::parent_id();
    loop {
        for _ in 0..10_000 {
            w.progress();
        }
        if std::os::unix::process::parent_id() != ppid {
            std::process::exit(3);
        }
    }
}

/// Kills a live peer with SIGKILL and measures the time until the error
/// handler runs (the socket or the shared memory says so, or the
/// keepalive finds no answer).
fn killed_peer(tls: &str) -> Duration {
    use std::io::BufRead;
    let mut child = spawn_child("keepalive_child", &[("RUCX_TEST_TLS", tls.to_string())]);
    let out = child.stdout.take().expect("stdout");
    let mut lines = std::io::BufReader::new(out).lines();
    let addr = loop {
        let line = lines.next().expect("child output").expect("line");
        // The harness may have begun the line ("test … ... ").
        if let Some(at) = line.find("addr=") {
            break unhex(line[at + 5..].trim());
        }
    };
    let mut a = ctx(tls).create_worker().expect("worker");
    let failed = Failed::default();
    let f = Arc::clone(&failed);
    let params = EpParams::new().on_error(move |_, _, e| {
        *f.lock().unwrap() = Some((Instant::now(), e.to_string()));
    });
    let ep = a.connect_with(&addr, params).expect("connect");
    a.tag_send_blocking(ep, b"hi", 1).expect("send");
    let end = Instant::now() + Duration::from_millis(600);
    while Instant::now() < end {
        a.progress();
    }
    assert!(
        failed.lock().unwrap().is_none(),
        "{tls}: a live peer failed"
    );
    let killed = Instant::now();
    child.kill().expect("kill");
    let _ = child.wait();
    let deadline = killed + Duration::from_secs(10);
    loop {
        a.progress();
        if let Some((at, why)) = &*failed.lock().unwrap() {
            let took = *at - killed;
            println!("{tls}: kill -9 to error handler: {took:?} ({why})");
            return took;
        }
        assert!(
            Instant::now() < deadline,
            "{tls}: no failure 10 s after the kill"
        );
    }
}

#[test]
fn killed_peer_fails_the_endpoint_in_time() {
    if is_child() {
        return;
    }
    for tls in ["tcp", "posix", "rc_iwarp"] {
        let took = killed_peer(tls);
        // 3 missed rounds of 100 ms, plus a round's slack.
        assert!(took < Duration::from_secs(2), "{tls}: {took:?}");
    }
}
