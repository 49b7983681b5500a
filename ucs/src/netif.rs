//! Network interfaces: the IPv4 interfaces that are up, and their speed
//! (what network transports list as devices).

use std::ffi::CStr;
use std::io;
use std::net::Ipv4Addr;

use crate::{Error, Result};

/// An IPv4 interface that is up.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NetIf {
    /// Interface name, e.g. `"lo"`.
    pub name: String,
    /// Its (first) IPv4 address.
    pub addr: Ipv4Addr,
    /// Whether it is a loopback interface.
    pub loopback: bool,
}

/// Every interface that is up and has an IPv4 address, in the order the
/// system lists them, one entry per name (the first address wins).
pub fn ipv4_interfaces() -> Result<Vec<NetIf>> {
    let mut head: *mut libc::ifaddrs = std::ptr::null_mut();
    // SAFETY: getifaddrs writes a list head into `head`, freed below.
    if unsafe { libc::getifaddrs(&mut head) } == -1 {
        return Err(Error::io("getifaddrs", io::Error::last_os_error()));
    }
    let mut out: Vec<NetIf> = Vec::new();
    let mut cur = head;
    while !cur.is_null() {
        // SAFETY: `cur` is a node of the list getifaddrs returned, not yet
        // freed.
        let ifa = unsafe { &*cur };
        cur = ifa.ifa_next;
        let flags = ifa.ifa_flags;
        if flags & libc::IFF_UP as libc::c_uint == 0 || ifa.ifa_addr.is_null() {
            continue;
        }
        // SAFETY: ifa_addr is non-null and points at a sockaddr of the list.
        let family = unsafe { (*ifa.ifa_addr).sa_family };
        if i32::from(family) != libc::AF_INET || ifa.ifa_name.is_null() {
            continue;
        }
        // SAFETY: an AF_INET address is a sockaddr_in.
        let sin = unsafe { &*ifa.ifa_addr.cast::<libc::sockaddr_in>() };
        let addr = Ipv4Addr::from(sin.sin_addr.s_addr.to_ne_bytes());
        // SAFETY: ifa_name is a non-null NUL-terminated string of the list.
        let name = unsafe { CStr::from_ptr(ifa.ifa_name) }
            .to_string_lossy()
            .into_owned();
        if out.iter().any(|i| i.name == name) {
            continue;
        }
        out.push(NetIf {
            name,
            addr,
            loopback: flags & libc::IFF_LOOPBACK as libc::c_uint != 0 || addr.is_loopback(),
        });
    }
    // SAFETY: `head` came from getifaddrs and is freed once; no reference
    // into the list outlives this point (names were copied).
    unsafe { libc::freeifaddrs(head) };
    Ok(out)
}

/// Finds the interface named `name`.
pub fn find(name: &str) -> Result<NetIf> {
    ipv4_interfaces()?
        .into_iter()
        .find(|i| i.name == name)
        .ok_or_else(|| Error::InvalidParam(format!("tcp: no IPv4 interface {name:?} is up")))
}

/// Link speed in bits per second from `/sys/class/net/<dev>/speed`, if the
/// driver reports one.
pub fn link_speed_bps(name: &str) -> Option<f64> {
    if name.contains('/') || name.starts_with('.') {
        return None;
    }
    let text = std::fs::read_to_string(format!("/sys/class/net/{name}/speed")).ok()?;
    let mbps: i64 = text.trim().parse().ok()?;
    (mbps > 0).then_some(mbps as f64 * 1e6)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loopback_is_listed() {
        let all = ipv4_interfaces().unwrap();
        let lo = all
            .iter()
            .find(|i| i.loopback)
            .expect("a loopback interface");
        assert!(lo.addr.is_loopback());
        assert_eq!(find(&lo.name).unwrap(), *lo);
        assert!(find("no-such-interface0").is_err());
    }

    #[test]
    fn bad_names_have_no_speed() {
        assert_eq!(link_speed_bps("../lo"), None);
        assert_eq!(link_speed_bps("no-such-interface0"), None);
    }
}
