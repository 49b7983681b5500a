//! The virtual transport as a [`Component`], so that code which opens
//! transports through a registry (a worker) can run on a [`VirtNet`].

use super::VirtNet;
use crate::component::{Component, MemoryDomain};
use crate::Result;

/// A component whose every iface joins the same [`VirtNet`]. Each
/// `md_open` gives one new memory domain ([`VirtMd`](super::VirtMd)), as
/// a process of its own would have, listing one resource per device.
#[derive(Debug, Clone)]
pub struct VirtComponent {
    net: VirtNet,
}

impl VirtComponent {
    pub(super) fn new(net: VirtNet) -> VirtComponent {
        VirtComponent { net }
    }

    /// The net its ifaces join.
    pub fn net(&self) -> &VirtNet {
        &self.net
    }

    /// Leaks the component for a [`Registry`](crate::Registry), which
    /// holds `&'static` components. A few hundred bytes per call: meant for
    /// tests.
    pub fn leak(self) -> &'static VirtComponent {
        Box::leak(Box::new(self))
    }
}

impl Component for VirtComponent {
    fn name(&self) -> &'static str {
        super::TL_NAME
    }

    fn md_open(&self) -> Result<Vec<Box<dyn MemoryDomain>>> {
        Ok(vec![Box::new(self.net.new_memory_domain()?)])
    }
}
