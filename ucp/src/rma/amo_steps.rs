//! The steps of atomics built from a device's operations, as the core
//! posts and completes them over a recorded lane whose device does 64-bit
//! fetch-and-add and compare-and-swap: each step waits for the last one,
//! a full lane parks the next step, and an endpoint failing between steps
//! or with a step in flight fails the request without posting more.
#![allow(unsafe_code)]

use super::amo::{Amo, AmoPlan};
use super::amo_built::{Built, BuiltState};
use super::atomic::{AtomicOp, AtomicValue};
use super::{RmaSink, RmaState};
use crate::proto::testing::{virt_attr, Node};
use crate::request::buf::ResultWord;
use crate::request::{Kind, Op, Request};
use crate::ucs::slab::SlabId;
use crate::uct::{Access, AmSink, AtomicCaps, EpId, RemoteKey};
use crate::Error;
use std::sync::atomic::{AtomicU64, Ordering};

/// A node whose lane does device atomics.
fn node() -> Node {
    let mut n = Node::new(virt_attr(|_| {}));
    n.tx.atomics = true;
    n
}

/// Starts a fetching `op` of `value` on `word`, old value to `result`,
/// as the worker's `atomic_device_start` does for a built atomic.
fn start(n: &mut Node, word: &AtomicU64, op: AtomicOp, value: u64, result: &mut u64) -> SlabId {
    let key = RemoteKey {
        md_name: "virt".into(),
        packed: std::sync::Arc::from(&[][..]),
        addr: word.as_ptr() as u64,
        len: 8,
        access: Access::REMOTE_ATOMIC,
    };
    let a = Amo {
        op,
        fetch: true,
        value: AtomicValue::U64(value),
        compare: 0,
        remote: key.addr,
    };
    let caps = AtomicCaps::FADD64 | AtomicCaps::CSWAP64;
    let built = Built::plan(&a, caps, &key).unwrap().expect("built");
    // SAFETY: the test keeps `result` alive and untouched until the
    // request completes.
    let rw = unsafe { ResultWord::new(result) };
    let plan = AmoPlan::new(0, EpId(0), key.clone(), built.step());
    let state = BuiltState {
        lane: (0, EpId(0), key),
        built,
        result: Some(rw),
        slot: [0; 8],
    };
    let st = RmaState {
        ep: n.ep,
        pending: 0,
        posting: false,
        len: 8,
        error: None,
        sink: RmaSink::DeviceBuilt(Box::new(state)),
        zcopy: Vec::new(),
        zcopy_inflight: 0,
        amo: Some(Box::new(plan)),
    };
    let id = n.core.reqs.insert(Request::new(Kind::Rma(st), Op::new()));
    n.core.push_rma_amo(&mut n.tx, id);
    n.run();
    id
}

/// The token of the last device atomic posted.
fn last(n: &Node) -> crate::uct::Token {
    n.tx.amos().last().expect("an atomic posted").4
}

#[test]
fn each_step_follows_the_last_until_the_swap_holds() {
    let mut n = node();
    let word = AtomicU64::new(6);
    let mut old = 0;
    let id = start(&mut n, &word, AtomicOp::Xor, 1, &mut old);
    // First step: guesses 0, reads 6.
    assert_eq!(n.tx.amos().len(), 1);
    assert_eq!(word.load(Ordering::SeqCst), 6);
    n.core.completed(last(&n), Ok(()));
    // Another initiator changes the word before the second step.
    word.fetch_xor(0x10, Ordering::SeqCst);
    n.run();
    assert_eq!(n.tx.amos().len(), 2, "one step at a time");
    assert!(n.result(id).is_none());
    n.complete(last(&n), Ok(()));
    let steps = n.tx.amos();
    assert_eq!(steps.len(), 3, "the second step missed");
    assert!(steps.iter().all(|s| s.0), "compare-and-swaps");
    assert_eq!(
        (steps[1].3, steps[2].3),
        (6, 0x16),
        "each expects the last read"
    );
    n.complete(last(&n), Ok(()));
    assert_eq!(n.done_len(id), Some(8));
    assert_eq!((old, word.load(Ordering::SeqCst)), (0x16, 0x17));
}

#[test]
fn a_full_lane_parks_the_next_step() {
    let mut n = node();
    let word = AtomicU64::new(6);
    let mut old = 0;
    let id = start(&mut n, &word, AtomicOp::Or, 1, &mut old);
    n.tx.full = true;
    n.complete(last(&n), Ok(()));
    assert_eq!(n.tx.amos().len(), 1, "no room: parked");
    assert!(n.result(id).is_none());
    n.room();
    assert_eq!(n.tx.amos().len(), 2);
    n.complete(last(&n), Ok(()));
    assert_eq!(n.done_len(id), Some(8));
    assert_eq!((old, word.load(Ordering::SeqCst)), (6, 7));
}

#[test]
fn an_endpoint_failing_between_steps_posts_nothing_more() {
    let mut n = node();
    let word = AtomicU64::new(6);
    let mut old = 0;
    let id = start(&mut n, &word, AtomicOp::Swap, 9, &mut old);
    // The first step is back, its successor queued; then the endpoint
    // fails.
    n.core.completed(last(&n), Ok(()));
    let ep = n.ep;
    n.core.fail_ep(ep, Error::Canceled);
    n.run();
    assert_eq!(n.tx.amos().len(), 1);
    assert!(matches!(n.result(id), Some(Err(Error::Canceled))));
    assert_eq!((old, word.load(Ordering::SeqCst)), (0, 6));
}

#[test]
fn an_endpoint_failing_with_a_step_in_flight_waits_for_it() {
    let mut n = node();
    let word = AtomicU64::new(6);
    let mut old = 0;
    let id = start(&mut n, &word, AtomicOp::And, 2, &mut old);
    let ep = n.ep;
    n.core.fail_ep(ep, Error::Canceled);
    n.run();
    assert!(n.result(id).is_none(), "the device still holds the slot");
    n.complete(last(&n), Ok(()));
    assert_eq!(n.tx.amos().len(), 1, "no step after the failure");
    assert!(matches!(n.result(id), Some(Err(Error::Canceled))));
    assert_eq!((old, word.load(Ordering::SeqCst)), (0, 6));
}

#[test]
fn a_failed_step_fails_the_request() {
    let mut n = node();
    let word = AtomicU64::new(6);
    let mut old = 0;
    let id = start(&mut n, &word, AtomicOp::Xor, 3, &mut old);
    n.complete(last(&n), Err(crate::ucs::Error::Canceled));
    assert_eq!(n.tx.amos().len(), 1);
    assert!(matches!(
        n.result(id),
        Some(Err(Error::EndpointFailed { .. }))
    ));
    assert_eq!(word.load(Ordering::SeqCst), 6);
}
