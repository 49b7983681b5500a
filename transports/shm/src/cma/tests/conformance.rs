//! The one-sided checks of the transport conformance suite, on two `cma`
//! ifaces of this process and a stand-in for the `shm` memory domain
//! (registration through `md_keys`).
//!
//! Both ifaces are this process, so keys are checked against the live
//! registration as well (see `ops.rs`); that is what makes `rma_dereg` and
//! the forged-key part of `rma_forged_keys` pass, which between two
//! processes CMA cannot do. The checks of active messages, and
//! `caps_consistent`, `reachability` and `peer_failure` (which send active
//! messages), do not apply to a transport without them.

use uct::testing::{checks, Fixture};
use uct::ucs::Result;
use uct::{
    Access, DeviceType, Iface, IfaceParams, MemHandle, MemoryDomain, RegCost, RemoteKey, TlResource,
};

use super::super::{open_iface, CmaConfig, DEV_NAME, TL_NAME};
use super::available;
use crate::md_keys;

#[derive(Debug)]
struct ShmMd;

impl MemoryDomain for ShmMd {
    fn name(&self) -> &str {
        md_keys::MD_NAME
    }

    fn resources(&self) -> Result<Vec<TlResource>> {
        Ok(vec![TlResource {
            tl_name: TL_NAME.into(),
            dev_name: DEV_NAME.into(),
            dev_type: DeviceType::Shm,
        }])
    }

    fn iface_open(&self, _r: &TlResource, params: &IfaceParams) -> Result<Box<dyn Iface>> {
        open_iface(params, &CmaConfig::default())
    }

    fn can_register(&self) -> bool {
        true
    }

    fn reg_cost(&self) -> RegCost {
        md_keys::REG_COST
    }

    unsafe fn mem_reg(&self, addr: *mut u8, len: usize, access: Access) -> Result<MemHandle> {
        md_keys::register(addr, len, access)
    }

    fn mem_dereg(&self, memh: &MemHandle) -> Result<()> {
        md_keys::deregister(memh)
    }

    fn mkey_pack(&self, memh: &MemHandle) -> Result<Vec<u8>> {
        md_keys::pack(memh)
    }

    fn rkey_unpack(&self, packed: &[u8]) -> Result<RemoteKey> {
        md_keys::unpack(packed)
    }
}

struct CmaFixture(ShmMd);

impl Fixture for CmaFixture {
    fn name(&self) -> &str {
        "shm/cma"
    }

    fn open_pair(&self) -> (Box<dyn Iface>, Box<dyn Iface>) {
        let open = || open_iface(&IfaceParams::default(), &CmaConfig::default()).unwrap();
        (open(), open())
    }

    fn memory_domain(&self) -> Option<&dyn MemoryDomain> {
        Some(&self.0)
    }
}

macro_rules! rma_checks {
    ($($check:ident)*) => {$(
        #[test]
        fn $check() {
            if available() {
                checks::$check(&CmaFixture(ShmMd));
            }
        }
    )*};
}

rma_checks!(rma_caps rma_put rma_get rma_iov rma_access rma_bounds rma_bad_endpoint rma_dereg
    rma_forged_keys);
