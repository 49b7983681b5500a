//! Closing an endpoint in flush mode against force mode: a flush close
//! lets everything posted before it arrive and then resets the peer's
//! endpoint (reported in peer mode); a force close is over at once and
//! cancels what was still queued.

mod common;

use common::*;
use rucx::ucp::{CloseMode, EpParams};
use rucx::{Op, Posted, Worker};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// `a` connected to `b`, and `b`'s endpoint back in peer mode with a
/// handler that records the error; both endpoints.
#[allow(clippy::type_complexity)]
fn pair(
    tls: &str,
) -> (
    Worker,
    Worker,
    rucx::Ep,
    rucx::Ep,
    Arc<Mutex<Option<String>>>,
) {
    let ctx = context(tls);
    let mut a = ctx.create_worker().expect("worker");
    let mut b = ctx.create_worker().expect("worker");
    let seen: Arc<Mutex<Option<String>>> = Arc::default();
    let s = Arc::clone(&seen);
    let ab = a.connect(&b.address()).expect("connect");
    let params = EpParams::new().on_error(move |_, _, e| *s.lock().unwrap() = Some(e.to_string()));
    let ba = b.connect_with(&a.address(), params).expect("connect back");
    (a, b, ab, ba, seen)
}

fn flush_close_delivers_then_resets(tls: &str) {
    let (mut a, mut b, ab, _ba, seen) = pair(tls);
    let n = 50u64;
    for i in 0..n {
        let data = pattern(3000 + i as usize * 1000, i);
        if let Posted::InFlight(id) = a.tag_send(ab, data, i, Op::new()).expect("send") {
            a.request_release(id);
        }
    }
    let mut closing = a.ep_close_start(ab, CloseMode::Flush).expect("close");
    let mut got = 0;
    let mut closed = None;
    let deadline = Instant::now() + Duration::from_secs(20);
    let mut recv = None;
    while closed.is_none() || got < n || seen.lock().unwrap().is_none() {
        assert!(Instant::now() < deadline, "{tls}: timed out ({got} of {n})");
        a.progress();
        b.progress();
        if closed.is_none() {
            closed = a.ep_close_poll(&mut closing);
        }
        if got == n {
            continue;
        }
        let id = match recv {
            Some(id) => id,
            None => match b
                .tag_recv(vec![0u8; 60_000], got, u64::MAX, Op::new())
                .unwrap()
            {
                Posted::Done(info, buf) => {
                    assert!(
                        buf[..info.length] == pattern(info.length, got),
                        "{tls}: {got}"
                    );
                    got += 1;
                    continue;
                }
                Posted::InFlight(id) => id,
            },
        };
        recv = Some(id);
        if let Some(r) = b.take::<Vec<u8>>(id) {
            let (info, buf) = r.expect("recv");
            assert!(
                buf[..info.length] == pattern(info.length, got),
                "{tls}: {got}"
            );
            got += 1;
            recv = None;
        }
    }
    closed.unwrap().expect("the flush close succeeds");
    let why = seen.lock().unwrap().clone().unwrap();
    assert!(why.contains("closed by the peer"), "{tls}: {why}");
    assert!(a.ep_status(ab).is_err(), "the endpoint is gone");
}

