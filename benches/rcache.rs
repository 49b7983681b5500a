//! Registration cache: hit lookups among 1, 1k and 100k cached regions, and
//! a miss that registers a new region and evicts the oldest. The registrar
//! does nothing, so this measures the cache alone.
//!
//! `cargo bench --bench rcache`; `-- --test` runs each once as a smoke test.

use criterion::{criterion_main, BenchmarkId, Criterion};
use rucx_ucs::rcache::{Rcache, RcacheConfig, Registrar};
use std::convert::Infallible;
use std::hint::black_box;

const PAGE: usize = 4096;
const BASE: usize = 1 << 40;

/// A registrar whose handle is the address.
#[derive(Debug)]
struct Nop;

impl Registrar for Nop {
    type Handle = usize;
    type Error = Infallible;

    fn register(&mut self, addr: usize, _len: usize) -> Result<usize, Infallible> {
        Ok(addr)
    }

    fn deregister(&mut self, handle: usize) {
        black_box(handle);
    }
}

fn cache(max_regions: usize) -> Rcache<Nop> {
    let config = RcacheConfig {
        max_regions,
        alignment: PAGE,
        ..RcacheConfig::default()
    };
    Rcache::new(Nop, config)
}

/// Caches `n` one-page regions, every other page so that none merge, all
/// unreferenced.
fn fill(cache: &mut Rcache<Nop>, n: usize) {
    for i in 0..n {
        let r = cache.get(BASE + 2 * i * PAGE, PAGE).expect("registers");
        cache.put(r);
    }
}

fn hits(c: &mut Criterion) {
    let mut g = c.benchmark_group("rcache/hit");
    for n in [1usize, 1000, 100_000] {
        let mut cache = cache(usize::MAX);
        fill(&mut cache, n);
        // 256 bytes inside each region, visited in a scattered order.
        let addrs: Vec<usize> = (0..n)
            .map(|k| BASE + 2 * (k * 7919 % n) * PAGE + 64)
            .collect();
        g.bench_with_input(BenchmarkId::from_parameter(n), &addrs, |b, addrs| {
            let mut i = 0;
            b.iter(|| {
                let r = cache.get(black_box(addrs[i]), 256).expect("hit");
                black_box(cache.handle(r));
                cache.put(r);
                i += 1;
                if i == addrs.len() {
                    i = 0;
                }
            })
        });
        assert_eq!(cache.stats().misses, n as u64, "every lookup hit");
    }
    g.finish();
}

fn miss_evict(c: &mut Criterion) {
    const MAX: usize = 1024;
    let mut cache = cache(MAX);
    fill(&mut cache, MAX);
    let mut next = MAX;
    c.bench_function("rcache/miss_evict_1k", |b| {
        b.iter(|| {
            let r = cache
                .get(black_box(BASE + 2 * next * PAGE), PAGE)
                .expect("registers");
            black_box(cache.handle(r));
            cache.put(r);
            next += 1;
        })
    });
    let s = cache.stats();
    assert_eq!((s.regions, s.evictions), (MAX, s.misses - MAX as u64));
}

// The macro generates an undocumented `pub fn benches`.
#[allow(missing_docs)]
mod group {
    criterion::criterion_group!(benches, super::hits, super::miss_evict);
}
criterion_main!(group::benches);
