//! The operation families an iface may offer, each a trait reached through
//! an accessor of [`Iface`], and the capability bits that follow from them.
//!
//! An iface that does not offer a family returns `None` from its accessor:
//! there is no method to call, so nothing answers "unsupported". The bits
//! of [`Caps::OPS`] are derived ([`op_caps`]) from the accessors and the
//! limits of [`IfaceAttr`], never written by hand.

use crate::iface::{AmId, Caps, EpId, Iface, IfaceAttr, Iov, IovMut, Posted, Token};
use crate::{Error, RemoteKey, Result};

mod atomic;
pub use atomic::{AtomicCaps, AtomicOp, AtomicOps, AtomicWord};

/// Copied active messages: `am_short` and `am_bcopy`
/// ([`Caps::AM_SHORT`], [`Caps::AM_BCOPY`]), reached through [`Iface::am`].
pub trait AmOps {
    /// Sends `header` (8 bytes, little-endian) and `payload` as one active
    /// message. `payload.len() <= attr().max_short`. Never `InFlight`.
    fn am_short(&mut self, ep: EpId, id: AmId, header: u64, payload: &[u8]) -> Result<Posted>;

    /// Copies `parts` into a transport buffer and sends them as one active
    /// message; returns the number of bytes sent. Their total length must
    /// not exceed `attr().max_bcopy`. `Done` means the parts may be reused.
    fn am_bcopy(&mut self, ep: EpId, id: AmId, parts: &[&[u8]]) -> Result<(Posted, usize)>;

    /// A sender of `ep`'s short active messages that another thread may
    /// use while this iface is used by its owner: a send path of the
    /// endpoint's own, without the iface (and the lock that guards it).
    /// `None` (the default) if the transport has none.
    ///
    /// Messages it sends and those the iface sends on `ep` are not ordered
    /// with each other unless the caller orders them (it sends through one
    /// of the two at a time). It must not be used after `ep` is destroyed:
    /// what it sends then may be taken as another sender's.
    fn short_sender(&mut self, ep: EpId) -> Option<Box<dyn ShortSender>> {
        let _ = ep;
        None
    }
}

/// One endpoint's short active messages, sent without its iface
/// ([`AmOps::short_sender`]).
pub trait ShortSender: Send + std::fmt::Debug {
    /// As [`AmOps::am_short`]: `Ok(true)` once sent, `Ok(false)` when the
    /// transport has no room now (nothing was sent).
    fn am_short(&mut self, id: AmId, header: u64, payload: &[u8]) -> Result<bool>;
}

/// Zero-copy active messages ([`Caps::AM_ZCOPY`]), reached through
/// [`Iface::zcopy`].
pub trait AmZcopyOps {
    /// Sends `header` (copied) followed by the memory of `iov` (not copied)
    /// as one active message. `header.len() <= attr().max_hdr`, at most
    /// `attr().max_iov` entries, their total at most `attr().max_zcopy`.
    ///
    /// # Safety
    ///
    /// When this returns `InFlight`, every range of `iov` must stay valid
    /// and unchanged until `completed(token, ..)` is reported for it.
    unsafe fn am_zcopy(
        &mut self,
        ep: EpId,
        id: AmId,
        header: &[u8],
        iov: &[Iov],
        token: Token,
    ) -> Result<Posted>;
}

/// Writing a peer's registered memory ([`Caps::PUT_ZCOPY`]), reached
/// through [`Iface::put`].
pub trait PutOps {
    /// Writes the local ranges of `iov` to `remote_addr` in the peer's
    /// memory named by `rkey`. The peer checks the key, the range and the
    /// rights; a refused access fails the operation (and, for transports
    /// where the peer can only say so by closing, the endpoint). At most
    /// `attr().max_iov` entries, their total at most `attr().max_put_zcopy`.
    ///
    /// # Safety
    ///
    /// As for [`AmZcopyOps::am_zcopy`]: the ranges stay valid and unchanged
    /// until the operation completes.
    unsafe fn put_zcopy(
        &mut self,
        ep: EpId,
        iov: &[Iov],
        remote_addr: u64,
        rkey: &RemoteKey,
        token: Token,
    ) -> Result<Posted>;
}

