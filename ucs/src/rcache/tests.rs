//! Tests of the registration cache, over a registrar that records what is
//! registered.

use super::*;
use std::cell::RefCell;
use std::collections::BTreeMap;
use std::rc::Rc;

mod model;

/// The alignment of every test cache.
const P: usize = 4096;

/// What a [`Counting`] registrar has registered.
#[derive(Debug, Default)]
struct Live {
    next: u64,
    /// Handle to (addr, len).
    live: BTreeMap<u64, (usize, usize)>,
    /// Refuse the next registration.
    fail_next: bool,
    /// Deregistered ranges, in order.
    gone: Vec<(usize, usize)>,
}

/// A registrar whose state the test keeps a hand on.
#[derive(Debug, Clone, Default)]
struct Counting(Rc<RefCell<Live>>);

impl Registrar for Counting {
    type Handle = u64;
    type Error = &'static str;

    fn register(&mut self, addr: usize, len: usize) -> Result<u64, &'static str> {
        let mut s = self.0.borrow_mut();
        if std::mem::take(&mut s.fail_next) {
            return Err("refused");
        }
        assert!(
            len > 0 && addr % P == 0 && len % P == 0,
            "{addr:#x}+{len:#x}"
        );
        s.next += 1;
        let h = s.next;
        s.live.insert(h, (addr, len));
        Ok(h)
    }

    fn deregister(&mut self, h: u64) {
        let mut s = self.0.borrow_mut();
        let range = s
            .live
            .remove(&h)
            .expect("deregistered once, after register");
        s.gone.push(range);
    }
}

fn cache(max_size: usize, max_regions: usize) -> (Rcache<Counting>, Rc<RefCell<Live>>) {
    let reg = Counting::default();
    let live = reg.0.clone();
    let config = RcacheConfig {
        max_size,
        max_regions,
        alignment: P,
    };
    (Rcache::new(reg, config), live)
}

fn unlimited() -> (Rcache<Counting>, Rc<RefCell<Live>>) {
    cache(usize::MAX, usize::MAX)
}

/// (start, len) of `r`'s region, in pages.
fn pages(c: &Rcache<Counting>, r: RegionRef) -> (usize, usize) {
    let i = c.region_info(r).expect("live region");
    (i.start / P, i.len / P)
}

/// Gets and puts pages `[first, first + n)`.
fn touch(c: &mut Rcache<Counting>, first: usize, n: usize) -> RegionRef {
    let r = c.get(first * P, n * P).unwrap();
    c.put(r);
    r
}

impl<R: Registrar> Rcache<R> {
    /// Checks the invariants of the module doc; returns the live regions as
    /// handle to (start, len).
    fn check(&mut self) -> Vec<(&R::Handle, (usize, usize))> {
        let mut prev_end = None;
        for (&start, &id) in &self.cached {
            let r = self.region(id);
            assert_eq!((r.start, r.state), (start, State::Cached));
            assert!(r.start < r.end);
            assert!(prev_end.is_none_or(|e| e < start), "disjoint, not adjacent");
            prev_end = Some(r.end);
        }
        let mut unreferenced = Vec::new();
        let mut bytes = 0;
        for (id, r) in self.regions.iter() {
            bytes += r.end - r.start;
            match r.state {
                State::Cached => assert_eq!(self.cached.get(&r.start), Some(&id)),
                State::Superseded => assert!(self.superseded.contains(&id) && r.refs > 0),
                State::Invalid => assert!(!self.superseded.contains(&id) && r.refs > 0),
            }
            if r.refs == 0 {
                unreferenced.push(id);
            }
        }
        assert_eq!(bytes, self.bytes);
        let mut lru = self.lru.ids(&mut self.regions);
        assert_eq!(lru.len(), self.lru.len());
        lru.sort();
        assert_eq!(lru, unreferenced, "the LRU list holds the unreferenced");
        let within =
            self.bytes <= self.config.max_size && self.regions.len() <= self.config.max_regions;
        assert!(
            within || lru.is_empty(),
            "over the limits with evictable regions"
        );
        self.regions
            .iter()
            .map(|(_, r)| (&r.handle, (r.start, r.end - r.start)))
            .collect()
    }
}

