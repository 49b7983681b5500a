//! The in-process `self` transport.
//!
//! Unlike UCX's `self`, which reaches only its own worker, an endpoint of
//! this transport reaches any `self` iface of the same process, so two
//! workers of one process (on one thread or on two) talk over it.
//!
//! # How it works
//!
//! Every iface owns a mailbox (`mailbox.rs`): a bounded lock-free queue of
//! messages, registered in a process-wide table under the iface's 64-bit id.
//! Sending copies the message into the target's mailbox and is `Done` at
//! once; a full mailbox gives `NoResource`. The receiver's `progress`
//! delivers a batch from its own mailbox.
//!
//! * Addresses: device = host id (8 bytes) + pid (4 bytes), iface = iface
//!   id (8 bytes). Reachable: same host and process, iface still open.
//! * Source ids: each endpoint gets its own [`SrcId`] from its target at
//!   creation, carried with every message; ids are not reused.
//! * Back-pressure: each mailbox is bounded by [`SelfConfig`] (bytes and
//!   messages). Pending tokens of an endpoint come back once its target has
//!   drained to half of both bounds; a sleeping sender is woken then.
//! * Zero-copy: `am_zcopy` copies at post time and returns `Done`.
//! * Memory: the memory domain registers ranges in a process-wide table
//!   (`reg.rs`); a packed key (`rkey.rs`) names the registration by slot and
//!   generation and the process by host id, pid and a random nonce.
//!   `put_zcopy`/`get_zcopy` (`rma.rs`) copy at post time and return `Done`,
//!   after checking the key against the live table (registration alive,
//!   range inside, right granted); the table stays read-locked during the
//!   copy, so `mem_dereg` waits for copies in progress.
//! * Peer failure: when an iface is dropped, each endpoint to it fails
//!   exactly once (`ep_failed`, then its pending tokens), and later
//!   operations on it fail. Messages are delivered whole, so a dropped sender
//!   never leaves a receiver with half a message: `src_failed` is never
//!   reported, and messages a dropped iface queued before are still
//!   delivered.
//! * Wakeup: each iface has an eventfd, signalled by a sender only when the
//!   target is armed, by a target that closes, and by a target that drained
//!   enough for a waiting sender.
//! * Nothing is ever in flight: `flush` is `Done`, `ep_destroy` has nothing
//!   to cancel.
//!
//! # Map
//!
//! * `mod.rs`: [`COMPONENT`], the memory domain, limits and model;
//! * `config.rs`: [`SelfConfig`] and the `RUCX_SELF_*` table;
//! * `iface.rs`: the [`Iface`] implementation (endpoints, operations,
//!   progress, arm);
//! * `mailbox.rs`: the shared mailbox, its wakeups, the process-wide table;
//! * `addr.rs`: addresses and iface ids; `event.rs`: the eventfd;
//! * `reg.rs`: the registration table; `rkey.rs`: the packed key layout;
//!   `rma.rs`: the checked copies of `put_zcopy` and `get_zcopy`.
//!
//! [`SrcId`]: crate::SrcId

mod addr;
mod config;
mod iface;
mod mailbox;
mod rkey;
mod rma;
#[cfg(test)]
mod rma_tests;
#[cfg(test)]
mod tests;

pub use config::{SelfConfig, SelfEnvConfig, CONFIG_TABLE};

use crate::component::{Component, DeviceType, IfaceParams, MemoryDomain, TlResource};
use crate::{
    Access, Caps, ConnectMode, Error, Iface, IfaceAttr, MemHandle, PerfModel, RegCost, RemoteKey,
    Result,
};
use std::sync::Arc;

/// Largest `am_short` payload.
pub const MAX_SHORT: usize = 8 << 10;
/// Largest `am_bcopy` message.
pub const MAX_BCOPY: usize = 64 << 10;
/// Largest `am_zcopy` data (header not counted).
pub const MAX_ZCOPY: usize = 1 << 20;
/// Largest `am_zcopy` header.
pub const MAX_HDR: usize = 128;
/// Most iov entries of `am_zcopy`, `put_zcopy` and `get_zcopy`.
pub const MAX_IOV: usize = 16;
/// Largest `put_zcopy` and `get_zcopy`: `isize::MAX`, the size of the
/// largest possible Rust object, so in effect no limit. The copy happens at
/// post time, whatever its size.
pub const MAX_RMA: usize = isize::MAX as usize;
/// Cost of one registration: a table insert under a lock, nothing pinned
/// or mapped, so a small constant and nothing per byte.
pub const REG_COST: RegCost = RegCost { c0: 50e-9, c1: 0.0 };
/// Largest message in a mailbox.
const MAX_MSG: usize = MAX_ZCOPY + MAX_HDR;
/// Most messages one `progress` delivers.
const PROGRESS_BATCH: usize = 64;
/// The one device.
const DEV_NAME: &str = "memory";

