//! What the RC transport puts in SENDs and in connection private data.
//! Every field is little-endian.
//!
//! * Connection request private data, 20 bytes: magic `rcx` + version 1
//!   (4), the initiator's receive buffer size (u32), the initiator's
//!   worker uuid (u64, for logs), the SENDs the initiator will make before
//!   its first grant (u32: it starts sending while the connection is being
//!   set up, the provider holding the SENDs until it is).
//! * Accept private data, 12 bytes: magic (4), the receives the responder
//!   posted before accepting (u32, at least the initiator's count: a
//!   responder that cannot post that many rejects), its receive buffer
//!   size (u32). Both sides must use the same buffer size; a mismatch is
//!   rejected.
//! * A SEND carries one active message: its id (one byte, below
//!   `AM_ID_MAX`), then the data (`am_short`: the 8-byte header and the
//!   payload).
//! * A credit grant is a SEND from the accepting side on its queue pair:
//!   id [`GRANT`] and the number of receives reposted since the last
//!   grant (u16). The accepting side grants once a quarter of its receives
//!   was reposted, so at most four grants are in flight, and the endpoint
//!   keeps [`super::iface::GRANT_RECVS`] receives posted for them: iWARP
//!   has no receiver-not-ready retry, a SEND that finds no receive ends the
//!   connection.

use crate::uct::ucs::{Error, PeerMisbehaved, Result};

/// Active message id of a credit grant.
pub(crate) const GRANT: u8 = 0xff;
const MAGIC: [u8; 4] = *b"rcx\x01";
/// Length of the request's private data.
pub(crate) const REQ_LEN: usize = 20;
/// Length of the accept's private data.
pub(crate) const REP_LEN: usize = 12;

/// The initiator's private data.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct ConnReq {
    pub(crate) seg: u32,
    pub(crate) uuid: u64,
    pub(crate) credits: u32,
}

/// The responder's private data.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct ConnRep {
    pub(crate) credits: u32,
    pub(crate) seg: u32,
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

impl ConnReq {
    pub(crate) fn encode(&self) -> Vec<u8> {
        let mut v = MAGIC.to_vec();
        v.extend_from_slice(&self.seg.to_le_bytes());
        v.extend_from_slice(&self.uuid.to_le_bytes());
        v.extend_from_slice(&self.credits.to_le_bytes());
        v
    }

    pub(crate) fn decode(b: &[u8]) -> Result<ConnReq> {
        if b.len() < REQ_LEN {
            return Err(bad(&format!("{} bytes, expected {REQ_LEN}", b.len())));
        }
        if b[..4] != MAGIC {
            return Err(bad("not an rc peer"));
        }
        let mut u = [0u8; 8];
        u.copy_from_slice(&b[8..16]);
        Ok(ConnReq {
            seg: u32::from_le_bytes([b[4], b[5], b[6], b[7]]),
            uuid: u64::from_le_bytes(u),
            credits: u32::from_le_bytes([b[16], b[17], b[18], b[19]]),
        })
    }
}

impl ConnRep {
    pub(crate) fn encode(&self) -> Vec<u8> {
        let mut v = MAGIC.to_vec();
        v.extend_from_slice(&self.credits.to_le_bytes());
        v.extend_from_slice(&self.seg.to_le_bytes());
        v
    }

    pub(crate) fn decode(b: &[u8]) -> Result<ConnRep> {
        if b.len() < REP_LEN {
            return Err(bad(&format!("{} bytes, expected {REP_LEN}", b.len())));
        }
        if b[..4] != MAGIC {
            return Err(bad("not an rc peer"));
        }
        Ok(ConnRep {
            credits: u32::from_le_bytes([b[4], b[5], b[6], b[7]]),
            seg: u32::from_le_bytes([b[8], b[9], b[10], b[11]]),
        })
    }
}

/// A grant's bytes.
pub(crate) fn grant(n: u16) -> [u8; 3] {
    let b = n.to_le_bytes();
    [GRANT, b[0], b[1]]
}

/// The credits of a grant message (`None` if it is not one).
pub(crate) fn parse_grant(msg: &[u8]) -> Option<u16> {
    match msg {
        [GRANT, a, b] => Some(u16::from_le_bytes([*a, *b])),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_and_refusals() {
        let r = ConnReq {
            seg: 8192,
            uuid: 7,
            credits: 64,
        };
        assert_eq!(ConnReq::decode(&r.encode()).unwrap(), r);
        let p = ConnRep {
            credits: 64,
            seg: 8192,
        };
        assert_eq!(ConnRep::decode(&p.encode()).unwrap(), p);
        assert!(ConnReq::decode(&r.encode()[..19]).is_err());
        assert!(ConnRep::decode(b"xxxx\0\0\0\0\0\0\0\0").is_err());
        assert_eq!(parse_grant(&grant(300)), Some(300));
        assert_eq!(parse_grant(&[GRANT, 1]), None);
        assert_eq!(parse_grant(&[1, 1, 1]), None);
    }
}
