//! Addresses of IP transports (TCP, RDMA over an IP network), IPv4 or
//! IPv6: device and iface addresses, and who can reach whom.
//!
//! Layout (fixed, documented, checked on decode):
//! * device address, 13 bytes (IPv4) or 25 bytes (IPv6): the family
//!   ([`FAMILY_V4`] = 4 or [`FAMILY_V6`] = 6, one byte), the address (4 or
//!   16 bytes, network order), then the host id (8 bytes, little-endian,
//!   [`crate::ucs::sys::host_id`]: boot id and network namespace), so that
//!   a loopback address is reachable only from the same host and
//!   namespace. Any other family byte, or a length that does not match
//!   the family, is malformed;
//! * iface address, 2 bytes: the listening TCP port, big-endian (network
//!   order).
//!
//! Reachability ([`Local::is_reachable`]):
//! * malformed addresses, port 0, unspecified, broadcast or multicast
//!   IPs, IPv6 link-local (no scope id travels) and IPv4-mapped IPv6
//!   addresses are unreachable;
//! * an iface reaches addresses of its own family only: an IPv4 iface
//!   never tries an IPv6 peer, and the other way round;
//! * a loopback remote (127.0.0.0/8, `::1`) is reachable only from a
//!   loopback iface of the same host id;
//! * a non-loopback remote is reachable from a non-loopback iface, and from a
//!   loopback iface only on the same host (the kernel routes it locally).
//!
//! A remote of the same host id is in this host's own network stack
//! ([`Local::same_host`]): whatever device names it, the kernel carries
//! the traffic over its loopback path.
//!
//! Subnets and routes are not checked: a non-loopback address is assumed
//! routable, as UCX does.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

use crate::ucs::netif::AddrFamily;

/// Family byte of an IPv4 device address.
pub const FAMILY_V4: u8 = 4;
/// Family byte of an IPv6 device address.
pub const FAMILY_V6: u8 = 6;
/// Length of an IPv4 device address.
pub const DEV_ADDR_V4_LEN: usize = 1 + 4 + 8;
/// Length of an IPv6 device address.
pub const DEV_ADDR_V6_LEN: usize = 1 + 16 + 8;
/// Length of an iface address.
pub const IFACE_ADDR_LEN: usize = 2;

/// Packs a device address ([`DEV_ADDR_V4_LEN`] or [`DEV_ADDR_V6_LEN`]
/// bytes).
pub fn pack_dev(ip: IpAddr, host_id: u64) -> Vec<u8> {
    let mut out = Vec::with_capacity(DEV_ADDR_V6_LEN);
    match ip {
        IpAddr::V4(a) => {
            out.push(FAMILY_V4);
            out.extend_from_slice(&a.octets());
        }
        IpAddr::V6(a) => {
            out.push(FAMILY_V6);
            out.extend_from_slice(&a.octets());
        }
    }
    out.extend_from_slice(&host_id.to_le_bytes());
    out
}

/// Packs an iface address.
pub fn pack_iface(port: u16) -> [u8; IFACE_ADDR_LEN] {
    port.to_be_bytes()
}

/// A decoded remote address.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Remote {
    /// Where to connect.
    pub addr: SocketAddr,
    /// The remote host id.
    pub host_id: u64,
}

/// Decodes a device address: the IP and the host id; `None` if malformed
/// (unknown family, wrong length).
pub fn unpack_dev(dev: &[u8]) -> Option<(IpAddr, u64)> {
    let (&family, rest) = dev.split_first()?;
    let (ip, host): (IpAddr, &[u8]) = match family {
        FAMILY_V4 if dev.len() == DEV_ADDR_V4_LEN => {
            let (a, host) = rest.split_first_chunk::<4>()?;
            (Ipv4Addr::from(*a).into(), host)
        }
        FAMILY_V6 if dev.len() == DEV_ADDR_V6_LEN => {
            let (a, host) = rest.split_first_chunk::<16>()?;
            (Ipv6Addr::from(*a).into(), host)
        }
        _ => return None,
    };
    let host: [u8; 8] = host.try_into().ok()?;
    Some((ip, u64::from_le_bytes(host)))
}

/// Whether a peer may be connected to at `ip` (see the module doc).
fn connectable(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(a) => !(a.is_unspecified() || a.is_broadcast() || a.is_multicast()),
        IpAddr::V6(a) => {
            let link_local = a.segments()[0] & 0xffc0 == 0xfe80;
            !(a.is_unspecified() || a.is_multicast() || link_local || a.to_ipv4_mapped().is_some())
        }
    }
}

/// Decodes a remote device and iface address; `None` if malformed or not
/// an address to connect to.
pub fn unpack(dev: &[u8], iface: &[u8]) -> Option<Remote> {
    let (ip, host_id) = unpack_dev(dev)?;
    let iface: &[u8; IFACE_ADDR_LEN] = iface.try_into().ok()?;
    let port = u16::from_be_bytes(*iface);
    if port == 0 || !connectable(ip) {
        return None;
    }
    Some(Remote {
        addr: SocketAddr::new(ip, port),
        host_id,
    })
}

/// What reachability is judged against: the local iface.
#[derive(Debug, Clone, Copy)]
pub struct Local {
    /// Our host id.
    pub host_id: u64,
    /// Whether our iface is on a loopback device.
    pub loopback: bool,
    /// The family of our iface's address.
    pub family: AddrFamily,
}

impl Local {
    /// Whether an endpoint from this iface can reach `remote` (see the
    /// module doc).
    pub fn reaches(&self, remote: &Remote) -> bool {
        if AddrFamily::of(remote.addr.ip()) != self.family {
            return false;
        }
        let same_host = remote.host_id == self.host_id;
        if remote.addr.ip().is_loopback() {
            self.loopback && same_host
        } else {
            !self.loopback || same_host
        }
    }

    /// Whether the remote device `dev` is in this host's own network stack
    /// (same host id: same boot and network namespace). `false` if
    /// malformed.
    pub fn same_host(&self, dev: &[u8]) -> bool {
        unpack_dev(dev).is_some_and(|(_, host)| host == self.host_id)
    }

    /// Decodes and judges a remote address.
    pub fn is_reachable(&self, dev: &[u8], iface: &[u8]) -> bool {
        unpack(dev, iface).is_some_and(|r| self.reaches(&r))
    }
}

#[cfg(test)]
mod tests;
