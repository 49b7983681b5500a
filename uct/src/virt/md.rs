//! [`VirtMd`]: the memory domain of a [`VirtNet`]: registers memory,
//! packs and unpacks keys (layout in `rkey.rs`), lists one resource per
//! device and opens ifaces on them.
//!
//! Each domain has its own registration table ([`RegTable`]), shared with
//! the net so that a target iface finds it when an access arrives. A domain
//! plays the part of one process's registrations: an iface opened from it
//! exposes exactly the domain's memory, whatever its device, so that one key
//! serves every lane of a worker. [`VirtNet::memory_domain`] gives the
//! net's default domain, the one of ifaces opened by
//! [`VirtNet::iface`]; each `md_open` of a
//! [`VirtComponent`](super::VirtComponent) makes a new one.

use super::rkey::{self, VirtKey};
use super::{VirtIface, VirtNet};
use crate::component::{DeviceType, IfaceParams, MemoryDomain, TlResource};
use crate::{Access, Error, Iface, MemHandle, RegCost, RegTable, RemoteKey, Result};
use std::sync::Arc;

/// Cost of one registration: a table insert under a lock, nothing pinned
/// or mapped, so a small constant and nothing per byte.
pub const REG_COST: RegCost = RegCost { c0: 50e-9, c1: 0.0 };

/// A memory domain of a [`VirtNet`]. Clones are handles on the same
/// domain. Dropping every handle does not end its registrations (the net
/// keeps the table); `mem_dereg` does.
#[derive(Clone)]
pub struct VirtMd {
    net: VirtNet,
    net_id: u64,
    id: u32,
    regs: Arc<RegTable>,
}

impl std::fmt::Debug for VirtMd {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("VirtMd")
            .field("net", &format_args!("{:#018x}", self.net_id))
            .field("id", &self.id)
            .finish_non_exhaustive()
    }
}

impl VirtMd {
    /// The domain `id` of `net`, with its table.
    pub(super) fn with_id(net: &VirtNet, net_id: u64, id: u32, regs: Arc<RegTable>) -> VirtMd {
        VirtMd {
            net: net.clone(),
            net_id,
            id,
            regs,
        }
    }

    /// The net it belongs to.
    pub fn net(&self) -> &VirtNet {
        &self.net
    }

    /// Opens an iface of this domain on device `dev_name`; `name` labels
    /// it in logs. `InvalidParam` for an unknown device.
    pub fn iface(&self, dev_name: &str, name: &str) -> Result<VirtIface> {
        VirtIface::open(&self.net, name, Some(dev_name), self.id)
    }

    /// A key of this net, checked: `InvalidParam` if malformed,
    /// `Unreachable` if of another net.
    pub(super) fn decode(net_id: u64, packed: &[u8]) -> Result<VirtKey> {
        let k = rkey::decode(packed)?;
        if k.net != net_id {
            return Err(Error::Unreachable(format!(
                "virt: remote key of net {:#018x}, not {net_id:#018x}",
                k.net
            )));
        }
        Ok(k)
    }
}

impl MemoryDomain for VirtMd {
    fn name(&self) -> &str {
        super::TL_NAME
    }

    /// One resource per device of the net, in configuration order.
    fn resources(&self) -> Result<Vec<TlResource>> {
        let n = self.net.lock();
        Ok(n.cfg
            .devices
            .iter()
            .map(|d| TlResource {
                tl_name: super::TL_NAME.into(),
                dev_name: d.name.clone(),
                dev_type: DeviceType::Net,
            })
            .collect())
    }

    fn iface_open(&self, resource: &TlResource, params: &IfaceParams) -> Result<Box<dyn Iface>> {
        if resource.tl_name != super::TL_NAME {
            return Err(Error::InvalidParam(format!(
                "virt: no resource {}/{}",
                resource.tl_name, resource.dev_name
            )));
        }
        let name = format!("worker {:#x}", params.worker_uuid);
        Ok(Box::new(self.iface(&resource.dev_name, &name)?))
    }

    fn can_register(&self) -> bool {
        true
    }

    /// [`REG_COST`].
    fn reg_cost(&self) -> RegCost {
        REG_COST
    }

    /// Records the range in this domain's table. A length of 0 is
    /// allowed; a null pointer, a range that wraps or exceeds `isize::MAX`
    /// bytes, or unknown access bits are `InvalidParam`. The memory is not
    /// touched here.
    unsafe fn mem_reg(&self, addr: *mut u8, len: usize, access: Access) -> Result<MemHandle> {
        self.regs.register(addr, len, access)
    }

    /// Ends the registration once accesses in progress on it are done;
    /// `InvalidParam` if it is not live here.
    fn mem_dereg(&self, memh: &MemHandle) -> Result<()> {
        self.regs.deregister(memh)
    }

    /// The key layout of `rkey.rs`; `InvalidParam` if `memh` is not live.
    fn mkey_pack(&self, memh: &MemHandle) -> Result<Vec<u8>> {
        Ok(rkey::pack(&VirtKey {
            net: self.net_id,
            md: self.id,
            fields: self.regs.key_fields(memh)?,
        }))
    }

    /// Checks length, tag, version, reserved bytes, access bits and range
    /// (`InvalidParam`) and that the key is of this net (`Unreachable`).
    /// Keys of any domain of the net unpack; the target checks the domain,
    /// and the registration, at each access.
    fn rkey_unpack(&self, packed: &[u8]) -> Result<RemoteKey> {
        let k = VirtMd::decode(self.net_id, packed)?;
        Ok(RemoteKey {
            md_name: super::TL_NAME.into(),
            packed: Arc::from(packed),
            addr: k.fields.addr,
            len: k.fields.len,
            access: k.fields.access,
        })
    }
}
