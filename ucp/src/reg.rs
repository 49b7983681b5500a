//! Registration of user buffers for rendezvous, through a registration
//! cache where that pays.
//!
//! A rendezvous registers the sender's buffer for remote reads (by get) or
//! the receiver's for remote writes (by put). Without a cache each transfer
//! registers and deregisters. With one ([`RcacheMode`]), the context keeps
//! one [`Rcache`](crate::ucs::rcache::Rcache) per memory domain and
//! right, shared by its workers: registrations cover whole pages, merge
//! with their neighbours and outlive the transfer, until evicted
//! (`RUCX_RCACHE_MAX_SIZE`, `RUCX_RCACHE_MAX_REGIONS`) or invalidated.
//!
//! In front of the shared caches each thread keeps a few regions it used
//! last ([`front`]): workers driven by different threads find their
//! buffers there without taking the context's lock.
//!
//! What a cached registration means for the application: the peer that got
//! its key can reach the registered pages (the buffer and what shares its
//! pages) with that right until the region is evicted or invalidated. The
//! cache does not watch `free` or `munmap`: before memory that took part in
//! a rendezvous goes back to the system (or changes hands), the
//! application calls [`crate::Context::rcache_invalidate`] on it, as memory
//! mapped through rucx is invalidated by [`crate::MemMap`] when unmapped.
//! `auto` therefore uses a cache only for domains whose registration is
//! costly (pinning, as RDMA devices do); this host's domains register in
//! a table lookup and keep the per-transfer registration.

mod front;
mod shared;
#[cfg(test)]
mod tests;

pub(crate) use shared::RegCaches;

use crate::ucs::rcache::Registrar;
use crate::uct::{Access, MemHandle, MemoryDomain};
use crate::{ucs, Context};
use front::Front;
use std::sync::Arc;

crate::ucs::config_enum! {
    /// Whether rendezvous registrations go through a registration cache
    /// (like `UCX_RCACHE_ENABLE`).
    pub enum RcacheMode {
        /// For memory domains whose registration costs 1 µs or more.
        Auto = "auto",
        /// For every memory domain that registers.
        Yes = "yes",
        /// Never: each transfer registers and deregisters.
        No = "no",
    }
}

/// Registration cost from which `auto` caches, seconds.
const AUTO_MIN_COST: f64 = 1e-6;

/// Registers with one memory domain, with one right.
#[derive(Debug)]
pub(crate) struct MdRegistrar {
    md: Arc<dyn MemoryDomain>,
    access: Access,
}

impl Registrar for MdRegistrar {
    type Handle = MemHandle;
    type Error = ucs::Error;

    fn register(&mut self, addr: usize, len: usize) -> ucs::Result<MemHandle> {
        // SAFETY: the cache registers whole pages of a buffer a rendezvous
        // holds; the pages stay mapped until the application invalidates
        // them (this module's contract, documented on `RcacheMode` and
        // `Context::rcache_invalidate`), and invalidation deregisters.
        #[allow(unsafe_code)]
        unsafe {
            self.md.mem_reg(addr as *mut u8, len, self.access)
        }
    }

    fn deregister(&mut self, h: MemHandle) {
        if let Err(e) = self.md.mem_dereg(&h) {
            tracing::warn!("registration cache: deregistering: {e}");
        }
    }
}

/// A rendezvous buffer's registration.
#[derive(Debug)]
pub(crate) struct BufReg {
    /// Memory domain.
    pub(crate) md: usize,
    /// The handle to pack keys from (for a cached region, the region's).
    pub(crate) memh: MemHandle,
    /// The cached region, if cached.
    cached: Option<Cached>,
    /// The same buffer registered with other domains, for lanes on other
    /// devices (a rendezvous by get over several RDMA devices); released
    /// with this one.
    pub(crate) more: Vec<BufReg>,
}

/// Whether a rendezvous buffer's registration may stay in the cache after
/// the transfer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Cacheable {
    /// The application's memory, which it invalidates before freeing.
    Yes,
    /// A bounce buffer of rucx's own (a datatype that is not contiguous),
    /// reused for other requests or freed without anyone invalidating
    /// it: registered for the transfer alone, never cached, so no stale
    /// registration can outlive it.
    No,
}

