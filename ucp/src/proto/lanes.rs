//! The protocols' one way to the transports.
//!
//! Protocol code never holds an iface. What it posts (active messages,
//! zero-copy reads and writes) goes through [`Lanes`], addressed by the lane's iface index and
//! transport endpoint. The worker implements it over its ifaces; protocol
//! tests implement it with a recorder, so that a protocol runs without a
//! worker or a transport. Zero-copy operations take buffers as
//! [`Lent`] ranges of a request's buffer, so that protocol code posts them
//! without `unsafe`. Waiting for room when a lane answers `NoResource`
//! is not here: a protocol records it (`room.rs`) and the executor asks
//! the transport.

use crate::request::buf::{Lent, LentMut};
use crate::ucs;
use crate::uct::{AmId, EpId, IfaceAttr, Posted, RemoteKey, Token};

/// Posting operations on the lanes of a worker.
///
/// Each method is the [`crate::uct::Iface`] operation of the same name on
/// iface `iface`; an index with no iface fails with
/// [`ucs::Error::InvalidParam`].
pub(crate) trait Lanes {
    /// Capabilities and limits of iface `iface`, `None` if there is none.
    fn attr(&self, iface: usize) -> Option<&IfaceAttr>;

    /// `ep`'s own sender of short active messages on iface `iface`
    /// ([`crate::uct::AmOps::short_sender`]); `None` if it has none.
    fn short_sender(&mut self, iface: usize, ep: EpId) -> Option<Box<dyn crate::uct::ShortSender>> {
        let _ = (iface, ep);
        None
    }

    /// `am_short` on `(iface, ep)`.
    fn am_short(
        &mut self,
        iface: usize,
        ep: EpId,
        id: AmId,
        header: u64,
        payload: &[u8],
    ) -> ucs::Result<Posted>;

    /// `am_bcopy` on `(iface, ep)`.
    fn am_bcopy(
        &mut self,
        iface: usize,
        ep: EpId,
        id: AmId,
        parts: &[&[u8]],
    ) -> ucs::Result<(Posted, usize)>;

    /// `am_zcopy` on `(iface, ep)`, of `header` and the lent `data`.
    fn am_zcopy(
        &mut self,
        iface: usize,
        ep: EpId,
        id: AmId,
        header: &[u8],
        data: Lent,
        token: Token,
    ) -> ucs::Result<Posted>;

    /// `put_zcopy` on `(iface, ep)` of the lent `src`.
    fn put_zcopy(
        &mut self,
        iface: usize,
        ep: EpId,
        src: Lent,
        remote_addr: u64,
        rkey: &RemoteKey,
        token: Token,
    ) -> ucs::Result<Posted>;

    /// `ep_create` on iface `iface`: a transport endpoint to the remote
    /// iface at `(dev_addr, iface_addr)` (a data lane connected when first
    /// used, `lazy_lanes.rs`).
    fn ep_create(&mut self, iface: usize, dev_addr: &[u8], iface_addr: &[u8]) -> ucs::Result<EpId>;

    /// The device atomics of iface `iface` ([`crate::uct::Iface::atomic`]),
    /// `None` if it has none (or there is no such iface).
    fn atomic(&mut self, iface: usize) -> Option<&mut dyn crate::uct::AtomicOps> {
        let _ = iface;
        None
    }

    /// `get_zcopy` on `(iface, ep)` into the lent `dst`.
    fn get_zcopy(
        &mut self,
        iface: usize,
        ep: EpId,
        dst: LentMut,
        remote_addr: u64,
        rkey: &RemoteKey,
        token: Token,
    ) -> ucs::Result<Posted>;
}

/// The error for a lane whose iface index names no iface.
pub(crate) fn no_iface(iface: usize) -> ucs::Error {
    ucs::Error::InvalidParam(format!("no iface {iface}"))
}
