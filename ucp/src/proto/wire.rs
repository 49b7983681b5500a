//! Wire format of the eager tag protocol.
//!
//! All integers are little-endian. Every message is one transport active
//! message whose id says which header follows:
//!
//! | AM id | name | header | then |
//! |---|---|---|---|
//! | 1 | `EAGER_ONLY` | tag: u64 | the whole payload |
//! | 2 | `EAGER_FIRST` | tag: u64, total length: u64, message id: u64 | the first fragment |
//! | 3 | `EAGER_MIDDLE` | message id: u64, offset: u64 | a later fragment |
//! | 4 | `WIREUP` | — | the sender's worker address |
//! | 5 | `EAGER_SYNC_ONLY` | tag: u64, sender request: u64 | the whole payload |
//! | 6 | `EAGER_SYNC_FIRST` | tag, total length, message id, sender request: u64 each | the first fragment |
//! | 7 | `SYNC_ACK` | sender request: u64 | — |
//! | 8 | `RNDV_RTS` | tag, sender request, total length: u64 each | — |
//! | 9 | `RNDV_RTR` | sender request, receiver request: u64 each | — |
//! | 10 | `RNDV_DATA` | receiver request, offset: u64 each | a fragment |
//! | 11 | `RNDV_RTS_GET` | tag, sender request, total length, address: u64 each | the sender's packed memory keys (below) |
//! | 12 | `RNDV_ATS` | sender request: u64 | — |
//! | 13 | `RNDV_RTS_PUT` | tag, sender request, total length: u64 each | — |
//! | 14 | `RNDV_RTR_PUT` | sender request, receiver request, address, length: u64 each | the receiver's packed memory key |
//! | 15 | `RNDV_ATP` | receiver request, status: u64 each | — |
//!
//! Other protocols' ids: 16–19 one-sided operations (`rma/wire.rs`), 20
//! `RNDV_RTR_SPLIT` (below), 21 user active messages (`am_wire.rs`), 22
//! stream fragments (`stream.rs`: the stream offset, u64, then bytes).
//!
//! Rendezvous by get: the request to send carries the address and packed
//! key of the sender's registered buffer; the receiver that matched it
//! reads the data with `get_zcopy` and answers `RNDV_ATS`, after which the
//! sender releases the buffer. The keys: the key of the domain of the lane
//! the request travels on (length: u16, then the key), then one entry per
//! further domain the buffer is registered with, for lanes on other
//! devices (name length: u8, the domain's name, key length: u16, the key;
//! at most [`RTS_GET_MAX_MORE`]).
//!
//! Rendezvous by put: the request to send (`RNDV_RTS_PUT`) is matched like
//! `RNDV_RTS`; the receiver registers its buffer for remote writes and
//! answers `RNDV_RTR_PUT` with its address, the length it accepts and the
//! packed key; the sender writes the data with `put_zcopy` and, once every
//! write completed at the receiver, sends `RNDV_ATP` with a status (0: all
//! written; else the sender's error, as a UCX status code). A receiver that
//! cannot register answers a plain `RNDV_RTR` and gets `RNDV_DATA`
//! fragments instead.
//!
//! Rendezvous over active messages: the sender announces a message with
//! `RNDV_RTS`, which is tag-matched like an eager message; once a receive
//! matched it, the receiver answers `RNDV_RTR` naming its request, and the
//! sender sends the data as `RNDV_DATA` fragments into it. So large
//! messages are never buffered as unexpected data.
//!
//! `WIREUP` is the first message on every new endpoint: it tells the
//! receiver who sends on that transport source, so it can answer (and it
//! creates an endpoint back if it has none). A synchronous send carries the
//! sender's request id; the receiver answers `SYNC_ACK` with it once a
//! receive has matched the message. Request ids from the wire are
//! generational: a stale or forged one finds nothing.
//!
//! A message id is unique per sending worker; fragments of one message may
//! arrive in any order after its first fragment, on the same transport
//! source. Everything here is decoded from untrusted bytes: a short header
//! or an impossible offset is a [`PeerMisbehaved`], never a panic.

use crate::ucs::PeerMisbehaved;
use crate::uct::AmId;

/// Whole message with its tag.
pub const AM_EAGER_ONLY: AmId = 1;
/// First fragment of a multi-fragment message.
pub const AM_EAGER_FIRST: AmId = 2;
/// A later fragment of a multi-fragment message.
pub const AM_EAGER_MIDDLE: AmId = 3;

