//! Memory registration of the `tcp` memory domain.
//!
//! TCP pins and maps nothing: a registration is an entry in the
//! process-wide [`REGS`] table, which the target side of a put
//! (`rx_put.rs`) checks before it writes, and a key names the entry and
//! the process (`rkey.rs`). Every iface of the process shares the table,
//! as a key names a process, not an iface.

use std::sync::Arc;

use uct::ucs::{Error, Result};
use uct::{Access, MemHandle, RegCost, RegTable, RemoteKey};

use crate::name::NAME;
use crate::rkey;

/// The registrations of this process that `tcp` keys name.
pub(crate) static REGS: RegTable = RegTable::new("tcp");

/// Cost of one registration: a slab insert under an uncontended write
/// lock, nothing pinned or mapped, so a constant and nothing per byte.
/// Measured (`tests/bench.rs`, `registration`, release build, a shared
/// 2-core host): `mem_reg` about 70 ns each while the table grows to 200k
/// live entries, `mem_dereg` about 16 ns, and `mem_reg` + `mkey_pack` (it
/// allocates the 64-byte key) + `mem_dereg` of one registration about
/// 67 ns; 50 ns is the registration's share.
pub(crate) const REG_COST: RegCost = RegCost { c0: 50e-9, c1: 0.0 };

/// Records a registration. A length of 0 is allowed; a null pointer, a
/// range that wraps or exceeds `isize::MAX` bytes, or unknown access bits
/// are `InvalidParam`. The memory is not touched.
pub(crate) fn register(addr: *mut u8, len: usize, access: Access) -> Result<MemHandle> {
    REGS.register(addr, len, access)
}

/// Ends a registration once writes in progress on it are done;
/// `InvalidParam` if it is not live.
pub(crate) fn deregister(memh: &MemHandle) -> Result<()> {
    REGS.deregister(memh)
}

/// The packed key of a live registration (layout in `rkey.rs`).
pub(crate) fn pack(memh: &MemHandle) -> Result<Vec<u8>> {
    Ok(rkey::pack(&REGS.key_fields(memh)?))
}

/// Checks the format of a peer's key. Whether it is the target's own, and
/// whether its registration is live, is checked by the target on each put.
pub(crate) fn unpack(packed: &[u8]) -> Result<RemoteKey> {
    let k = rkey::decode(packed)?;
    Ok(RemoteKey {
        md_name: NAME.into(),
        packed: Arc::from(packed),
        addr: k.fields.addr,
        len: k.fields.len,
        access: k.fields.access,
    })
}

/// The decoded key of a put, refusing keys of other memory domains.
pub(crate) fn put_key(rkey: &RemoteKey) -> Result<rkey::Key> {
    if rkey.md_name != NAME {
        return Err(Error::InvalidParam(format!(
            "tcp: remote key of memory domain {:?}",
            rkey.md_name
        )));
    }
    rkey::decode(&rkey.packed)
}

#[cfg(test)]
mod tests {
    use super::*;
    use uct::ucs::Status;

    #[test]
    fn register_pack_unpack_dereg() {
        let mut buf = vec![0u8; 100];
        let rw = Access::REMOTE_READ | Access::REMOTE_WRITE;
        let h = register(buf.as_mut_ptr(), 100, rw).unwrap();
        let packed = pack(&h).unwrap();
        let k = unpack(&packed).unwrap();
        assert_eq!(k.md_name, "tcp");
        assert_eq!((k.addr, k.len, k.access), (h.addr as u64, 100, rw));
        assert_eq!(&k.packed[..], &packed[..]);
        let d = put_key(&k).unwrap();
        assert!(d.owner.is_me());
        deregister(&h).unwrap();
        assert_eq!(deregister(&h).unwrap_err().status(), Status::InvalidParam);
        assert!(pack(&h).is_err());
        // The key still unpacks: only the target can tell it is dead.
        assert!(unpack(&packed).is_ok());
        let mut other = k.clone();
        other.md_name = "self".into();
        assert_eq!(put_key(&other).unwrap_err().status(), Status::InvalidParam);
        assert!(register(std::ptr::null_mut(), 1, rw).is_err());
    }
}
