//! The checks of the conformance suite. Each takes a [`Fixture`], opens its
//! own pair of ifaces, and panics with the fixture's name on a violation.
//! A check of an operation the iface does not advertise passes at once
//! (and says `not applicable` on stderr).

mod am;
mod caps;
mod failure;
mod flow;
pub mod rma;

pub use am::{am_bcopy, am_short, am_zcopy, limits};
pub use caps::{caps_consistent, reachability};
pub use failure::{ep_destroy_in_flight, event_fd, peer_failure};
pub use flow::{flush, many_endpoints, ordering, pending};
pub use rma::{
    rma_access, rma_bad_endpoint, rma_bounds, rma_caps, rma_dereg, rma_forged_keys, rma_get,
    rma_iov, rma_put,
};

#[cfg(doc)]
use super::Fixture;
use super::Pair;
use crate::{AmId, Caps, EpId, Posted, Token, AM_ID_MAX};

/// `len` deterministic bytes for `seed`; the first 8 (if there is room) are
/// the seed itself, so that messages can be told apart.
pub fn pattern(seed: u64, len: usize) -> Vec<u8> {
    let mut x = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    let mut v: Vec<u8> = (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect();
    if len >= 8 {
        v[..8].copy_from_slice(&seed.to_le_bytes());
    }
    v
}

fn skip(p: &Pair, why: &str) {
    eprintln!("{}: not applicable: {why}", p.name());
}

/// An active message operation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Short,
    Bcopy,
    Zcopy,
}

/// The operations `caps` advertise.
fn kinds(caps: Caps) -> Vec<Kind> {
    let mut k = Vec::new();
    if caps.contains(Caps::AM_SHORT) {
        k.push(Kind::Short);
    }
    if caps.contains(Caps::AM_BCOPY) {
        k.push(Kind::Bcopy);
    }
    if caps.contains(Caps::AM_ZCOPY) {
        k.push(Kind::Zcopy);
    }
    k
}

/// Messages sent and zero-copy operations still to complete.
#[derive(Debug, Default)]
struct Sent {
    expected: Vec<(AmId, Vec<u8>)>,
    in_flight: Vec<Token>,
}

impl Sent {
    fn record(&mut self, posted: Posted, token: Token, id: AmId, data: Vec<u8>) {
        if posted == Posted::InFlight {
            self.in_flight.push(token);
        }
        self.expected.push((id, data));
    }
}

/// Posts message `seq` of about `len` bytes as `kind` on `a`'s `ep`; one
/// attempt when `once`, else retried past `NoResource`. Returns the outcome
/// and the data `b` should receive (`None` for `NoResource`).
fn send(
    p: &mut Pair,
    ep: EpId,
    kind: Kind,
    seq: u64,
    len: usize,
    once: bool,
) -> (Posted, Option<(AmId, Vec<u8>)>) {
    let attr = p.a().attr().clone();
    let id = (seq % u64::from(AM_ID_MAX)) as AmId;
    let name = p.name().to_owned();
    let (posted, data) = match kind {
        Kind::Short => {
            let payload = pattern(seq, len.min(attr.max_short));
            let op = |a: &mut dyn crate::Iface| a.am().unwrap().am_short(ep, id, seq, &payload);
            let posted = if once {
                op(p.a())
            } else {
                p.retry("am_short", op, |r| *r == Posted::NoResource)
            }
            .unwrap_or_else(|e| panic!("{name}: am_short #{seq} failed: {e}"));
            assert_ne!(
                posted,
                Posted::InFlight,
                "{name}: am_short returned InFlight"
            );
            let mut data = seq.to_le_bytes().to_vec();
            data.extend_from_slice(&payload);
            (posted, data)
        }
        Kind::Bcopy => {
            let data = pattern(seq, len.min(attr.max_bcopy));
            let (x, y) = data.split_at(data.len() / 3);
            let parts: [&[u8]; 2] = [x, y];
            let op = |a: &mut dyn crate::Iface| a.am().unwrap().am_bcopy(ep, id, &parts);
            let (posted, n) = if once {
                op(p.a())
            } else {
                p.retry("am_bcopy", op, |r| r.0 == Posted::NoResource)
            }
            .unwrap_or_else(|e| panic!("{name}: am_bcopy #{seq} failed: {e}"));
            assert_ne!(
                posted,
                Posted::InFlight,
                "{name}: am_bcopy returned InFlight"
            );
            if posted == Posted::Done {
                assert_eq!(n, data.len(), "{name}: am_bcopy byte count");
            }
            (posted, data)
        }
        Kind::Zcopy => {
            let header = seq.to_le_bytes()[..attr.max_hdr.min(8)].to_vec();
            let body = pattern(seq, len.min(attr.max_zcopy));
            let parts = if attr.max_iov >= 2 {
                let (x, y) = body.split_at(body.len() / 2);
                vec![x.to_vec(), y.to_vec()]
            } else {
                vec![body.clone()]
            };
            let token = Token(seq);
            let posted = if once {
                p.zcopy_once(ep, id, &header, parts, token)
            } else {
                p.zcopy(ep, id, &header, parts, token)
            }
            .unwrap_or_else(|e| panic!("{name}: am_zcopy #{seq} failed: {e}"));
            let mut data = header;
            data.extend_from_slice(&body);
            (posted, data)
        }
    };
    if posted == Posted::NoResource {
        (posted, None)
    } else {
        (posted, Some((id, data)))
    }
}

/// Drives until `b` has `sent.expected.len()` messages and every in-flight
/// operation completed, then checks completions and contents in order.
/// Returns the source ids of the messages.
fn expect_delivered(p: &mut Pair, sent: &Sent, what: &str) -> Vec<crate::SrcId> {
    let n = sent.expected.len();
    p.drive_until(what, |p| {
        p.sink_b.ams.len() >= n
            && sent
                .in_flight
                .iter()
                .all(|&t| p.sink_a.completion(t).is_some())
    });
    let name = p.name().to_owned();
    for &t in &sent.in_flight {
        if let Some(Err(e)) = p.sink_a.completion(t) {
            panic!("{name}: {what}: operation {t:?} completed with {e}");
        }
    }
    assert_eq!(p.sink_b.ams.len(), n, "{name}: {what}: message count");
    for (i, ((id, data), got)) in sent.expected.iter().zip(&p.sink_b.ams).enumerate() {
        assert_eq!(got.id, *id, "{name}: {what}: id of message {i}");
        if got.data != *data {
            let at = got.data.iter().zip(data).position(|(x, y)| x != y);
            panic!(
                "{name}: {what}: message {i}: {} bytes, expected {}, first difference at {at:?}",
                got.data.len(),
                data.len()
            );
        }
    }
    p.sink_b.ams.iter().map(|m| m.src).collect()
}

/// Asserts that all source ids are one.
fn assert_one_source(name: &str, srcs: &[crate::SrcId], what: &str) {
    if let Some(first) = srcs.first() {
        assert!(
            srcs.iter().all(|s| s == first),
            "{name}: {what}: one endpoint's messages carry different source ids"
        );
    }
}
