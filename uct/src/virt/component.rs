//! The virtual transport as a [`Component`], so that code which opens
//! transports through a registry (a worker) can run on a [`VirtNet`].

use super::VirtNet;
use crate::component::{Component, DeviceType, IfaceParams, MemoryDomain, TlResource};
use crate::{Error, Iface, Result};

/// A component with one memory domain and one resource (`virt` on the
/// net's device); every iface it opens joins the same [`VirtNet`].
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
        let dev_name = self.net.lock().cfg.dev_name.clone();
        Ok(vec![Box::new(VirtMd {
            net: self.net.clone(),
            dev_name,
        })])
    }
}

/// The memory domain of a [`VirtComponent`] (it registers nothing yet).
#[derive(Debug)]
struct VirtMd {
    net: VirtNet,
    dev_name: String,
}

impl MemoryDomain for VirtMd {
    fn name(&self) -> &str {
        super::TL_NAME
    }

    fn resources(&self) -> Result<Vec<TlResource>> {
        Ok(vec![TlResource {
            tl_name: super::TL_NAME.into(),
            dev_name: self.dev_name.clone(),
            dev_type: DeviceType::Net,
        }])
    }

    fn iface_open(&self, resource: &TlResource, params: &IfaceParams) -> Result<Box<dyn Iface>> {
        if resource.tl_name != super::TL_NAME || resource.dev_name != self.dev_name {
            return Err(Error::InvalidParam(format!(
                "virt: no resource {}/{}",
                resource.tl_name, resource.dev_name
            )));
        }
        let name = format!("worker {:#x}", params.worker_uuid);
        Ok(Box::new(self.net.iface(&name)?))
    }
}