/// The sender's worker address.
pub const AM_WIREUP: AmId = 4;
/// Whole message of a synchronous send.
pub const AM_EAGER_SYNC_ONLY: AmId = 5;
/// First fragment of a synchronous multi-fragment send.
pub const AM_EAGER_SYNC_FIRST: AmId = 6;
/// A receive matched the synchronous send named in the header.
pub const AM_SYNC_ACK: AmId = 7;

/// Request to send (rendezvous).
pub const AM_RNDV_RTS: AmId = 8;
/// Ready to receive (rendezvous).
pub const AM_RNDV_RTR: AmId = 9;
/// Rendezvous data fragment.
pub const AM_RNDV_DATA: AmId = 10;

/// Request to send with the sender's memory key (rendezvous by get).
pub const AM_RNDV_RTS_GET: AmId = 11;
/// The receiver has read a rendezvous-by-get send.
pub const AM_RNDV_ATS: AmId = 12;

/// Request to send whose data the sender will write (rendezvous by put).
pub const AM_RNDV_RTS_PUT: AmId = 13;
/// Ready to receive with the receiver's memory key (rendezvous by put).
pub const AM_RNDV_RTR_PUT: AmId = 14;
/// The sender's writes are all done (rendezvous by put).
pub const AM_RNDV_ATP: AmId = 15;

/// The receiver of a rendezvous by get offers the message's last bytes
/// for the sender to write, with the `RNDV_RTR_PUT` layout (the length
/// counts from the end of the message); the sender answers `RNDV_ATP`.
pub const AM_RNDV_RTR_SPLIT: AmId = 20;
/// As [`AM_RNDV_RTR_SPLIT`], for the message's first bytes: the length
/// counts from its start.
pub const AM_RNDV_RTR_SPLIT_HEAD: AmId = 28;

/// Active message id of stream fragments: the stream offset (`u64`,
/// little-endian), then the bytes.
pub const AM_STREAM: AmId = 22;
/// Length of a stream fragment's header.
pub const STREAM_HDR: usize = 8;

/// Size of the `RNDV_RTR_PUT` header before the key.
pub const RTR_PUT_HDR: usize = 32;

/// Decodes a `RNDV_RTR_PUT`: sender request, receiver request, address,
/// length and the packed key.
pub fn decode_rtr_put(data: &[u8]) -> Result<([u64; 4], &[u8]), PeerMisbehaved> {
    need("rendezvous RTR (put)", data, RTR_PUT_HDR)?;
    let f = [
        u64_at(data, 0),
        u64_at(data, 8),
        u64_at(data, 16),
        u64_at(data, 24),
    ];
    Ok((f, &data[RTR_PUT_HDR..]))
}

/// Encodes a `RNDV_RTR_PUT` (or `RNDV_RTR_SPLIT`): sender request,
/// receiver request, address, length, then the packed key.
pub fn encode_rtr_put(fields: [u64; 4], key: &[u8]) -> Vec<u8> {
    let mut d = Vec::with_capacity(RTR_PUT_HDR + key.len());
    for v in fields {
        d.extend_from_slice(&v.to_le_bytes());
    }
    d.extend_from_slice(key);
    d
}

/// Decodes a `RNDV_ATP`: receiver request and status.
pub fn decode_atp(data: &[u8]) -> Result<(u64, u64), PeerMisbehaved> {
    need("rendezvous ATP", data, 16)?;
    Ok((u64_at(data, 0), u64_at(data, 8)))
}

/// Size of the `RNDV_RTS_GET` header before the key.
pub const RTS_GET_HDR: usize = 32;

/// Most further domains' keys in one `RNDV_RTS_GET`.
pub const RTS_GET_MAX_MORE: usize = 8;

