//! Software cost of one small tagged message over the posix transport,
//! both workers in one thread (no second core, no cache-line transfers):
//! what the protocol and transport code cost per message, apart from the
//! memory system (the per-message figure includes one progress call of the
//! sender, which takes back the FIFO's flow-control credits). Run with
//! `cargo test --release --test shm_overhead -- --ignored --nocapture
//! --test-threads=1` (alone on the machine: the two
//! tests would share its cores); it prints figures and asserts nothing about
//! them.

mod common;

use std::time::Instant;

use common::context;
use rucx::ucp::Posted;

/// Two workers of one context on `tls`, and an endpoint from the first to
/// the second.
fn pair(tls: &str) -> (rucx::ucp::Worker, rucx::ucp::Worker, rucx::ucp::Ep) {
    let ctx = context(tls);
    let mut a = ctx.create_worker().expect("worker a");
    let mut b = ctx.create_worker().expect("worker b");
    let ep = a.connect(&b.address()).expect("connect");
    settle(&mut a, &mut b, ep);
    (a, b, ep)
}

/// One message from `a` to `b`, both progressed until it is through and a
/// while after: the endpoint is connected before anything is timed, so
/// that a small send goes out at once.
fn settle(a: &mut rucx::ucp::Worker, b: &mut rucx::ucp::Worker, ep: rucx::ucp::Ep) {
    let src = [0u8; 8];
    let mut dst = [0u8; 8];
    // SAFETY: both buffers outlive the two requests, waited for below.
    let r = unsafe { b.tag_recv_raw(dst.as_mut_ptr(), 8, 0, u64::MAX, Default::default()) };
    let s = unsafe { a.tag_send_raw(ep, src.as_ptr(), 8, 0, Default::default()) };
    let id = |p: rucx::ucp::Posted<()>| match p {
        Posted::InFlight(id) => Some(id),
        Posted::Done(..) => None,
    };
    let (mut s, mut r) = (id(s.expect("send")), id(r.expect("recv")));
    for _ in 0..1000 {
        a.progress();
        b.progress();
        s = s.filter(|&id| a.request_test(id).is_none());
        r = r.filter(|&id| b.request_test(id).is_none());
    }
    assert!(s.is_none() && r.is_none(), "the first message went through");
}

#[test]
#[ignore = "measurement; prints nanoseconds per message"]
fn posix_message_software_cost() {
    let (mut a, mut b, ep) = pair("posix");
    let src = [7u8; 8];
    let mut dst = [0u8; 8];
    for (label, expected_first) in [("receive posted first", true), ("message first", false)] {
        let n = 2_000_000u32;
        let mut best = f64::MAX;
        for _ in 0..3 {
            let t = Instant::now();
            for i in 0..n {
                let tag = u64::from(i);
                let mut post_recv = |b: &mut rucx::ucp::Worker| {
                    // SAFETY: `dst` outlives the receive, which completes
                    // before the next iteration touches `dst`.
                    unsafe {
                        b.tag_recv_raw(dst.as_mut_ptr(), 8, tag, u64::MAX, Default::default())
                    }
                    .expect("recv")
                };
                let mut recv = None;
                if expected_first {
                    recv = Some(post_recv(&mut b));
                }
                // SAFETY: `src` outlives the send; 8 bytes go out at once.
                let s = unsafe { a.tag_send_raw(ep, src.as_ptr(), 8, tag, Default::default()) }
                    .expect("send");
                assert!(matches!(s, Posted::Done(..)), "small send finishes at once");
                if !expected_first {
                    while b.progress() == 0 {}
                    recv = Some(post_recv(&mut b));
                }
                if let Some(Posted::InFlight(id)) = recv {
                    loop {
                        if let Some(r) = b.request_test(id) {
                            r.expect("receive");
                            break;
                        }
                        b.progress();
                    }
                }
                // The sender's look at its worker, as a ping-pong's sender
                // makes: it takes back flow-control credits.
                a.progress();
            }
            best = best.min(t.elapsed().as_secs_f64());
        }
        println!("{label}: {:.1} ns per message", best * 1e9 / f64::from(n));
    }
}

