//! [`IwarpProvider`]: one iWARP device per network interface that is up
//! with an address of a family in `RUCX_IWARP_AF_PRIO`; the device uses
//! that address.

use std::sync::Arc;

use rucx_rdma::{Device, DeviceInfo, Provider};
use uct::ucs::config::ConfigTable;
use uct::ucs::{self, netif, Error, Result};

use crate::config::{IwarpConfig, Settings, IWARP_TABLE};
use crate::device::IwarpDevice;

/// The userspace iWARP provider.
#[derive(Debug)]
pub struct IwarpProvider {
    _private: (),
}

/// The provider instance.
pub static PROVIDER: IwarpProvider = IwarpProvider { _private: () };

const PREFIX: &str = "iwarp_";

impl IwarpProvider {
    /// Opens device `name` (e.g. `"iwarp_lo"`) with `config` instead of
    /// the `RUCX_IWARP_*` environment (tests, and programs that configure
    /// devices themselves).
    pub fn open_with(&self, name: &str, config: &IwarpConfig) -> Result<IwarpDevice> {
        let settings = Settings::from_config(config)?;
        let no_device = || Error::InvalidParam(format!("iwarp: no device {name:?}"));
        let netdev = name.strip_prefix(PREFIX).ok_or_else(no_device)?;
        let nif = netif::find(netdev).map_err(|_| no_device())?;
        let addr = nif.addr(&config.af_prio).ok_or_else(|| {
            Error::InvalidParam(format!(
                "iwarp: interface {netdev:?} has no address of RUCX_IWARP_AF_PRIO={}",
                ucs::config::ConfigValue::to_text(&config.af_prio)
            ))
        })?;
        Ok(IwarpDevice::new(&nif.name, addr, settings))
    }
}

impl Provider for IwarpProvider {
    fn name(&self) -> &'static str {
        "iwarp"
    }

    fn devices(&self) -> Result<Vec<DeviceInfo>> {
        let prio = IwarpConfig::from_env()?.af_prio;
        Ok(netif::interfaces()?
            .into_iter()
            .filter_map(|i| {
                let addr = i.addr(&prio)?;
                Some(DeviceInfo {
                    name: format!("{PREFIX}{}", i.name),
                    netdev: i.name,
                    addr,
                })
            })
            .collect())
    }

    fn open_device(&self, name: &str) -> Result<Arc<dyn Device>> {
        let config = IwarpConfig::from_env()?;
        Ok(Arc::new(self.open_with(name, &config)?))
    }

    fn config_tables(&self) -> Vec<&'static ConfigTable> {
        vec![&IWARP_TABLE]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loopback_is_a_device() {
        let devs = PROVIDER.devices().unwrap();
        let lo = devs.iter().find(|d| d.netdev == "lo").expect("lo is up");
        assert_eq!(lo.name, "iwarp_lo");
        let dev = PROVIDER.open_device("iwarp_lo").unwrap();
        let attr = dev.attr();
        assert_eq!(attr.name, "iwarp_lo");
        assert_eq!(attr.max_sge_rd, 1);
        assert!(!attr.atomics);
        assert_eq!(attr.max_private_data, 508);
        assert!(attr.local_lkey.is_some());
        assert!(PROVIDER.open_device("iwarp_nonexistent0").is_err());
        assert!(PROVIDER.open_device("lo").is_err());
        assert_eq!(PROVIDER.config_tables()[0].name, "iwarp");
    }
}