/// The keys of an `RNDV_RTS_GET` (after its header): `first`, then each
/// of `more` (domain name, key). `None` if a key or name is too long to
/// encode, or there are more than [`RTS_GET_MAX_MORE`].
pub fn encode_rts_keys(first: &[u8], more: &[(&str, Vec<u8>)]) -> Option<Vec<u8>> {
    if more.len() > RTS_GET_MAX_MORE {
        return None;
    }
    let mut out = Vec::with_capacity(2 + first.len() + more.len() * (first.len() + 16));
    out.extend_from_slice(&u16::try_from(first.len()).ok()?.to_le_bytes());
    out.extend_from_slice(first);
    for (name, key) in more {
        out.push(u8::try_from(name.len()).ok()?);
        out.extend_from_slice(name.as_bytes());
        out.extend_from_slice(&u16::try_from(key.len()).ok()?.to_le_bytes());
        out.extend_from_slice(key);
    }
    Some(out)
}

/// Decodes the keys of an `RNDV_RTS_GET` (after its header): the first
/// key and the further (domain name, key) entries.
#[allow(clippy::type_complexity)]
pub fn decode_rts_keys(data: &[u8]) -> Result<(&[u8], Vec<(&str, &[u8])>), PeerMisbehaved> {
    const WHAT: &str = "rendezvous keys";
    let bad = |detail: String| PeerMisbehaved::Invalid { what: WHAT, detail };
    // A u16 length, then as many bytes; the rest after them.
    let sized = |b: &'_ [u8]| -> Result<(usize, usize), PeerMisbehaved> {
        need(WHAT, b, 2)?;
        let n = usize::from(u16::from_le_bytes([b[0], b[1]]));
        need(WHAT, b, 2 + n)?;
        Ok((2, 2 + n))
    };
    let (a, b) = sized(data)?;
    let first = &data[a..b];
    let mut rest = &data[b..];
    let mut more = Vec::new();
    while !rest.is_empty() {
        if more.len() == RTS_GET_MAX_MORE {
            return Err(bad(format!("more than {RTS_GET_MAX_MORE} further keys")));
        }
        let n = usize::from(rest[0]);
        need(WHAT, rest, 1 + n)?;
        let name = std::str::from_utf8(&rest[1..1 + n])
            .map_err(|_| bad("a domain name that is not UTF-8".into()))?;
        let tail = &rest[1 + n..];
        let (a, b) = sized(tail)?;
        more.push((name, &tail[a..b]));
        rest = &tail[b..];
    }
    Ok((first, more))
}

/// Size of the `RNDV_DATA` header.
pub const RNDV_DATA_HDR: usize = 16;

/// Decodes three little-endian u64 header fields.
pub fn decode_u64x3(what: &'static str, data: &[u8]) -> Result<[u64; 3], PeerMisbehaved> {
    need(what, data, 24)?;
    Ok([u64_at(data, 0), u64_at(data, 8), u64_at(data, 16)])
}

/// Decodes two little-endian u64 header fields and the rest.
pub fn decode_u64x2<'a>(
    what: &'static str,
    data: &'a [u8],
) -> Result<(u64, u64, &'a [u8]), PeerMisbehaved> {
    need(what, data, 16)?;
    Ok((u64_at(data, 0), u64_at(data, 8), &data[16..]))
}

/// Size of the `EAGER_SYNC_ONLY` header.
pub const SYNC_ONLY_HDR: usize = 16;
/// Size of the `EAGER_SYNC_FIRST` header.
pub const SYNC_FIRST_HDR: usize = 32;

/// Size of the `EAGER_ONLY` header.
pub const ONLY_HDR: usize = 8;
/// Size of the `EAGER_FIRST` header.
pub const FIRST_HDR: usize = 24;
/// Size of the `EAGER_MIDDLE` header.
pub const MIDDLE_HDR: usize = 16;

fn u64_at(b: &[u8], at: usize) -> u64 {
    let mut a = [0u8; 8];
    a.copy_from_slice(&b[at..at + 8]);
    u64::from_le_bytes(a)
}

fn need(what: &'static str, data: &[u8], min: usize) -> Result<(), PeerMisbehaved> {
    if data.len() < min {
        Err(PeerMisbehaved::Truncated {
            what,
            len: data.len(),
            min,
        })
    } else {
        Ok(())
    }
}

/// Decodes `EAGER_ONLY`: (tag, payload).
pub fn decode_only(data: &[u8]) -> Result<(u64, &[u8]), PeerMisbehaved> {
    need("eager header", data, ONLY_HDR)?;
    Ok((u64_at(data, 0), &data[ONLY_HDR..]))
}

