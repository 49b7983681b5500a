//! How the suite gets ifaces to test.

use crate::{Component, Iface, IfaceParams, MemoryDomain, TlResource};
use std::sync::OnceLock;

/// Opens the ifaces a check runs on.
pub trait Fixture {
    /// Name for failure messages, e.g. `"tcp/lo"`.
    fn name(&self) -> &str;

    /// Two fresh ifaces that can reach each other, e.g. two ifaces of the
    /// same resource in this process. Panics if it cannot.
    fn open_pair(&self) -> (Box<dyn Iface>, Box<dyn Iface>);

    /// The memory domain of the pair's ifaces, for the checks of memory
    /// registration and one-sided operations: memory it registers is
    /// memory `b` exposes, and `a` unpacks keys with it. `None` (the
    /// default) skips those checks.
    fn memory_domain(&self) -> Option<&dyn MemoryDomain> {
        None
    }
}

type Filter = Box<dyn Fn(&TlResource) -> bool + Send + Sync>;

/// A fixture that opens two ifaces on the first resource of a component
/// that a filter accepts.
///
/// The component's memory domains are opened once, on first use, and kept:
/// both ifaces of a pair come from the same domain, which
/// [`Fixture::memory_domain`] returns.
pub struct ComponentFixture {
    component: &'static dyn Component,
    name: String,
    filter: Filter,
    mds: OnceLock<Vec<Box<dyn MemoryDomain>>>,
}

impl std::fmt::Debug for ComponentFixture {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ComponentFixture")
            .field("component", &self.component.name())
            .field("name", &self.name)
            .finish_non_exhaustive()
    }
}

impl ComponentFixture {
    /// The first resource of `component` on device `dev_name`.
    pub fn new(component: &'static dyn Component, dev_name: &str) -> ComponentFixture {
        let dev = dev_name.to_owned();
        ComponentFixture {
            component,
            name: format!("{}/{}", component.name(), dev_name),
            filter: Box::new(move |r| r.dev_name == dev),
            mds: OnceLock::new(),
        }
    }

    /// The first resource of `component` that `filter` accepts; `name`
    /// labels failures.
    pub fn with_filter(
        component: &'static dyn Component,
        name: &str,
        filter: impl Fn(&TlResource) -> bool + Send + Sync + 'static,
    ) -> ComponentFixture {
        ComponentFixture {
            component,
            name: name.to_owned(),
            filter: Box::new(filter),
            mds: OnceLock::new(),
        }
    }

    /// The memory domain with the first matching resource, and that
    /// resource; panics if there is none.
    fn resource(&self) -> (&dyn MemoryDomain, TlResource) {
        let mds = self.mds.get_or_init(|| {
            self.component
                .md_open()
                .unwrap_or_else(|e| panic!("{}: md_open failed: {e}", self.name))
        });
        for md in mds {
            let resources = md.resources().unwrap_or_else(|e| {
                panic!("{}: resources of md {} failed: {e}", self.name, md.name())
            });
            if let Some(r) = resources.into_iter().find(|r| (self.filter)(r)) {
                return (&**md, r);
            }
        }
        panic!("{}: no matching resource", self.name)
    }

    /// Opens one iface with the given worker id.
    pub fn open(&self, worker_uuid: u64) -> Box<dyn Iface> {
        let (md, r) = self.resource();
        let params = IfaceParams { worker_uuid };
        md.iface_open(&r, &params).unwrap_or_else(|e| {
            panic!(
                "{}: iface_open {}/{} failed: {e}",
                self.name, r.tl_name, r.dev_name
            )
        })
    }
}

impl Fixture for ComponentFixture {
    fn name(&self) -> &str {
        &self.name
    }

    fn open_pair(&self) -> (Box<dyn Iface>, Box<dyn Iface>) {
        (self.open(1), self.open(2))
    }

    fn memory_domain(&self) -> Option<&dyn MemoryDomain> {
        Some(self.resource().0)
    }
}
