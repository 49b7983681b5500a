//! What a device and its contexts share: the device's limits and the
//! state behind every context of one device. Imports neither `device` nor
//! `engine`, so that `device` depends on `engine` and not back.

use parking_lot::RwLock;
use rucx_rdma::DeviceAttr;

use crate::config::Settings;
use crate::mr::Tables;

/// Most scatter/gather entries per work request (as siw).
pub(crate) const MAX_SGE: usize = 6;
/// Largest inline send.
pub(crate) const MAX_INLINE: usize = 128;
/// Most work requests per queue.
pub(crate) const MAX_QP_WR: u32 = 32 * 1024;
/// Largest completion queue.
pub(crate) const MAX_CQE: u32 = 1 << 20;
/// Most receives of a shared receive queue.
pub(crate) const MAX_SRQ_WR: u32 = 1 << 20;
/// Most scatter entries of a receive on a shared receive queue.
pub(crate) const MAX_SRQ_SGE: u32 = 1;
/// Largest message: completions carry 32-bit lengths.
pub(crate) const MAX_MSG: u64 = 1 << 31;
/// Largest private data: MPA's 512 bytes minus RFC 6581's IRD/ORD word.
pub(crate) const MAX_PRIVATE_DATA: usize = 512 - 4;

/// What every context of a device shares.
#[derive(Debug)]
pub(crate) struct Shared {
    pub(crate) attr: DeviceAttr,
    pub(crate) settings: Settings,
    pub(crate) tables: RwLock<Tables>,
    /// The interface's address, IPv4 or IPv6 (connections are made from
    /// it, and only to addresses of its family).
    pub(crate) addr: std::net::IpAddr,
}
