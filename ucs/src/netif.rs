//! Network interfaces: those that are up with their IPv4 and IPv6
//! addresses, and their speed (what network transports list as devices);
//! the address family preference of a transport ([`AfPrio`]).
//!
//! IPv6 link-local addresses (`fe80::/10`) are not listed: they need a
//! scope id on every socket address, which the transports' address
//! formats do not carry. Multicast and unspecified addresses are not
//! listed either.

use std::ffi::CStr;
use std::io;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use crate::config::ConfigValue;
use crate::{Error, Result};

/// An interface that is up, with at least one usable address.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NetIf {
    /// Interface name, e.g. `"lo"`.
    pub name: String,
    /// Its addresses, in the order the system lists them.
    pub addrs: Vec<IpAddr>,
    /// Whether it is a loopback interface.
    pub loopback: bool,
}

impl NetIf {
    /// Its first address of `family`.
    pub fn addr_of(&self, family: AddrFamily) -> Option<IpAddr> {
        self.addrs
            .iter()
            .copied()
            .find(|a| AddrFamily::of(*a) == family)
    }

    /// Its first address of the first family in `prio` it has one of.
    pub fn addr(&self, prio: &AfPrio) -> Option<IpAddr> {
        prio.0.iter().find_map(|&f| self.addr_of(f))
    }
}

/// An address family, named as UCX names them (`inet`, `inet6`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum AddrFamily {
    /// IPv4.
    Inet,
    /// IPv6.
    Inet6,
}

impl AddrFamily {
    /// The family of `ip`.
    pub fn of(ip: IpAddr) -> AddrFamily {
        match ip {
            IpAddr::V4(_) => AddrFamily::Inet,
            IpAddr::V6(_) => AddrFamily::Inet6,
        }
    }

    fn name(self) -> &'static str {
        match self {
            AddrFamily::Inet => "inet",
            AddrFamily::Inet6 => "inet6",
        }
    }
}

/// Address families in order of preference (UCX's `UCX_TCP_AF_PRIO`): a
/// device uses the first one it has an address of; a device with none of
/// them is not used.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AfPrio(pub Vec<AddrFamily>);

impl ConfigValue for AfPrio {
    const KIND: &'static str = "address families";
    const SYNTAX: &'static str = "comma-separated list of inet, inet6 (first preferred)";

    fn parse(text: &str) -> std::result::Result<Self, String> {
        let mut out = Vec::new();
        for item in text.split(',') {
            let f = match item.trim().to_ascii_lowercase().as_str() {
                "inet" => AddrFamily::Inet,
                "inet6" => AddrFamily::Inet6,
                other => return Err(format!("unknown address family {other:?}")),
            };
            if !out.contains(&f) {
                out.push(f);
            }
        }
        Ok(AfPrio(out))
    }

    fn to_text(&self) -> String {
        let names: Vec<&str> = self.0.iter().map(|f| f.name()).collect();
        names.join(",")
    }
}

/// Whether an interface address is listed (see the module doc).
fn usable(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(_) => true,
        IpAddr::V6(a) => {
            !a.is_unspecified() && !a.is_multicast() && (a.segments()[0] & 0xffc0) != 0xfe80
        }
    }
}

