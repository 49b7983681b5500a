//! Properties of the RC wire decoders, checked on any input: nothing
//! panics, what is accepted re-encodes to the bytes it was read from (the
//! decoders read a prefix and ignore what follows), and what is refused is
//! refused for a reason the input shows.
//!
//! Shared by the proptests below and the `rc_wire` fuzz target, which
//! includes this file: `super` is `crate::rc::wire` here and the target's
//! root (which imports the same items from `rucx_rdma::rc::wire`) there.

#![allow(dead_code)]

use std::net::{Ipv4Addr, Ipv6Addr};

use super::{header, parse_header, ConnRep, ConnReq, HDR, MAGIC, REP_LEN, REQ_LEN};

/// Every decoder on `data`.
pub(crate) fn check_all(data: &[u8]) {
    check_req(data);
    check_rep(data);
    check_header(data);
}

/// `ConnReq::decode`: accepted exactly when the input is long enough, has
/// the magic, a zero reserved byte and a listening address (family 4 with
/// zeros after the IPv4 address, or 6; not unspecified; port not 0); then
/// the request re-encodes to its 48 bytes.
pub(crate) fn check_req(data: &[u8]) {
    let addr_ok = |d: &[u8]| {
        let mut a = [0u8; 16];
        a.copy_from_slice(&d[25..41]);
        match d[24] {
            4 => a[4..] == [0; 12] && !Ipv4Addr::new(a[0], a[1], a[2], a[3]).is_unspecified(),
            6 => !Ipv6Addr::from(a).is_unspecified(),
            _ => false,
        }
    };
    let ok_shape = data.len() >= REQ_LEN
        && data[..4] == MAGIC
        && data[43] == 0
        && u16::from_le_bytes([data[41], data[42]]) != 0
        && addr_ok(data);
    check_prefix(
        "request",
        data,
        ok_shape,
        REQ_LEN,
        ConnReq::decode,
        ConnReq::encode,
    );
}

/// `ConnRep::decode`: accepted exactly when the input is long enough and
/// has the magic; then the reply re-encodes to its 16 bytes.
pub(crate) fn check_rep(data: &[u8]) {
    let ok_shape = data.len() >= REP_LEN && data[..4] == MAGIC;
    check_prefix(
        "reply",
        data,
        ok_shape,
        REP_LEN,
        ConnRep::decode,
        ConnRep::encode,
    );
}

/// What a decoder of a fixed-length prefix must do: accept exactly the
/// input of the right shape, and re-encode what it accepts to the `len`
/// bytes it read, which decode to the same value.
fn check_prefix<T: PartialEq + std::fmt::Debug, E>(
    what: &str,
    data: &[u8],
    ok_shape: bool,
    len: usize,
    decode: impl Fn(&[u8]) -> Result<T, E>,
    encode: impl Fn(&T) -> Vec<u8>,
) {
    match decode(data) {
        Ok(v) => {
            assert!(ok_shape, "accepted a {what} the layout refuses: {data:?}");
            let bytes = encode(&v);
            assert_eq!(bytes, &data[..len], "{what} does not re-encode");
            assert_eq!(decode(&bytes).ok(), Some(v));
        }
        Err(_) => assert!(!ok_shape, "refused a well-formed {what}: {data:?}"),
    }
}

/// `parse_header`: a header exactly when there are 3 bytes, and it is
/// what those bytes say.
pub(crate) fn check_header(data: &[u8]) {
    match parse_header(data) {
        Some((id, grant)) => {
            assert!(data.len() >= HDR);
            assert_eq!(header(id, grant), data[..HDR]);
        }
        None => assert!(data.len() < HDR, "no header in {data:?}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::net::{IpAddr, SocketAddr};

    fn valid_req() -> impl Strategy<Value = Vec<u8>> {
        (
            any::<u32>(),
            any::<u64>(),
            any::<u32>(),
            any::<u32>(),
            prop_oneof![
                (1u32..).prop_map(|ip| IpAddr::from(Ipv4Addr::from(ip))),
                (1u128..).prop_map(|ip| IpAddr::from(Ipv6Addr::from(ip))),
            ],
            1u16..,
            any::<u32>(),
        )
            .prop_map(|(seg, uuid, credits, posted, ip, port, max_window)| {
                ConnReq {
                    seg,
                    uuid,
                    credits,
                    posted,
                    listen: SocketAddr::new(ip, port),
                    max_window,
                }
                .encode()
            })
    }

    fn valid_rep() -> impl Strategy<Value = Vec<u8>> {
        (any::<u32>(), any::<u32>(), any::<u32>()).prop_map(|(credits, seg, max_window)| {
            ConnRep {
                credits,
                seg,
                max_window,
            }
            .encode()
        })
    }

    /// A valid message, then truncated, bit-flipped or extended.
    fn mutated(valid: impl Strategy<Value = Vec<u8>>) -> impl Strategy<Value = Vec<u8>> {
        (
            valid,
            any::<prop::sample::Index>(),
            any::<prop::sample::Index>(),
            0u8..8,
            0u8..3,
            prop::collection::vec(any::<u8>(), 0..64),
        )
            .prop_map(|(mut v, cut, at, bit, how, tail)| {
                match how {
                    0 => v.truncate(cut.index(v.len() + 1)),
                    1 => {
                        let i = at.index(v.len());
                        v[i] ^= 1 << bit;
                    }
                    _ => v.extend_from_slice(&tail),
                }
                v
            })
    }

    proptest! {
        #[test]
        fn random_bytes(data in prop::collection::vec(any::<u8>(), 0..64)) {
            check_all(&data);
        }

        #[test]
        fn huge_inputs(data in prop::collection::vec(any::<u8>(), 4096..65536)) {
            check_all(&data);
        }

        #[test]
        fn mutated_requests(data in mutated(valid_req())) {
            check_all(&data);
        }

        #[test]
        fn mutated_replies(data in mutated(valid_rep())) {
            check_all(&data);
        }

        #[test]
        fn magic_prefixed(tail in prop::collection::vec(any::<u8>(), 0..40)) {
            let mut data = MAGIC.to_vec();
            data.extend_from_slice(&tail);
            check_all(&data);
        }
    }
}
