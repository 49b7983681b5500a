//! Front caches in front of the shared registration caches: lookups,
//! limits, invalidation from other threads (also racing with lookups),
//! threads that exit.

use super::front::FRONT_ENTRIES;
use super::BufReg;
use crate::uct::Access;
use crate::{Context, UcpConfig};
use std::collections::HashSet;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc, RwLock};

const READ: Access = Access::REMOTE_READ;

/// A context over the `self` transport caching every registration.
fn context(extra: &[(&str, &str)]) -> Context {
    let cfg = UcpConfig::from_lookup(|k| match k {
        "RUCX_RCACHE_ENABLE" => Some("yes".to_string()),
        _ => extra
            .iter()
            .find(|(n, _)| *n == k)
            .map(|(_, v)| v.to_string()),
    })
    .expect("config");
    let registry = crate::uct::Registry::new().with(&crate::uct::self_tl::COMPONENT);
    let ctx = Context::with_registry(cfg, &registry).expect("context");
    assert!(ctx.md_cached(0), "the self domain is cached");
    ctx
}

fn page() -> usize {
    crate::ucs::sys::page_size()
}

/// `n` one-page slices of one allocation, each with a page of gap on
/// both sides (so their regions neither overlap nor touch).
struct Pages(Vec<u8>);

impl Pages {
    fn new(n: usize) -> Pages {
        Pages(vec![0; (2 * n + 2) * page()])
    }

    /// Start of slice `i`, page-aligned.
    fn at(&self, i: usize) -> usize {
        let base = self.0.as_ptr() as usize;
        base.div_ceil(page()) * page() + (2 * i + 1) * page()
    }
}

fn register(ctx: &Context, addr: usize, len: usize) -> BufReg {
    // SAFETY: the test's buffers outlive their registrations, and are
    // invalidated before they are freed where they were cached.
    #[allow(unsafe_code)]
    unsafe { ctx.register_buffer(0, addr as *mut u8, len, READ, super::Cacheable::Yes) }
        .expect("registers")
}

/// Whether the domain still knows the registration.
fn live(ctx: &Context, r: &BufReg) -> bool {
    ctx.md(0).expect("domain").mkey_pack(&r.memh).is_ok()
}

#[test]
fn a_thread_finds_its_last_regions_in_its_front() {
    let ctx = context(&[]);
    let p = Pages::new(1);
    let first = register(&ctx, p.at(0) + 8, 100);
    let id = first.memh.id;
    ctx.release_buffer(first);
    for _ in 0..3 {
        let again = register(&ctx, p.at(0) + 16, 64);
        assert_eq!(again.memh.id, id, "the same registration");
        assert!(live(&ctx, &again));
        ctx.release_buffer(again);
    }
    let s = ctx.rcache_stats();
    assert_eq!((s.misses, s.hits, s.regions), (1, 3, 1), "{s:?}");
    let front = super::front::this_thread(ctx.reg_caches()).expect("front");
    assert_eq!(front.len(), (1, 0));
    ctx.rcache_invalidate(p.0.as_ptr(), p.0.len());
    assert_eq!(ctx.rcache_stats().regions, 0);
    assert_eq!(front.len(), (0, 0));
}

#[test]
fn invalidation_reaches_the_fronts_of_other_threads() {
    let ctx = context(&[]);
    let p = Pages::new(1);
    let addr = p.at(0);
    let (go, wait) = mpsc::channel::<()>();
    let (tell, hear) = mpsc::channel::<u64>();
    let c = ctx.clone();
    let t = std::thread::spawn(move || {
        let r = register(&c, addr, 256);
        let id = r.memh.id;
        c.release_buffer(r);
        tell.send(id).unwrap();
        wait.recv().unwrap();
        // After the other thread's invalidation: a new registration.
        let r = register(&c, addr, 256);
        assert_ne!(r.memh.id, id, "the invalidated registration came back");
        assert!(live(&c, &r));
        c.release_buffer(r);
        c.rcache_invalidate(addr as *const u8, 256);
    });
    let id = hear.recv().unwrap();
    assert_eq!(ctx.rcache_stats().regions, 1);
    ctx.rcache_invalidate(addr as *const u8, 1);
    let s = ctx.rcache_stats();
    assert_eq!((s.regions, s.invalidations), (0, 1), "{s:?}");
    go.send(()).unwrap();
    t.join().unwrap();
    let s = ctx.rcache_stats();
    assert_eq!((s.misses, s.regions), (2, 0), "{s:?}");
    assert_ne!(id, 0);
}

#[test]
fn entries_invalidated_in_use_end_with_their_last_release() {
    let ctx = context(&[]);
    let p = Pages::new(1);
    let held = register(&ctx, p.at(0), 64);
    let twice = register(&ctx, p.at(0), 64);
    ctx.rcache_invalidate(p.at(0) as *const u8, 64);
    assert!(live(&ctx, &held), "still registered for its transfers");
    let fresh = register(&ctx, p.at(0), 64);
    assert_ne!(fresh.memh.id, held.memh.id);
    assert_eq!(ctx.rcache_stats().regions, 2);
    ctx.release_buffer(held);
    assert!(live(&ctx, &twice));
    let old = twice.memh.clone();
    ctx.release_buffer(twice);
    assert!(ctx.md(0).unwrap().mkey_pack(&old).is_err(), "deregistered");
    ctx.release_buffer(fresh);
    assert_eq!(ctx.rcache_stats().regions, 1);
    ctx.rcache_invalidate(p.0.as_ptr(), p.0.len());
    assert_eq!(ctx.rcache_stats().regions, 0);
}

