//! Endpoints' own send paths on a `SharedWorker`: short tag messages over
//! shared memory go past the worker's lock, and still keep each thread's
//! order with the messages that take the worker's path (larger ones, and
//! short ones while the receiver's FIFO is full or the endpoint's credit
//! runs out). Every byte and every thread's order is checked.

mod common;

use common::*;
use rucx::ucp::CloseMode;
use rucx::ucp::SharedWorker;
use std::time::Duration;

const THREADS: u64 = 2;

/// Thread `t`'s message `i`: mostly short, some that take the worker's
/// path (eager fragments, rendezvous) between them.
fn size(t: u64, i: u64) -> usize {
    match (t + i) % 50 {
        0 => 9000,
        25 => 200_000,
        k => (k % 17) as usize,
    }
}

fn pair(vars: &[(&str, &str)]) -> (rucx::Context, SharedWorker, SharedWorker) {
    let ctx = context_vars(vars);
    let a = ctx.create_worker().expect("worker a").into_shared();
    let b = ctx.create_worker().expect("worker b").into_shared();
    (ctx, a, b)
}

/// `THREADS` threads send `n` messages each on one endpoint while the
/// receiver waits `delay` before it receives (the FIFO fills meanwhile);
/// one thread per sender receives them in order.
fn send_and_check(a: &SharedWorker, b: &SharedWorker, n: u64, delay: Duration) {
    let ep = a.connect(&b.address()).expect("connect");
    let _back = b.connect(&a.address()).expect("connect back");
    std::thread::scope(|s| {
        for t in 0..THREADS {
            s.spawn(move || {
                let mut pending = Vec::new();
                for i in 0..n {
                    let data = pattern(size(t, i), t << 32 | i);
                    pending.push(a.tag_send(ep, data, t << 32 | i).expect("send"));
                    if pending.len() >= 64 {
                        for f in pending.drain(..) {
                            f.wait().expect("send done");
                        }
                    }
                }
                for f in pending {
                    f.wait().expect("send done");
                }
            });
            s.spawn(move || {
                std::thread::sleep(delay);
                recv_in_order(b, t, n, size);
            });
        }
    });
}

#[test]
fn short_sends_pass_the_lock_and_keep_order_shm() {
    let (_ctx, a, b) = pair(&[("RUCX_TLS", "shm")]);
    const N: u64 = 20_000;
    send_and_check(&a, &b, N, Duration::from_millis(50));
    let passed = a.endpoint_path_sends();
    // Most messages are short: if none went past the lock, the path is
    // not used; if all did, the larger ones were not ordered with them.
    assert!(passed > 0, "no send took the endpoint's path");
    assert!(passed < THREADS * N, "{passed} of {} sends", THREADS * N);
}

/// A small unexpected-message limit: the endpoint's credit runs out every
/// few hundred messages, so its lease is taken back and given again.
#[test]
fn short_sends_keep_order_when_credit_runs_out_shm() {
    let (_ctx, a, b) = pair(&[("RUCX_TLS", "shm"), ("RUCX_UNEXPECTED_MAX", "64k")]);
    send_and_check(&a, &b, 5_000, Duration::from_millis(20));
    assert!(
        a.endpoint_path_sends() > 0,
        "no send took the endpoint's path"
    );
}

/// tcp has no send path of an endpoint's own: every send takes the lock.
#[test]
fn tcp_sends_take_the_workers_path() {
    let (_ctx, a, b) = pair(&[("RUCX_TLS", "tcp")]);
    send_and_check(&a, &b, 500, Duration::ZERO);
    assert_eq!(a.endpoint_path_sends(), 0);
}

/// After a close, a send on the endpoint fails at once: its path is gone
/// with it.
#[test]
fn a_closed_endpoints_path_is_gone_shm() {
    let (_ctx, a, b) = pair(&[("RUCX_TLS", "shm")]);
    let ep = a.connect(&b.address()).expect("connect");
    let _back = b.connect(&a.address()).expect("connect back");
    let recv = {
        let b = b.clone();
        std::thread::spawn(move || {
            for i in 0..100u64 {
                let f = b.tag_recv(vec![0u8; 8], i, u64::MAX).expect("recv");
                assert_eq!(f.wait().expect("recv done").0.tag, i);
            }
        })
    };
    for i in 0..100u64 {
        let f = a.tag_send(ep, vec![7u8; 8], i).expect("send");
        f.wait().expect("sent");
    }
    recv.join().expect("receiver");
    assert!(a.endpoint_path_sends() > 0);
    a.ep_close(ep, CloseMode::Flush).wait().expect("close");
    assert_eq!(
        a.endpoint_path_sends(),
        0,
        "the closed endpoint's path is kept"
    );
    match a.tag_send(ep, vec![1u8; 8], 1) {
        Err(_) => {}
        Ok(f) => assert!(f.wait().is_err(), "a send on a closed endpoint succeeded"),
    }
    // A new endpoint may take the closed one's place in the table: its
    // path serves it, and still not the old handle.
    let ep2 = a.connect(&b.address()).expect("connect again");
    let recv = {
        let b = b.clone();
        std::thread::spawn(move || {
            for i in 0..100u64 {
                let f = b.tag_recv(vec![0u8; 8], 1000 + i, u64::MAX).expect("recv");
                assert_eq!(f.wait().expect("recv done").0.tag, 1000 + i);
            }
        })
    };
    for i in 0..100u64 {
        let f = a.tag_send(ep2, vec![7u8; 8], 1000 + i).expect("send");
        f.wait().expect("sent");
        if i == 50 {
            match a.tag_send(ep, vec![1u8; 8], 1) {
                Err(_) => {}
                Ok(f) => assert!(f.wait().is_err(), "the closed endpoint sent"),
            }
        }
    }
    recv.join().expect("receiver");
    assert!(a.endpoint_path_sends() > 0, "the new endpoint has no path");
}

