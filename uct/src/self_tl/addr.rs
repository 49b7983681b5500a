//! Addresses of `self` ifaces.
//!
//! Device address: host id (8 bytes, `ucs::sys::host_id`) then process id (4 bytes), both
//! little-endian. Iface address: the iface id (8 bytes, little-endian),
//! unique within the process and never reused by it. Iface ids start at a
//! random per-process offset, so that an address from another process
//! cannot name a local iface even if host id and pid were to collide.

use crate::{Error, Result};
use std::collections::hash_map::RandomState;
use std::hash::{BuildHasher, Hasher};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::OnceLock;

/// Length of a device address.
pub(super) const DEV_ADDR_LEN: usize = 12;
/// Length of an iface address.
pub(super) const IFACE_ADDR_LEN: usize = 8;

/// This process's device address.
pub(super) fn device_addr() -> &'static [u8; DEV_ADDR_LEN] {
    static ADDR: OnceLock<[u8; DEV_ADDR_LEN]> = OnceLock::new();
    ADDR.get_or_init(|| encode_dev(crate::ucs::sys::host_id(), std::process::id()))
}

/// A fresh iface id, never returned before in this process.
pub(super) fn next_iface_id() -> u64 {
    static BASE: OnceLock<u64> = OnceLock::new();
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let base = *BASE.get_or_init(|| RandomState::new().build_hasher().finish());
    base.wrapping_add(NEXT.fetch_add(1, Ordering::Relaxed))
}

fn encode_dev(host: u64, pid: u32) -> [u8; DEV_ADDR_LEN] {
    let mut a = [0u8; DEV_ADDR_LEN];
    a[..8].copy_from_slice(&host.to_le_bytes());
    a[8..].copy_from_slice(&pid.to_le_bytes());
    a
}

/// Decodes an iface address: `InvalidAddr` if malformed.
pub(super) fn decode_iface(addr: &[u8]) -> Result<u64> {
    let bytes: [u8; IFACE_ADDR_LEN] = addr.try_into().map_err(|_| {
        Error::InvalidAddr(format!(
            "self iface address of {} bytes, expected {IFACE_ADDR_LEN}",
            addr.len()
        ))
    })?;
    Ok(u64::from_le_bytes(bytes))
}

/// Checks that a device address is this process: `InvalidAddr` if
/// malformed, `Unreachable` if another process or host.
pub(super) fn check_dev(addr: &[u8]) -> Result<()> {
    if addr.len() != DEV_ADDR_LEN {
        return Err(Error::InvalidAddr(format!(
            "self device address of {} bytes, expected {DEV_ADDR_LEN}",
            addr.len()
        )));
    }
    if addr != device_addr() {
        return Err(Error::Unreachable(
            "self reaches only ifaces of its own process".into(),
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Status;

    #[test]
    fn device_address_names_this_process() {
        let a = device_addr();
        assert_eq!(&a[8..], &std::process::id().to_le_bytes());
        assert!(check_dev(a).is_ok());
        let mut other = *a;
        other[8] ^= 1;
        assert_eq!(check_dev(&other).unwrap_err().status(), Status::Unreachable);
        assert_eq!(
            check_dev(&a[..11]).unwrap_err().status(),
            Status::InvalidAddr
        );
        assert_eq!(check_dev(&[]).unwrap_err().status(), Status::InvalidAddr);
    }

    #[test]
    fn iface_ids_are_fresh_and_decode() {
        let a = next_iface_id();
        let b = next_iface_id();
        assert_ne!(a, b);
        assert_eq!(decode_iface(&a.to_le_bytes()).unwrap(), a);
        assert!(decode_iface(&[1, 2, 3]).is_err());
        assert!(decode_iface(&[0; 9]).is_err());
    }
}
