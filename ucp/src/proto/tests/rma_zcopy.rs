//! One-sided operations by zero-copy reads and writes on the lane: the
//! request completes once every step did, and not before, also when its
//! endpoint fails while steps are with the transport.
//!
//! The request is built as the worker's `rma_start` builds it (the
//! operations are the worker's API, not the core's), then posted with
//! `Core::push_rma_zcopy`.

use crate::proto::testing::{pattern, virt_attr, Node};
use crate::request::{Kind, Op, Request};
use crate::rma::{RmaSink, RmaState, ZcopyPlan};
use crate::ucs::slab::SlabId;
use crate::uct::{Access, AmSink, EpId, RemoteKey};
use crate::Error;

/// Starts a zero-copy get of `remote` into `local` on `n`'s endpoint, in
/// reads of at most `max` bytes.
fn get(n: &mut Node, local: &mut [u8], remote: &[u8], max: usize) -> SlabId {
    let key = RemoteKey {
        md_name: "virt".into(),
        packed: std::sync::Arc::from(&[][..]),
        addr: remote.as_ptr() as u64,
        len: remote.len() as u64,
        access: Access::REMOTE_READ,
    };
    // SAFETY: the test keeps `local` alive and untouched until the get
    // completes.
    #[allow(unsafe_code)]
    let buf = unsafe { crate::request::buf::RecvBuf::new(local.as_mut_ptr(), local.len()) };
    let plan = ZcopyPlan {
        local: crate::proto::rndv_zcopy::Local::Recv(buf),
        iface: 0,
        uct_ep: EpId(0),
        key,
        max,
        len: local.len(),
        remote: remote.as_ptr() as u64,
        off: 0,
    };
    let st = RmaState {
        ep: n.ep,
        pending: 0,
        posting: false,
        len: local.len(),
        error: None,
        sink: RmaSink::None,
        zcopy: vec![plan],
        zcopy_inflight: 0,
        amo: None,
    };
    let id = n.core.reqs.insert(Request::new(Kind::Rma(st), Op::new()));
    n.core.push_rma_zcopy(&mut n.tx, id);
    n.run();
    id
}

#[test]
fn a_get_completes_after_its_last_read() {
    let mut n = Node::new(virt_attr(|_| {}));
    let remote = pattern(10_000);
    let mut local = vec![0u8; 10_000];
    let id = get(&mut n, &mut local, &remote, 4096);
    let reads = n.tx.rmas(true);
    assert_eq!(
        reads.iter().map(|r| r.1).collect::<Vec<_>>(),
        [4096, 4096, 1808]
    );
    assert_eq!(local, remote);
    let first = reads[0].2;
    n.complete(first, Ok(()));
    assert!(n.result(id).is_none());
    n.complete_all(Ok(()));
    assert_eq!(n.done_len(id), Some(10_000));
}

#[test]
fn a_full_lane_parks_the_reads_until_it_has_room() {
    let mut n = Node::new(virt_attr(|_| {}));
    let remote = pattern(10_000);
    let mut local = vec![0u8; 10_000];
    n.tx.room_for = Some(1);
    let id = get(&mut n, &mut local, &remote, 4096);
    assert_eq!(n.tx.rmas(true).len(), 1);
    n.complete_all(Ok(()));
    assert!(n.result(id).is_none(), "reads still to post");
    n.room();
    assert_eq!(n.tx.rmas(true).len(), 3);
    n.complete_all(Ok(()));
    assert_eq!(n.done_len(id), Some(10_000));
    assert_eq!(local, remote);
}

#[test]
fn an_endpoint_failing_mid_get_completes_it_after_the_reads() {
    let mut n = Node::new(virt_attr(|_| {}));
    let remote = pattern(10_000);
    let mut local = vec![0u8; 10_000];
    let id = get(&mut n, &mut local, &remote, 4096);
    n.core
        .ep_failed(EpId(0), crate::error::peer_failed("gone".into()));
    n.run();
    assert!(n.result(id).is_none(), "completed with reads in flight");
    n.complete_all(Err(crate::ucs::Error::Canceled));
    assert!(matches!(
        n.result(id),
        Some(Err(Error::EndpointFailed { .. }))
    ));
}
