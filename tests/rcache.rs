//! The registration cache under rendezvous: with `RUCX_RCACHE_ENABLE=yes`
//! a buffer sent (by get, over shm) or received into (by put, over tcp)
//! again is found registered, the limits evict, invalidation ends
//! registrations; without it nothing is cached.

use rucx::ucp::UcpConfig;
use rucx::{Context, Op, Posted, Worker};

fn context(tls: &str, extra: &[(&str, &str)]) -> Context {
    let cfg = UcpConfig::from_lookup(|k| match k {
        "RUCX_TLS" => Some(tls.to_string()),
        "RUCX_RNDV_THRESH" => Some("16k".to_string()),
        _ => extra
            .iter()
            .find(|(n, _)| *n == k)
            .map(|(_, v)| v.to_string()),
    })
    .expect("config");
    Context::with_config(cfg).expect("context")
}

/// Sends `src` from `a` to `b` with a large-message protocol, both driven.
fn transfer(a: &mut Worker, b: &mut Worker, ep: rucx::Ep, src: &[u8], dst: &mut [u8]) {
    // SAFETY: both buffers outlive the operations, which complete below.
    let r = unsafe { b.tag_recv_raw(dst.as_mut_ptr(), dst.len(), 5, u64::MAX, Op::new()) }.unwrap();
    // SAFETY: as above.
    let s = unsafe { a.tag_send_raw(ep, src.as_ptr(), src.len(), 5, Op::new()) }.unwrap();
    let (mut rs, mut ss) = (r, s);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    loop {
        if let Posted::InFlight(id) = rs {
            if let Some(res) = b.request_test(id) {
                res.expect("receive");
                rs = Posted::Done(
                    rucx::Info {
                        tag: 5,
                        length: dst.len(),
                    },
                    (),
                );
            }
        }
        if let Posted::InFlight(id) = ss {
            if let Some(res) = a.request_test(id) {
                res.expect("send");
                ss = Posted::Done(
                    rucx::Info {
                        tag: 5,
                        length: src.len(),
                    },
                    (),
                );
            }
        }
        if matches!((&rs, &ss), (Posted::Done(..), Posted::Done(..))) {
            break;
        }
        assert!(std::time::Instant::now() < deadline, "transfer timed out");
        a.progress();
        b.progress();
    }
    assert!(src == dst, "data arrived intact");
}

fn cached(tls: &str) {
    let ctx = context(
        tls,
        &[
            ("RUCX_RCACHE_ENABLE", "yes"),
            ("RUCX_RCACHE_MAX_REGIONS", "2"),
            // Only the sender registers: no split with the receiver.
            ("RUCX_RNDV_SPLIT_THRESH", "inf"),
        ],
    );
    let mut a = ctx.create_worker().unwrap();
    let mut b = ctx.create_worker().unwrap();
    let ep = a.connect(&b.address()).unwrap();
    let src: Vec<u8> = (0..300_000u32).map(|i| i as u8).collect();
    let mut dst = vec![0u8; src.len()];
    transfer(&mut a, &mut b, ep, &src, &mut dst);
    let first = ctx.rcache_stats();
    assert_eq!(
        (first.misses, first.hits),
        (1, 0),
        "{tls}: first transfer registers: {first:?}"
    );
    dst.fill(0);
    transfer(&mut a, &mut b, ep, &src, &mut dst);
    let second = ctx.rcache_stats();
    assert_eq!(
        (second.misses, second.hits),
        (1, 1),
        "{tls}: second transfer hits: {second:?}"
    );
    // Two more buffers, with gaps of several pages between them (slices
    // of one allocation: no merging), beyond the limit of two regions.
    let mut big = vec![3u8; 1 << 20];
    let mut big_dst = vec![0u8; 1 << 20];
    for k in 0..2 {
        let r = k * 400_000..k * 400_000 + 300_000;
        big[r.clone()].fill(k as u8 + 1);
        transfer(&mut a, &mut b, ep, &big[r.clone()], &mut big_dst[r]);
    }
    let s = ctx.rcache_stats();
    assert!(
        s.evictions >= 1 && s.regions <= 2,
        "{tls}: limits hold: {s:?}"
    );
    // Invalidation ends what covers the memory.
    for b in [&big, &big_dst, &src, &dst] {
        ctx.rcache_invalidate(b.as_ptr(), b.len());
    }
    let s = ctx.rcache_stats();
    assert!(
        s.invalidations >= 1 && s.regions == 0,
        "{tls}: invalidated: {s:?}"
    );
}

