//! Registration-cache lookups of rendezvous buffers from 1 and 2 threads,
//! each with its own worker on one shared context (`RUCX_TLS=self`,
//! `RUCX_RCACHE_ENABLE=yes`): every lookup hits, so this measures what a
//! rendezvous pays to find and release its buffer's cached registration,
//! and whether threads serialize on it. Throughput is in lookups/s over
//! all threads.
//!
//! `cargo bench --bench rcache_threads`; `-- --test` runs each once.

use criterion::{criterion_main, BenchmarkId, Criterion, Throughput};
use rucx::ucp::UcpConfig;
use rucx::Context;
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

/// A rendezvous-sized buffer: 64 KiB.
const LEN: usize = 64 << 10;

fn context() -> Context {
    let cfg = UcpConfig::from_lookup(|k| match k {
        "RUCX_TLS" => Some("self".to_string()),
        "RUCX_RCACHE_ENABLE" => Some("yes".to_string()),
        _ => None,
    })
    .expect("config");
    Context::with_config(cfg).expect("context")
}

/// Runs `iters` lookups in each of `threads` threads at once (each with a
/// worker and a buffer of its own) and returns the time from the common
/// start to the last thread's end.
fn run(ctx: &Context, threads: usize, iters: u64) -> Duration {
    let start = Arc::new(Barrier::new(threads + 1));
    let handles: Vec<_> = (0..threads)
        .map(|_| {
            let ctx = ctx.clone();
            let start = start.clone();
            std::thread::spawn(move || {
                let _worker = ctx.create_worker().expect("worker");
                let buf = vec![1u8; LEN];
                ctx.bench_rndv_register(&buf).expect("first lookup");
                start.wait();
                for _ in 0..iters {
                    ctx.bench_rndv_register(std::hint::black_box(&buf))
                        .expect("lookup");
                }
                let end = Instant::now();
                ctx.rcache_invalidate(buf.as_ptr(), buf.len());
                end
            })
        })
        .collect();
    start.wait();
    let t0 = Instant::now();
    handles
        .into_iter()
        .map(|h| h.join().expect("bench thread"))
        .max()
        .map_or(Duration::ZERO, |end| end - t0)
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
}

// The macro generates an undocumented `pub fn benches`.
#[allow(missing_docs)]
mod group {
    criterion::criterion_group!(benches, super::lookups);
}
criterion_main!(group::benches);
