//! How the suite gets ifaces to test.

use crate::{Component, Iface, IfaceParams, TlResource};

/// Opens the ifaces a check runs on.
pub trait Fixture {
    /// Name for failure messages, e.g. `"tcp/lo"`.
    fn name(&self) -> &str;

    /// Two fresh ifaces that can reach each other, e.g. two ifaces of the
    /// same resource in this process. Panics if it cannot.
    fn open_pair(&self) -> (Box<dyn Iface>, Box<dyn Iface>);
}

type Filter = Box<dyn Fn(&TlResource) -> bool + Send + Sync>;

/// A fixture that opens two ifaces on the first resource of a component
/// that a filter accepts.
pub struct ComponentFixture {
    component: &'static dyn Component,
    name: String,
    filter: Filter,
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
        }
    }

    /// Opens one iface with the given worker id.
    pub fn open(&self, worker_uuid: u64) -> Box<dyn Iface> {
        let mds = self
            .component
            .md_open()
            .unwrap_or_else(|e| panic!("{}: md_open failed: {e}", self.name));
        for md in &mds {
            let resources = md.resources().unwrap_or_else(|e| {
                panic!("{}: resources of md {} failed: {e}", self.name, md.name())
            });
            if let Some(r) = resources.iter().find(|r| (self.filter)(r)) {
                let params = IfaceParams { worker_uuid };
                return md.iface_open(r, &params).unwrap_or_else(|e| {
                    panic!(
                        "{}: iface_open {}/{} failed: {e}",
                        self.name, r.tl_name, r.dev_name
                    )
                });
            }
        }
        panic!("{}: no matching resource", self.name)
    }
}

impl Fixture for ComponentFixture {
    fn name(&self) -> &str {
        &self.name
    }

    fn open_pair(&self) -> (Box<dyn Iface>, Box<dyn Iface>) {
        (self.open(1), self.open(2))
    }
}
