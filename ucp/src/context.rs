//! The context: transport resources a program may use.

use crate::config::UcpConfig;
use crate::uct::{DeviceType, MemoryDomain, TlResource};
use crate::worker::Worker;
use crate::{Error, Result};
use std::sync::Arc;

/// Whether `RUCX_TLS` allows transport `tl`, which its component also
/// names by `aliases` (`Component::tl_aliases`).
pub(crate) fn tls_allows(list: &crate::ucs::config::AllowList, tl: &str, aliases: &[&str]) -> bool {
    if list.is_all() {
        return true;
    }
    let named = list
        .items()
        .iter()
        .any(|item| item == tl || aliases.contains(&item.as_str()));
    named != list.is_negated()
}

/// One program's view of the available transports, filtered by `RUCX_TLS`
/// and `RUCX_NET_DEVICES`. Cheap to clone, `Send + Sync`; create workers
/// from it.
#[derive(Clone, Debug)]
pub struct Context {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    config: UcpConfig,
    mds: Vec<Arc<dyn MemoryDomain>>,
    /// Per memory domain: rendezvous registrations go through `regs`.
    cached_mds: Vec<bool>,
    /// Registration caches of rendezvous buffers, shared by the workers
    /// (behind each thread's front cache).
    regs: Arc<parking_lot::Mutex<crate::reg::RegCaches>>,
    /// (memory domain index, resource)
    resources: Vec<(usize, TlResource)>,
}

impl Context {
    /// A context over the transports of `registry`, configured from the
    /// environment (`RUCX_*`; unknown `RUCX_` variables are reported as
    /// warnings). The `rucx` crate's `Context::new` is this with the
    /// built-in transports.
    pub fn from_env(registry: &crate::uct::Registry) -> Result<Context> {
        crate::ucs::log::init();
        let config = UcpConfig::from_env()?;
        crate::ucs::config::warn_unknown(&crate::config::config_tables(registry));
        Context::with_registry(config, registry)
    }

    /// A context with the given configuration over the transports of
    /// `registry`: the built-in ones (the `rucx` crate's `registry()`), a
    /// virtual network for deterministic tests, or a transport of the
    /// application's own. The protocol layer knows no transport by name:
    /// it uses what the registry's components open.
    pub fn with_registry(config: UcpConfig, registry: &crate::uct::Registry) -> Result<Context> {
        let mut mds = Vec::new();
        let mut resources = Vec::new();
        for comp in registry.components() {
            let opened = match comp.md_open() {
                Ok(m) => m,
                // A wrong setting is the user's to see; a missing device
                // or library is how the machine is.
                Err(e @ (crate::ucs::Error::Config(_) | crate::ucs::Error::InvalidParam(_))) => {
                    tracing::warn!("transport component {} not used: {e}", comp.name());
                    continue;
                }
                Err(e) => {
                    tracing::info!("transport component {} unavailable: {e}", comp.name());
                    continue;
                }
            };
            for md in opened {
                let list = match md.resources() {
                    Ok(l) => l,
                    Err(e) => {
                        tracing::info!("memory domain {} has no resources: {e}", md.name());
                        continue;
                    }
                };
                let md_index = mds.len();
                let mut any = false;
                for r in list {
                    if !tls_allows(&config.tls, &r.tl_name, comp.tl_aliases(&r.tl_name)) {
                        continue;
                    }
                    if r.dev_type == DeviceType::Net && !config.net_devices.allows(&r.dev_name) {
                        continue;
                    }
                    resources.push((md_index, r));
                    any = true;
                }
                if any {
                    mds.push(Arc::from(md));
                }
            }
        }
        if resources.is_empty() {
            return Err(Error::Unsupported(format!(
                "no transport resources left after RUCX_TLS={} RUCX_NET_DEVICES={}",
                crate::ucs::config::ConfigValue::to_text(&config.tls),
                crate::ucs::config::ConfigValue::to_text(&config.net_devices),
            )));
        }
        let regs = Arc::new(parking_lot::Mutex::new(crate::reg::RegCaches::new(&config)));
        let cached_mds = mds
            .iter()
            .map(|m: &Arc<dyn MemoryDomain>| {
                crate::reg::caches_md(config.rcache_enable, m.as_ref())
            })
            .collect();
        Ok(Context {
            inner: Arc::new(Inner {
                config,
                mds,
                cached_mds,
                regs,
                resources,
            }),
        })
    }

    /// The configuration in force.
    pub fn config(&self) -> &UcpConfig {
        &self.inner.config
    }

    /// Transport resources this context uses.
    pub fn resources(&self) -> Vec<TlResource> {
        self.inner
            .resources
            .iter()
            .map(|(_, r)| r.clone())
            .collect()
    }

    /// The resources this context uses, each with the index and name of
    /// its memory domain (what UCX's `ucp_context_print_info` lists).
    pub fn resources_by_md(&self) -> Vec<(usize, String, TlResource)> {
        self.resource_list()
            .map(|(i, md, r)| (i, md.name().to_string(), r.clone()))
            .collect()
    }

    /// Creates a worker with one iface per resource.
    pub fn create_worker(&self) -> Result<Worker> {
        Worker::new(self.clone())
    }