#[test]
fn the_limits_take_back_what_fronts_keep() {
    let ctx = context(&[("RUCX_RCACHE_MAX_REGIONS", "2")]);
    let p = Pages::new(3);
    for i in 0..3 {
        let r = register(&ctx, p.at(i), 64);
        ctx.release_buffer(r);
    }
    let s = ctx.rcache_stats();
    assert_eq!((s.misses, s.evictions, s.regions), (3, 1, 2), "{s:?}");
    // The newest is still this thread's.
    let r = register(&ctx, p.at(2), 64);
    ctx.release_buffer(r);
    assert_eq!(ctx.rcache_stats().misses, 3);
    ctx.rcache_invalidate(p.0.as_ptr(), p.0.len());
    assert_eq!(ctx.rcache_stats().regions, 0);
}

#[test]
fn a_full_front_leaves_regions_to_their_transfers() {
    let ctx = context(&[]);
    let n = FRONT_ENTRIES + 4;
    let p = Pages::new(n);
    let held: Vec<BufReg> = (0..n).map(|i| register(&ctx, p.at(i), 64)).collect();
    let front = super::front::this_thread(ctx.reg_caches()).expect("front");
    assert_eq!(front.len(), (FRONT_ENTRIES, 0));
    assert_eq!(ctx.rcache_stats().regions, n);
    for r in held {
        ctx.release_buffer(r);
    }
    // One more replaces the least recently used unused entry.
    let q = Pages::new(1);
    let r = register(&ctx, q.at(0), 64);
    ctx.release_buffer(r);
    assert_eq!(front.len(), (FRONT_ENTRIES, 0));
    let s = ctx.rcache_stats();
    assert_eq!((s.misses, s.regions), (n as u64 + 1, n + 1), "{s:?}");
    ctx.rcache_invalidate(p.0.as_ptr(), p.0.len());
    ctx.rcache_invalidate(q.0.as_ptr(), q.0.len());
    assert_eq!(ctx.rcache_stats().regions, 0);
    assert_eq!(front.len(), (0, 0));
}

#[test]
fn threads_that_exit_give_their_entries_back() {
    let ctx = context(&[]);
    let p = Pages::new(2);
    let (a, b) = (p.at(0), p.at(1));
    let c = ctx.clone();
    // One entry unused, one in use by a transfer that outlives the thread.
    let in_use = std::thread::spawn(move || {
        let r = register(&c, a, 64);
        c.release_buffer(r);
        let again = register(&c, a, 64);
        c.release_buffer(again);
        register(&c, b, 64)
    })
    .join()
    .unwrap();
    assert_eq!(ctx.reg_caches().lock().fronts(), 0, "retired");
    let s = ctx.rcache_stats();
    assert_eq!((s.misses, s.hits, s.regions), (2, 1, 2), "{s:?}");
    ctx.rcache_invalidate(a as *const u8, 64);
    assert_eq!(
        ctx.rcache_stats().regions,
        1,
        "the unused one was given back"
    );
    ctx.release_buffer(in_use);
    ctx.rcache_invalidate(b as *const u8, 64);
    assert_eq!(ctx.rcache_stats().regions, 0);
}

#[test]
fn invalidation_races_lookups_from_other_threads() {
    const THREADS: usize = 3;
    const ROUNDS: usize = 200;
    let ctx = context(&[]);
    let p = Arc::new(Pages::new(THREADS));
    // Ids of registrations returned before an invalidation of everything
    // started: none may come back from a lookup that starts after it.
    let forbidden: Arc<RwLock<HashSet<u64>>> = Arc::default();
    let seen: Arc<RwLock<HashSet<u64>>> = Arc::default();
    let stop = Arc::new(AtomicBool::new(false));
    let threads: Vec<_> = (0..THREADS)
        .map(|t| {
            let (ctx, p) = (ctx.clone(), p.clone());
            let (forbidden, seen, stop) = (forbidden.clone(), seen.clone(), stop.clone());
            std::thread::spawn(move || {
                let mut n = 0u64;
                while !stop.load(Ordering::Acquire) {
                    let before = forbidden.read().unwrap().clone();
                    // Its own page, and the neighbour's now and then.
                    let addr = p.at((t + (n % 4 == 0) as usize) % THREADS);
                    let r = register(&ctx, addr + 8 * (n as usize % 16), 64);
                    assert!(
                        !before.contains(&r.memh.id),
                        "an invalidated registration came back"
                    );
                    assert!(live(&ctx, &r), "a lookup returned a dead registration");
                    seen.write().unwrap().insert(r.memh.id);
                    ctx.release_buffer(r);
                    n += 1;
                }
                n
            })
        })
        .collect();
    for _ in 0..ROUNDS {
        let snapshot = seen.read().unwrap().clone();
        ctx.rcache_invalidate(p.0.as_ptr(), p.0.len());
        forbidden.write().unwrap().extend(snapshot);
        std::thread::yield_now();
    }
    stop.store(true, Ordering::Release);
    let lookups: u64 = threads.into_iter().map(|t| t.join().unwrap()).sum();
    ctx.rcache_invalidate(p.0.as_ptr(), p.0.len());
    let s = ctx.rcache_stats();
    assert_eq!(s.hits + s.misses, lookups, "{s:?}");
    assert_eq!(
        (s.regions, s.bytes),
        (0, 0),
        "every reference given back: {s:?}"
    );
}
