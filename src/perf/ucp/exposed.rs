//! The buffer a worker exposes to the peer's one-sided operations, for
//! [`UcpWorker`](super::UcpWorker) and the `-T` threads' workers alike: a
//! memory map of the context, its packed key, and the accesses the
//! runner's checks make to it.

use crate::perf::error::{PerfError, Result};
use crate::perf::worker::Exposed;
use rucx_ucp::{Access, Context, MemMap};

/// What the peer may do to the exposed buffer.
const EXPOSED_ACCESS: Access = Access::REMOTE_READ
    .union(Access::REMOTE_WRITE)
    .union(Access::REMOTE_ATOMIC);

/// Maps `len` bytes of `ctx` into `slot` (unmapping what was there
/// first); the address and packed key to send the peer.
pub(super) fn expose(ctx: &Context, slot: &mut Option<MemMap>, len: usize) -> Result<Exposed> {
    *slot = None;
    let map = ctx
        .mem_alloc(len, EXPOSED_ACCESS)
        .map_err(|e| PerfError::transport("allocate the exposed buffer", e))?;
    let rkey = map
        .rkey_pack()
        .map_err(|e| PerfError::transport("pack the remote key", e))?;
    let addr = map.addr();
    *slot = Some(map);
    Ok(Exposed { addr, rkey })
}

/// The exposed buffer, or an error if none is.
pub(super) fn map(slot: &Option<MemMap>) -> Result<&MemMap> {
    slot.as_ref()
        .ok_or_else(|| PerfError::Params("no buffer is exposed".into()))
}

/// The byte at `offset`, by an atomic load of the aligned word that
/// holds it: the buffer is page-aligned and a multiple of 8 bytes long.
#[inline]
pub(super) fn byte(map: &MemMap, offset: usize) -> Result<u8> {
    let word = offset & !7;
    let v = map
        .load_u64(word)
        .map_err(|e| PerfError::transport("read the exposed buffer", e))?;
    Ok(v.to_ne_bytes()[offset - word])
}

/// Copies the bytes at `offset` into `out`.
pub(super) fn read(map: &MemMap, offset: usize, out: &mut [u8]) -> Result<()> {
    map.read(offset, out)
        .map_err(|e| PerfError::transport("read the exposed buffer", e))
}

/// Writes `data` at `offset`.
pub(super) fn write(map: &MemMap, offset: usize, data: &[u8]) -> Result<()> {
    map.write(offset, data)
        .map_err(|e| PerfError::transport("write the exposed buffer", e))
}
