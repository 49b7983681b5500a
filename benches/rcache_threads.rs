//! Registration-cache lookups of rendezvous buffers from 1 and 2 threads,
//! each with its own worker on one shared context (`RUCX_TLS=self`,
//! `RUCX_RCACHE_ENABLE=yes`): every lookup hits, so `lookup_64k` measures
//! what a rendezvous pays to find and release its buffer's cached
//! registration, and whether threads serialize on it; `tag_send_64k`
//! sends 64 KiB messages by rendezvous between two workers of each thread,
//! the whole path around those lookups. Throughput is in lookups or
//! messages per second over all threads.
//!
//! `cargo bench --bench rcache_threads`; `-- --test` runs each once.

use criterion::{criterion_main, BenchmarkId, Criterion, Throughput};
use rucx::ucp::UcpConfig;
use rucx::{Context, Op, Posted, Worker};
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

/// A rendezvous-sized buffer: 64 KiB.
const LEN: usize = 64 << 10;

fn context() -> Context {
    let cfg = UcpConfig::from_lookup(|k| match k {
        "RUCX_TLS" => Some("self".to_string()),
        "RUCX_RCACHE_ENABLE" => Some("yes".to_string()),
        "RUCX_RNDV_THRESH" => Some("16k".to_string()),
        _ => None,
    })
    .expect("config");
    Context::with_config(cfg).expect("context")
}

/// Sends `src` from `a` to `b` by rendezvous, driving both until done.
fn transfer(a: &mut Worker, b: &mut Worker, ep: rucx::Ep, src: &[u8], dst: &mut [u8]) {
    // SAFETY: both buffers outlive the operations, which complete below.
    let r = unsafe { b.tag_recv_raw(dst.as_mut_ptr(), dst.len(), 5, u64::MAX, Op::new()) }
        .expect("receive");
    // SAFETY: as above.
    let s = unsafe { a.tag_send_raw(ep, src.as_ptr(), src.len(), 5, Op::new()) }.expect("send");
    let mut pending: Vec<(bool, rucx::ReqId)> = Vec::new();
    if let Posted::InFlight(id) = r {
        pending.push((false, id));
    }
    if let Posted::InFlight(id) = s {
        pending.push((true, id));
    }
    while !pending.is_empty() {
        a.progress();
        b.progress();
        pending.retain(|&(send, id)| {
            let w = if send { &mut *a } else { &mut *b };
            match w.request_test(id) {
                Some(res) => {
                    res.expect("transfer");
                    false
                }
                None => true,
            }
        });
    }
}

/// Sends `iters` 64 KiB messages in each of `threads` threads at once,
/// each thread between two workers of its own; the time as [`run`]'s.
fn send(ctx: &Context, threads: usize, iters: u64) -> Duration {
    let start = Arc::new(Barrier::new(threads));
    let handles: Vec<_> = (0..threads)
        .map(|_| {
            let ctx = ctx.clone();
            let start = start.clone();
            std::thread::spawn(move || {
                let mut a = ctx.create_worker().expect("worker");
                let mut b = ctx.create_worker().expect("worker");
                let ep = a.connect(&b.address()).expect("connect");
                let src = vec![1u8; LEN];
                let mut dst = vec![0u8; LEN];
                transfer(&mut a, &mut b, ep, &src, &mut dst);
                start.wait();
                let begin = Instant::now();
                for _ in 0..iters {
                    transfer(&mut a, &mut b, ep, &src, &mut dst);
                }
                let end = Instant::now();
                drop((a, b));
                ctx.rcache_invalidate(src.as_ptr(), src.len());
                ctx.rcache_invalidate(dst.as_ptr(), dst.len());
                (begin, end)
            })
        })
        .collect();
    span(handles)
}

/// Runs `iters` lookups in each of `threads` threads at once (each with a
/// worker and a buffer of its own) and returns the time from the first
/// thread's start to the last thread's end.
fn run(ctx: &Context, threads: usize, iters: u64) -> Duration {
    let start = Arc::new(Barrier::new(threads));
    let handles: Vec<_> = (0..threads)
        .map(|_| {
            let ctx = ctx.clone();
            let start = start.clone();
            std::thread::spawn(move || {
                let _worker = ctx.create_worker().expect("worker");
                let buf = vec![1u8; LEN];
                ctx.bench_rndv_register(&buf).expect("first lookup");
                start.wait();
                let begin = Instant::now();
                for _ in 0..iters {
                    ctx.bench_rndv_register(std::hint::black_box(&buf))
                        .expect("lookup");
                }
                let end = Instant::now();
                ctx.rcache_invalidate(buf.as_ptr(), buf.len());
                (begin, end)
            })
        })
        .collect();
    span(handles)
}

/// From the first thread's start to the last one's end.
fn span(handles: Vec<std::thread::JoinHandle<(Instant, Instant)>>) -> Duration {
    let spans: Vec<(Instant, Instant)> = handles
        .into_iter()
        .map(|h| h.join().expect("bench thread"))
        .collect();
    let first = spans.iter().map(|s| s.0).min();
    let last = spans.iter().map(|s| s.1).max();
    match (first, last) {
        (Some(a), Some(b)) => b - a,
        _ => Duration::ZERO,
    }
}

fn lookups(c: &mut Criterion) {
    let ctx = context();
    let mut g = c.benchmark_group("rcache_threads/lookup_64k");
    for threads in [1usize, 2] {
        g.throughput(Throughput::Elements(threads as u64));
        g.bench_with_input(
            BenchmarkId::from_parameter(threads),
            &threads,
            |b, &threads| b.iter_custom(|iters| run(&ctx, threads, iters)),
        );
    }
    g.finish();
    let mut g = c.benchmark_group("rcache_threads/tag_send_64k");
    for threads in [1usize, 2] {
        g.throughput(Throughput::Elements(threads as u64));
        g.bench_with_input(
            BenchmarkId::from_parameter(threads),
            &threads,
            |b, &threads| b.iter_custom(|iters| send(&ctx, threads, iters)),
        );
    }
    g.finish();
}

// The macro generates an undocumented `pub fn benches`.
#[allow(missing_docs)]
mod group {
    criterion::criterion_group!(benches, super::lookups);
}
criterion_main!(group::benches);
