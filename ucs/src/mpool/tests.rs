//! Tests of the pools.

use super::*;
use std::collections::HashSet;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

#[test]
fn mpool_reuses_and_keeps_state() {
    let made = Arc::new(AtomicUsize::new(0));
    let m = made.clone();
    let mut pool = Mpool::new(MpoolParams::new("t").elems_per_chunk(4), move || {
        m.fetch_add(1, Ordering::Relaxed);
        Vec::<u8>::new()
    });
    assert_eq!(made.load(Ordering::Relaxed), 0, "nothing made before get");
    let (a, v) = pool.get_entry().unwrap();
    v.extend_from_slice(b"hello");
    assert_eq!(made.load(Ordering::Relaxed), 4, "one chunk");
    assert!(pool.put(a));
    let b = pool.get().unwrap();
    assert_eq!(b, a, "LIFO reuse");
    assert_eq!(pool.get_ref(b).unwrap(), b"hello", "state kept");
    assert_eq!(pool.capacity(), 4);
    assert_eq!(pool.in_use(), 1);
}

#[test]
fn mpool_limit_and_growth() {
    let mut pool =
        Mpool::<u64>::with_default(MpoolParams::new("t").elems_per_chunk(2).max_elems(5));
    let got: Vec<_> = std::iter::from_fn(|| pool.get()).collect();
    assert_eq!(got.len(), 5);
    assert_eq!(pool.capacity(), 5);
    assert_eq!(pool.get(), None);
    assert!(pool.put(got[3]));
    assert_eq!(pool.get(), Some(got[3]));
    assert_eq!(pool.get(), None);
}

#[test]
fn mpool_no_double_handout() {
    let mut pool = Mpool::<u32>::with_default(MpoolParams::new("t").elems_per_chunk(8));
    let mut seen = HashSet::new();
    let mut out = Vec::new();
    for round in 0..10u32 {
        for _ in 0..7 {
            let (i, v) = pool.get_entry().unwrap();
            assert!(seen.insert(i), "{i:?} handed out twice");
            *v = round;
            out.push(i);
        }
        // Put back every other one.
        let keep: Vec<_> = out
            .iter()
            .copied()
            .enumerate()
            .filter(|(n, _)| n % 2 == 0)
            .collect();
        for (_, i) in keep {
            assert!(pool.put(i));
            assert!(!pool.put(i), "double put refused");
            seen.remove(&i);
        }
        out.retain(|i| seen.contains(i));
    }
    assert_eq!(pool.in_use(), seen.len());
}

#[test]
fn mpool_refuses_foreign_indices() {
    let mut pool = Mpool::<u8>::with_default(MpoolParams::new("t"));
    let i = pool.get().unwrap();
    let forged = MpoolIdx::from_u32(1000);
    assert!(pool.get_mut(forged).is_none());
    assert!(
        pool.get_ref(MpoolIdx::from_u32(1)).is_none(),
        "made but free"
    );
    assert!(!pool.put(forged));
    assert_eq!(MpoolIdx::from_u32(i.as_u32()), i);
    *pool.get_mut(i).unwrap() = 7;
    assert!(pool.put(i));
    assert!(pool.get_mut(i).is_none(), "put back");
}

#[test]
fn mpool_objects_do_not_move() {
    let mut pool = Mpool::<[u8; 32]>::with_default(MpoolParams::new("t").elems_per_chunk(2));
    let a = pool.get().unwrap();
    let addr = pool.get_ref(a).unwrap().as_ptr();
    for _ in 0..100 {
        pool.get().unwrap();
    }
    assert_eq!(pool.get_ref(a).unwrap().as_ptr(), addr);
}

#[test]
fn mpool_reserve() {
    let mut pool =
        Mpool::<u8>::with_default(MpoolParams::new("t").elems_per_chunk(4).max_elems(10));
    pool.reserve(5);
    assert_eq!(pool.capacity(), 8, "whole chunks");
    pool.reserve(100);
    assert_eq!(pool.capacity(), 10);
    assert_eq!(pool.in_use(), 0);
    assert!(format!("{pool:?}").contains("capacity: 10"));
}

#[test]
fn bufpool_recycles() {
    let mut pool = BufPool::new(MpoolParams::new("b").max_elems(2), 64);
    let mut a = pool.take().unwrap();
    assert!(a.is_empty() && a.capacity() >= 64);
    a.extend_from_slice(&[1; 64]);
    let ptr = a.as_ptr();
    let b = pool.take_copy(b"abc").unwrap();
    assert_eq!(b, b"abc");
    assert!(pool.take().is_none(), "limit");
    pool.give(a);
    assert_eq!(pool.outstanding(), 1);
    let c = pool.take().unwrap();
    assert!(c.is_empty(), "cleared");
    assert_eq!(c.as_ptr(), ptr, "same allocation");
    assert!(pool.take_copy(&[0; 65]).is_none(), "too long");
    pool.give(b);
    pool.give(c);
    assert_eq!(pool.free_count(), 2);
}

