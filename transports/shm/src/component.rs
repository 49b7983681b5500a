//! The `shm` component and its memory domain: the `posix` FIFO transport
//! and the `cma` zero-copy transport, on one device, `memory`.
//!
//! One memory domain serves both, so that a registration's key is good for
//! either: the protocol layer sends messages on `posix` and moves
//! rendezvous data with `cma`, with keys of this domain.

use uct::ucs::config::ConfigTable;
use uct::ucs::{Error, Result};
use uct::{
    Access, Component, DeviceType, Iface, IfaceParams, MemAllocOps, MemHandle, MemoryDomain,
    RegCost, RemoteKey, RkeyPtrOps, TlResource,
};

use crate::cma::{self, CmaConfig, CMA_TABLE};
use crate::md_alloc::{ShmAlloc, ShmRkeyPtr};
use crate::md_keys;
use crate::posix::{self, MmConfig, MM_TABLE};
use crate::segment::{PosixConfig, POSIX_TABLE};

/// The shared-memory transport family.
#[derive(Debug)]
pub struct ShmComponent {
    _private: (),
}

/// The shared-memory component, for the registry.
pub static COMPONENT: ShmComponent = ShmComponent { _private: () };

impl Component for ShmComponent {
    fn name(&self) -> &'static str {
        md_keys::MD_NAME
    }

    /// Opens the `shm` memory domain with the configuration from the
    /// environment (`RUCX_MM_*`, `RUCX_POSIX_*`, `RUCX_CMA_*`); a bad value
    /// is an error.
    fn md_open(&self) -> Result<Vec<Box<dyn MemoryDomain>>> {
        let mm = MmConfig::from_env()?;
        mm.fifo()?;
        let md = ShmMd {
            mm,
            alloc: ShmAlloc {
                posix: PosixConfig::from_env()?,
            },
            cma: CmaConfig::from_env()?,
        };
        Ok(vec![Box::new(md)])
    }

    /// `shm` and `sm` stand for both transports: the FIFO and CMA.
    fn tl_aliases(&self, _tl_name: &str) -> &'static [&'static str] {
        &["shm", "sm"]
    }

    fn config_tables(&self) -> Vec<&'static ConfigTable> {
        vec![&MM_TABLE, &POSIX_TABLE, &CMA_TABLE]
    }
}

/// The `shm` memory domain. Besides registering memory for both
/// transports, it allocates shared segments that peers on this host map
/// from their keys (`mem_alloc_ops`, `rkey_ptr_ops`; see `md_alloc`).
#[derive(Debug)]
struct ShmMd {
    mm: MmConfig,
    /// Allocation, with the segment configuration the `posix` transport
    /// uses too.
    alloc: ShmAlloc,
    cma: CmaConfig,
}

impl MemoryDomain for ShmMd {
    fn name(&self) -> &str {
        md_keys::MD_NAME
    }

    /// `posix` always (opening it fails cleanly, e.g. without /dev/shm and
    /// memfd); `cma` where the probe allows cross-memory attach.
    fn resources(&self) -> Result<Vec<TlResource>> {
        let res = |tl: &str| TlResource {
            tl_name: tl.to_string(),
            dev_name: posix::DEV_NAME.to_string(),
            dev_type: DeviceType::Shm,
        };
        let mut out = vec![res(posix::TL_NAME)];
        match cma::probe() {
            Ok(()) => out.push(res(cma::TL_NAME)),
            Err(why) => tracing::info!("cma unavailable: {why}"),
        }
        Ok(out)
    }

    fn iface_open(&self, resource: &TlResource, params: &IfaceParams) -> Result<Box<dyn Iface>> {
        match resource.tl_name.as_str() {
            posix::TL_NAME => posix::open_iface(params, &self.mm, &self.alloc.posix),
            cma::TL_NAME => cma::open_iface(params, &self.cma),
            other => Err(Error::InvalidParam(format!(
                "shm: cannot open transport {other:?}"
            ))),
        }
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

    /// The key of memory this domain allocated carries the segment entry
    /// peers map it with.
    fn mkey_pack(&self, memh: &MemHandle) -> Result<Vec<u8>> {
        crate::md_alloc::mkey_pack(memh)
    }

    fn rkey_unpack(&self, packed: &[u8]) -> Result<RemoteKey> {
        md_keys::unpack(packed)
    }

    /// Shared segments (`RUCX_POSIX_BACKEND`, `RUCX_POSIX_DIR`).
    fn mem_alloc_ops(&self) -> Option<&dyn MemAllocOps> {
        Some(&self.alloc)
    }

    /// Segments of peers on this host that allocated them with
    /// `mem_alloc`.
    fn rkey_ptr_ops(&self) -> Option<&dyn RkeyPtrOps> {
        Some(&ShmRkeyPtr)
    }
}