/// Checks `c` and that `live` holds exactly its registrations.
fn check(c: &mut Rcache<Counting>, live: &Rc<RefCell<Live>>) {
    let ours: BTreeMap<u64, (usize, usize)> = c.check().into_iter().map(|(&h, r)| (h, r)).collect();
    assert_eq!(ours, live.borrow().live, "registrar and cache agree");
}

#[test]
fn hit_inside_a_cached_region() {
    let (mut c, live) = unlimited();
    let a = c.get(P + 10, 100).unwrap();
    assert_eq!(pages(&c, a), (1, 1));
    let b = c.get(P + 200, 50).unwrap();
    assert_eq!(a, b);
    assert_eq!(c.region_info(a).unwrap().refs, 2);
    assert_eq!(c.handle(a), Some(&1));
    c.put(a);
    c.put(b);
    let d = c.get(P, P).unwrap();
    assert_eq!(d, a, "still cached when unreferenced");
    assert_eq!(live.borrow().live.len(), 1);
    let s = c.stats();
    assert_eq!((s.hits, s.misses, s.regions, s.bytes), (2, 1, 1, P));
    check(&mut c, &live);
}

#[test]
fn ranges_are_widened_to_the_alignment() {
    let (mut c, live) = unlimited();
    let a = c.get(P - 1, 2).unwrap();
    assert_eq!(pages(&c, a), (0, 2));
    assert_eq!(live.borrow().live[&1], (0, 2 * P));
}

#[test]
fn miss_merges_overlapping_regions() {
    let (mut c, live) = unlimited();
    touch(&mut c, 0, 2);
    let b = c.get(P, 2 * P).unwrap();
    assert_eq!(pages(&c, b), (0, 3));
    assert_eq!(live.borrow().gone, [(0, 2 * P)]);
    let s = c.stats();
    assert_eq!((s.misses, s.merges, s.regions, s.bytes), (2, 1, 1, 3 * P));
    check(&mut c, &live);
}

#[test]
fn miss_merges_adjacent_regions_on_both_sides() {
    let (mut c, live) = unlimited();
    touch(&mut c, 0, 1);
    touch(&mut c, 2, 1);
    touch(&mut c, 5, 1);
    let b = c.get(P, P).unwrap();
    assert_eq!(pages(&c, b), (0, 3), "page 5 is not adjacent");
    assert_eq!(c.stats().merges, 2);
    assert_eq!(c.stats().regions, 2);
    check(&mut c, &live);
}

#[test]
fn referenced_region_stays_with_its_holder_when_merged() {
    let (mut c, live) = unlimited();
    let a = c.get(0, P).unwrap();
    let b = c.get(P, P).unwrap();
    assert_eq!(pages(&c, b), (0, 2), "the new region covers the held one");
    assert_eq!(pages(&c, a), (0, 1));
    assert!(c.region_info(a).unwrap().valid);
    assert_eq!(c.handle(a), Some(&1));
    assert_eq!(c.get(0, P).unwrap(), b, "later gets find the new region");
    assert_eq!(c.stats().regions, 2);
    check(&mut c, &live);
    c.put(a);
    assert_eq!(c.region_info(a), None, "deregistered on its last put");
    assert_eq!(live.borrow().gone, [(0, P)]);
    assert_eq!(c.stats().regions, 1);
    check(&mut c, &live);
}

#[test]
fn referenced_regions_are_not_evicted() {
    let (mut c, live) = cache(usize::MAX, 1);
    let a = c.get(0, P).unwrap();
    assert!(!c.over_limits());
    let b = c.get(4 * P, P).unwrap();
    assert_eq!(c.stats().regions, 2, "over the limit while all are held");
    assert!(c.over_limits());
    check(&mut c, &live);
    c.put(a);
    assert_eq!(c.region_info(a), None, "evicted once unreferenced");
    assert!(!c.over_limits());
    c.put(b);
    assert_eq!(c.region_info(b).unwrap().refs, 0, "within the limit: kept");
    assert_eq!(c.stats().evictions, 1);
    check(&mut c, &live);
}

