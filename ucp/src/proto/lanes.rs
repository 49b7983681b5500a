//! The protocols' one way to the transports.
//!
//! Protocol code never holds an iface. What it posts (active messages,
//! zero-copy reads and writes, a request to be told when an endpoint has
//! room) goes through [`Lanes`], addressed by the lane's iface index and
//! transport endpoint. The worker implements it over its ifaces; protocol
//! tests implement it with a recorder, so that a protocol runs without a
//! worker or a transport.

use crate::ucs;
use crate::uct::{AmId, EpId, IfaceAttr, Iov, IovMut, Posted, RemoteKey, Token};

/// Posting operations on the lanes of a worker.
///
/// Each method is the [`crate::uct::Iface`] operation of the same name on
/// iface `iface`; an index with no iface fails with
/// [`ucs::Error::InvalidParam`].
#[allow(unsafe_code)]
pub(crate) trait Lanes {
    /// Capabilities and limits of iface `iface`, `None` if there is none.
    fn attr(&self, iface: usize) -> Option<&IfaceAttr>;

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

    /// `am_zcopy` on `(iface, ep)`.
    ///
    /// # Safety
    ///
    /// As for `Iface::am_zcopy`: when this returns `InFlight`, the ranges
    /// of `iov` stay valid and unchanged until `token` completes.
    unsafe fn am_zcopy(
        &mut self,
        iface: usize,
        ep: EpId,
        id: AmId,
        header: &[u8],
        iov: &[Iov],
        token: Token,
    ) -> ucs::Result<Posted>;

    /// `put_zcopy` on `(iface, ep)`.
    ///
    /// # Safety
    ///
    /// As for `Iface::put_zcopy`.
    unsafe fn put_zcopy(
        &mut self,
        iface: usize,
        ep: EpId,
        iov: &[Iov],
        remote_addr: u64,
        rkey: &RemoteKey,
        token: Token,
    ) -> ucs::Result<Posted>;

    /// `get_zcopy` on `(iface, ep)`.
    ///
    /// # Safety
    ///
    /// As for `Iface::get_zcopy`.
    unsafe fn get_zcopy(
        &mut self,
        iface: usize,
        ep: EpId,
        iov: &[IovMut],
        remote_addr: u64,
        rkey: &RemoteKey,
        token: Token,
    ) -> ucs::Result<Posted>;

    /// `pending_add` on `(iface, ep)`.
    fn pending_add(&mut self, iface: usize, ep: EpId, token: Token) -> ucs::Result<()>;
}

/// The error for a lane whose iface index names no iface.
pub(crate) fn no_iface(iface: usize) -> ucs::Error {
    ucs::Error::InvalidParam(format!("no iface {iface}"))
}
