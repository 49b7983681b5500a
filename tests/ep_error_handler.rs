//! Endpoint error handling (`Worker::connect_with`, `EpParams`): a peer
//! that goes away fails the endpoint, its handler runs once with the
//! error, its outstanding operations complete with it and later ones fail
//! at once; closing an endpoint runs no handler.

mod common;

use common::*;
use rucx::ucp::{EpParams, ErrMode};
use rucx::{Error, Op, Posted, Worker};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// What a handler saw: the endpoint's id and the error's status.
type Seen = Arc<Mutex<Vec<(u64, rucx::ucp::ucs::Status, bool)>>>;

fn recording(seen: &Seen) -> EpParams {
    let seen = Arc::clone(seen);
    EpParams::new().on_error(move |w, ep, err| {
        // The handler may use the worker: the endpoint says it failed.
        let failed = w.ep_status(ep).is_err();
        seen.lock()
            .unwrap()
            .push((ep.to_u64(), err.status(), failed));
    })
}

/// Two workers of `ctx`, the first with an endpoint to the second whose
/// handler records into the returned list.
fn watched(ctx: rucx::Context) -> (Worker, Worker, rucx::Ep, Seen) {
    let mut a = ctx.create_worker().expect("worker");
    let b = ctx.create_worker().expect("worker");
    let seen = Seen::default();
    let ep = a
        .connect_with(&b.address(), recording(&seen))
        .expect("connect");
    (a, b, ep, seen)
}

/// Progresses `w` until `done` (20 s at most).
fn until(w: &mut Worker, what: &str, mut done: impl FnMut(&mut Worker) -> bool) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while !done(w) {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        w.progress();
    }
}

/// Progresses `w` a thousand times more: a handler that ran does not run
/// again.
fn linger(w: &mut Worker) {
    for _ in 0..1000 {
        w.progress();
    }
}

#[test]
fn a_peer_that_goes_away_runs_the_handler_once_and_fails_its_operations() {
    let (mut a, b, ep, seen) = watched(context_rndv("tcp", Some("4k")));
    assert_eq!(a.ep_err_mode(ep).expect("mode"), ErrMode::Peer);
    // A rendezvous send waits for the receiver, which never answers.
    let data = vec![7u8; 64 * 1024];
    let Posted::InFlight(id) = a.tag_send(ep, data, 1, Op::new()).expect("send") else {
        panic!("a rendezvous send cannot finish at once");
    };
    drop(b);
    until(&mut a, "the handler", |_| !seen.lock().unwrap().is_empty());
    let (at, status, failed) = seen.lock().unwrap()[0];
    assert_eq!(at, ep.to_u64());
    assert!(failed, "the endpoint reports its failure to the handler");
    assert_ne!(status, rucx::ucp::ucs::Status::Ok);
    // The send in flight completed with the endpoint's failure.
    let mut result = None;
    until(&mut a, "the send", |a| {
        result = a.request_test(id);
        result.is_some()
    });
    assert!(
        matches!(result, Some(Err(Error::EndpointFailed { .. }))),
        "{result:?}"
    );
    // A later operation fails at once.
    assert!(a.tag_send(ep, vec![1u8; 8], 2, Op::new()).is_err());
    // Once, however long the worker goes on.
    linger(&mut a);
    assert_eq!(seen.lock().unwrap().len(), 1);
}

#[test]
fn closing_an_endpoint_runs_no_handler() {
    let (mut a, b, ep, seen) = watched(context("tcp"));
    a.ep_close(ep).expect("close");
    drop(b);
    for _ in 0..10_000 {
        a.progress();
    }
    assert!(seen.lock().unwrap().is_empty());
}

#[test]
fn without_peer_mode_no_handler_runs_but_the_endpoint_fails() {
    let ctx = context("tcp");
    let mut a = ctx.create_worker().expect("worker");
    let b = ctx.create_worker().expect("worker");
    let ep = a
        .connect_with(&b.address(), EpParams::new().err_mode(ErrMode::None))
        .expect("connect");
    assert_eq!(a.ep_err_mode(ep).expect("mode"), ErrMode::None);
    drop(b);
    until(&mut a, "the failure", |a| a.ep_status(ep).is_err());
    assert!(matches!(a.ep_status(ep), Err(Error::EndpointFailed { .. })));
}

#[test]
fn a_second_connect_without_peer_mode_keeps_the_first_ones_reports() {
    let (mut a, b, ep, seen) = watched(context("tcp"));
    let again = a
        .connect_with(&b.address(), EpParams::new().err_mode(ErrMode::None))
        .expect("connect again");
    assert_eq!(again, ep, "one endpoint per peer worker");
    assert_eq!(a.ep_err_mode(ep).expect("mode"), ErrMode::Peer);
    drop(b);
    until(&mut a, "the handler", |_| !seen.lock().unwrap().is_empty());
    linger(&mut a);
    assert_eq!(seen.lock().unwrap().len(), 1);
}

#[test]
fn each_handler_of_a_shared_endpoint_runs_once_in_the_order_given() {
    let (mut a, b, ep, first) = watched(context("tcp"));
    let second = Seen::default();
    let order = Arc::new(Mutex::new(Vec::new()));
    let again = a
        .connect_with(&b.address(), recording(&second))
        .expect("connect again");
    assert_eq!(again, ep);
    // A third handler records when it ran, against the other two.
    let (o, f, s) = (Arc::clone(&order), Arc::clone(&first), Arc::clone(&second));
    let third = EpParams::new().on_error(move |_, _, _| {
        let ran = (f.lock().unwrap().len(), s.lock().unwrap().len());
        o.lock().unwrap().push(ran);
    });
    a.connect_with(&b.address(), third)
        .expect("connect a third time");
    drop(b);
    until(&mut a, "the handlers", |_| {
        !order.lock().unwrap().is_empty()
    });
    linger(&mut a);
    for seen in [&first, &second] {
        let seen = seen.lock().unwrap();
        assert_eq!(seen.len(), 1, "{seen:?}");
        assert_eq!(seen[0].0, ep.to_u64());
        assert!(
            seen[0].2,
            "the endpoint reports its failure to each handler"
        );
    }
    // The third ran once, after the first two.
    assert_eq!(*order.lock().unwrap(), vec![(1, 1)]);
}