/// Every interface that is up and has a usable IPv4 or IPv6 address, in
/// the order the system lists them, one entry per name.
pub fn interfaces() -> Result<Vec<NetIf>> {
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
        if flags & libc::IFF_UP as libc::c_uint == 0
            || ifa.ifa_addr.is_null()
            || ifa.ifa_name.is_null()
        {
            continue;
        }
        // SAFETY: ifa_addr is non-null and points at a sockaddr of the list.
        let family = i32::from(unsafe { (*ifa.ifa_addr).sa_family });
        let addr = match family {
            libc::AF_INET => {
                // SAFETY: an AF_INET address is a sockaddr_in.
                let sin = unsafe { &*ifa.ifa_addr.cast::<libc::sockaddr_in>() };
                IpAddr::V4(Ipv4Addr::from(sin.sin_addr.s_addr.to_ne_bytes()))
            }
            libc::AF_INET6 => {
                // SAFETY: an AF_INET6 address is a sockaddr_in6.
                let sin6 = unsafe { &*ifa.ifa_addr.cast::<libc::sockaddr_in6>() };
                IpAddr::V6(Ipv6Addr::from(sin6.sin6_addr.s6_addr))
            }
            _ => continue,
        };
        if !usable(addr) {
            continue;
        }
        // SAFETY: ifa_name is a non-null NUL-terminated string of the list.
        let name = unsafe { CStr::from_ptr(ifa.ifa_name) }.to_string_lossy();
        let loopback = flags & libc::IFF_LOOPBACK as libc::c_uint != 0 || addr.is_loopback();
        match out.iter_mut().find(|i| i.name == name) {
            Some(i) => {
                i.addrs.push(addr);
                i.loopback |= loopback;
            }
            None => out.push(NetIf {
                name: name.into_owned(),
                addrs: vec![addr],
                loopback,
            }),
        }
    }
    // SAFETY: `head` came from getifaddrs and is freed once; no reference
    // into the list outlives this point (names were copied).
    unsafe { libc::freeifaddrs(head) };
    Ok(out)
}

/// Finds the interface named `name`.
pub fn find(name: &str) -> Result<NetIf> {
    interfaces()?
        .into_iter()
        .find(|i| i.name == name)
        .ok_or_else(|| Error::InvalidParam(format!("no IP interface {name:?} is up")))
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
        let all = interfaces().unwrap();
        let lo = all
            .iter()
            .find(|i| i.loopback)
            .expect("a loopback interface");
        assert!(lo.addrs.iter().all(|a| a.is_loopback()));
        assert!(lo.addr_of(AddrFamily::Inet).is_some());
        assert_eq!(find(&lo.name).unwrap(), *lo);
        assert!(find("no-such-interface0").is_err());
        for i in &all {
            assert!(i.addrs.iter().all(|a| usable(*a)), "{i:?}");
        }
    }

    #[test]
    fn link_local_and_multicast_are_not_usable() {
        for a in ["fe80::1", "febf::1", "ff02::1", "::"] {
            assert!(!usable(a.parse().unwrap()), "{a}");
        }
        for a in ["::1", "fd00::2", "2001:db8::1", "fec0::1", "127.0.0.1"] {
            assert!(usable(a.parse().unwrap()), "{a}");
        }
    }

    #[test]
    fn af_prio_picks_the_first_family_present() {
        let p = AfPrio::parse("inet,inet6").unwrap();
        assert_eq!(p.to_text(), "inet,inet6");
        assert_eq!(AfPrio::parse(&p.to_text()), Ok(p.clone()));
        let six = AfPrio::parse(" INET6 ").unwrap();
        assert_eq!(six.0, vec![AddrFamily::Inet6]);
        for bad in ["", "inet,", "ipv4", "inet;inet6"] {
            assert!(AfPrio::parse(bad).is_err(), "{bad:?}");
        }
        let both = NetIf {
            name: "x".into(),
            addrs: vec!["fd00::2".parse().unwrap(), "10.0.0.1".parse().unwrap()],
            loopback: false,
        };
        assert_eq!(both.addr(&p), Some("10.0.0.1".parse().unwrap()));
        assert_eq!(both.addr(&six), Some("fd00::2".parse().unwrap()));
        let only6 = NetIf {
            addrs: vec!["fd00::2".parse().unwrap()],
            ..both.clone()
        };
        assert_eq!(only6.addr(&p), Some("fd00::2".parse().unwrap()));
        let v4 = AfPrio::parse("inet").unwrap();
        assert_eq!(only6.addr(&v4), None);
    }

    #[test]
    fn bad_names_have_no_speed() {
        assert_eq!(link_speed_bps("../lo"), None);
        assert_eq!(link_speed_bps("no-such-interface0"), None);
    }
}
