//! The context's registration caches, one per (domain, right), shared by
//! its threads under the context's lock, and the list of the threads'
//! front caches that invalidation and the limits reach.

use super::front::{CacheKey, Front, Held, Inserted, NewEntry};
use super::{BufReg, Cached, MdRegistrar};
use crate::ucs::rcache::{Rcache, RcacheConfig, RcacheError, RcacheStats};
use crate::uct::Access;
use crate::{ucs, Context};
use std::sync::Arc;

/// The caches of a context, made on first use, and the fronts of the
/// threads that used them.
#[derive(Debug)]
pub(crate) struct RegCaches {
    config: RcacheConfig,
    caches: Vec<(CacheKey, Rcache<MdRegistrar>)>,
    /// The fronts of live threads.
    fronts: Vec<Arc<Front>>,
    /// Lookups answered by fronts of threads that exited.
    retired_hits: u64,
}

impl RegCaches {
    pub(crate) fn new(cfg: &crate::UcpConfig) -> RegCaches {
        RegCaches {
            config: RcacheConfig {
                max_size: cfg.rcache_max_size.usize_or(usize::MAX),
                max_regions: cfg.rcache_max_regions.usize_or(usize::MAX),
                ..RcacheConfig::default()
            },
            caches: Vec::new(),
            fronts: Vec::new(),
            retired_hits: 0,
        }
    }

    /// Registers `len` bytes at `ptr` with domain `md` for `access`
    /// through the shared cache (a miss of `front`, which keeps the region
    /// if it can).
    ///
    /// # Safety
    ///
    /// As `MemoryDomain::mem_reg`: the memory stays valid until the
    /// registration is released and until it is invalidated.
    #[allow(unsafe_code)]
    pub(super) unsafe fn register(
        &mut self,
        ctx: &Context,
        front: Option<Arc<Front>>,
        md: usize,
        ptr: *mut u8,
        len: usize,
        access: Access,
    ) -> ucs::Result<BufReg> {
        let key = (md, access);
        let ci = match self.caches.iter().position(|(k, _)| *k == key) {
            Some(i) => i,
            None => {
                let r = MdRegistrar {
                    md: ctx
                        .md_arc(md)
                        .ok_or_else(|| ucs::Error::InvalidParam("no memory domain".into()))?,
                    access,
                };
                self.caches.push((key, Rcache::new(r, self.config)));
                self.caches.len() - 1
            }
        };
        let cache = &mut self.caches[ci].1;
        let region = cache.get(ptr as usize, len).map_err(|e| match e {
            RcacheError::Register(e) => e,
            e => ucs::Error::InvalidParam(e.to_string()),
        })?;
        let (memh, info) = match (cache.handle(region).cloned(), cache.region_info(region)) {
            (Some(h), Some(i)) => (h, i),
            _ => {
                cache.put(region);
                return Err(ucs::Error::InvalidParam(
                    "registration cache: region gone".into(),
                ));
            }
        };
        if cache.over_limits() {
            // What the fronts keep unused is what the cache could evict.
            self.give_back_unused(ci);
        }
        let held = (ci, region);
        let front = front.filter(|f| {
            let kept = f.insert(NewEntry {
                key,
                held,
                start: info.start,
                end: info.start + info.len,
                memh: memh.clone(),
            });
            match kept {
                Inserted::Kept(replaced) => {
                    if let Some(r) = replaced {
                        self.put(r);
                    }
                    true
                }
                Inserted::No => false,
            }
        });
        Ok(BufReg {
            md,
            memh,
            cached: Some(Cached { front, held }),
            more: Vec::new(),
        })
    }

    /// Gives back one reference on a region.
    pub(super) fn put(&mut self, (ci, region): Held) {
        if let Some((_, c)) = self.caches.get_mut(ci) {
            c.put(region);
        }
    }

    /// Takes the unused entries of cache `ci` from every front back.
    fn give_back_unused(&mut self, ci: usize) {
        let held: Vec<Held> = self.fronts.iter().flat_map(|f| f.take_unused(ci)).collect();
        for h in held {
            self.put(h);
        }
    }

    /// Forgets every cached registration overlapping the range, in every
    /// front and cache.
    pub(crate) fn invalidate(&mut self, addr: usize, len: usize) {
        if len == 0 {
            return;
        }
        let end = addr.saturating_add(len);
        let held: Vec<Held> = self
            .fronts
            .iter()
            .flat_map(|f| f.invalidate(addr, end))
            .collect();
        for h in held {
            self.put(h);
        }
        for (_, c) in &mut self.caches {
            c.invalidate(addr, len);
        }
    }

    /// The counters of all caches, summed, with the lookups the fronts
    /// answered counted as hits.
    pub(crate) fn stats(&self) -> RcacheStats {
        let mut s = RcacheStats::default();
        for (_, c) in &self.caches {
            s += c.stats();
        }
        s.hits += self.retired_hits + self.fronts.iter().map(|f| f.hits()).sum::<u64>();
        s
    }

    /// Lists a new thread's front.
    pub(super) fn add_front(&mut self, f: Arc<Front>) {
        self.fronts.push(f);
    }

    /// A thread exited: its front leaves the list and gives back what it
    /// does not use.
    pub(super) fn retire(&mut self, f: &Arc<Front>) {
        self.fronts.retain(|x| !Arc::ptr_eq(x, f));
        let (held, hits) = f.retire();
        self.retired_hits += hits;
        for h in held {
            self.put(h);
        }
    }

    /// Fronts listed.
    #[cfg(test)]
    pub(super) fn fronts(&self) -> usize {
        self.fronts.len()
    }
}