/// Decodes `EAGER_SYNC_ONLY`: (tag, sender request, payload).
pub fn decode_sync_only(data: &[u8]) -> Result<(u64, u64, &[u8]), PeerMisbehaved> {
    need("sync eager header", data, SYNC_ONLY_HDR)?;
    Ok((u64_at(data, 0), u64_at(data, 8), &data[SYNC_ONLY_HDR..]))
}

/// Decodes `EAGER_SYNC_FIRST`: the first-fragment header, the sender's
/// request and the fragment.
pub fn decode_sync_first(data: &[u8]) -> Result<(FirstHdr, u64, &[u8]), PeerMisbehaved> {
    need("sync eager first header", data, SYNC_FIRST_HDR)?;
    let sreq = u64_at(data, 24);
    let mut v = [0u8; FIRST_HDR];
    v.copy_from_slice(&data[..FIRST_HDR]);
    let (h, _) = FirstHdr::decode(&v)?;
    let frag = &data[SYNC_FIRST_HDR..];
    if frag.len() as u64 > h.total {
        return Err(PeerMisbehaved::Invalid {
            what: "sync eager first fragment",
            detail: format!("{} bytes of a {}-byte message", frag.len(), h.total),
        });
    }
    Ok((h, sreq, frag))
}

/// Decodes `SYNC_ACK`: the sender's request id.
pub fn decode_ack(data: &[u8]) -> Result<u64, PeerMisbehaved> {
    need("sync ack", data, 8)?;
    Ok(u64_at(data, 0))
}

/// Header of a first fragment.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FirstHdr {
    /// Message tag.
    pub tag: u64,
    /// Length of the whole message.
    pub total: u64,
    /// Sender's message id.
    pub msg_id: u64,
}

impl FirstHdr {
    /// Encodes the header.
    pub fn encode(&self) -> [u8; FIRST_HDR] {
        let mut b = [0u8; FIRST_HDR];
        b[0..8].copy_from_slice(&self.tag.to_le_bytes());
        b[8..16].copy_from_slice(&self.total.to_le_bytes());
        b[16..24].copy_from_slice(&self.msg_id.to_le_bytes());
        b
    }

    /// Decodes header and fragment; the fragment may not exceed the total.
    pub fn decode(data: &[u8]) -> Result<(FirstHdr, &[u8]), PeerMisbehaved> {
        need("eager first header", data, FIRST_HDR)?;
        let h = FirstHdr {
            tag: u64_at(data, 0),
            total: u64_at(data, 8),
            msg_id: u64_at(data, 16),
        };
        let frag = &data[FIRST_HDR..];
        if frag.len() as u64 > h.total {
            return Err(PeerMisbehaved::Invalid {
                what: "eager first fragment",
                detail: format!("{} bytes of a {}-byte message", frag.len(), h.total),
            });
        }
        Ok((h, frag))
    }
}

/// Header of a later fragment.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MiddleHdr {
    /// Sender's message id.
    pub msg_id: u64,
    /// Offset of this fragment in the message.
    pub offset: u64,
}

impl MiddleHdr {
    /// Encodes the header.
    pub fn encode(&self) -> [u8; MIDDLE_HDR] {
        let mut b = [0u8; MIDDLE_HDR];
        b[0..8].copy_from_slice(&self.msg_id.to_le_bytes());
        b[8..16].copy_from_slice(&self.offset.to_le_bytes());
        b
    }

