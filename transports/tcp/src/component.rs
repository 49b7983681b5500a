//! The `tcp` component and its memory domain.

use uct::ucs::config::ConfigTable;
use uct::ucs::{Error, Result};
use uct::{
    Access, Component, DeviceType, Iface, IfaceParams, MemHandle, MemoryDomain, RegCost, RemoteKey,
    TlResource,
};

use crate::config::{Limits, TcpConfig, TCP_TABLE};
use crate::iface::TcpIface;
use crate::mem;
use crate::name::NAME;

/// The TCP transport family: one memory domain, `tcp`, with one resource
/// per network interface that is up and has an address of a family in
/// `RUCX_TCP_AF_PRIO`.
#[derive(Debug)]
pub struct TcpComponent {
    _private: (),
}

/// The TCP component, for the registry.
pub static COMPONENT: TcpComponent = TcpComponent { _private: () };

impl Component for TcpComponent {
    fn name(&self) -> &'static str {
        NAME
    }

    /// Opens the `tcp` memory domain with the configuration from the
    /// environment (`RUCX_TCP_*`); a bad value is an error.
    fn md_open(&self) -> Result<Vec<Box<dyn MemoryDomain>>> {
        let config = TcpConfig::from_env()?;
        Limits::from_config(&config)?;
        crate::config::keepalive(&config)?;
        Ok(vec![Box::new(TcpMd { config })])
    }

    fn config_tables(&self) -> Vec<&'static ConfigTable> {
        vec![&TCP_TABLE]
    }
}

/// The `tcp` memory domain: lists the network interfaces, and registers
/// memory for `put_zcopy` in a process-wide table (`mem.rs`), since TCP
/// pins nothing.
#[derive(Debug)]
struct TcpMd {
    config: TcpConfig,
}

impl MemoryDomain for TcpMd {
    fn name(&self) -> &str {
        NAME
    }

    fn resources(&self) -> Result<Vec<TlResource>> {
        Ok(uct::ucs::netif::interfaces()?
            .into_iter()
            .filter(|i| i.addr(&self.config.af_prio).is_some())
            .map(|i| TlResource {
                tl_name: NAME.to_string(),
                dev_name: i.name,
                dev_type: DeviceType::Net,
            })
            .collect())
    }

    fn iface_open(&self, resource: &TlResource, params: &IfaceParams) -> Result<Box<dyn Iface>> {
        if resource.tl_name != NAME {
            return Err(Error::InvalidParam(format!(
                "tcp: cannot open transport {:?}",
                resource.tl_name
            )));
        }
        open_iface(&resource.dev_name, params, &self.config)
    }

    fn can_register(&self) -> bool {
        true
    }

    /// A table insert: about 50 ns, nothing per byte (`mem.rs`).
    fn reg_cost(&self) -> RegCost {
        mem::REG_COST
    }

    /// Records the range in the process-wide table, which every `tcp`
    /// iface of the process checks puts against. A length of 0 is
    /// allowed; a null pointer, a range that wraps or exceeds `isize::MAX`
    /// bytes, or unknown access bits are `InvalidParam`. The memory is not
    /// touched here.
    unsafe fn mem_reg(&self, addr: *mut u8, len: usize, access: Access) -> Result<MemHandle> {
        mem::register(addr, len, access)
    }

    /// Ends the registration once a write in progress on it is done; puts
    /// arriving later with its key are refused. `InvalidParam` if it is not
    /// live.
    fn mem_dereg(&self, memh: &MemHandle) -> Result<()> {
        mem::deregister(memh)
    }

    /// The key layout of `rkey.rs`; `InvalidParam` if `memh` is not live.
    fn mkey_pack(&self, memh: &MemHandle) -> Result<Vec<u8>> {
        mem::pack(memh)
    }

    /// Checks the key's format only (`InvalidParam`): it belongs to the
    /// peer, which checks owner, registration, range and rights on each
    /// put.
    fn rkey_unpack(&self, packed: &[u8]) -> Result<RemoteKey> {
        mem::unpack(packed)
    }
}

/// Opens a TCP iface on network device `dev` with an explicit
/// configuration, bypassing the environment.
pub fn open_iface(dev: &str, params: &IfaceParams, config: &TcpConfig) -> Result<Box<dyn Iface>> {
    Ok(Box::new(TcpIface::open(dev, params, config)?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lists_loopback_and_opens_it() {
        assert_eq!(COMPONENT.name(), "tcp");
        assert_eq!(COMPONENT.config_tables()[0].prefix, "TCP_");
        let mds = COMPONENT.md_open().unwrap();
        assert_eq!(mds.len(), 1);
        assert_eq!(mds[0].name(), "tcp");
        let res = mds[0].resources().unwrap();
        assert!(res
            .iter()
            .all(|r| r.tl_name == "tcp" && r.dev_type == DeviceType::Net));
        let lo = res
            .iter()
            .find(|r| r.dev_name == "lo")
            .expect("lo is listed");
        let iface = mds[0].iface_open(lo, &IfaceParams::default()).unwrap();
        assert_eq!(iface.tl_name(), "tcp");
        assert_eq!(iface.dev_name(), "lo");
        assert_eq!(iface.device_addr().len(), uct::ip_addr::DEV_ADDR_V4_LEN);
        assert_eq!(iface.iface_addr().len(), 2);
        assert!(iface.is_reachable(iface.device_addr(), iface.iface_addr()));
        let mut other = lo.clone();
        other.tl_name = "shm".into();
        assert!(mds[0].iface_open(&other, &IfaceParams::default()).is_err());
        other = lo.clone();
        other.dev_name = "no-such-dev0".into();
        assert!(mds[0].iface_open(&other, &IfaceParams::default()).is_err());
    }
}
