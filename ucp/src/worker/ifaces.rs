//! A worker's ifaces, and the protocols' [`Lanes`] over them.

use crate::proto::lanes::{no_iface, Lanes};
use crate::ucs;
use crate::uct::{AmId, EpId, Iface, IfaceAttr, Iov, IovMut, Posted, RemoteKey, Token};
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
    #[inline]
    fn get(&mut self, iface: usize) -> ucs::Result<&mut dyn Iface> {
        match self.0.get_mut(iface) {
            Some(i) => Ok(i.as_mut()),
            None => Err(no_iface(iface)),
        }
    }
}

#[allow(unsafe_code)]
impl Lanes for Ifaces {
    fn attr(&self, iface: usize) -> Option<&IfaceAttr> {
        self.0.get(iface).map(|i| i.attr())
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
        self.get(iface)?.am_short(ep, id, header, payload)
    }

    #[inline]
    fn am_bcopy(
        &mut self,
        iface: usize,
        ep: EpId,
        id: AmId,
        parts: &[&[u8]],
    ) -> ucs::Result<(Posted, usize)> {
        self.get(iface)?.am_bcopy(ep, id, parts)
    }

    #[allow(unsafe_code)]
    unsafe fn am_zcopy(
        &mut self,
        iface: usize,
        ep: EpId,
        id: AmId,
        header: &[u8],
        iov: &[Iov],
        token: Token,
    ) -> ucs::Result<Posted> {
        // SAFETY: the caller keeps the contract of `Iface::am_zcopy`.
        unsafe { self.get(iface)?.am_zcopy(ep, id, header, iov, token) }
    }

    #[allow(unsafe_code)]
    unsafe fn put_zcopy(
        &mut self,
        iface: usize,
        ep: EpId,
        iov: &[Iov],
        remote_addr: u64,
        rkey: &RemoteKey,
        token: Token,
    ) -> ucs::Result<Posted> {
        // SAFETY: the caller keeps the contract of `Iface::put_zcopy`.
        unsafe {
            self.get(iface)?
                .put_zcopy(ep, iov, remote_addr, rkey, token)
        }
    }

    #[allow(unsafe_code)]
    unsafe fn get_zcopy(
        &mut self,
        iface: usize,
        ep: EpId,
        iov: &[IovMut],
        remote_addr: u64,
        rkey: &RemoteKey,
        token: Token,
    ) -> ucs::Result<Posted> {
        // SAFETY: the caller keeps the contract of `Iface::get_zcopy`.
        unsafe {
            self.get(iface)?
                .get_zcopy(ep, iov, remote_addr, rkey, token)
        }
    }

    fn pending_add(&mut self, iface: usize, ep: EpId, token: Token) -> ucs::Result<()> {
        self.get(iface)?.pending_add(ep, token)
    }
}