/// An active message as its handler saw it: header, reply flag, data.
type Arrived = (Vec<u8>, bool, Vec<u8>);

/// Active messages without a user header go by the endpoint's path too;
/// those with one take the worker's, and each thread's messages arrive in
/// the order it sent them.
#[test]
fn active_messages_pass_the_lock_and_keep_order_shm() {
    use rucx::ucp::AmParams;
    use std::sync::{Arc, Mutex};
    let (_ctx, a, b) = pair(&[("RUCX_TLS", "shm")]);
    let ep = a.connect(&b.address()).expect("connect");
    let _back = b.connect(&a.address()).expect("connect back");
    let got: Arc<Mutex<Vec<Arrived>>> = Arc::default();
    let sink = Arc::clone(&got);
    b.with(|w| {
        w.am_set_handler(5, move |_, msg| {
            let m = (
                msg.header().to_vec(),
                msg.reply_ep().is_some(),
                msg.into_data(),
            );
            sink.lock().expect("sink").push(m);
        })
    });
    const N: u64 = 3_000;
    std::thread::scope(|s| {
        for t in 0..THREADS {
            let a = &a;
            s.spawn(move || {
                for i in 0..N {
                    let data = [t.to_le_bytes(), i.to_le_bytes()].concat();
                    let (header, params) = match i % 10 {
                        0 => (&b"hdr"[..], AmParams::new()),
                        5 => (&[][..], AmParams::new().reply()),
                        _ => (&[][..], AmParams::new()),
                    };
                    let f = a.am_send(ep, 5, header, data, params).expect("send");
                    f.wait().expect("sent");
                }
            });
        }
        s.spawn(|| {
            let deadline = std::time::Instant::now() + Duration::from_secs(60);
            while got.lock().expect("sink").len() < (THREADS * N) as usize {
                assert!(std::time::Instant::now() < deadline, "messages missing");
                b.progress();
            }
        });
    });
    let got = got.lock().expect("sink");
    let mut next = [0u64; THREADS as usize];
    for (header, reply, data) in got.iter() {
        let t = u64::from_le_bytes(data[..8].try_into().expect("t"));
        let i = u64::from_le_bytes(data[8..16].try_into().expect("i"));
        assert_eq!(i, next[t as usize], "order of thread {t}");
        next[t as usize] += 1;
        assert_eq!(
            header.as_slice(),
            if i % 10 == 0 { &b"hdr"[..] } else { &[][..] }
        );
        assert_eq!(*reply, i % 10 == 5, "reply flag of {t}/{i}");
    }
    assert!(
        a.endpoint_path_sends() > 0,
        "no message took the endpoint's path"
    );
}

/// A receiver without a limit on unexpected messages grants everything:
/// the lease must not push the endpoint's count of charged bytes to the
/// edge of its range, where the worker's own sends would overflow it.
#[test]
fn short_sends_keep_order_without_a_credit_limit_shm() {
    let (_ctx, a, b) = pair(&[("RUCX_TLS", "shm"), ("RUCX_UNEXPECTED_MAX", "inf")]);
    send_and_check(&a, &b, 5_000, Duration::from_millis(20));
    assert!(
        a.endpoint_path_sends() > 0,
        "no send took the endpoint's path"
    );
}

/// `Worker::send_paths` on a plain worker (as the C API's multi mode
/// uses it): another thread sends through the handle while the owner
/// sends through the worker, in order; once the worker is dropped the
/// handle sends nothing.
#[test]
fn send_paths_of_a_plain_worker_close_with_it_shm() {
    let ctx = context_vars(&[("RUCX_TLS", "shm")]);
    let mut a = ctx.create_worker().expect("worker a");
    let b = ctx.create_worker().expect("worker b").into_shared();
    let paths = a.send_paths();
    let ep = a.connect(&b.address()).expect("connect");
    // The worker's own fast send opens the endpoint's path.
    a.tag_send_blocking(ep, &pattern(8, 0), 0)
        .expect("first send");
    // Within one lease of the endpoint's first credit, so that the path
    // never needs the owner to top it up.
    const N: u64 = 200;
    let by_path = std::thread::scope(|s| {
        let p = &paths;
        let other = s.spawn(move || {
            let mut went = 0;
            for i in 0..N {
                let tag = 1 << 32 | i;
                let data = pattern(size(1, i).clamp(1, 16), tag);
                // Spin while the receiver's FIFO is full.
                let start = std::time::Instant::now();
                while !p.try_tag_send_short(ep, &data, tag) {
                    assert!(
                        start.elapsed() < Duration::from_secs(30),
                        "the path stays shut"
                    );
                    std::thread::yield_now();
                }
                went += 1;
            }
            went
        });
        let recv = s.spawn(|| {
            recv_in_order(&b, 1, N, |t, i| size(t, i).clamp(1, 16));
            recv_in_order(&b, 2, N, |_, _| 8);
        });
        for i in 0..N {
            let tag = 2 << 32 | i;
            a.tag_send_blocking(ep, &pattern(8, tag), tag)
                .expect("owner's send");
            a.progress();
        }
        while !recv.is_finished() {
            a.progress();
        }
        recv.join().expect("receiver");
        other.join().expect("other sender")
    });
    assert_eq!(by_path, N);
    assert!(paths.sends() >= N, "the handle counts its sends");
    drop(a);
    assert!(
        !paths.try_tag_send_short(ep, b"late", 9),
        "a path outlived its worker"
    );
    assert_eq!(paths.sends(), 0);
}
