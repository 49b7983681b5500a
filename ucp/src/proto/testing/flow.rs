//! Carrying messages between two nodes, and what tests build their
//! inputs from: wire headers, data, configurations.

use super::node::{virt_attr, Node};
use super::rec::Sent;
use crate::ucs::slab::SlabId;
use crate::uct::{AmSink, IfaceAttr, SrcId};
use crate::UcpConfig;

/// Delivers between `a` and `b` both ways until neither sends anything;
/// returns how many messages went. Panics after 1000 rounds (a loop).
pub(crate) fn exchange(a: &mut Node, b: &mut Node) -> usize {
    let mut n = 0;
    for _ in 0..1000 {
        let m = deliver(a, b) + deliver(b, a);
        if m == 0 {
            return n;
        }
        n += m;
    }
    panic!("the nodes keep sending");
}

/// Delivers between `a` and `b` and completes every zero-copy operation
/// in flight with success, until nothing is left to do.
pub(crate) fn settle(a: &mut Node, b: &mut Node) {
    for _ in 0..100 {
        exchange(a, b);
        if a.tx.inflight.is_empty() && b.tx.inflight.is_empty() {
            return;
        }
        a.complete_all(Ok(()));
        b.complete_all(Ok(()));
    }
    panic!("the nodes keep working");
}

/// Completes the reads in flight at `b` (the receiver of a rendezvous by
/// get), checks that receive `rid` finished with `len` bytes, then
/// carries `b`'s answer to `a` and checks that send `sid` finished too.
pub(crate) fn finish_reads(a: &mut Node, b: &mut Node, (sid, rid): (SlabId, SlabId), len: usize) {
    b.complete_all(Ok(()));
    assert_eq!(b.done_len(rid), Some(len));
    deliver(b, a);
    assert_eq!(a.done_len(sid), Some(len));
}

/// Sends `data` with `tag` from `a` (in flight) and delivers it to `b`,
/// which has no receive for it and must not answer yet; then posts the
/// receive of `buf` at `b` and carries out what matching started. Returns
/// (send, receive).
pub(crate) fn unexpected_then_recv(
    a: &mut Node,
    b: &mut Node,
    data: &[u8],
    buf: &mut [u8],
    tag: u64,
) -> (SlabId, SlabId) {
    let sid = a.send_pending(data, tag);
    deliver(a, b);
    assert!(b.tx.sent.is_empty(), "an answer before a receive matched");
    let rid = b.recv_pending(buf, tag);
    b.run();
    (sid, rid)
}

/// Little-endian `u64`s one after another: a wire header.
pub(crate) fn le(v: &[u64]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

/// An `EAGER_ONLY` message with `tag` and `payload`.
pub(crate) fn only(tag: u64, payload: &[u8]) -> Vec<u8> {
    [&le(&[tag])[..], payload].concat()
}

/// A test pattern of `n` bytes.
pub(crate) fn pattern(n: usize) -> Vec<u8> {
    (0..n).map(|i| (i * 7 + 3) as u8).collect()
}

/// An attribute set that forces fragments: small bcopy, no zero-copy.
pub(crate) fn fragmenting() -> IfaceAttr {
    let mut a = virt_attr(|_| {});
    a.max_bcopy = 256;
    a.max_short = 32;
    a.caps.remove(crate::uct::Caps::AM_ZCOPY);
    a
}

/// The default configuration without rendezvous.
pub(crate) fn no_rndv() -> UcpConfig {
    UcpConfig {
        rndv_thresh: crate::ucs::config::MemUnits::Inf,
        ..UcpConfig::default()
    }
}

/// A configuration with rendezvous from `thresh` bytes on, by `scheme`.
pub(crate) fn rndv_config(scheme: crate::proto::select::RndvScheme, thresh: u64) -> UcpConfig {
    UcpConfig {
        rndv_thresh: crate::ucs::config::MemUnits::Bytes(thresh),
        rndv_scheme: scheme,
        ..UcpConfig::default()
    }
}

/// Two nodes over one net ([`Node::pair`]) whose lanes can read and
/// write, doing rendezvous by `scheme` from 1 KiB on, in zero-copy
/// operations of at most `frag` bytes.
pub(crate) fn rndv_pair(scheme: crate::proto::select::RndvScheme, frag: u64) -> (Node, Node) {
    let mut cfg = rndv_config(scheme, 1024);
    cfg.rndv_frag_size = crate::ucs::config::MemUnits::Bytes(frag);
    let attr = virt_attr(|_| {});
    assert!(attr
        .caps
        .contains(crate::uct::Caps::GET_ZCOPY | crate::uct::Caps::PUT_ZCOPY));
    Node::pair(attr, cfg)
}

/// Feeds the active messages `from` sent (and takes them) to `to` as
/// arrivals from source 0, then carries out `to`'s commands. Returns how
/// many it delivered.
pub(crate) fn deliver(from: &mut Node, to: &mut Node) -> usize {
    let sent = std::mem::take(&mut from.tx.sent);
    let mut n = 0;
    for s in sent {
        match s {
            Sent::Am { id, data, .. } => {
                to.core.am(id, SrcId(0), &data);
                n += 1;
            }
            other => from.tx.sent.push(other),
        }
    }
    to.run();
    n
}
