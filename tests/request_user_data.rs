//! `Worker::request_set_user_data`: the user data of a queued request can
//! be set after posting, while it is in flight and once its completion
//! waits in the queue.

mod common;

use common::*;
use rucx::ucp::{Op, Posted};

#[test]
fn user_data_set_after_posting_is_reported() {
    let ctx = context("self");
    let mut a = ctx.create_worker().expect("worker");
    let ep = a.connect(&a.address()).expect("connect");
    let mut buf = [0u8; 8];
    let mut buf2 = [0u8; 8];
    // SAFETY: the buffers outlive the requests, which complete below.
    let r1 = unsafe { a.tag_recv_raw(buf.as_mut_ptr(), 8, 1, u64::MAX, Op::new().queue()) };
    let Ok(Posted::InFlight(id1)) = r1 else {
        panic!("receive 1 should wait: {r1:?}");
    };
    // SAFETY: as above.
    let r2 = unsafe { a.tag_recv_raw(buf2.as_mut_ptr(), 8, 2, u64::MAX, Op::new().queue()) };
    let Ok(Posted::InFlight(id2)) = r2 else {
        panic!("receive 2 should wait: {r2:?}");
    };
    // In flight: the request takes it.
    assert!(a.request_set_user_data(id1, 11));
    a.tag_send_blocking(ep, &7u64.to_le_bytes(), 1)
        .expect("send 1");
    a.tag_send_blocking(ep, &9u64.to_le_bytes(), 2)
        .expect("send 2");
    while a.progress() > 0 {}
    // Completed into the queue: its completion takes it.
    assert!(a.request_set_user_data(id2, 22));
    let mut got = Vec::new();
    while let Some(c) = a.next_completion() {
        got.push((c.id, c.user_data, c.result.expect("receive").length));
    }
    got.sort_by_key(|g| g.1);
    assert_eq!(got, [(id1, 11, 8), (id2, 22, 8)]);
    assert_eq!((u64::from_le_bytes(buf), u64::from_le_bytes(buf2)), (7, 9));
    // Neither a request nor a completion any more.
    assert!(!a.request_set_user_data(id1, 5));
}
