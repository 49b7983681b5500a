//! Flush and fence as requests: a flush waits, without blocking, until a
//! rendezvous send the receiver has not taken yet has left; a fence with
//! nothing in flight is over at once; a flush of a failed endpoint ends
//! with its error.

mod common;

use common::*;
use rucx::{Op, Posted};
use std::time::{Duration, Instant};

#[test]
fn a_flush_request_waits_for_the_receiver_without_blocking() {
    let ctx = context_rndv("tcp", Some("4k"));
    let mut a = ctx.create_worker().expect("worker");
    let mut b = ctx.create_worker().expect("worker");
    let ep = a.connect(&b.address()).expect("connect");
    let data = pattern(1 << 20, 3);
    let Posted::InFlight(s) = a.tag_send(ep, data.clone(), 9, Op::new()).unwrap() else {
        panic!("a rendezvous send waits for its receiver");
    };
    let mut all = a.flush_start();
    let mut one = a.ep_flush_start(ep).expect("flush");
    for _ in 0..2000 {
        a.progress();
        assert!(
            a.flush_poll(&mut all).is_none(),
            "flushed before the receiver took it"
        );
        assert!(a.flush_poll(&mut one).is_none());
    }
    let mut fence = a.fence_start();
    assert!(
        matches!(a.flush_poll(&mut fence), Some(Ok(()))),
        "nothing one-sided in flight"
    );
    let Posted::InFlight(r) = b
        .tag_recv(vec![0u8; 1 << 20], 9, u64::MAX, Op::new())
        .unwrap()
    else {
        panic!("the data is still at the sender");
    };
    let deadline = Instant::now() + Duration::from_secs(20);
    let (mut done_all, mut done_one) = (None, None);
    while done_all.is_none() || done_one.is_none() {
        assert!(Instant::now() < deadline, "timed out");
        a.progress();
        b.progress();
        if done_all.is_none() {
            done_all = a.flush_poll(&mut all);
        }
        if done_one.is_none() {
            done_one = a.flush_poll(&mut one);
        }
    }
    done_all.unwrap().expect("worker flush");
    done_one.unwrap().expect("endpoint flush");
    assert!(!a.request_is_active(s));
    while b.request_is_active(r) {
        b.progress();
    }
    let (_, got) = b.take::<Vec<u8>>(r).unwrap().expect("recv");
    assert!(got == data);
}

#[test]
fn flushing_a_failed_endpoint_ends_with_its_error() {
    let ctx = context("tcp");
    let mut a = ctx.create_worker().expect("worker");
    let b = ctx.create_worker().expect("worker");
    let ep = a.connect(&b.address()).expect("connect");
    drop(b);
    let deadline = Instant::now() + Duration::from_secs(20);
    while a.ep_status(ep).is_ok() {
        assert!(Instant::now() < deadline, "the endpoint never failed");
        let _ = a.tag_send_blocking(ep, b"x", 1);
        a.progress();
    }
    let mut f = a.ep_flush_start(ep).expect("flush");
    let r = loop {
        if let Some(r) = a.flush_poll(&mut f) {
            break r;
        }
        a.progress();
    };
    assert!(r.is_err());
}
