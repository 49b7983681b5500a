//! Random gets, puts and invalidations over 64 pages, checked after every
//! step against what the callers hold and what the registrar has live.

use super::*;
use proptest::prelude::*;
use proptest::sample::Index;

/// Start of the address space under test.
const BASE: usize = 1 << 40;
/// Pages in it.
const PAGES: usize = 64;

#[derive(Debug, Clone)]
enum Op {
    Get {
        page: usize,
        off: usize,
        len: usize,
    },
    Put(Index),
    /// Puts a reference no caller holds any more.
    PutAgain(Index),
    Invalidate {
        page: usize,
        pages: usize,
    },
    /// The registrar refuses its next registration.
    FailNext,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        6 => (0..PAGES, 0..P, 1..6 * P).prop_map(|(page, off, len)| Op::Get { page, off, len }),
        5 => any::<Index>().prop_map(Op::Put),
        1 => any::<Index>().prop_map(Op::PutAgain),
        1 => (0..PAGES, 1..8usize).prop_map(|(page, pages)| Op::Invalidate { page, pages }),
        1 => Just(Op::FailNext),
    ]
}

fn limit(max_pages: usize) -> impl Strategy<Value = usize> {
    prop_oneof![1..max_pages, Just(usize::MAX)]
}

/// A reference some caller holds.
#[derive(Debug)]
struct Held {
    r: RegionRef,
    /// The requested range, aligned.
    start: usize,
    end: usize,
    /// An invalidation covered part of the region since the get.
    invalidated: bool,
}

struct Harness {
    c: Rcache<Counting>,
    live: Rc<RefCell<Live>>,
    held: Vec<Held>,
    put: Vec<RegionRef>,
}

impl Harness {
    fn get(&mut self, addr: usize, len: usize) {
        let (start, end) = (addr / P * P, (addr + len).div_ceil(P) * P);
        let hit = self
            .c
            .cached
            .values()
            .any(|&id| self.c.region(id).start <= start && self.c.region(id).end >= end);
        let will_fail = !hit && self.live.borrow().fail_next;
        let (before, registered) = (self.c.stats(), self.live.borrow().next);
        match self.c.get(addr, len) {
            Ok(r) => {
                assert!(!will_fail);
                let after = self.c.stats();
                assert_eq!(after.hits, before.hits + u64::from(hit));
                assert_eq!(self.live.borrow().next, registered + u64::from(!hit));
                self.held.push(Held {
                    r,
                    start,
                    end,
                    invalidated: false,
                });
            }
            Err(RcacheError::Register(_)) => {
                assert!(will_fail);
                assert_eq!(self.c.stats().regions, before.regions);
            }
            Err(e) => panic!("{e}"),
        }
    }

    fn invalidate(&mut self, addr: usize, len: usize) {
        for h in &mut self.held {
            let i = self.c.region_info(h.r).unwrap();
            h.invalidated |= i.start < addr + len && addr < i.start + i.len;
        }
        self.c.invalidate(addr, len);
    }

    fn check(&mut self) {
        check(&mut self.c, &self.live);
        for h in &self.held {
            let i = self.c.region_info(h.r).expect("held regions live");
            assert!(
                i.start <= h.start && i.start + i.len >= h.end,
                "{h:?} {i:?}"
            );
            assert_eq!(i.valid, !h.invalidated, "{h:?}");
            let refs = self.held.iter().filter(|o| o.r == h.r).count();
            assert_eq!(i.refs, refs);
        }
        if self.held.is_empty() {
            let s = self.c.stats();
            let config = self.c.config();
            assert!(s.bytes <= config.max_size && s.regions <= config.max_regions);
        }
    }
}

proptest! {
    #[test]
    fn cache_agrees_with_the_model(
        max_size in limit(16),
        max_regions in limit(6),
        ops in proptest::collection::vec(op(), 1..200),
    ) {
        let (c, live) = cache(max_size.saturating_mul(P), max_regions);
        let mut t = Harness { c, live, held: Vec::new(), put: Vec::new() };
        for op in ops {
            match op {
                Op::Get { page, off, len } => t.get(BASE + page * P + off, len),
                Op::Put(i) if !t.held.is_empty() => {
                    let h = t.held.swap_remove(i.index(t.held.len()));
                    t.c.put(h.r);
                    t.put.push(h.r);
                }
                Op::PutAgain(i) if !t.put.is_empty() => {
                    let r = *i.get(&t.put);
                    if t.held.iter().all(|h| h.r != r) {
                        t.c.put(r);
                    }
                }
                Op::Invalidate { page, pages } => t.invalidate(BASE + page * P, pages * P),
                Op::FailNext => t.live.borrow_mut().fail_next = true,
                Op::Put(_) | Op::PutAgain(_) => {}
            }
            t.check();
        }
        for h in std::mem::take(&mut t.held) {
            t.c.put(h.r);
        }
        t.c.invalidate(BASE, 2 * PAGES * P);
        t.check();
        prop_assert!(t.live.borrow().live.is_empty());
        prop_assert_eq!(t.c.stats().bytes, 0);
    }
}
