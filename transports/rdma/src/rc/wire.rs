//! What the RC transport puts in SENDs and in connection private data.
//! Every field is little-endian.
//!
//! * Connection request private data, 48 bytes: magic `rcx` + version 4
//!   (4), the initiator's receive buffer size (u32), the initiator's
//!   worker uuid (u64, for logs), the window the initiator starts sending
//!   with (u32: the responder commits that many receives before it
//!   accepts; the initiator starts sending while the connection is being
//!   set up, the provider holding the SENDs until it is), the window the
//!   initiator committed to the responder (u32: the responder's first
//!   credits), the initiator's listening address: its family (one byte, 4
//!   or 6), the IP (16 bytes in network order; an IPv4 address in the
//!   first 4, the rest zero) and the port (u16), then a reserved byte
//!   (zero), then the most credits the initiator will ever grant (u32).
//! * Accept private data, 16 bytes: magic (4), the window the responder
//!   committed to the initiator (u32, at least what was asked: a
//!   responder that cannot commit that many rejects), its receive buffer
//!   size (u32), the most credits it will ever grant (u32). Both sides
//!   must use the same buffer size; a mismatch is rejected.
//! * A SEND carries one active message: a 3-byte header — its id (below
//!   `AM_ID_MAX`) and a credit field (u16): the credits it returns (low
//!   14 bits), bit 14 set when it spent its sender's last credit, bit 15
//!   set when it acknowledges the peer's last grant — then the data
//!   (`am_short`: the 8-byte header and the payload).
//! * A credit grant is a SEND with id [`GRANT`], no data, and the same
//!   credit field, for when credits pile up with nothing to carry them:
//!   it needs no credit, each side keeps one receive per connection for
//!   it, and a side sends the next only once the last was acknowledged.
//!   iWARP has no receiver-not-ready retry: a SEND that finds no receive
//!   ends the connection, so the accounting must be exact.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

use uct::ucs::{Error, PeerMisbehaved, Result};

/// Active message id of a credit grant.
pub const GRANT: u8 = 0xff;
/// Bytes before a message's data.
pub const HDR: usize = 3;
/// First bytes of both private data blocks: `rcx` and the version.
pub const MAGIC: [u8; 4] = *b"rcx\x04";
/// Length of the request's private data.
pub const REQ_LEN: usize = 48;
/// Length of the accept's private data.
pub const REP_LEN: usize = 16;

/// The initiator's private data.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ConnReq {
    /// The initiator's receive buffer size.
    pub seg: u32,
    /// The initiator's worker uuid (for logs).
    pub uuid: u64,
    /// The window the initiator starts sending with: receives the
    /// responder must commit.
    pub credits: u32,
    /// The window the initiator committed to the responder.
    pub posted: u32,
    /// The initiator's listening address.
    pub listen: SocketAddr,
    /// Most credits the initiator will grant.
    pub max_window: u32,
}

/// The responder's private data.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ConnRep {
    /// The window the responder committed to the initiator.
    pub credits: u32,
    /// The responder's receive buffer size.
    pub seg: u32,
    /// Most credits the responder will grant.
    pub max_window: u32,
}

fn bad(detail: &str) -> Error {
    Error::PeerMisbehaved {
        peer: "rc peer".into(),
        what: PeerMisbehaved::Invalid {
            what: "rc connection private data",
            detail: detail.into(),
        },
    }
}

fn u32_at(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}

impl ConnReq {
    /// The request's private data, [`REQ_LEN`] bytes.
    pub fn encode(&self) -> Vec<u8> {
        let mut v = MAGIC.to_vec();
        v.extend_from_slice(&self.seg.to_le_bytes());
        v.extend_from_slice(&self.uuid.to_le_bytes());
        v.extend_from_slice(&self.credits.to_le_bytes());
        v.extend_from_slice(&self.posted.to_le_bytes());
        let mut ip = [0u8; 16];
        match self.listen.ip() {
            IpAddr::V4(a) => {
                v.push(4);
                ip[..4].copy_from_slice(&a.octets());
            }
            IpAddr::V6(a) => {
                v.push(6);
                ip = a.octets();
            }
        }
        v.extend_from_slice(&ip);
        v.extend_from_slice(&self.listen.port().to_le_bytes());
        v.push(0);
        v.extend_from_slice(&self.max_window.to_le_bytes());
        v
    }