    /// Decodes header and fragment.
    pub fn decode(data: &[u8]) -> Result<(MiddleHdr, &[u8]), PeerMisbehaved> {
        need("eager middle header", data, MIDDLE_HDR)?;
        Ok((
            MiddleHdr {
                msg_id: u64_at(data, 0),
                offset: u64_at(data, 8),
            },
            &data[MIDDLE_HDR..],
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rts_keys_round_trip_and_refusals() {
        let more = vec![("rxed1", vec![7u8; 32]), ("mlx5_1", vec![9u8; 3])];
        let enc = encode_rts_keys(&[1, 2, 3], &more).unwrap();
        let (first, got) = decode_rts_keys(&enc).unwrap();
        assert_eq!(first, &[1, 2, 3]);
        assert_eq!(got, vec![("rxed1", &[7u8; 32][..]), ("mlx5_1", &[9u8; 3][..])]);
        let one = encode_rts_keys(&[5; 32], &[]).unwrap();
        assert_eq!(one.len(), 34);
        assert_eq!(decode_rts_keys(&one).unwrap(), (&[5u8; 32][..], vec![]));
        // Every truncation of a valid encoding is refused but those that
        // end after a whole entry: the first key (2 + 3 bytes), and the
        // first further key (1 + 5 + 2 + 32 more).
        for cut in 0..enc.len() {
            let r = decode_rts_keys(&enc[..cut]);
            assert_eq!(r.is_ok(), cut == 5 || cut == 45, "cut at {cut}: {r:?}");
        }
        let mut bad_name = enc.clone();
        bad_name[6] = 0xff;
        assert!(decode_rts_keys(&bad_name).is_err());
        let many: Vec<(&str, Vec<u8>)> = (0..=RTS_GET_MAX_MORE).map(|_| ("d", vec![1])).collect();
        assert!(encode_rts_keys(&[1], &many).is_none());
        let mut too_many = encode_rts_keys(&[1], &many[1..]).unwrap();
        too_many.extend_from_slice(&[1, b'd', 1, 0, 1]);
        assert!(decode_rts_keys(&too_many).is_err());
        assert!(encode_rts_keys(&vec![0; 70_000], &[]).is_none());
    }

    #[test]
    fn round_trips() {
        let f = FirstHdr {
            tag: 7,
            total: 100,
            msg_id: 9,
        };
        let mut b = f.encode().to_vec();
        b.extend_from_slice(&[1, 2, 3]);
        let (g, frag) = FirstHdr::decode(&b).unwrap();
        assert_eq!(g, f);
        assert_eq!(frag, &[1, 2, 3]);
        let m = MiddleHdr {
            msg_id: 9,
            offset: 50,
        };
        let enc = m.encode();
        let (n, frag) = MiddleHdr::decode(&enc).unwrap();
        assert_eq!(n, m);
        assert!(frag.is_empty());
        let mut only = 5u64.to_le_bytes().to_vec();
        only.push(42);
        let (tag, payload) = decode_only(&only).unwrap();
        assert_eq!((tag, payload), (5, &[42u8][..]));
    }

    #[test]
    fn sync_headers() {
        let f = FirstHdr {
            tag: 1,
            total: 10,
            msg_id: 2,
        };
        let mut b = f.encode().to_vec();
        b.extend_from_slice(&77u64.to_le_bytes());
        b.extend_from_slice(&[5; 4]);
        let (h, sreq, frag) = decode_sync_first(&b).unwrap();
        assert_eq!((h, sreq, frag), (f, 77, &[5u8; 4][..]));
        b.extend_from_slice(&[0; 7]);
        assert!(decode_sync_first(&b).is_err(), "fragment beyond total");
        assert!(decode_sync_first(&b[..31]).is_err());
        let mut o = 3u64.to_le_bytes().to_vec();
        o.extend_from_slice(&4u64.to_le_bytes());
        o.push(9);
        assert_eq!(decode_sync_only(&o).unwrap(), (3, 4, &[9u8][..]));
        assert!(decode_sync_only(&o[..15]).is_err());
        assert_eq!(decode_ack(&o[8..16]).unwrap(), 4);
        assert!(decode_ack(&o[..7]).is_err());
    }

    #[test]
    fn put_headers() {
        let mut b = Vec::new();
        for v in [1u64, 2, 0x1000, 64] {
            b.extend_from_slice(&v.to_le_bytes());
        }
        b.extend_from_slice(b"key");
        assert_eq!(
            decode_rtr_put(&b).unwrap(),
            ([1, 2, 0x1000, 64], &b"key"[..])
        );
        assert!(decode_rtr_put(&b[..RTR_PUT_HDR - 1]).is_err());
        assert_eq!(decode_atp(&b[..16]).unwrap(), (1, 2));
        assert!(decode_atp(&b[..15]).is_err());
    }

    #[test]
    fn rejects_bad_input() {
        assert!(decode_only(&[1, 2, 3]).is_err());
        assert!(FirstHdr::decode(&[0; 23]).is_err());
        assert!(MiddleHdr::decode(&[0; 15]).is_err());
        let f = FirstHdr {
            tag: 1,
            total: 2,
            msg_id: 3,
        };
        let mut b = f.encode().to_vec();
        b.extend_from_slice(&[0; 3]);
        assert!(FirstHdr::decode(&b).is_err(), "fragment longer than total");
    }
}
