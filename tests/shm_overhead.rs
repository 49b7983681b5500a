//! Software cost of one small tagged message over the posix transport,
//! both workers in one thread (no second core, no cache-line transfers):
//! what the protocol and transport code cost per message, apart from the
//! memory system. Run with `cargo test --release --test shm_overhead --
//! --ignored --nocapture`; it prints figures and asserts nothing about them.

mod common;

use std::time::Instant;

use common::context;
use rucx::ucp::Posted;

#[test]
#[ignore = "measurement; prints nanoseconds per message"]
fn posix_message_software_cost() {
    let ctx = context("posix");
    let mut a = ctx.create_worker().expect("worker a");
    let mut b = ctx.create_worker().expect("worker b");
    let ep = a.connect(&b.address()).expect("connect");
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
            }
            best = best.min(t.elapsed().as_secs_f64());
        }
        println!("{label}: {:.1} ns per message", best * 1e9 / f64::from(n));
    }
}
