//! Tag matcher micro-benchmarks: one message matched per iteration on the
//! expected path (post, then arrive) and the unexpected path (arrive finds
//! nothing, queue the message, then post), with 0 / 100 / 1000 other exact
//! receives posted under other tags (which mostly land in other buckets; a
//! few share the measured tag's bucket, as in real use), and with a
//! non-matching wildcard receive posted, which takes arrivals off the
//! bucket-only fast path.

use std::hint::black_box;

use criterion::{criterion_main, BenchmarkId, Criterion};
use rucx::ucp::tag::{PostOutcome, TagMatcher};

const ALL: u64 = u64::MAX;
/// Source rank in the high 32 bits, user tag in the low 32.
const SRC_MASK: u64 = !0xffff_ffff;
const TAG: u64 = (1 << 32) | 77;

type M = TagMatcher<u64, u64>;

fn setup(others: u64, wildcard: bool) -> M {
    let mut m = M::new();
    for i in 0..others {
        let tag = (2 << 32) | (1000 + i);
        assert!(matches!(m.post(tag, ALL, i), PostOutcome::Queued(_)));
    }
    if wildcard {
        // Any tag from source 9, which never sends here.
        assert!(matches!(
            m.post(9 << 32, SRC_MASK, 0),
            PostOutcome::Queued(_)
        ));
    }
    m
}

fn expected_path(c: &mut Criterion) {
    let mut g = c.benchmark_group("tag_match/expected");
    for (others, wildcard) in [
        (0, false),
        (100, false),
        (1000, false),
        (0, true),
        (1000, true),
    ] {
        let name = if wildcard { "wildcard_posted" } else { "exact" };
        g.bench_with_input(BenchmarkId::new(name, others), &others, |b, &others| {
            let mut m = setup(others, wildcard);
            b.iter(|| {
                let posted = m.post(black_box(TAG), ALL, 1);
                black_box(&posted);
                black_box(m.arrive(black_box(TAG)))
            });
        });
    }
    g.bench_function("wildcard_recv_matched", |b| {
        let mut m = setup(0, false);
        b.iter(|| {
            let posted = m.post(black_box(1 << 32), SRC_MASK, 1);
            black_box(&posted);
            black_box(m.arrive(black_box(TAG)))
        });
    });
    g.finish();
}

fn unexpected_path(c: &mut Criterion) {
    let mut g = c.benchmark_group("tag_match/unexpected");
    for (others, wildcard) in [
        (0, false),
        (100, false),
        (1000, false),
        (0, true),
        (1000, true),
    ] {
        let name = if wildcard { "wildcard_posted" } else { "exact" };
        g.bench_with_input(BenchmarkId::new(name, others), &others, |b, &others| {
            let mut m = setup(others, wildcard);
            b.iter(|| {
                let tag = black_box(TAG);
                if m.arrive(tag).is_none() {
                    m.push_unexpected(tag, 5);
                }
                black_box(m.post(tag, ALL, 1))
            });
        });
    }
    g.bench_function("wildcard_recv_100_queued", |b| {
        // A wildcard receive scans the global arrival list: 100 messages
        // from other sources are queued ahead of the one it takes.
        let mut m = setup(0, false);
        for i in 0..100 {
            m.push_unexpected((3 << 32) | i, i);
        }
        b.iter(|| {
            m.push_unexpected(black_box(TAG), 5);
            black_box(m.post(black_box(1 << 32), SRC_MASK, 1))
        });
    });
    g.finish();
}

// The macro generates an undocumented `pub fn benches`.
#[allow(missing_docs)]
mod group {
    criterion::criterion_group!(benches, super::expected_path, super::unexpected_path);
}
criterion_main!(group::benches);