/// Reading a peer's registered memory ([`Caps::GET_ZCOPY`]), reached
/// through [`Iface::get`].
pub trait GetOps {
    /// Reads `remote_addr` of the peer's memory named by `rkey` into the
    /// local ranges of `iov`. At most `attr().max_iov` entries, their total
    /// at most `attr().max_get_zcopy`.
    ///
    /// # Safety
    ///
    /// The ranges of `iov` must stay valid for writes, and untouched by
    /// anyone else, until the operation completes.
    unsafe fn get_zcopy(
        &mut self,
        ep: EpId,
        iov: &[IovMut],
        remote_addr: u64,
        rkey: &RemoteKey,
        token: Token,
    ) -> Result<Posted>;
}

impl Caps {
    /// The bits that name operation families: derived by [`op_caps`], as
    /// opposed to the bits that describe other properties of an iface
    /// (peer failure, event fd, connection mode), which are data.
    pub const OPS: Caps = Caps::AM_SHORT
        .union(Caps::AM_BCOPY)
        .union(Caps::AM_ZCOPY)
        .union(Caps::PENDING)
        .union(Caps::PUT_ZCOPY)
        .union(Caps::GET_ZCOPY)
        .union(Caps::ATOMIC_DEVICE);
}

/// The operation bits of `iface`: a family's bits are set where its
/// accessor returns an implementation and its size limit in
/// [`IfaceAttr`] is above zero (an operation that can carry nothing is not
/// offered); [`Caps::ATOMIC_DEVICE`] where [`Iface::atomic`] gives an
/// implementation that executes at least one operation. [`Caps::PENDING`] is always set: every iface has
/// [`Iface::pending_add`].
pub fn op_caps(iface: &mut dyn Iface) -> Caps {
    let a = iface.attr().clone();
    let am = iface.am().is_some();
    let zcopy = iface.zcopy().is_some();
    let put = iface.put().is_some();
    let get = iface.get().is_some();
    let amo = iface.atomic().is_some_and(|a| !a.atomic_caps().is_empty());
    let mut caps = family_caps(&a, am, zcopy, put, get);
    caps.set(Caps::ATOMIC_DEVICE, amo);
    caps
}

/// The operation bits for ifaces with the given families and limits.
fn family_caps(a: &IfaceAttr, am: bool, zcopy: bool, put: bool, get: bool) -> Caps {
    let mut caps = Caps::PENDING;
    for (on, bit) in [
        (am && a.max_short > 0, Caps::AM_SHORT),
        (am && a.max_bcopy > 0, Caps::AM_BCOPY),
        (zcopy && a.max_zcopy > 0 && a.max_iov > 0, Caps::AM_ZCOPY),
        (put && a.max_put_zcopy > 0, Caps::PUT_ZCOPY),
        (get && a.max_get_zcopy > 0, Caps::GET_ZCOPY),
    ] {
        caps.set(bit, on);
    }
    caps
}

/// The capabilities of `iface` with its operation bits derived: the
/// property bits of its attributes, plus [`op_caps`]. A transport stores
/// this in its [`IfaceAttr`] once the iface is built.
pub fn derive_caps(iface: &mut dyn Iface) -> Caps {
    iface.attr().caps.difference(Caps::OPS) | op_caps(iface)
}

/// The operations an accessor gave (`ops`), or, where the iface has no
/// such family, the error for asking: [`Error::OpUnsupported`] naming
/// `family`. For callers that chose the iface by its [`Caps`] and treat a
/// missing family as a failed operation, e.g.
/// `offered(iface.am(), "am").and_then(|am| am.am_short(..))`.
pub fn offered<'a, T: ?Sized>(ops: Option<&'a mut T>, family: &'static str) -> Result<&'a mut T> {
    ops.ok_or_else(|| Error::op_unsupported("this iface", family))
}

#[cfg(test)]
mod tests;