/// `a` and `b` exchange a message each way; then `a` closes its end in
/// flush mode. `b`'s flush, started once it learned of the close,
/// succeeds: nothing was left to flush (as UCX's `ucp_hello_world` server
/// flushes after its client has received everything and gone).
fn flush_after_the_peer_closed_succeeds(tls: &str) {
    let (mut a, mut b, ab, ba, seen) = pair(tls);
    let deadline = Instant::now() + Duration::from_secs(20);
    for (tag, len) in [(9u64, 20_000usize), (10, 100)] {
        let (tx, rx, ep) = if tag == 9 {
            (&mut b, &mut a, ba)
        } else {
            (&mut a, &mut b, ab)
        };
        let id = match tx
            .tag_send(ep, pattern(len, tag), tag, Op::new())
            .expect("send")
        {
            Posted::InFlight(id) => Some(id),
            Posted::Done(..) => None,
        };
        let mut recv = match rx
            .tag_recv(vec![0u8; len], tag, u64::MAX, Op::new())
            .unwrap()
        {
            Posted::InFlight(r) => Some(r),
            Posted::Done(..) => None,
        };
        let mut sent = id.is_none();
        while recv.is_some() || !sent {
            assert!(Instant::now() < deadline, "{tls}: exchange timed out");
            tx.progress();
            rx.progress();
            if let Some(r) = recv {
                if let Some(res) = rx.take::<Vec<u8>>(r) {
                    let (info, buf) = res.expect("recv");
                    assert!(buf[..info.length] == pattern(len, tag), "{tls}");
                    recv = None;
                }
            }
            if let (Some(i), false) = (id, sent) {
                if let Some(res) = tx.take::<Vec<u8>>(i) {
                    res.expect("send");
                    sent = true;
                }
            }
        }
    }
    let mut closing = a.ep_close_start(ab, CloseMode::Flush).expect("close");
    let mut closed = None;
    while closed.is_none() || seen.lock().unwrap().is_none() {
        assert!(Instant::now() < deadline, "{tls}: close timed out");
        a.progress();
        b.progress();
        if closed.is_none() {
            closed = a.ep_close_poll(&mut closing);
        }
    }
    closed.unwrap().expect("the flush close succeeds");
    b.ep_flush(ba)
        .expect("the flush after the peer closed its end");
}

#[test]
fn tcp_flush_close_delivers_then_resets() {
    flush_close_delivers_then_resets("tcp");
}

#[test]
fn shm_flush_close_delivers_then_resets() {
    flush_close_delivers_then_resets("posix,cma");
}

#[test]
fn rc_iwarp_flush_close_delivers_then_resets() {
    flush_close_delivers_then_resets("rc_iwarp");
}

#[test]
fn tcp_flush_after_the_peer_closed_succeeds() {
    flush_after_the_peer_closed_succeeds("tcp");
}

#[test]
fn shm_flush_after_the_peer_closed_succeeds() {
    flush_after_the_peer_closed_succeeds("posix,cma");
}

#[cfg(feature = "verbs")]
#[test]
fn rc_verbs_flush_close_delivers_then_resets() {
    if let Some(tls) = rc_verbs() {
        flush_close_delivers_then_resets(tls);
    }
}

#[test]
fn force_close_cancels_what_is_queued_at_once() {
    let (mut a, _b, ab, _ba, _seen) = pair("tcp");
    let mut ids = Vec::new();
    for i in 0..200u64 {
        // Far more than the socket takes: most stay queued.
        if let Posted::InFlight(id) = a.tag_send(ab, vec![1u8; 200_000], i, Op::new()).unwrap() {
            ids.push(id);
        }
    }
    assert!(!ids.is_empty());
    let c = a.ep_close_start(ab, CloseMode::Force).expect("close");
    drop(c);
    let canceled = ids
        .iter()
        .filter(|&&id| matches!(a.take::<Vec<u8>>(id), Some(Err(e)) if matches!(e.error, rucx::Error::Canceled)))
        .count();
    assert!(canceled > 0, "nothing was canceled");
    assert!(a.ep_status(ab).is_err());
}

#[test]
fn a_flush_close_that_cannot_finish_times_out_and_is_forced() {
    let (mut a, b, ab, _ba, _seen) = pair("tcp");
    // A rendezvous send waits for the receiver, which never progresses.
    let data = vec![5u8; 8 << 20];
    let p = a.tag_send(ab, data, 1, Op::new()).expect("send");
    let t = Instant::now();
    let r = a.ep_close_with(ab, CloseMode::Flush, Duration::from_millis(300));
    assert!(matches!(r, Err(rucx::Error::TimedOut)), "{r:?}");
    assert!(t.elapsed() < Duration::from_secs(5));
    assert!(a.ep_status(ab).is_err());
    if let Posted::InFlight(id) = p {
        let _ = a.take::<Vec<u8>>(id);
    }
    drop(b);
}
