//! Components, memory domains and transport resources.

use crate::iface::Iface;
use crate::mem::{Access, MemAllocOps, MemHandle, RegCost, RemoteKey, RkeyPtrOps};
use crate::Result;

/// Kind of device a resource runs on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DeviceType {
    /// A network interface (TCP, RDMA).
    Net,
    /// Memory shared between processes on one host.
    Shm,
    /// The process itself.
    SelfDev,
}

impl DeviceType {
    /// Short name as `rucx-info -d` prints it.
    pub fn as_str(self) -> &'static str {
        match self {
            DeviceType::Net => "network",
            DeviceType::Shm => "intra-node",
            DeviceType::SelfDev => "loopback",
        }
    }
}

/// One transport on one device: what `RUCX_TLS` and `RUCX_NET_DEVICES` filter.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TlResource {
    /// Transport name, e.g. `"tcp"`.
    pub tl_name: String,
    /// Device name, e.g. `"lo"` or `"eth0"`.
    pub dev_name: String,
    /// Kind of device.
    pub dev_type: DeviceType,
}

/// Parameters for opening an iface.
#[derive(Debug, Clone, Default)]
pub struct IfaceParams {
    /// The opening worker's unique id (for addresses and logs).
    pub worker_uuid: u64,
}

/// A memory domain: owns transport resources, registers memory and packs
/// and unpacks keys where it can, and may allocate memory that peers map
/// ([`MemoryDomain::mem_alloc_ops`], [`MemoryDomain::rkey_ptr_ops`]).
pub trait MemoryDomain: Send + Sync + std::fmt::Debug {
    /// Name, e.g. `"tcp"` or `"self"`.
    fn name(&self) -> &str;

    /// Transport resources on this domain.
    fn resources(&self) -> Result<Vec<TlResource>>;

    /// Opens an iface on one of [`MemoryDomain::resources`].
    fn iface_open(&self, resource: &TlResource, params: &IfaceParams) -> Result<Box<dyn Iface>>;

    /// Facts about the device behind this domain, as `rucx-info -d`
    /// prints them (name, value), e.g. an RDMA device's limits.
    fn device_info(&self) -> Vec<(&'static str, String)> {
        Vec::new()
    }

    /// Whether this domain registers memory (and packs keys for peers).
    fn can_register(&self) -> bool {
        false
    }

    /// The atomic operations this domain's device executes itself on
    /// memory registered here with
    /// [`Access::REMOTE_ATOMIC`](crate::Access::REMOTE_ATOMIC) (RDMA
    /// atomics, done by the target's NIC); empty (the default) where
    /// peers' atomics need the CPU. A domain with none may refuse that
    /// right.
    fn atomic_caps(&self) -> crate::AtomicCaps {
        crate::AtomicCaps::empty()
    }

    /// Cost model of [`MemoryDomain::mem_reg`].
    fn reg_cost(&self) -> RegCost {
        RegCost::default()
    }

    /// Registers `len` bytes at `addr` with `access` rights.
    ///
    /// # Safety
    ///
    /// The memory must stay valid until [`MemoryDomain::mem_dereg`]
    /// returns, and while it is registered it must not be accessed through
    /// Rust references in a way that races with peers: not at all with
    /// remote write rights, and not written with remote read rights.
    /// Registering 0 bytes is allowed.
    unsafe fn mem_reg(&self, addr: *mut u8, len: usize, access: Access) -> Result<MemHandle> {
        let _ = (addr, len, access);
        Err(crate::Error::op_unsupported(
            self.name().to_string(),
            "mem_reg",
        ))
    }

    /// Ends a registration: later accesses through its keys fail.
    fn mem_dereg(&self, memh: &MemHandle) -> Result<()> {
        let _ = memh;
        Err(crate::Error::op_unsupported(
            self.name().to_string(),
            "mem_dereg",
        ))
    }

    /// Bytes a peer turns into a [`RemoteKey`] with `rkey_unpack`.
    fn mkey_pack(&self, memh: &MemHandle) -> Result<Vec<u8>> {
        let _ = memh;
        Err(crate::Error::op_unsupported(
            self.name().to_string(),
            "mkey_pack",
        ))
    }

    /// Validates and unpacks a key packed by a peer's domain of this kind.
    fn rkey_unpack(&self, packed: &[u8]) -> Result<RemoteKey> {
        let _ = packed;
        Err(crate::Error::op_unsupported(
            self.name().to_string(),
            "rkey_unpack",
        ))
    }

    /// The domain's allocation of memory that peers on its host can map
    /// (UCX's `uct_md_mem_alloc`), if it has one. Memory it allocates is
    /// registered with it; [`MemoryDomain::mkey_pack`] of that
    /// registration packs what peers need to map it.
    fn mem_alloc_ops(&self) -> Option<&dyn MemAllocOps> {
        None
    }

    /// The domain's mapping of a peer's memory into this process from the
    /// peer's key (UCX's `uct_rkey_ptr`), if it has one.
    fn rkey_ptr_ops(&self) -> Option<&dyn RkeyPtrOps> {
        None
    }
}

/// A transport family: the entry point of a transport crate.
pub trait Component: Send + Sync + std::fmt::Debug {
    /// Name, e.g. `"tcp"`.
    fn name(&self) -> &'static str;

    /// Opens the memory domains of this component (usually one).
    fn md_open(&self) -> Result<Vec<Box<dyn MemoryDomain>>>;

    /// Configuration tables of this component, for `rucx-info -c`.
    fn config_tables(&self) -> Vec<&'static ucs::config::ConfigTable> {
        Vec::new()
    }

    /// Further names under which `RUCX_TLS` selects this component's
    /// transport `tl_name`, as UCX's aliases do (`shm` for both
    /// shared-memory transports). None by default.
    fn tl_aliases(&self, tl_name: &str) -> &'static [&'static str] {
        let _ = tl_name;
        &[]
    }
}

use crate::ucs;