#[test]
fn rendezvous_by_get_reuses_cached_registrations_over_shm() {
    cached("shm");
}

#[test]
fn rendezvous_by_put_reuses_cached_registrations_over_tcp() {
    cached("tcp");
}

#[test]
fn auto_caches_nothing_for_table_domains() {
    let ctx = context("tcp", &[]);
    let mut a = ctx.create_worker().unwrap();
    let mut b = ctx.create_worker().unwrap();
    let ep = a.connect(&b.address()).unwrap();
    let src = vec![7u8; 200_000];
    let mut dst = vec![0u8; src.len()];
    transfer(&mut a, &mut b, ep, &src, &mut dst);
    let s = ctx.rcache_stats();
    assert_eq!((s.misses, s.hits, s.regions), (0, 0, 0), "{s:?}");
}

/// A message of two buffers each way (`Iov`s packed into bounce buffers
/// of the worker's), sent by rendezvous and received into two buffers.
fn iov_transfer(a: &mut Worker, b: &mut Worker, ep: rucx::Ep, len: usize, seed: u8) {
    let half = len / 2;
    let data: Vec<u8> = (0..len).map(|i| (i as u8).wrapping_mul(seed)).collect();
    let out = rucx::dt::Iov::new(vec![data[..half].to_vec(), data[half..].to_vec()]);
    let into = rucx::dt::Iov::new(vec![vec![0u8; half], vec![0u8; len - half]]);
    let r = b.tag_recv_dt(into, 6, u64::MAX, Op::new()).unwrap();
    let s = a.tag_send_dt(ep, out, 6, Op::new()).unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    let id = |p: &Posted<_>| match p {
        Posted::InFlight(id) => Some(*id),
        Posted::Done(..) => None,
    };
    let ids = (id(&r), id(&s));
    while ids.0.is_some_and(|id| b.request_is_active(id))
        || ids.1.is_some_and(|id| a.request_is_active(id))
    {
        assert!(std::time::Instant::now() < deadline, "transfer timed out");
        a.progress();
        b.progress();
    }
    let got = match (r, ids.0) {
        (Posted::Done(_, v), _) => v,
        (_, Some(id)) => b.take::<rucx::dt::Iov<Vec<u8>>>(id).unwrap().unwrap().1,
        _ => unreachable!("a receive is done or in flight"),
    };
    if let Some(id) = ids.1 {
        a.take::<rucx::dt::Iov<Vec<u8>>>(id).unwrap().unwrap();
    }
    assert!(got.into_inner().concat() == data, "data arrived intact");
}

/// Bounce buffers are the worker's, reused or freed without anyone
/// invalidating them: their registrations are never cached, so no stale
/// one outlives them (a later buffer at the same address would otherwise
/// be read or written through the old pages).
fn bounce_buffers_stay_out(tls: &str) {
    let ctx = context(
        tls,
        &[
            ("RUCX_RCACHE_ENABLE", "yes"),
            ("RUCX_RNDV_SPLIT_THRESH", "inf"),
        ],
    );
    let mut a = ctx.create_worker().unwrap();
    let mut b = ctx.create_worker().unwrap();
    let ep = a.connect(&b.address()).unwrap();
    // Sizes past what the worker keeps as spares, so that bounce buffers
    // are freed and their addresses reused.
    for (k, len) in [300_000usize, 600_000, 300_000, 1 << 20]
        .into_iter()
        .enumerate()
    {
        iov_transfer(&mut a, &mut b, ep, len, 3 + 2 * k as u8);
        let s = ctx.rcache_stats();
        assert_eq!((s.misses, s.hits, s.regions), (0, 0, 0), "{tls}: {s:?}");
    }
    // The application's own buffers are still cached.
    let src = vec![9u8; 300_000];
    let mut dst = vec![0u8; src.len()];
    transfer(&mut a, &mut b, ep, &src, &mut dst);
    assert_eq!(ctx.rcache_stats().misses, 1);
    ctx.rcache_invalidate(src.as_ptr(), src.len());
    ctx.rcache_invalidate(dst.as_ptr(), dst.len());
}

#[test]
fn bounce_buffers_are_not_cached_by_get_over_shm() {
    bounce_buffers_stay_out("shm");
}

#[test]
fn bounce_buffers_are_not_cached_by_put_over_tcp() {
    bounce_buffers_stay_out("tcp");
}