#[test]
fn bufpool_drops_odd_buffers() {
    let mut pool = BufPool::new(MpoolParams::new("b"), 64);
    pool.give(Vec::with_capacity(8));
    pool.give(Vec::with_capacity(1 << 20));
    assert_eq!(pool.free_count(), 0);
    let mut big = pool.take().unwrap();
    big.extend_from_slice(&[0; 1000]);
    pool.give(big);
    assert_eq!(pool.free_count(), 0);
    pool.prefill(3);
    assert_eq!(pool.free_count(), 3);
    assert_eq!(pool.outstanding(), 0);
}

#[test]
fn chunked_bufpool_slots() {
    let mut pool = ChunkedBufPool::new(MpoolParams::new("c").elems_per_chunk(4).max_elems(6), 16);
    let got: Vec<_> = std::iter::from_fn(|| pool.get()).collect();
    assert_eq!(got.len(), 6);
    for (n, &b) in got.iter().enumerate() {
        let s = pool.buf_mut(b).unwrap();
        assert_eq!(s.len(), 16);
        assert!(s.iter().all(|&x| x == 0));
        s.fill(n as u8);
    }
    for (n, &b) in got.iter().enumerate() {
        assert!(
            pool.buf(b).unwrap().iter().all(|&x| x == n as u8),
            "slots overlap"
        );
    }
    let chunks: Vec<_> = pool.chunks().map(|(first, c)| (first, c.len())).collect();
    assert_eq!(chunks, [(0, 64), (4, 32)]);
    assert_eq!(pool.chunk_of(got[5]), Some((1, 16)));
    assert_eq!(pool.chunk_of(PoolBuf::from_u32(6)), None);
    assert!(pool.put(got[0]));
    assert!(!pool.put(got[0]));
    assert!(pool.buf(got[0]).is_none());
    assert_eq!(pool.get(), Some(got[0]));
    assert_eq!(pool.in_use(), 6);
}

#[test]
fn shared_pool_limit_and_reuse() {
    let pool = SharedMpool::new(MpoolParams::new("s").max_elems(2), || vec![0u8; 4]);
    let mut a = pool.get().unwrap();
    a[0] = 9;
    let b = pool.take().unwrap();
    assert!(pool.get().is_none(), "limit");
    drop(a);
    let a2 = pool.get().unwrap();
    assert_eq!(a2[0], 9, "same object back");
    pool.put(b);
    assert_eq!(pool.free_count(), 1);
    assert_eq!(pool.made(), 2);
    let owned = a2.into_box();
    assert_eq!(pool.free_count(), 1, "detached, not returned");
    pool.put(owned);
    // A foreign object does not fit the full free list and is dropped.
    pool.put(Box::new(vec![1]));
    assert_eq!(pool.free_count(), 2);
    assert_eq!(pool.made(), 1);
}

#[test]
fn shared_pool_across_threads() {
    let pool = Arc::new(SharedMpool::new(MpoolParams::new("s").max_elems(8), || {
        0u64
    }));
    std::thread::scope(|s| {
        for _ in 0..4 {
            let pool = &pool;
            s.spawn(move || {
                for _ in 0..2000 {
                    // At most 4 threads hold 2 each: never beyond 8.
                    let mut a = pool.get().expect("limit is 8");
                    let b = pool.get().expect("limit is 8");
                    *a += 1;
                    drop(b);
                }
            });
        }
    });
    assert!(pool.made() <= 8);
    let total: u64 = std::iter::from_fn(|| pool.take()).map(|b| *b).sum();
    assert_eq!(total, 4 * 2000, "every increment landed in some object");
}

#[test]
fn shared_bufpool() {
    let pool = SharedBufPool::new(MpoolParams::new("sb").max_elems(1), 32);
    let mut a = pool.take().unwrap();
    assert!(a.capacity() >= 32);
    a.push(1);
    assert!(pool.take().is_none());
    pool.give(a);
    let a = pool.take().unwrap();
    assert!(a.is_empty());
    pool.give(Vec::new());
    assert_eq!(
        pool.made(),
        0,
        "a foreign small buffer is dropped and uncounted"
    );
    pool.give(a);
    assert_eq!(pool.free_count(), 1);
}