    pub(crate) fn resource_list(
        &self,
    ) -> impl Iterator<Item = (usize, &dyn MemoryDomain, &TlResource)> {
        self.inner
            .resources
            .iter()
            .map(|(m, r)| (*m, self.inner.mds[*m].as_ref(), r))
    }

    /// Number of memory domains.
    pub(crate) fn md_count(&self) -> usize {
        self.inner.mds.len()
    }

    /// Memory domain number `i`.
    pub(crate) fn md(&self, i: usize) -> Option<&dyn MemoryDomain> {
        self.inner.mds.get(i).map(|m| m.as_ref())
    }

    /// Memory domain number `i`, shared.
    pub(crate) fn md_arc(&self, i: usize) -> Option<Arc<dyn MemoryDomain>> {
        self.inner.mds.get(i).cloned()
    }

    /// Whether rendezvous registrations with domain `i` are cached.
    pub(crate) fn md_cached(&self, i: usize) -> bool {
        self.inner.cached_mds.get(i).copied().unwrap_or(false)
    }

    /// The registration caches, shared by the threads' front caches.
    pub(crate) fn reg_caches(&self) -> &Arc<parking_lot::Mutex<crate::reg::RegCaches>> {
        &self.inner.regs
    }

    /// A handle that does not keep the context alive: for process-wide
    /// lists of contexts (the C API's `ucm_vm_munmap` invalidates the
    /// registration caches of every live one).
    pub fn downgrade(&self) -> WeakContext {
        WeakContext(Arc::downgrade(&self.inner))
    }

    /// Tells the registration caches that `len` bytes at `ptr` are about to
    /// be freed or reused: registrations covering them end (at once, or
    /// when the transfers using them finish). Call it before freeing
    /// memory that took part in a rendezvous when `RUCX_RCACHE_ENABLE` is
    /// on; memory mapped with [`Context::mem_map`] is invalidated when
    /// unmapped.
    ///
    /// Every thread's cached entries covering the range are gone when this
    /// returns.
    pub fn rcache_invalidate(&self, ptr: *const u8, len: usize) {
        self.inner.regs.lock().invalidate(ptr as usize, len);
    }

    /// Counters of the registration caches (hits, misses, evictions, ...),
    /// summed over domains.
    pub fn rcache_stats(&self) -> crate::ucs::rcache::RcacheStats {
        self.inner.regs.lock().stats()
    }
}

/// A [`Context`] held weakly ([`Context::downgrade`]).
#[derive(Clone, Debug)]
pub struct WeakContext(std::sync::Weak<Inner>);

impl WeakContext {
    /// The context, if some clone of it is still alive.
    pub fn upgrade(&self) -> Option<Context> {
        self.0.upgrade().map(|inner| Context { inner })
    }

    /// Whether this and `ctx` are the same context.
    pub fn is(&self, ctx: &Context) -> bool {
        std::ptr::eq(self.0.as_ptr(), Arc::as_ptr(&ctx.inner))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ucs::config::{AllowList, ConfigValue};

    #[test]
    fn weak_contexts_do_not_keep_it_alive() {
        let registry = crate::uct::Registry::new().with(&crate::uct::self_tl::COMPONENT);
        let ctx = Context::with_registry(UcpConfig::default(), &registry).unwrap();
        let weak = ctx.downgrade();
        assert!(weak.is(&ctx));
        let again = weak.upgrade().expect("alive");
        assert!(weak.is(&again));
        drop((ctx, again));
        assert!(weak.upgrade().is_none());
    }

    #[test]
    fn resources_name_their_memory_domains() {
        let registry = crate::uct::Registry::new().with(&crate::uct::self_tl::COMPONENT);
        let ctx = Context::with_registry(UcpConfig::default(), &registry).unwrap();
        let by_md = ctx.resources_by_md();
        assert_eq!(by_md.len(), ctx.resources().len());
        for (i, name, r) in &by_md {
            assert_eq!(ctx.md(*i).map(|m| m.name()), Some(name.as_str()));
            assert_eq!(r.tl_name, "self");
        }
    }

    #[test]
    fn tls_aliases_expand() {
        let l = |t: &str| AllowList::parse(t).unwrap();
        // As the shared-memory and RC components name their transports.
        let shm: &[&str] = &["shm", "sm"];
        let rc: &[&str] = &["rc"];
        let allows = |list: &str, tl: &str| {
            let aliases = match tl {
                "posix" | "cma" => shm,
                t if t.starts_with("rc_") => rc,
                _ => &[],
            };
            tls_allows(&l(list), tl, aliases)
        };
        assert!(allows("all", "tcp"));
        assert!(allows("shm", "posix") && allows("shm", "cma"));
        assert!(!allows("shm", "tcp"));
        assert!(allows("sm,tcp", "cma") && allows("sm,tcp", "tcp"));
        assert!(allows("posix", "posix") && !allows("posix", "cma"));
        assert!(!allows("^shm", "posix") && !allows("^shm", "cma"));
        assert!(allows("^shm", "tcp"));
        assert!(allows("^cma", "posix") && !allows("^cma", "cma"));
        assert!(allows("rc", "rc_iwarp") && !allows("rc", "tcp"));
        assert!(allows("rc_iwarp", "rc_iwarp") && !allows("^rc", "rc_iwarp"));
    }
}
