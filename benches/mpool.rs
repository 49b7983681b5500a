//! Pool get/put against the allocator.
//!
//! `cargo bench --bench mpool`; `-- --test` runs each once as a smoke test.

use criterion::{criterion_main, Criterion};
use rucx_ucs::mpool::{BufPool, Mpool, MpoolParams, SharedBufPool, SharedMpool};
use std::hint::black_box;

/// A request-sized object.
type Obj = [u64; 16];

fn objects(c: &mut Criterion) {
    let mut g = c.benchmark_group("object");

    let mut pool = Mpool::new(MpoolParams::new("bench"), || [0u64; 16]);
    pool.reserve(64);
    g.bench_function("mpool_get_put", |b| {
        b.iter(|| {
            let (i, obj) = pool.get_entry().expect("unlimited pool");
            obj[0] = black_box(1);
            black_box(pool.put(i))
        })
    });

    g.bench_function("box_new_drop", |b| {
        b.iter(|| {
            let mut obj: Box<Obj> = Box::new([0u64; 16]);
            obj[0] = black_box(1);
            drop(black_box(obj))
        })
    });

    let shared = SharedMpool::new(MpoolParams::new("bench"), || [0u64; 16]);
    g.bench_function("shared_get_put", |b| {
        b.iter(|| {
            let mut obj = shared.get().expect("unlimited pool");
            obj[0] = black_box(1);
            drop(obj)
        })
    });
    g.finish();
}

fn buffers(c: &mut Criterion) {
    const SIZE: usize = 8192;
    // A slice of unknown length, as a message is: the copy is a `memcpy`
    // call in every variant.
    let data: &[u8] = &[7u8; 256];
    let mut g = c.benchmark_group("buffer_8k");

    let mut pool = BufPool::new(MpoolParams::new("bench"), SIZE);
    pool.prefill(4);
    g.bench_function("bufpool_take_copy_give", |b| {
        b.iter(|| {
            let buf = pool.take_copy(black_box(data)).expect("unlimited pool");
            pool.give(black_box(buf))
        })
    });

    g.bench_function("vec_with_capacity_drop", |b| {
        b.iter(|| {
            let mut buf = Vec::with_capacity(SIZE);
            buf.extend_from_slice(black_box(data));
            drop(black_box(buf))
        })
    });

    let shared = SharedBufPool::new(MpoolParams::new("bench"), SIZE);
    g.bench_function("shared_bufpool_take_give", |b| {
        b.iter(|| {
            let mut buf = shared.take().expect("unlimited pool");
            buf.extend_from_slice(black_box(data));
            shared.give(black_box(buf))
        })
    });
    g.finish();
}

// The macro generates an undocumented `pub fn benches`.
#[allow(missing_docs)]
mod group {
    criterion::criterion_group!(benches, super::objects, super::buffers);
}
criterion_main!(group::benches);
