//! Socket addresses to and from `sockaddr`, for the connection manager.

use std::mem;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, SocketAddrV4, SocketAddrV6};

/// `addr` as a `sockaddr_storage` (holding a `sockaddr_in` or
/// `sockaddr_in6`).
pub(crate) fn to_raw(addr: SocketAddr) -> libc::sockaddr_storage {
    // SAFETY: sockaddr_storage is plain bytes; all zeroes is valid.
    let mut ss: libc::sockaddr_storage = unsafe { mem::zeroed() };
    match addr {
        SocketAddr::V4(a) => {
            let sin = libc::sockaddr_in {
                sin_family: libc::AF_INET as libc::sa_family_t,
                sin_port: a.port().to_be(),
                sin_addr: libc::in_addr {
                    s_addr: u32::from_ne_bytes(a.ip().octets()),
                },
                sin_zero: [0; 8],
            };
            // SAFETY: sockaddr_storage is larger than, and aligned for,
            // sockaddr_in.
            unsafe { std::ptr::write((&mut ss as *mut libc::sockaddr_storage).cast(), sin) };
        }
        SocketAddr::V6(a) => {
            let sin6 = libc::sockaddr_in6 {
                sin6_family: libc::AF_INET6 as libc::sa_family_t,
                sin6_port: a.port().to_be(),
                sin6_flowinfo: a.flowinfo(),
                sin6_addr: libc::in6_addr {
                    s6_addr: a.ip().octets(),
                },
                sin6_scope_id: a.scope_id(),
            };
            // SAFETY: as above, for sockaddr_in6.
            unsafe { std::ptr::write((&mut ss as *mut libc::sockaddr_storage).cast(), sin6) };
        }
    }
    ss
}

/// The address a `sockaddr` holds (`None` for other families, or NULL).
///
/// # Safety
///
/// `p` is NULL or points to a `sockaddr_in` or `sockaddr_in6` as its
/// family says (a `sockaddr_storage`, or the union of the connection
/// manager's route).
pub(crate) unsafe fn from_raw(p: *const libc::sockaddr) -> Option<SocketAddr> {
    if p.is_null() {
        return None;
    }
    // SAFETY: the caller gives a valid sockaddr; the family comes first.
    let family = i32::from(unsafe { (*p).sa_family });
    match family {
        libc::AF_INET => {
            // SAFETY: the family says it is a sockaddr_in.
            let sin = unsafe { std::ptr::read_unaligned(p.cast::<libc::sockaddr_in>()) };
            let ip = Ipv4Addr::from(sin.sin_addr.s_addr.to_ne_bytes());
            Some(SocketAddr::V4(SocketAddrV4::new(
                ip,
                u16::from_be(sin.sin_port),
            )))
        }
        libc::AF_INET6 => {
            // SAFETY: the family says it is a sockaddr_in6.
            let s6 = unsafe { std::ptr::read_unaligned(p.cast::<libc::sockaddr_in6>()) };
            let ip = Ipv6Addr::from(s6.sin6_addr.s6_addr);
            Some(SocketAddr::V6(SocketAddrV6::new(
                ip,
                u16::from_be(s6.sin6_port),
                s6.sin6_flowinfo,
                s6.sin6_scope_id,
            )))
        }
        _ => None,
    }
}

/// `ip` with port 0, the source of an address resolution.
pub(crate) fn any_port(ip: IpAddr) -> SocketAddr {
    SocketAddr::new(ip, 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn addresses_round_trip() {
        for a in [
            "10.1.2.3:4791".parse::<SocketAddr>().unwrap(),
            "[fe80::1]:20000".parse().unwrap(),
            "127.0.0.1:0".parse().unwrap(),
        ] {
            let raw = to_raw(a);
            // SAFETY: `raw` holds the address just written.
            let back = unsafe { from_raw((&raw as *const libc::sockaddr_storage).cast()) };
            assert_eq!(back, Some(a));
        }
        // SAFETY: NULL is allowed.
        assert_eq!(unsafe { from_raw(std::ptr::null()) }, None);
        assert_eq!(any_port("10.0.0.1".parse().unwrap()).port(), 0);
    }
}
