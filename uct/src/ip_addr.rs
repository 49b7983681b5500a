//! Addresses of IPv4 transports (TCP, RDMA over an IP network): device and
//! iface addresses, and who can reach whom.
//!
//! Layout (fixed, documented, checked on decode):
//! * device address, 12 bytes: the IPv4 address (4 bytes, network order),
//!   then the host id (8 bytes, little-endian, [`crate::ucs::sys::host_id`]:
//!   boot id and network namespace), so that a loopback address is
//!   reachable only from the same host and namespace;
//! * iface address, 2 bytes: the listening TCP port, big-endian (network
//!   order).
//!
//! Reachability ([`Local::is_reachable`]):
//! * malformed addresses, port 0, and unspecified, broadcast or multicast IPs
//!   are unreachable;
//! * a loopback remote (127.0.0.0/8) is reachable only from a loopback iface
//!   of the same host id;
//! * a non-loopback remote is reachable from a non-loopback iface, and from a
//!   loopback iface only on the same host (the kernel routes it locally).
//!
//! A remote of the same host id is in this host's own network stack
//! ([`Local::same_host`]): whatever device names it, the kernel carries
//! the traffic over its loopback path.
//!
//! Subnets and routes are not checked: a non-loopback address is assumed
//! routable, as UCX does.

use std::net::{Ipv4Addr, SocketAddrV4};

/// Length of a device address.
pub const DEV_ADDR_LEN: usize = 12;
/// Length of an iface address.
pub const IFACE_ADDR_LEN: usize = 2;

/// Packs a device address.
pub fn pack_dev(ip: Ipv4Addr, host_id: u64) -> [u8; DEV_ADDR_LEN] {
    let mut out = [0u8; DEV_ADDR_LEN];
    out[..4].copy_from_slice(&ip.octets());
    out[4..].copy_from_slice(&host_id.to_le_bytes());
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
    pub addr: SocketAddrV4,
    /// The remote host id.
    pub host_id: u64,
}

/// Decodes a remote device and iface address; `None` if malformed.
pub fn unpack(dev: &[u8], iface: &[u8]) -> Option<Remote> {
    let dev: &[u8; DEV_ADDR_LEN] = dev.try_into().ok()?;
    let iface: &[u8; IFACE_ADDR_LEN] = iface.try_into().ok()?;
    let ip = Ipv4Addr::new(dev[0], dev[1], dev[2], dev[3]);
    let mut host = [0u8; 8];
    host.copy_from_slice(&dev[4..]);
    let port = u16::from_be_bytes(*iface);
    if port == 0 || ip.is_unspecified() || ip.is_broadcast() || ip.is_multicast() {
        return None;
    }
    Some(Remote {
        addr: SocketAddrV4::new(ip, port),
        host_id: u64::from_le_bytes(host),
    })
}

/// What reachability is judged against: the local iface.
#[derive(Debug, Clone, Copy)]
pub struct Local {
    /// Our host id.
    pub host_id: u64,
    /// Whether our iface is on a loopback device.
    pub loopback: bool,
}

impl Local {
    /// Whether an endpoint from this iface can reach `remote` (see the
    /// module doc).
    pub fn reaches(&self, remote: &Remote) -> bool {
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
        let Ok(dev) = <&[u8; DEV_ADDR_LEN]>::try_from(dev) else {
            return false;
        };
        let mut host = [0u8; 8];
        host.copy_from_slice(&dev[4..]);
        u64::from_le_bytes(host) == self.host_id
    }

    /// Decodes and judges a remote address.
    pub fn is_reachable(&self, dev: &[u8], iface: &[u8]) -> bool {
        unpack(dev, iface).is_some_and(|r| self.reaches(&r))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip() {
        let dev = pack_dev(Ipv4Addr::new(10, 1, 2, 3), 0x1122_3344_5566_7788);
        let iface = pack_iface(4000);
        assert_eq!(&dev[..4], &[10, 1, 2, 3]);
        assert_eq!(iface, [0x0f, 0xa0]);
        let r = unpack(&dev, &iface).unwrap();
        assert_eq!(r.addr, "10.1.2.3:4000".parse().unwrap());
        assert_eq!(r.host_id, 0x1122_3344_5566_7788);
    }

    #[test]
    fn same_host_is_by_host_id_whatever_the_address() {
        let me = Local {
            host_id: 7,
            loopback: false,
        };
        let lo = Ipv4Addr::LOCALHOST;
        let net = Ipv4Addr::new(192, 0, 2, 9);
        assert!(me.same_host(&pack_dev(lo, 7)));
        assert!(me.same_host(&pack_dev(net, 7)));
        assert!(
            !me.same_host(&pack_dev(net, 8)),
            "another namespace or host"
        );
        assert!(!me.same_host(&pack_dev(net, 7)[..11]), "malformed");
        assert!(!me.same_host(&[]));
    }

    #[test]
    fn malformed_is_unreachable() {
        let me = Local {
            host_id: 7,
            loopback: false,
        };
        let dev = pack_dev(Ipv4Addr::new(10, 0, 0, 1), 7);
        assert!(me.is_reachable(&dev, &pack_iface(1)));
        assert!(!me.is_reachable(&dev[..11], &pack_iface(1)));
        assert!(!me.is_reachable(&dev, &[1]));
        assert!(!me.is_reachable(&dev, &[1, 2, 3]));
        assert!(!me.is_reachable(&dev, &pack_iface(0)));
        assert!(!me.is_reachable(&[], &[]));
        for ip in [
            Ipv4Addr::UNSPECIFIED,
            Ipv4Addr::BROADCAST,
            Ipv4Addr::new(224, 0, 0, 1),
        ] {
            assert!(!me.is_reachable(&pack_dev(ip, 7), &pack_iface(1)), "{ip}");
        }
    }

    #[test]
    fn loopback_rules() {
        let lo = Ipv4Addr::LOCALHOST;
        let net = Ipv4Addr::new(192, 0, 2, 9);
        let port = pack_iface(5000);
        let on_lo = Local {
            host_id: 1,
            loopback: true,
        };
        let on_net = Local {
            host_id: 1,
            loopback: false,
        };
        // Loopback remote: loopback iface on the same host only.
        assert!(on_lo.is_reachable(&pack_dev(lo, 1), &port));
        assert!(!on_lo.is_reachable(&pack_dev(lo, 2), &port));
        assert!(!on_net.is_reachable(&pack_dev(lo, 1), &port));
        // Network remote: any network iface; a loopback iface on this host.
        assert!(on_net.is_reachable(&pack_dev(net, 2), &port));
        assert!(on_lo.is_reachable(&pack_dev(net, 1), &port));
        assert!(!on_lo.is_reachable(&pack_dev(net, 2), &port));
    }
}
