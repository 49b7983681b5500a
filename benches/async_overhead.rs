//! What each API tier costs per small message, apart from the wire: an
//! 8-byte tag message between two workers of one process over the posix
//! transport, driven by one thread (no second core, no wake-ups). Each
//! iteration posts a receive on `b`, sends from `a` and progresses `b`
//! until the receive is done, and progresses `a` once (as a ping-pong's
//! sender does while it waits), through:
//!
//! * `raw`: `tag_recv_raw` / `tag_send_raw` and `request_test`;
//! * `owned`: the owned tier (`tag_recv` / `tag_send` with a `Vec`, and
//!   `take`);
//! * `local`: `LocalWorker` futures, polled by hand with a waker that does
//!   nothing;
//! * `shared`: `SharedWorker` futures, polled the same way.
//!
//! The difference between `raw` and `local` is what the futures' path adds
//! to each side of a ping-pong (`examples/async_lat.rs` measures the
//! ping-pong itself, between two processes).

use std::future::Future;
use std::hint::black_box;
use std::pin::pin;
use std::task::{Context as TaskContext, Poll, Waker};

use criterion::{criterion_main, Criterion};
use rucx::ucp::{Ep, Posted, UcpConfig, Worker};
use rucx::Context;

const TAG: u64 = 7;

fn pair() -> (Worker, Worker, Ep) {
    let cfg =
        UcpConfig::from_lookup(|k| (k == "RUCX_TLS").then(|| "posix".to_string())).expect("config");
    let ctx = Context::with_config(cfg).expect("a context over posix");
    let mut a = ctx.create_worker().expect("worker a");
    let mut b = ctx.create_worker().expect("worker b");
    let ep = a.connect(&b.address()).expect("connect");
    settle(&mut a, &mut b, ep);
    (a, b, ep)
}

/// One message from `a` to `b`, both progressed until it is through: the
/// endpoint's connection is set up before anything is timed, so that a
/// small send goes out at once.
fn settle(a: &mut Worker, b: &mut Worker, ep: Ep) {
    let r = b
        .tag_recv(vec![0u8; 8], TAG, u64::MAX, Default::default())
        .expect("recv");
    let s = a
        .tag_send(ep, vec![1u8; 8], TAG, Default::default())
        .expect("send");
    let mut s = match s {
        Posted::InFlight(id) => Some(id),
        Posted::Done(..) => None,
    };
    let mut r = match r {
        Posted::InFlight(id) => Some(id),
        Posted::Done(..) => None,
    };
    while s.is_some() || r.is_some() {
        a.progress();
        b.progress();
        s = s.filter(|&id| a.take::<Vec<u8>>(id).is_none());
        r = r.filter(|&id| b.take::<Vec<u8>>(id).is_none());
    }
    for _ in 0..1000 {
        a.progress();
        b.progress();
    }
}

/// Polls `f` until it is ready; the future progresses its worker itself.
fn poll_ready<F: Future>(f: F) -> F::Output {
    let mut f = pin!(f);
    let mut cx = TaskContext::from_waker(Waker::noop());
    loop {
        if let Poll::Ready(r) = f.as_mut().poll(&mut cx) {
            return r;
        }
    }
}

/// The `local` or `shared` tier (`into`: `into_local` or `into_shared`):
/// their futures have the same methods.
macro_rules! futures_tier {
    ($g:ident, $name:literal, $into:ident) => {
        let (a, b, ep) = pair();
        let (a, b) = (a.$into(), b.$into());
        $g.bench_function($name, |bench| {
            let mut bufs = Some((vec![1u8; 8], vec![0u8; 8]));
            bench.iter(|| {
                let (msg, buf) = bufs.take().expect("buffers");
                let r = b.tag_recv(buf, TAG, u64::MAX).expect("recv");
                let msg = poll_ready(a.tag_send(ep, msg, TAG).expect("send"))
                    .expect("sent")
                    .1;
                let buf = poll_ready(r).expect("received").1;
                a.progress();
                bufs = Some((msg, buf));
            });
        });
    };
}

/// The four tiers, one pair of workers each.
fn tiers(c: &mut Criterion) {
    let mut g = c.benchmark_group("async_overhead/8B");
    let (mut a, mut b, ep) = pair();
    g.bench_function("raw", |bench| {
        let src = [1u8; 8];
        let mut dst = [0u8; 8];
        bench.iter(|| {
            // SAFETY: `dst` outlives the receive, done before the next
            // iteration; `src` outlives the send, which goes out at once.
            let r =
                unsafe { b.tag_recv_raw(dst.as_mut_ptr(), 8, TAG, u64::MAX, Default::default()) }
                    .expect("recv");
            let s = unsafe { a.tag_send_raw(ep, src.as_ptr(), 8, TAG, Default::default()) }
                .expect("send");
            if let Posted::InFlight(id) = s {
                while a.request_test(id).is_none() {
                    a.progress();
                }
            }
            // The sender's look at its worker, as in a ping-pong: it takes
            // back flow-control credits.
            a.progress();
            if let Posted::InFlight(id) = r {
                loop {
                    if let Some(r) = b.request_test(id) {
                        black_box(r.expect("receive"));
                        break;
                    }
                    b.progress();
                }
            }
        });
    });
    let (mut a, mut b, ep) = pair();
    g.bench_function("owned", |bench| {
        let mut bufs = Some((vec![1u8; 8], vec![0u8; 8]));
        bench.iter(|| {
            let (msg, buf) = bufs.take().expect("buffers");
            let r = b
                .tag_recv(buf, TAG, u64::MAX, Default::default())
                .expect("recv");
            let msg = match a.tag_send(ep, msg, TAG, Default::default()).expect("send") {
                Posted::Done(_, m) => m,
                Posted::InFlight(id) => loop {
                    a.progress();
                    if let Some(r) = a.take::<Vec<u8>>(id) {
                        break r.expect("send").1;
                    }
                },
            };
            let buf = match r {
                Posted::Done(_, b) => b,
                Posted::InFlight(id) => loop {
                    b.progress();
                    if let Some(r) = b.take::<Vec<u8>>(id) {
                        break r.expect("receive").1;
                    }
                },
            };
            a.progress();
            bufs = Some((msg, buf));
        });
    });
    futures_tier!(g, "local", into_local);
    futures_tier!(g, "shared", into_shared);
    g.finish();
}

// The macro generates an undocumented `pub fn benches`.
#[allow(missing_docs)]
mod group {
    criterion::criterion_group!(benches, super::tiers);
}
criterion_main!(group::benches);