/// The registrations of this process that `self` keys name.
static REGS: crate::RegTable = crate::RegTable::new("self");

/// The `self` component: one memory domain with one resource.
#[derive(Debug)]
pub struct SelfComponent {
    /// `None`: read `RUCX_SELF_*` when the memory domain opens.
    config: Option<SelfConfig>,
}

impl SelfComponent {
    /// A component with a fixed configuration instead of the environment's
    /// (checked when the memory domain opens).
    pub const fn with_config(config: SelfConfig) -> SelfComponent {
        SelfComponent {
            config: Some(config),
        }
    }
}

/// The `self` component, configured from `RUCX_SELF_*`.
pub static COMPONENT: SelfComponent = SelfComponent { config: None };

impl Component for SelfComponent {
    fn name(&self) -> &'static str {
        "self"
    }

    fn md_open(&self) -> Result<Vec<Box<dyn MemoryDomain>>> {
        let config = match self.config {
            Some(c) => c.validate()?,
            None => SelfConfig::from_env()?,
        };
        Ok(vec![Box::new(SelfMd { config })])
    }

    fn config_tables(&self) -> Vec<&'static crate::ucs::config::ConfigTable> {
        vec![&CONFIG_TABLE]
    }
}

/// The memory domain of `self`.
#[derive(Debug)]
struct SelfMd {
    config: SelfConfig,
}

impl MemoryDomain for SelfMd {
    fn name(&self) -> &str {
        "self"
    }

    fn resources(&self) -> Result<Vec<TlResource>> {
        Ok(vec![TlResource {
            tl_name: "self".into(),
            dev_name: DEV_NAME.into(),
            dev_type: DeviceType::SelfDev,
        }])
    }

    fn iface_open(&self, resource: &TlResource, _params: &IfaceParams) -> Result<Box<dyn Iface>> {
        if resource.tl_name != "self" || resource.dev_name != DEV_NAME {
            return Err(Error::InvalidParam(format!(
                "self: no resource {}/{}",
                resource.tl_name, resource.dev_name
            )));
        }
        Ok(Box::new(iface::SelfIface::open(&self.config)?))
    }

    fn can_register(&self) -> bool {
        true
    }

    /// [`REG_COST`].
    fn reg_cost(&self) -> RegCost {
        REG_COST
    }

    /// Records the range in the process-wide table; any `self` iface of
    /// the process then reaches it through a key. A length of 0 is allowed;
    /// a null pointer, a range that wraps or exceeds `isize::MAX` bytes, or
    /// unknown access bits are `InvalidParam`. The memory is not touched.
    unsafe fn mem_reg(&self, addr: *mut u8, len: usize, access: Access) -> Result<MemHandle> {
        REGS.register(addr, len, access)
    }

    /// Removes the registration once copies in progress on it are done;
    /// `InvalidParam` if it is not live.
    fn mem_dereg(&self, memh: &MemHandle) -> Result<()> {
        REGS.deregister(memh)
    }

    /// The key layout of `rkey.rs`; `InvalidParam` if `memh` is not live.
    fn mkey_pack(&self, memh: &MemHandle) -> Result<Vec<u8>> {
        Ok(rkey::pack(&REGS.key_fields(memh)?))
    }

    /// Checks length, tag, version, reserved bytes, access bits and range
    /// (`InvalidParam`) and that the key is of this process
    /// (`Unreachable`). Whether the registration is still live is checked
    /// by each operation.
    fn rkey_unpack(&self, packed: &[u8]) -> Result<RemoteKey> {
        let f = rkey::decode(packed)?;
        Ok(RemoteKey {
            md_name: "self".into(),
            packed: Arc::from(packed),
            addr: f.addr,
            len: f.len,
            access: f.access,
        })
    }
}

/// Attributes of every `self` iface.
fn iface_attr() -> IfaceAttr {
    IfaceAttr {
        // The operation bits are derived from the iface's families.
        caps: Caps::CONNECT_TO_IFACE | Caps::PEER_FAILURE | Caps::EVENT_FD,
        max_short: MAX_SHORT,
        max_bcopy: MAX_BCOPY,
        max_zcopy: MAX_ZCOPY,
        max_hdr: MAX_HDR,
        max_iov: MAX_IOV,
        max_put_zcopy: MAX_RMA,
        max_get_zcopy: MAX_RMA,
        // A memcpy: no wire latency, a few instructions per message, memory
        // bandwidth (UCX's self estimates 10 ns and 6911 MB/s).
        model: PerfModel {
            latency: 0.0,
            overhead: 10e-9,
            bandwidth: 6911.0 * 1024.0 * 1024.0,
        },
        connect: ConnectMode::ToIface,
    }
}
