//! The connector's hello (layout in the parent module's doc) and the key
//! of an iface.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

use uct::ucs::PeerMisbehaved;

use super::{MAGIC, VERSION};

/// Bytes before the address: magic, version, port, family.
const HELLO_HEAD: usize = 13;
/// Family byte of an IPv4 hello.
const FAMILY_V4: u8 = 4;
/// Family byte of an IPv6 hello.
const FAMILY_V6: u8 = 6;
/// Length of the longest hello (IPv6).
pub(crate) const HELLO_MAX: usize = HELLO_HEAD + 16;

/// The key of an iface: its listening address, the same on both sides of
/// a connection, ordered by IP (IPv4 before IPv6), then port.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(crate) struct Key {
    ip: IpAddr,
    port: u16,
}

impl Key {
    /// The address it stands for.
    pub(crate) fn addr(self) -> SocketAddr {
        SocketAddr::new(self.ip, self.port)
    }
}

/// The key of the iface listening at `addr`.
pub(crate) fn key(addr: SocketAddr) -> Key {
    Key {
        ip: addr.ip(),
        port: addr.port(),
    }
}

/// The hello of a connector listening on `me`.
pub(crate) fn hello(me: SocketAddr) -> Vec<u8> {
    let mut out = Vec::with_capacity(HELLO_MAX);
    out.extend_from_slice(&MAGIC.to_le_bytes());
    out.extend_from_slice(&VERSION.to_le_bytes());
    out.extend_from_slice(&me.port().to_be_bytes());
    match me.ip() {
        IpAddr::V4(a) => {
            out.push(FAMILY_V4);
            out.extend_from_slice(&a.octets());
        }
        IpAddr::V6(a) => {
            out.push(FAMILY_V6);
            out.extend_from_slice(&a.octets());
        }
    }
    out
}

/// Checks the start of a received stream as a hello, as far as its bytes
/// go: `Ok(None)` while the hello is not complete and nothing in it is
/// wrong yet; the connector's listening address and the hello's length
/// once it is.
pub(crate) fn parse_hello(b: &[u8]) -> Result<Option<(SocketAddr, usize)>, PeerMisbehaved> {
    let Some(magic) = b.first_chunk::<8>() else {
        return Ok(None);
    };
    let magic = u64::from_le_bytes(*magic);
    if magic != MAGIC {
        return Err(PeerMisbehaved::BadMagic(magic));
    }
    let Some(&[v0, v1, p0, p1, family]) = b.get(8..HELLO_HEAD).and_then(|h| h.first_chunk::<5>())
    else {
        // Judge the version as soon as it is in.
        if let Some(&[v0, v1]) = b.get(8..10) {
            check_version(u16::from_le_bytes([v0, v1]))?;
        }
        return Ok(None);
    };
    check_version(u16::from_le_bytes([v0, v1]))?;
    let port = u16::from_be_bytes([p0, p1]);
    let rest = &b[HELLO_HEAD..];
    let ip: IpAddr = match family {
        FAMILY_V4 => match rest.first_chunk::<4>() {
            Some(a) => Ipv4Addr::from(*a).into(),
            None => return Ok(None),
        },
        FAMILY_V6 => match rest.first_chunk::<16>() {
            Some(a) => Ipv6Addr::from(*a).into(),
            None => return Ok(None),
        },
        _ => {
            return Err(PeerMisbehaved::Invalid {
                what: "hello address family",
                detail: format!("{family}, expected {FAMILY_V4} or {FAMILY_V6}"),
            })
        }
    };
    let len = HELLO_HEAD + if ip.is_ipv4() { 4 } else { 16 };
    Ok(Some((SocketAddr::new(ip, port), len)))
}

fn check_version(version: u16) -> Result<(), PeerMisbehaved> {
    if version != VERSION {
        return Err(PeerMisbehaved::Invalid {
            what: "protocol version",
            detail: format!("{version}, expected {VERSION}"),
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn both_families_round_trip_at_any_split() {
        for me in ["10.1.2.3:4567", "[fd00::2]:9", "[::1]:65535"] {
            let me: SocketAddr = me.parse().unwrap();
            let h = hello(me);
            assert_eq!(h.len(), if me.is_ipv4() { 17 } else { HELLO_MAX });
            for cut in 0..h.len() {
                assert_eq!(parse_hello(&h[..cut]), Ok(None), "{me} cut at {cut}");
            }
            assert_eq!(parse_hello(&h), Ok(Some((me, h.len()))));
            // What follows the hello is not its business.
            let mut more = h.clone();
            more.extend_from_slice(&[0xff; 40]);
            assert_eq!(parse_hello(&more), Ok(Some((me, h.len()))));
        }
    }

    #[test]
    fn bad_hellos_are_refused_early() {
        let me: SocketAddr = "10.1.2.3:4567".parse().unwrap();
        let mut bad = hello(me);
        bad[0] ^= 1;
        assert!(matches!(
            parse_hello(&bad[..8]),
            Err(PeerMisbehaved::BadMagic(_))
        ));
        // An older peer's version-2 hello (16 bytes) fails at its version.
        let mut old = hello(me)[..16].to_vec();
        old[8..10].copy_from_slice(&2u16.to_le_bytes());
        for cut in 10..=16 {
            assert!(
                matches!(
                    parse_hello(&old[..cut]),
                    Err(PeerMisbehaved::Invalid { .. })
                ),
                "{cut}"
            );
        }
        for family in [0u8, 5, 41, 255] {
            let mut bad = hello(me);
            bad[12] = family;
            assert!(matches!(
                parse_hello(&bad[..13]),
                Err(PeerMisbehaved::Invalid { .. })
            ));
        }
        // Random bytes never panic.
        let mut x = 0x1234_5678_9abc_def0u64;
        for _ in 0..2000 {
            let mut b = hello(me);
            for _ in 0..3 {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                let i = (x % b.len() as u64) as usize;
                b[i] = (x >> 32) as u8;
            }
            let _ = parse_hello(&b[..(x % 30) as usize % (b.len() + 1)]);
        }
    }

    #[test]
    fn keys_order_by_address() {
        let k = |s: &str| key(s.parse().unwrap());
        assert!(k("10.0.0.1:9") < k("10.0.0.1:10"));
        assert!(k("10.0.0.1:10") < k("10.0.0.2:1"));
        assert!(k("[::1]:9") < k("[::1]:10"));
        assert!(k("[::1]:10") < k("[fd00::1]:1"));
        assert_ne!(k("[::1]:9"), k("127.0.0.1:9"));
    }
}
