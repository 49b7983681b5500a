//! Code that runs while rucx has the worker borrowed — completion
//! callbacks and `Scope::with_worker` — gets a `WorkerMut`: every
//! operation, but never the `&mut Worker` that `std::mem::swap` would need
//! to move the worker away while a scope's transfers use it (that does not
//! compile: `tests/ui/callback_cannot_swap_worker.rs`,
//! `tests/ui/scoped_worker_cannot_be_replaced.rs`). Here: what it can do
//! still works, inside a scope, and the scope drains the worker it was
//! opened on.

mod common;

use common::*;
use rucx::{Op, Posted, WorkerMut, TAG_MASK_ALL};
use std::sync::{Arc, Mutex};

/// Runs both workers until `done` holds.
fn drive(
    a: &mut rucx::Worker,
    b: &mut rucx::Worker,
    mut done: impl FnMut(&mut rucx::Worker, &mut rucx::Worker) -> bool,
) {
    for _ in 0..1_000_000 {
        if done(a, b) {
            return;
        }
        a.progress();
        b.progress();
    }
    panic!("no progress");
}

#[test]
fn a_callback_inside_a_scope_posts_through_its_worker_mut() {
    let ctx = context("self");
    let mut a = ctx.create_worker().expect("worker");
    let mut b = ctx.create_worker().expect("worker");
    let ab = a.connect(&b.address()).expect("connect");
    let ba = b.connect(&a.address()).expect("connect");
    let replied = Arc::new(Mutex::new(None));
    let seen = replied.clone();
    // The callback answers the request it received, from inside progress.
    let cb = move |w: &mut WorkerMut<'_>, c: rucx::Completion| {
        let len = c.result.as_ref().map(|i| i.length).unwrap_or(0);
        let r = w.tag_send(ba, vec![len as u8; 4], 2, Op::new());
        *seen.lock().unwrap() = Some(matches!(r, Ok(Posted::Done(..))));
    };
    let mut halo = vec![0u8; 32];
    let data = pattern(32, 9);
    let got = b.scope(|s| {
        let scoped = s.tag_recv(&mut halo, 3, TAG_MASK_ALL);
        s.with_worker(|w| {
            let r = w.tag_recv(vec![0u8; 16], 1, TAG_MASK_ALL, Op::new().callback(cb));
            assert!(matches!(r, Ok(Posted::InFlight(_))));
        });
        a.tag_send_blocking(ab, b"request", 1).expect("send");
        a.tag_send_blocking(ab, &data, 3).expect("send");
        while !s.test(&scoped) || replied.lock().unwrap().is_none() {
            s.progress();
        }
        s.wait(scoped).0
    });
    assert_eq!(got.expect("scoped receive").length, 32);
    assert_eq!(halo, data);
    assert_eq!(*replied.lock().unwrap(), Some(true));
    let mut answer = [0u8; 4];
    let mut done = None;
    drive(&mut a, &mut b, |a, _| {
        done = done.or_else(|| a.tag_probe(2, TAG_MASK_ALL));
        done.is_some()
    });
    a.tag_recv_blocking(&mut answer, 2, TAG_MASK_ALL)
        .expect("answer");
    assert_eq!(answer, [7u8; 4], "the callback saw the 7-byte request");
}

#[test]
fn with_worker_lends_every_operation_and_the_scope_drains_its_own_worker() {
    let ctx = context("self");
    let mut a = ctx.create_worker().expect("worker");
    let mut b = ctx.create_worker().expect("worker");
    let b_addr = b.address();
    let mut buf = vec![0u8; 8];
    let outstanding = a.scope(|s| {
        let scoped = s.tag_recv(&mut buf, 5, TAG_MASK_ALL);
        // Connecting, sending and probing all go through the lent worker.
        let ep = s.with_worker(|w| w.connect(&b_addr)).expect("connect");
        s.with_worker(|w| {
            w.tag_send_blocking(ep, b"to b", 4).expect("send");
            assert!(w.tag_probe(5, TAG_MASK_ALL).is_none());
            // Reads reach the worker itself.
            assert!(w.requests_outstanding() >= 1);
        });
        drop(scoped);
        // The scope ends with `scoped` unmatched: it cancels it on the
        // worker it was opened on.
        s.with_worker(|w| w.requests_outstanding())
    });
    assert!(outstanding >= 1);
    assert_eq!(a.requests_outstanding(), 0, "the scope drained its worker");
    let mut got = [0u8; 4];
    drive(&mut a, &mut b, |_, b| {
        b.tag_probe(4, TAG_MASK_ALL).is_some()
    });
    b.tag_recv_blocking(&mut got, 4, TAG_MASK_ALL)
        .expect("recv");
    assert_eq!(&got, b"to b");
}