#[test]
fn lru_eviction_order_under_max_regions() {
    let (mut c, live) = cache(usize::MAX, 2);
    let a = touch(&mut c, 0, 1);
    let b = touch(&mut c, 2, 1);
    let d = touch(&mut c, 4, 1);
    assert_eq!(c.region_info(a), None, "least recently used");
    assert_eq!(touch(&mut c, 2, 1), b, "a hit makes b the most recent");
    touch(&mut c, 6, 1);
    assert_eq!(c.region_info(d), None);
    assert!(c.region_info(b).is_some());
    assert_eq!(live.borrow().gone, [(0, P), (4 * P, P)]);
    assert_eq!(c.stats().evictions, 2);
    check(&mut c, &live);
}

#[test]
fn lru_eviction_order_under_max_size() {
    let (mut c, live) = cache(3 * P, usize::MAX);
    touch(&mut c, 0, 1);
    touch(&mut c, 2, 2);
    touch(&mut c, 5, 1);
    assert_eq!(live.borrow().gone, [(0, P)]);
    touch(&mut c, 7, 2);
    assert_eq!(live.borrow().gone, [(0, P), (2 * P, 2 * P)]);
    assert_eq!(c.stats().bytes, 3 * P);
    let big = c.get(10 * P, 4 * P).unwrap();
    assert_eq!(c.stats().bytes, 4 * P, "only the held region is left");
    c.put(big);
    assert_eq!(c.stats().bytes, 0, "and it goes when put");
    check(&mut c, &live);
}

#[test]
fn invalidate_unreferenced_deregisters_now() {
    let (mut c, live) = unlimited();
    let a = touch(&mut c, 0, 2);
    let far = touch(&mut c, 3, 1);
    c.invalidate(P + 1, 1);
    assert_eq!(c.region_info(a), None);
    assert!(
        c.region_info(far).is_some(),
        "no overlap with the widened range"
    );
    assert_eq!(live.borrow().gone, [(0, 2 * P)]);
    let b = c.get(0, P).unwrap();
    assert_ne!(b, a, "a miss");
    let s = c.stats();
    assert_eq!((s.invalidations, s.misses, s.hits), (1, 3, 0));
    c.invalidate(0, 0);
    c.invalidate(usize::MAX - 1, 10);
    assert!(
        c.region_info(b).is_some(),
        "empty and far ranges touch nothing"
    );
    check(&mut c, &live);
}

#[test]
fn invalidate_referenced_defers_deregistration() {
    let (mut c, live) = unlimited();
    let a = c.get(0, P).unwrap();
    c.invalidate(0, usize::MAX);
    let info = c.region_info(a).unwrap();
    assert!(!info.valid);
    assert_eq!(c.handle(a), Some(&1), "still registered while held");
    let b = c.get(0, P).unwrap();
    assert_ne!(a, b, "never returned again");
    assert_eq!(live.borrow().live.len(), 2);
    check(&mut c, &live);
    c.put(a);
    assert_eq!(c.region_info(a), None);
    assert_eq!(live.borrow().gone, [(0, P)]);
    check(&mut c, &live);
}

#[test]
fn invalidate_reaches_superseded_regions() {
    let (mut c, live) = unlimited();
    let a = c.get(0, P).unwrap();
    let b = c.get(P, P).unwrap();
    let far = c.get(8 * P, P).unwrap();
    c.invalidate(0, 1);
    assert!(!c.region_info(a).unwrap().valid, "the held, superseded one");
    assert!(!c.region_info(b).unwrap().valid, "the one covering it");
    assert!(c.region_info(far).unwrap().valid);
    assert_eq!(c.stats().invalidations, 2);
    check(&mut c, &live);
    for r in [a, b, far] {
        c.put(r);
    }
    c.invalidate(0, usize::MAX);
    assert!(live.borrow().live.is_empty());
    check(&mut c, &live);
}

