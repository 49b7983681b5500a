//! Remote keys unpacked on an endpoint.

use super::mem::decode_packed;
use super::wire::KeyRef;
use crate::ucs::slab::SlabId;
use crate::uct::{Access, RemoteKey};
use crate::{Ep, Error, Result, Worker};

/// A peer's mapped memory as one endpoint reaches it: made by
/// [`Worker::rkey_unpack`] from the bytes of the peer's
/// [`crate::MemMap::rkey_pack`], valid for operations on that endpoint.
///
/// The declared range and rights are checked here before anything is
/// sent; the target checks again against its live registration wherever
/// it takes part in the access.
#[derive(Debug, Clone)]
pub struct Rkey {
    pub(crate) ep: SlabId,
    pub(crate) key: KeyRef,
    pub(crate) addr: u64,
    pub(crate) len: u64,
    pub(crate) access: Access,
    /// Per lane of the endpoint: the key of that lane's memory domain, if
    /// the peer's map was registered with it.
    pub(crate) lanes: Vec<Option<RemoteKey>>,
}

impl Rkey {
    /// Start of the remote range.
    pub fn addr(&self) -> u64 {
        self.addr
    }

    /// Length of the remote range.
    pub fn len(&self) -> u64 {
        self.len
    }

    /// Whether the remote range is empty.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Rights the peer granted.
    pub fn access(&self) -> Access {
        self.access
    }

    /// Checks an access of `len` bytes at `addr` with right `need` against
    /// what the key declares.
    pub(crate) fn check(&self, ep: Ep, addr: u64, len: usize, need: Access) -> Result<()> {
        if self.ep != ep.0 {
            return Err(Error::InvalidParam(
                "the remote key was unpacked on another endpoint".into(),
            ));
        }
        let inside = addr
            .checked_add(len as u64)
            .is_some_and(|end| addr >= self.addr && end <= self.addr + self.len);
        if !inside {
            return Err(Error::RemoteAccess(format!(
                "{len} bytes at {addr:#x} are outside the remote range of {} bytes at {:#x}",
                self.len, self.addr
            )));
        }
        if !self.access.contains(need) {
            return Err(Error::RemoteAccess(format!(
                "the remote memory grants {:?}, not {need:?}",
                self.access
            )));
        }
        Ok(())
    }
}

impl Worker {
    /// Unpacks a peer's packed key for operations on `ep`. The bytes are
    /// untrusted: a malformed key is an error, and the target checks every
    /// access it takes part in against its live registration.
    pub fn rkey_unpack(&self, ep: Ep, packed: &[u8]) -> Result<Rkey> {
        let p = decode_packed(packed)?;
        let st = self.core.eps.get(ep.0).ok_or(Error::InvalidHandle)?;
        let lanes = st
            .lanes
            .iter()
            .map(|&(iface, _)| {
                let md = self.core.ctx.md(*self.core.iface_md.get(iface)?)?;
                let (_, bytes) = p.mds.iter().find(|(name, _)| *name == md.name())?;
                match md.rkey_unpack(bytes) {
                    Ok(k) => Some(k),
                    Err(e) => {
                        tracing::debug!("rkey_unpack: {}: {e}", md.name());
                        None
                    }
                }
            })
            .collect();
        Ok(Rkey {
            ep: ep.0,
            key: p.key,
            addr: p.addr,
            len: p.len,
            access: p.access,
            lanes,
        })
    }
}
