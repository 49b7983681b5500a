//! [`VerbsProvider`]: one device per active port of an RDMA NIC whose
//! network interface has an IP address.

use std::sync::Arc;

use rucx_rdma::{Device, DeviceInfo, Provider};
use uct::ucs::netif::{AddrFamily, AfPrio};
use uct::ucs::{Error, Result};

use crate::device::VerbsDevice;
use crate::discover::{discover, usable_ports};

/// The libibverbs provider.
#[derive(Debug)]
pub struct VerbsProvider {
    _private: (),
}

/// The provider instance.
pub static PROVIDER: VerbsProvider = VerbsProvider { _private: () };

/// Address families a port's interface is used with, IPv4 first.
pub(crate) fn af_prio() -> AfPrio {
    AfPrio(vec![AddrFamily::Inet, AddrFamily::Inet6])
}

impl Provider for VerbsProvider {
    fn name(&self) -> &'static str {
        "verbs"
    }

    /// Active ports with an IP address, named `<device>:<port>`. No RDMA
    /// device (or no kernel RDMA at all) is an empty list.
    fn devices(&self) -> Result<Vec<DeviceInfo>> {
        Ok(usable_ports(&discover(), &af_prio()))
    }

    fn open_device(&self, name: &str) -> Result<Arc<dyn Device>> {
        let info = self
            .devices()?
            .into_iter()
            .find(|d| d.name == name)
            .ok_or_else(|| Error::InvalidParam(format!("verbs: no usable device {name:?}")))?;
        Ok(Arc::new(VerbsDevice::open(&info)?))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ffi::DeviceList;

    /// On a machine without RDMA devices (no kernel RDMA, or no NIC),
    /// discovery finds nothing and says so without an error.
    #[test]
    fn no_device_is_an_empty_list() {
        if DeviceList::get().iter().next().is_some() {
            println!("skipped: this machine has an RDMA device");
            return;
        }
        assert!(discover().is_empty());
        assert_eq!(PROVIDER.devices().unwrap(), Vec::new());
        assert!(PROVIDER.open_device("rxe0:1").is_err());
        // So the transport lists no memory domain, hence no resource.
        let mds = uct::Component::md_open(&crate::COMPONENT).unwrap();
        assert!(mds.is_empty());
    }
}