/// A transfer's use of a cached region.
#[derive(Debug)]
struct Cached {
    /// The front cache whose entry the transfer uses; without one, the
    /// transfer holds a reference on the shared region itself.
    front: Option<Arc<Front>>,
    /// The shared cache and region.
    held: front::Held,
}

/// Whether rendezvous registrations with `md` go through the cache under
/// `mode` (decided once, when the context is made).
pub(crate) fn caches_md(mode: RcacheMode, md: &dyn MemoryDomain) -> bool {
    match mode {
        RcacheMode::No => false,
        RcacheMode::Yes => true,
        RcacheMode::Auto => md.reg_cost().c0 >= AUTO_MIN_COST,
    }
}

impl Context {
    /// Registers a rendezvous buffer with domain `md`: through the
    /// context's caches if that domain is cached and the buffer is
    /// `Cacheable::Yes`, else straight with the domain. A cached
    /// registration this thread used last is found in its front cache,
    /// under that front's lock only; other lookups take the context's
    /// lock.
    ///
    /// # Safety
    ///
    /// As `MemoryDomain::mem_reg`: the memory stays valid until
    /// [`Context::release_buffer`] (and, when cached, until invalidated).
    #[allow(unsafe_code)]
    pub(crate) unsafe fn register_buffer(
        &self,
        md: usize,
        ptr: *mut u8,
        len: usize,
        access: Access,
        cacheable: Cacheable,
    ) -> ucs::Result<BufReg> {
        if cacheable == Cacheable::Yes && self.md_cached(md) && len > 0 {
            let shared = self.reg_caches();
            let front = front::this_thread(shared);
            let found = front
                .as_ref()
                .and_then(|f| f.lookup((md, access), ptr as usize, len));
            if let Some((held, memh)) = found {
                return Ok(BufReg {
                    md,
                    memh,
                    cached: Some(Cached { front, held }),
                    more: Vec::new(),
                });
            }
            // SAFETY: forwarded from this function's contract.
            return unsafe { shared.lock().register(self, front, md, ptr, len, access) };
        }
        let m = self
            .md(md)
            .ok_or_else(|| ucs::Error::InvalidParam("no memory domain".into()))?;
        // SAFETY: forwarded from this function's contract.
        let memh = unsafe { m.mem_reg(ptr, len, access) }?;
        Ok(BufReg {
            md,
            memh,
            cached: None,
            more: Vec::new(),
        })
    }

    /// Ends a transfer's use of a registration from
    /// [`Context::register_buffer`].
    pub(crate) fn release_buffer(&self, r: BufReg) {
        for m in r.more {
            self.release_buffer(m);
        }
        match r.cached {
            Some(Cached { front, held }) => {
                let done = match front {
                    Some(f) => f.release(held),
                    None => Some(held),
                };
                if let Some(h) = done {
                    self.reg_caches().lock().put(h);
                }
            }
            None => {
                if let Some(md) = self.md(r.md) {
                    if let Err(e) = md.mem_dereg(&r.memh) {
                        tracing::warn!("deregistering a rendezvous buffer: {e}");
                    }
                }
            }
        }
    }
}

#[cfg(any(fuzzing, feature = "fuzzing"))]
impl Context {
    /// Registers `buf` for remote reads as a rendezvous by get would, with
    /// the first memory domain whose rendezvous registrations are cached,
    /// and releases the registration again: one registration-cache lookup
    /// and release, for benches. Not a stable API.
    ///
    /// As with every cached registration, the cache keeps `buf`'s pages
    /// registered after this returns: call [`Context::rcache_invalidate`]
    /// on `buf` before freeing it.
    #[doc(hidden)]
    pub fn bench_rndv_register(&self, buf: &[u8]) -> ucs::Result<()> {
        let md = (0..self.md_count())
            .find(|&i| self.md_cached(i))
            .ok_or_else(|| ucs::Error::Unsupported("no cached memory domain".into()))?;
        // SAFETY: `buf` is valid for the call, which releases the
        // registration before returning; the cached region's pages stay
        // registered until invalidated (the caller's part, above).
        #[allow(unsafe_code)]
        let r = unsafe {
            self.register_buffer(
                md,
                buf.as_ptr().cast_mut(),
                buf.len(),
                Access::REMOTE_READ,
                Cacheable::Yes,
            )
        }?;
        self.release_buffer(r);
        Ok(())
    }
}
