//! A worker's ifaces, and the protocols' [`Lanes`] over them.

use crate::proto::lanes::{no_iface, Lanes};
use crate::request::buf::{Lent, LentMut};
use crate::ucs;
use crate::uct::{offered, AmId, EpId, Iface, IfaceAttr, Posted, RemoteKey, Token};
use std::ops::{Deref, DerefMut};

/// The ifaces a worker opened, in the order of their indexes.
#[derive(Debug, Default)]
pub(crate) struct Ifaces(pub(crate) Vec<Box<dyn Iface>>);

impl Deref for Ifaces {
    type Target = Vec<Box<dyn Iface>>;
    fn deref(&self) -> &Self::Target {
        &self.0
    }
}

impl DerefMut for Ifaces {
    fn deref_mut(&mut self) -> &mut Self::Target {
        &mut self.0
    }
}

impl Ifaces {
    /// Asks iface `iface` to report when transport endpoint `ep` has room
    /// (`pending_ready`, which names the lane by iface and endpoint: the
    /// token carries nothing).
    pub(crate) fn pending_add(&mut self, iface: usize, ep: EpId) -> ucs::Result<()> {
        self.iface(iface)?.pending_add(ep, Token(0))
    }

    #[inline]
    fn iface(&mut self, iface: usize) -> ucs::Result<&mut dyn Iface> {
        match self.0.get_mut(iface) {
            Some(i) => Ok(i.as_mut()),
            None => Err(no_iface(iface)),
        }
    }
}

impl Lanes for Ifaces {
    fn attr(&self, iface: usize) -> Option<&IfaceAttr> {
        self.0.get(iface).map(|i| i.attr())
    }

    fn atomic(&mut self, iface: usize) -> Option<&mut dyn crate::uct::AtomicOps> {
        self.0.get_mut(iface)?.atomic()
    }

    fn ep_create(&mut self, iface: usize, dev_addr: &[u8], iface_addr: &[u8]) -> ucs::Result<EpId> {
        self.iface(iface)?.ep_create(dev_addr, iface_addr)
    }

    fn short_sender(&mut self, iface: usize, ep: EpId) -> Option<Box<dyn crate::uct::ShortSender>> {
        self.0.get_mut(iface)?.am()?.short_sender(ep)
    }

    #[inline]
    fn am_short(
        &mut self,
        iface: usize,
        ep: EpId,
        id: AmId,
        header: u64,
        payload: &[u8],
    ) -> ucs::Result<Posted> {
        offered(self.iface(iface)?.am(), "am")?.am_short(ep, id, header, payload)
    }

    #[inline]
    fn am_bcopy(
        &mut self,
        iface: usize,
        ep: EpId,
        id: AmId,
        parts: &[&[u8]],
    ) -> ucs::Result<(Posted, usize)> {
        offered(self.iface(iface)?.am(), "am")?.am_bcopy(ep, id, parts)
    }

    // SAFETY (the three zero-copy operations): a lent range lies in a
    // request's buffer, valid (and, lent for writing, the request's alone)
    // until the request completes, which waits for the operation's
    // completion; see `Lent`.
    #[allow(unsafe_code)]
    fn am_zcopy(
        &mut self,
        iface: usize,
        ep: EpId,
        id: AmId,
        header: &[u8],
        data: Lent,
        token: Token,
    ) -> ucs::Result<Posted> {
        let iov = [data.iov()];
        let ops = offered(self.iface(iface)?.zcopy(), "am_zcopy")?;
        // SAFETY: see above.
        unsafe { ops.am_zcopy(ep, id, header, &iov, token) }
    }

    #[allow(unsafe_code)]
    fn put_zcopy(
        &mut self,
        iface: usize,
        ep: EpId,
        src: Lent,
        remote_addr: u64,
        rkey: &RemoteKey,
        token: Token,
    ) -> ucs::Result<Posted> {
        let iov = [src.iov()];
        let ops = offered(self.iface(iface)?.put(), "put")?;
        // SAFETY: see above.
        unsafe { ops.put_zcopy(ep, &iov, remote_addr, rkey, token) }
    }

    #[allow(unsafe_code)]
    fn get_zcopy(
        &mut self,
        iface: usize,
        ep: EpId,
        dst: LentMut,
        remote_addr: u64,
        rkey: &RemoteKey,
        token: Token,
    ) -> ucs::Result<Posted> {
        let iov = [dst.iov()];
        let ops = offered(self.iface(iface)?.get(), "get")?;
        // SAFETY: see above.
        unsafe { ops.get_zcopy(ep, &iov, remote_addr, rkey, token) }
    }
}
