//! Many idle endpoints do not make progress dearer: after one round of
//! messages on every endpoint and a quiet spell, a worker's empty
//! progress calls look at no connection, whether it has one endpoint or
//! hundreds. Counted through the transports' visit counters
//! (`Worker::transport_visits`), not timed.

use rucx::ucp::{Op, Posted, Worker};
use std::time::{Duration, Instant};

mod common;

/// Progress calls measured on the quiet worker.
const CALLS: usize = 20_000;

/// One worker with `n` tcp endpoints to `n` other workers, one message
/// over each; returns the connections visited by `CALLS` progress calls
/// once everything is quiet, and the events those calls reported.
fn quiet_visits(n: usize) -> (u64, usize) {
    let ctx = common::context_vars(&[("RUCX_TLS", "tcp"), ("RUCX_NET_DEVICES", "lo")]);
    let mut d = ctx.create_worker().expect("worker");
    let mut remotes: Vec<Worker> = (0..n)
        .map(|_| ctx.create_worker().expect("remote worker"))
        .collect();
    for (i, r) in remotes.iter_mut().enumerate() {
        let ep = d.connect(&r.address()).expect("connect");
        match d.tag_send(ep, vec![7u8; 8], i as u64, Op::new()) {
            Ok(Posted::InFlight(id)) => d.request_release(id),
            Ok(Posted::Done(..)) => {}
            Err(e) => panic!("send {i}: {e}"),
        }
    }
    let t = Instant::now();
    let mut got = vec![false; n];
    while got.iter().any(|g| !g) {
        d.progress();
        for (i, r) in remotes.iter_mut().enumerate() {
            r.progress();
            if !got[i] && r.tag_probe(i as u64, u64::MAX).is_some() {
                let mut b = [0u8; 8];
                let info = r
                    .tag_recv_blocking(&mut b, i as u64, u64::MAX)
                    .expect("recv");
                assert_eq!((info.length, b), (8, [7u8; 8]));
                got[i] = true;
            }
        }
        assert!(
            t.elapsed() < Duration::from_secs(60),
            "messages not delivered"
        );
    }
    // Quiet for longer than the tcp idle sweep takes to free buffers.
    let t = Instant::now();
    while t.elapsed() < Duration::from_millis(700) {
        d.progress();
        for r in &mut remotes {
            r.progress();
        }
    }
    let before = d.transport_visits();
    // The counter counts: delivering the messages looked at connections.
    assert!(before >= n as u64, "{before} visits for {n} connections");
    let events: usize = (0..CALLS).map(|_| d.progress()).sum();
    (d.transport_visits() - before, events)
}

#[test]
fn idle_tcp_endpoints_add_no_progress_work() {
    let (one, ev_one) = quiet_visits(1);
    let (many, ev_many) = quiet_visits(300);
    println!("visits in {CALLS} progress calls: 1 endpoint {one}, 300 endpoints {many}");
    assert_eq!((ev_one, ev_many), (0, 0), "events on a quiet worker");
    assert_eq!(
        many, one,
        "300 idle endpoints cost progress {many} connection visits, 1 endpoint {one}"
    );
}