/// The two halves apart, in windows of 32 as `tag_bw` runs them: the
/// sender's cost per message (32 sends), then the receiver's (32 receives
/// posted, progress until all are done).
#[test]
#[ignore = "measurement; prints nanoseconds per message"]
fn posix_message_cost_by_side() {
    const WINDOW: usize = 32;
    let (mut a, mut b, ep) = pair("posix");
    let src = [7u8; 8];
    let mut dst = [[0u8; 8]; WINDOW];
    for posted_first in [true, false] {
        let rounds = 60_000u32;
        let (mut send_ns, mut recv_ns) = (f64::MAX, f64::MAX);
        for _ in 0..3 {
            let (mut ts, mut tr) = (0f64, 0f64);
            for _ in 0..rounds {
                let mut ids = Vec::with_capacity(WINDOW);
                let mut post = |b: &mut rucx::ucp::Worker, ids: &mut Vec<_>| {
                    let t = Instant::now();
                    for d in dst.iter_mut() {
                        // SAFETY: `dst` outlives every receive, all of which
                        // complete before the next round.
                        let r = unsafe {
                            b.tag_recv_raw(d.as_mut_ptr(), 8, 1, u64::MAX, Default::default())
                        }
                        .expect("recv");
                        if let Posted::InFlight(id) = r {
                            ids.push(id);
                        }
                    }
                    t.elapsed().as_secs_f64()
                };
                if posted_first {
                    tr += post(&mut b, &mut ids);
                }
                let t = Instant::now();
                for _ in 0..WINDOW {
                    // SAFETY: `src` outlives the send; 8 bytes go out at once.
                    let s = unsafe { a.tag_send_raw(ep, src.as_ptr(), 8, 1, Default::default()) }
                        .expect("send");
                    assert!(matches!(s, Posted::Done(..)), "small send finishes at once");
                }
                ts += t.elapsed().as_secs_f64();
                let t = Instant::now();
                if !posted_first {
                    let mut got = 0;
                    while got < WINDOW {
                        got += b.progress();
                    }
                }
                tr += t.elapsed().as_secs_f64();
                if !posted_first {
                    tr += post(&mut b, &mut ids);
                }
                let t = Instant::now();
                for id in ids {
                    loop {
                        if let Some(r) = b.request_test(id) {
                            r.expect("receive");
                            break;
                        }
                        b.progress();
                    }
                }
                tr += t.elapsed().as_secs_f64();
                // The sender takes back its flow-control credits, untimed.
                a.progress();
            }
            let per = f64::from(rounds) * WINDOW as f64;
            send_ns = send_ns.min(ts * 1e9 / per);
            recv_ns = recv_ns.min(tr * 1e9 / per);
        }
        let label = if posted_first {
            "receives posted first"
        } else {
            "messages first"
        };
        println!("{label}: send {send_ns:.1} ns, receive {recv_ns:.1} ns per message");
    }
}

/// One empty `progress` call of a worker with a shared-memory endpoint: the
/// step of the polling loop a latency test spins in.
#[test]
#[ignore = "measurement; prints nanoseconds per call"]
fn empty_progress_cost() {
    let (mut a, mut b, _ep) = pair("shm");
    let _back = b.connect(&a.address()).expect("connect back");
    let n = 20_000_000u32;
    let mut best = f64::MAX;
    for _ in 0..3 {
        let t = Instant::now();
        for _ in 0..n {
            std::hint::black_box(a.progress());
        }
        best = best.min(t.elapsed().as_secs_f64());
    }
    println!(
        "empty progress: {:.1} ns per call",
        best * 1e9 / f64::from(n)
    );
}
