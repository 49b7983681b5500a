//! An endpoint announces itself (its wireup) with its first operation,
//! not when it is made: endpoints that are never used cost their peers
//! nothing, and the first message still arrives, with the peer's endpoint
//! back made in time to answer it. Counted (endpoints on each side), not
//! timed.

use rucx::ucp::{Op, Posted, Worker};
use std::time::{Duration, Instant};

mod common;

/// Peers of the connecting worker in each case.
const PEERS: usize = 6;

/// Progresses every worker until `done` holds (at most 30 s).
fn drive(
    d: &mut Worker,
    peers: &mut [Worker],
    mut done: impl FnMut(&mut Worker, &mut [Worker]) -> bool,
) {
    let t = Instant::now();
    while !done(d, peers) {
        d.progress();
        for p in peers.iter_mut() {
            p.progress();
        }
        assert!(t.elapsed() < Duration::from_secs(30), "timed out");
    }
}

/// Progresses every worker `n` times.
fn spin(d: &mut Worker, peers: &mut [Worker], n: usize) {
    for _ in 0..n {
        d.progress();
        for p in peers.iter_mut() {
            p.progress();
        }
    }
}

fn unused_endpoints_cost_their_peers_nothing(tls: &str) {
    let ctx = match tls {
        "tcp" => common::context_vars(&[("RUCX_TLS", tls), ("RUCX_NET_DEVICES", "lo")]),
        _ => common::context_vars(&[("RUCX_TLS", tls)]),
    };
    let mut d = ctx.create_worker().expect("worker");
    let mut peers: Vec<Worker> = (0..PEERS)
        .map(|_| ctx.create_worker().expect("peer"))
        .collect();
    let eps: Vec<_> = peers
        .iter()
        .map(|p| d.connect(&p.address()).expect("connect"))
        .collect();
    spin(&mut d, &mut peers, 2000);
    for (i, p) in peers.iter().enumerate() {
        assert_eq!(
            p.endpoint_count(),
            0,
            "{tls}: peer {i} heard of an unused endpoint"
        );
    }
    assert_eq!(
        d.requests_outstanding(),
        0,
        "{tls}: nothing is queued for them"
    );

    // The first message announces the endpoint; its receiver answers on
    // the endpoint back, which the announcement made.
    match d
        .tag_send(eps[0], vec![5u8; 16], 1, Op::new())
        .expect("send")
    {
        Posted::InFlight(id) => d.request_release(id),
        Posted::Done(..) => {}
    }
    drive(&mut d, &mut peers, |_, p| {
        p[0].tag_probe(1, u64::MAX).is_some()
    });
    let mut b = [0u8; 16];
    let info = peers[0]
        .tag_recv_blocking(&mut b, 1, u64::MAX)
        .expect("recv");
    assert_eq!((info.length, b), (16, [5u8; 16]), "{tls}");
    assert_eq!(peers[0].endpoint_count(), 1, "{tls}");
    let back = peers[0].connect(&d.address()).expect("endpoint back");
    peers[0]
        .tag_send_blocking(back, &[9u8; 4], 2)
        .expect("answer");
    drive(&mut d, &mut peers, |d, _| {
        d.tag_probe(2, u64::MAX).is_some()
    });
    assert_eq!(
        d.endpoint_count(),
        PEERS,
        "{tls}: the answer used the endpoint d made"
    );

    // A one-sided flush and a close of endpoints never used tell nobody.
    d.ep_flush(eps[1]).expect("flush");
    d.ep_close(eps[2]).expect("close");
    spin(&mut d, &mut peers, 2000);
    for (i, p) in peers.iter().enumerate().skip(1) {
        assert_eq!(
            p.endpoint_count(),
            0,
            "{tls}: peer {i} heard of an unused endpoint"
        );
    }

    // A stream and an active message announce their endpoints too.
    match d
        .stream_send(eps[3], vec![1u8; 8], Op::new())
        .expect("stream")
    {
        Posted::InFlight(id) => d.request_release(id),
        Posted::Done(..) => {}
    }
    drive(&mut d, &mut peers, |_, p| p[3].endpoint_count() == 1);
    let sent = d.am_send(eps[4], 3, &[], &[1, 2, 3], Default::default());
    if let Posted::InFlight(id) = sent.expect("active message") {
        d.request_release(id);
    }
    drive(&mut d, &mut peers, |_, p| p[4].endpoint_count() == 1);
    assert_eq!(peers[5].endpoint_count(), 0, "{tls}");
}

#[test]
fn unused_endpoints_cost_their_peers_nothing_over_tcp() {
    unused_endpoints_cost_their_peers_nothing("tcp");
}

#[test]
fn unused_endpoints_cost_their_peers_nothing_over_shm() {
    unused_endpoints_cost_their_peers_nothing("posix");
}

#[test]
fn unused_endpoints_cost_their_peers_nothing_over_rc_iwarp() {
    unused_endpoints_cost_their_peers_nothing("rc_iwarp");
}

/// An endpoint in peer error mode announces itself at once: its peer
/// watches it from the start.
#[test]
fn an_endpoint_in_peer_error_mode_announces_itself_at_once() {
    let ctx = common::context_vars(&[("RUCX_TLS", "tcp"), ("RUCX_NET_DEVICES", "lo")]);
    let mut d = ctx.create_worker().expect("worker");
    let mut peers = vec![ctx.create_worker().expect("peer")];
    let params = rucx::ucp::EpParams::default().err_mode(rucx::ucp::ErrMode::Peer);
    d.connect_with(&peers[0].address(), params)
        .expect("connect");
    drive(&mut d, &mut peers, |_, p| p[0].endpoint_count() == 1);
}