#[test]
fn stale_refs_find_nothing() {
    let (mut c, live) = cache(usize::MAX, 1);
    let a = touch(&mut c, 0, 1);
    let b = c.get(4 * P, P).unwrap();
    assert_eq!(c.region_info(a), None, "evicted");
    let d = c.get(8 * P, P).unwrap();
    assert_eq!(a.0.index(), d.0.index(), "its slot holds d");
    assert_eq!(c.handle(a), None);
    c.put(a);
    assert_eq!(c.region_info(d).unwrap().refs, 1, "d is untouched");
    c.put(b);
    assert_eq!(c.region_info(b), None, "evicted");
    c.put(b);
    c.put(d);
    c.put(d);
    assert_eq!(c.region_info(d).unwrap().refs, 0, "no underflow");
    assert_eq!(c.get(8 * P, 1).unwrap(), d);
    assert_eq!(c.region_info(d).unwrap().refs, 1);
    check(&mut c, &live);
}

#[test]
fn bad_ranges_are_refused() {
    let (mut c, live) = unlimited();
    let last_page = usize::MAX - P + 1;
    for (addr, len) in [(P, 0), (usize::MAX, 1), (1, usize::MAX), (last_page, 1)] {
        assert!(matches!(c.get(addr, len), Err(RcacheError::Range { .. })));
    }
    let top = c.get(last_page - P, P).unwrap();
    assert_eq!(
        pages(&c, top),
        (usize::MAX / P - 1, 1),
        "the page below fits"
    );
    assert_eq!(c.stats().misses, 1);
    check(&mut c, &live);
}

#[test]
fn failed_registration_leaves_the_cache_unchanged() {
    let (mut c, live) = unlimited();
    let a = touch(&mut c, 0, 1);
    live.borrow_mut().fail_next = true;
    let err = c.get(0, 2 * P).unwrap_err();
    assert!(matches!(err, RcacheError::Register("refused")));
    assert_eq!(err.to_string(), "registration failed: refused");
    assert_eq!(c.get(0, P).unwrap(), a, "a is still cached");
    let s = c.stats();
    assert_eq!((s.misses, s.hits, s.merges, s.regions), (2, 1, 0, 1));
    check(&mut c, &live);
}

#[test]
fn drop_deregisters_everything() {
    let (mut c, live) = unlimited();
    let _held = c.get(0, P).unwrap();
    let _superseding = c.get(P, P).unwrap();
    touch(&mut c, 4, 1);
    let _invalid = c.get(8 * P, P).unwrap();
    c.invalidate(8 * P, P);
    assert_eq!(live.borrow().live.len(), 4);
    drop(c);
    assert!(live.borrow().live.is_empty());
}

#[test]
fn stats_count_each_event() {
    let (mut c, live) = cache(usize::MAX, 2);
    touch(&mut c, 0, 1); // miss
    touch(&mut c, 0, 1); // hit
    touch(&mut c, 1, 1); // miss, merge
    touch(&mut c, 4, 1); // miss
    touch(&mut c, 8, 1); // miss, eviction
    c.invalidate(4 * P, P); // invalidation
    let s = c.stats();
    let want = RcacheStats {
        hits: 1,
        misses: 4,
        merges: 1,
        evictions: 1,
        invalidations: 1,
        regions: 1,
        bytes: P,
    };
    assert_eq!(s, want);
    check(&mut c, &live);
}

#[test]
fn default_config_is_unlimited_pages() {
    let d = RcacheConfig::default();
    assert_eq!(d.alignment, crate::sys::page_size());
    assert_eq!((d.max_size, d.max_regions), (usize::MAX, usize::MAX));
}

#[test]
#[should_panic(expected = "not a power of two")]
fn alignment_must_be_a_power_of_two() {
    let config = RcacheConfig {
        alignment: 3000,
        ..RcacheConfig::default()
    };
    Rcache::new(Counting::default(), config);
}