    /// Reads a request from the first [`REQ_LEN`] bytes of `b`.
    pub fn decode(b: &[u8]) -> Result<ConnReq> {
        if b.len() < REQ_LEN {
            return Err(bad(&format!("{} bytes, expected {REQ_LEN}", b.len())));
        }
        if b[..4] != MAGIC {
            return Err(bad("not an rc peer of this version"));
        }
        if b[43] != 0 {
            return Err(bad("reserved bytes set"));
        }
        let mut u = [0u8; 8];
        u.copy_from_slice(&b[8..16]);
        let mut a = [0u8; 16];
        a.copy_from_slice(&b[25..41]);
        let ip: IpAddr = match b[24] {
            4 if a[4..] == [0; 12] => Ipv4Addr::new(a[0], a[1], a[2], a[3]).into(),
            4 => return Err(bad("bytes after an IPv4 address set")),
            6 => Ipv6Addr::from(a).into(),
            f => return Err(bad(&format!("address family {f}"))),
        };
        let port = u16::from_le_bytes([b[41], b[42]]);
        if port == 0 || ip.is_unspecified() {
            return Err(bad("no listening address"));
        }
        Ok(ConnReq {
            seg: u32_at(b, 4),
            uuid: u64::from_le_bytes(u),
            credits: u32_at(b, 16),
            posted: u32_at(b, 20),
            listen: SocketAddr::new(ip, port),
            max_window: u32_at(b, 44),
        })
    }
}

impl ConnRep {
    /// The accept's private data, [`REP_LEN`] bytes.
    pub fn encode(&self) -> Vec<u8> {
        let mut v = MAGIC.to_vec();
        v.extend_from_slice(&self.credits.to_le_bytes());
        v.extend_from_slice(&self.seg.to_le_bytes());
        v.extend_from_slice(&self.max_window.to_le_bytes());
        v
    }

    /// Reads an accept from the first [`REP_LEN`] bytes of `b`.
    pub fn decode(b: &[u8]) -> Result<ConnRep> {
        if b.len() < REP_LEN {
            return Err(bad(&format!("{} bytes, expected {REP_LEN}", b.len())));
        }
        if b[..4] != MAGIC {
            return Err(bad("not an rc peer of this version"));
        }
        Ok(ConnRep {
            credits: u32_at(b, 4),
            seg: u32_at(b, 8),
            max_window: u32_at(b, 12),
        })
    }
}

/// A message header: id and credits returned.
pub fn header(id: u8, grant: u16) -> [u8; HDR] {
    let g = grant.to_le_bytes();
    [id, g[0], g[1]]
}

/// The id and returned credits of a received message (`None` if it is
/// shorter than a header).
pub fn parse_header(msg: &[u8]) -> Option<(u8, u16)> {
    match msg {
        [id, a, b, ..] => Some((*id, u16::from_le_bytes([*a, *b]))),
        _ => None,
    }
}

#[cfg(test)]
mod checks;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_and_refusals() {
        let r = ConnReq {
            seg: 8192,
            uuid: 7,
            credits: 64,
            posted: 72,
            listen: "10.1.2.3:4000".parse().unwrap(),
            max_window: 64,
        };
        let e = r.encode();
        assert_eq!(e.len(), REQ_LEN);
        assert_eq!(&e[24..29], &[4, 10, 1, 2, 3]);
        assert_eq!(&e[41..48], &[0xa0, 0x0f, 0, 64, 0, 0, 0]);
        assert_eq!(ConnReq::decode(&e).unwrap(), r);
        assert!(ConnReq::decode(&e[..47]).is_err());
        let mut z = e.clone();
        z[41..43].copy_from_slice(&[0, 0]);
        assert!(ConnReq::decode(&z).is_err());
        let mut z = e.clone();
        z[43] = 1;
        assert!(ConnReq::decode(&z).is_err());
        for (at, v) in [(24, 5u8), (24, 0), (30, 1)] {
            let mut z = e.clone();
            z[at] = v;
            assert!(ConnReq::decode(&z).is_err(), "byte {at} = {v}");
        }
        let six = ConnReq {
            listen: "[fd00::2]:4000".parse().unwrap(),
            ..r
        };
        let e6 = six.encode();
        assert_eq!(e6.len(), REQ_LEN);
        assert_eq!(e6[24], 6);
        assert_eq!(ConnReq::decode(&e6).unwrap(), six);
        let p = ConnRep {
            credits: 64,
            seg: 8192,
            max_window: 128,
        };
        assert_eq!(ConnRep::decode(&p.encode()).unwrap(), p);
        assert!(ConnRep::decode(&p.encode()[..15]).is_err());
        assert!(ConnRep::decode(b"xxxx\0\0\0\0\0\0\0\0\0\0\0\0").is_err());
        assert_eq!(parse_header(&header(5, 300)), Some((5, 300)));
        assert_eq!(parse_header(&[GRANT, 1]), None);
    }
}
