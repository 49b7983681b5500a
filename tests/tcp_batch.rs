//! Over TCP, small sends posted one after another without a progress call
//! (`RUCX_TCP_TX_BATCH`, on by default): the first leaves at once, the
//! others are requests that the next progress call completes, writing
//! them together; every message arrives, in order, intact. With
//! `RUCX_TCP_TX_BATCH=n` every small send completes at once.

mod common;

use common::*;
use rucx::{Op, Posted, ReqId, Worker, TAG_MASK_ALL};

const N: u64 = 100;

fn pair() -> (Worker, Worker, rucx::Ep) {
    let ctx = context_vars(&[("RUCX_TLS", "tcp"), ("RUCX_NET_DEVICES", "lo")]);
    let mut a = ctx.create_worker().expect("worker");
    let mut b = ctx.create_worker().expect("worker");
    let ep = a.connect(&b.address()).expect("connect");
    // One message first, so that the connection is open.
    let first = a.tag_send(ep, vec![0u8; 8], 0, Op::new()).expect("send");
    let r = match b.tag_recv(vec![0u8; 8], 0, TAG_MASK_ALL, Op::new()) {
        Ok(Posted::InFlight(id)) => Some(id),
        Ok(Posted::Done(..)) => None,
        Err(e) => panic!("recv: {e}"),
    };
    progress_until(&mut a, 20, |a| {
        b.progress();
        let sent = match first {
            Posted::InFlight(id) => !a.request_is_active(id),
            Posted::Done(..) => true,
        };
        sent && r.is_none_or(|id| !b.request_is_active(id))
    });
    (a, b, ep)
}

/// Posts `N` 8-byte sends (tags 1..=N) with no progress call between them;
/// the requests of those that did not complete at once.
fn burst(a: &mut Worker, ep: rucx::Ep) -> Vec<ReqId> {
    a.progress();
    let mut ids = Vec::new();
    for k in 1..=N {
        match a.tag_send(ep, pattern(8, k), k, Op::new()).expect("send") {
            Posted::Done(..) => {}
            Posted::InFlight(id) => ids.push(id),
        }
    }
    ids
}

/// Receives the burst on `b`, in order, checking every byte.
fn receive_burst(b: &mut Worker) {
    let mut buf = [0u8; 8];
    for k in 1..=N {
        let info = b
            .tag_recv_blocking(&mut buf, k, TAG_MASK_ALL)
            .expect("recv");
        assert_eq!(info.length, 8);
        assert_eq!(buf[..], pattern(8, k)[..], "message {k}");
    }
}

#[test]
fn a_burst_of_small_sends_leaves_with_the_next_progress_calls() {
    if is_child() {
        return;
    }
    let (mut a, mut b, ep) = pair();
    let ids = burst(&mut a, ep);
    assert_eq!(
        ids.len() as u64,
        N - 1,
        "only the first send leaves at once"
    );
    // The first call hands the waiting sends back, the second resumes
    // them together.
    a.progress();
    a.progress();
    for id in ids {
        assert!(
            !a.request_is_active(id),
            "two progress calls write the sends that waited"
        );
        a.take::<Vec<u8>>(id).expect("done").expect("sent");
    }
    receive_burst(&mut b);
}

/// In a child with `RUCX_TCP_TX_BATCH=n` (the transports read their
/// settings from the environment).
#[test]
fn without_batching_every_small_send_completes_at_once() {
    if is_child() {
        return;
    }
    let mut child = spawn_child("unbatched_child", &[("RUCX_TCP_TX_BATCH", "n".into())]);
    assert!(wait_exit(&mut child, 60).success(), "the child failed");
}

#[test]
fn unbatched_child() {
    if !is_child() {
        return;
    }
    let (mut a, mut b, ep) = pair();
    assert!(burst(&mut a, ep).is_empty());
    receive_burst(&mut b);
}
