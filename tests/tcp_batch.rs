//! Over TCP, small sends posted one after another without a progress call
//! (`RUCX_TCP_TX_BATCH`, on by default): the first leaves at once, the
//! others are requests that the next progress call completes, writing
//! them together; every message arrives, in order, intact. With
//! `RUCX_TCP_TX_BATCH=n` every small send completes at once. What a
//! progress call sends leaves before it returns, even when a callback
//! panics.

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
    a.progress();
    for id in ids {
        assert!(
            !a.request_is_active(id),
            "one progress call writes the sends that waited"
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

/// Receives on `b` the 8-byte message `tag` by progressing `b` alone.
fn recv_alone(b: &mut Worker, tag: u64) {
    let id = match b
        .tag_recv(vec![0u8; 8], tag, TAG_MASK_ALL, Op::new())
        .expect("recv")
    {
        Posted::InFlight(id) => id,
        Posted::Done(_, buf) => return assert_eq!(buf, pattern(8, tag)),
    };
    progress_until(b, 10, |b| !b.request_is_active(id));
    let (_, buf) = b.take::<Vec<u8>>(id).expect("done").expect("received");
    assert_eq!(buf, pattern(8, tag), "message {tag}");
}

/// A progress call corks the ifaces for what it sends and uncorks them
/// before it returns, also when a callback panics: the callback's sends
/// have left, and later sends are not held.
#[test]
fn sends_of_a_callback_that_panics_still_leave() {
    if is_child() {
        return;
    }
    let (mut a, mut b, ab) = pair();
    let ba = b.connect(&a.address()).expect("connect back");
    let cb = move |w: &mut rucx::WorkerMut<'_>, _: rucx::Completion| {
        for tag in [501, 502] {
            let p = w.tag_send(ab, pattern(8, tag), tag, Op::new());
            // Corked: the frame joins the connection's backlog.
            assert!(matches!(p, Ok(Posted::Done(..))));
        }
        panic!("the callback fails");
    };
    let r = a.tag_recv(vec![0u8; 8], 500, TAG_MASK_ALL, Op::new().callback(cb));
    assert!(matches!(r, Ok(Posted::InFlight(_))));
    let s = b
        .tag_send(ba, pattern(8, 500), 500, Op::new())
        .expect("send");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    let panicked = loop {
        assert!(std::time::Instant::now() < deadline, "no callback ran");
        b.progress();
        let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| a.progress()));
        if r.is_err() {
            break true;
        }
    };
    assert!(panicked);
    recv_alone(&mut b, 501);
    recv_alone(&mut b, 502);
    a.progress();
    let p = a
        .tag_send(ab, pattern(8, 503), 503, Op::new())
        .expect("send");
    assert!(
        matches!(p, Posted::Done(..)),
        "the first send after a progress call leaves at once"
    );
    recv_alone(&mut b, 503);
    if let Posted::InFlight(id) = s {
        progress_until(&mut b, 10, |b| !b.request_is_active(id));
    }
}

/// A wrong value of `RUCX_TCP_TX_BATCH` leaves tcp out with a warning
/// that names the variable (at the default log level), not silently.
#[test]
fn a_wrong_batch_setting_is_named_in_a_warning() {
    if is_child() {
        return;
    }
    let env = [
        ("RUCX_TCP_TX_BATCH", "maybe".to_string()),
        ("RUCX_TLS", "tcp".to_string()),
    ];
    let mut child = spawn_child_with("bad_setting_child", &env, &["RUCX_LOG_LEVEL"], true);
    drop(child.stdin.take());
    let mut err = String::new();
    std::io::Read::read_to_string(child.stderr.as_mut().expect("stderr"), &mut err)
        .expect("read stderr");
    assert!(
        wait_exit(&mut child, 60).success(),
        "the child failed:\n{err}"
    );
    assert!(
        err.contains("RUCX_TCP_TX_BATCH=\"maybe\"") && err.contains("WARN"),
        "no warning naming the setting:\n{err}"
    );
}

#[test]
fn bad_setting_child() {
    if !is_child() {
        return;
    }
    let made = rucx::Context::new();
    assert!(made.is_err(), "no transport is left over tcp alone");
}
