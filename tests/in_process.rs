//! Two workers in one process, over `self`, `tcp` and `rc_iwarp`.

mod common;

use common::*;
use rucx::{Error, Op, Posted, Worker, TAG_MASK_ALL, TAG_MASK_ANY};
use std::sync::{Arc, Mutex};

fn pair(tls: &str) -> (Worker, Worker, rucx::Ep, rucx::Ep) {
    let ctx = context(tls);
    let mut a = ctx.create_worker().expect("worker a");
    let mut b = ctx.create_worker().expect("worker b");
    let ab = a.connect(&b.address()).expect("a->b");
    let ba = b.connect(&a.address()).expect("b->a");
    (a, b, ab, ba)
}

/// Progresses both workers until `done` holds (10 s at most).
fn drive(a: &mut Worker, b: &mut Worker, mut done: impl FnMut(&mut Worker, &mut Worker) -> bool) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while !done(a, b) {
        assert!(std::time::Instant::now() < deadline, "timed out");
        a.progress();
        b.progress();
    }
}

fn sizes_round_trip(tls: &str) {
    let (mut a, mut b, ab, _) = pair(tls);
    for (i, size) in [
        0usize,
        1,
        8,
        100,
        4095,
        8192,
        65536,
        65537,
        1 << 20,
        8 << 20,
    ]
    .into_iter()
    .enumerate()
    {
        let out = pattern(size, i as u64);
        let tag = 0x100 + i as u64;
        let recv = b
            .tag_recv(vec![0u8; size], tag, TAG_MASK_ALL, Op::new())
            .expect("recv");
        let send = a.tag_send(ab, out.clone(), tag, Op::new()).expect("send");
        let recv_id = match recv {
            Posted::InFlight(id) => id,
            Posted::Done(..) => panic!("receive done before send"),
        };
        if let Posted::InFlight(id) = send {
            drive(&mut a, &mut b, |a, _| !a.request_is_active(id));
            let (info, _) = a.take::<Vec<u8>>(id).expect("done").expect("send ok");
            assert_eq!(info.length, size);
        }
        drive(&mut a, &mut b, |_, b| !b.request_is_active(recv_id));
        let (info, got) = b.take::<Vec<u8>>(recv_id).expect("done").expect("recv ok");
        assert_eq!((info.tag, info.length), (tag, size));
        assert!(got == out, "{tls}: size {size} corrupted");
    }
}

#[test]
fn self_sizes() {
    sizes_round_trip("self");
}

#[test]
fn tcp_sizes() {
    sizes_round_trip("tcp");
}

#[test]
fn rc_iwarp_sizes() {
    sizes_round_trip("rc_iwarp");
}

#[cfg(feature = "verbs")]
#[test]
fn rc_verbs_sizes() {
    if let Some(tls) = rc_verbs() {
        sizes_round_trip(tls);
    }
}

/// Each side sends to the other before either has progressed (as two MPI
/// ranks that start with `MPI_Sendrecv` to each other): both open a
/// connection at once, and each message, small and large, arrives whole.
fn crossed_first_sends(tls: &str) {
    let (mut a, mut b, ab, ba) = pair(tls);
    for (i, size) in [8usize, 64 << 10, 1 << 20].into_iter().enumerate() {
        let tag = 40 + i as u64;
        let (out_a, out_b) = (pattern(size, 1 + i as u64), pattern(size, 101 + i as u64));
        let sa = a
            .tag_send(ab, out_a.clone(), tag, Op::new())
            .expect("a send");
        let sb = b
            .tag_send(ba, out_b.clone(), tag, Op::new())
            .expect("b send");
        let ra = a
            .tag_recv(vec![0u8; size], tag, TAG_MASK_ALL, Op::new())
            .expect("a recv");
        let rb = b
            .tag_recv(vec![0u8; size], tag, TAG_MASK_ALL, Op::new())
            .expect("b recv");
        let in_flight = |ps: [&Posted<_>; 2]| -> Vec<_> {
            ps.into_iter()
                .filter_map(|p| match p {
                    Posted::InFlight(id) => Some(*id),
                    Posted::Done(..) => None,
                })
                .collect()
        };
        let (on_a, on_b) = (in_flight([&sa, &ra]), in_flight([&sb, &rb]));
        drive(&mut a, &mut b, |a, b| {
            on_a.iter().all(|&id| !a.request_is_active(id))
                && on_b.iter().all(|&id| !b.request_is_active(id))
        });
        let Posted::InFlight(ra) = ra else {
            panic!("{tls}: a's receive done at once")
        };
        let Posted::InFlight(rb) = rb else {
            panic!("{tls}: b's receive done at once")
        };
        let (_, got_a) = a.take::<Vec<u8>>(ra).expect("done").expect("a recv ok");
        let (_, got_b) = b.take::<Vec<u8>>(rb).expect("done").expect("b recv ok");
        assert!(got_a == out_b, "{tls}: size {size} corrupted on a");
        assert!(got_b == out_a, "{tls}: size {size} corrupted on b");
    }
}

#[test]
fn tcp_crossed_first_sends() {
    crossed_first_sends("tcp");
}

#[test]
fn rc_iwarp_crossed_first_sends() {
    crossed_first_sends("rc_iwarp");
}

#[cfg(feature = "verbs")]
#[test]
fn rc_verbs_crossed_first_sends() {
    if let Some(tls) = rc_verbs() {
        crossed_first_sends(tls);
    }
}

fn unexpected_then_posted(tls: &str) {
    let (mut a, mut b, ab, _) = pair(tls);
    // Messages arrive before any receive is posted.
    let msgs: Vec<Vec<u8>> = (0..20).map(|i| pattern(i * 7000, i as u64)).collect();
    // The receiver progresses (transports need that) but posts nothing.
    // Large messages may go by rendezvous: those sends complete only once
    // matched, so they stay in flight until the receives below.
    let mut sends = Vec::new();
    for m in &msgs {
        if let Posted::InFlight(id) = a.tag_send(ab, m.clone(), 5, Op::new()).expect("send") {
            sends.push(id);
        }
    }
    drive(&mut a, &mut b, |_, b| {
        b.tag_probe(5, TAG_MASK_ALL).is_some()
    });
    // Per-sender order: the same tag matches in send order.
    for m in &msgs {
        let mut buf = vec![0u8; 200_000];
        let info = b
            .scope(|s| {
                let p = s.tag_recv(&mut buf, 5, TAG_MASK_ALL);
                loop {
                    if s.test(&p) {
                        break s.wait(p).0;
                    }
                    s.progress();
                    a.progress();
                }
            })
            .expect("recv");
        assert_eq!(info.length, m.len());
        assert!(&buf[..m.len()] == m.as_slice());
    }
    drive(&mut a, &mut b, |a, _| {
        sends.iter().all(|&id| !a.request_is_active(id))
    });
}

#[test]
fn self_unexpected_order() {
    unexpected_then_posted("self");
}

#[test]
fn tcp_unexpected_order() {
    unexpected_then_posted("tcp");
}

#[test]
fn wildcard_and_masks() {
    let (mut a, mut b, ab, _) = pair("tcp");
    a.tag_send_blocking(ab, b"one", 0xAB_0001).expect("send");
    a.tag_send_blocking(ab, b"two", 0xCD_0002).expect("send");
    a.tag_send_blocking(ab, b"three", 0xAB_0003).expect("send");
    drive(&mut a, &mut b, |_, b| {
        b.tag_probe(0xAB_0003, TAG_MASK_ALL).is_some()
    });
    let mut buf = [0u8; 8];
    // Mask on the high part: matches the oldest 0xAB____ message.
    let i = b
        .tag_recv_blocking(&mut buf, 0xAB_0000, !0xFFFF)
        .expect("recv");
    assert_eq!((i.tag, &buf[..i.length]), (0xAB_0001, &b"one"[..]));
    let i = b
        .tag_recv_blocking(&mut buf, 0, TAG_MASK_ANY)
        .expect("recv");
    assert_eq!((i.tag, &buf[..i.length]), (0xCD_0002, &b"two"[..]));
    let i = b
        .tag_recv_blocking(&mut buf, 0xAB_0000, !0xFFFF)
        .expect("recv");
    assert_eq!((i.tag, &buf[..i.length]), (0xAB_0003, &b"three"[..]));
    assert!(b.tag_probe(0, TAG_MASK_ANY).is_none());
}

#[test]
fn truncation_is_an_error_not_an_overflow() {
    let (mut a, mut b, ab, _) = pair("self");
    let out = pattern(100_000, 1);
    // Possibly a rendezvous: the send completes once the receive matched.
    let sent = a.tag_send(ab, out.clone(), 9, Op::new()).expect("send");
    let mut small = vec![0u8; 1000];
    let mut guard = vec![0xEEu8; 16];
    let r = b.scope(|s| {
        let p = s.tag_recv(&mut small, 9, TAG_MASK_ALL);
        loop {
            if s.test(&p) {
                break s.wait(p).0;
            }
            s.progress();
            a.progress();
        }
    });
    if let Posted::InFlight(id) = sent {
        drive(&mut a, &mut b, |a, _| !a.request_is_active(id));
    }
    match r {
        Err(Error::Truncated { length, capacity }) => {
            assert_eq!((length, capacity), (100_000, 1000));
        }
        other => panic!("expected truncation, got {other:?}"),
    }
    assert_eq!(&small[..], &out[..1000]);
    guard.push(0);
    assert!(guard[..16].iter().all(|&x| x == 0xEE));
}

/// A small eager message that finds its receive already posted (the
/// receive's fast path) and is longer than it: the receive fails with
/// `Truncated`, gets the first bytes, and nothing past its end is written.
#[test]
fn posted_small_receive_truncates() {
    let (mut a, mut b, ab, _) = pair("posix");
    let mut backing = [0xEEu8; 32];
    // SAFETY: `backing` outlives the receive, which completes below.
    let posted = unsafe { b.tag_recv_raw(backing.as_mut_ptr(), 8, 5, TAG_MASK_ALL, Op::new()) }
        .expect("recv");
    let Posted::InFlight(id) = posted else {
        panic!("nothing was sent yet: the receive must wait");
    };
    let out: Vec<u8> = (1..=24).collect();
    // SAFETY: `out` outlives the send, which completes at once.
    let s = unsafe { a.tag_send_raw(ab, out.as_ptr(), out.len(), 5, Op::new()) }.expect("send");
    assert!(matches!(s, Posted::Done(..)));
    let r = loop {
        if let Some(r) = b.request_test(id) {
            break r;
        }
        b.progress();
    };
    match r {
        Err(Error::Truncated { length, capacity }) => assert_eq!((length, capacity), (24, 8)),
        other => panic!("expected truncation, got {other:?}"),
    }
    assert_eq!(&backing[..8], &out[..8]);
    assert!(backing[8..].iter().all(|&x| x == 0xEE));
}

#[test]
fn completion_queue_and_callbacks() {
    let (mut a, mut b, ab, _) = pair("tcp");
    let seen = Arc::new(Mutex::new(Vec::new()));
    let s2 = seen.clone();
    let r1 = b
        .tag_recv(
            vec![0u8; 64],
            1,
            TAG_MASK_ALL,
            Op::new().user_data(11).queue(),
        )
        .expect("recv");
    let r2 = b
        .tag_recv(
            vec![0u8; 64],
            2,
            TAG_MASK_ALL,
            Op::new().user_data(22).callback(move |w, c| {
                s2.lock()
                    .unwrap()
                    .push((c.user_data, c.result.clone().map(|i| i.length).ok()));
                // A callback may post more work on the worker.
                let _ = w.tag_probe(0, TAG_MASK_ANY);
            }),
        )
        .expect("recv");
    assert!(matches!(r1, Posted::InFlight(_)) && matches!(r2, Posted::InFlight(_)));
    a.tag_send_blocking(ab, b"first", 1).expect("send");
    a.tag_send_blocking(ab, b"second", 2).expect("send");
    let mut queued = None;
    drive(&mut a, &mut b, |_, b| {
        if queued.is_none() {
            queued = b.next_completion();
        }
        queued.is_some() && !seen.lock().unwrap().is_empty()
    });
    let c = queued.unwrap();
    assert_eq!(c.user_data, 11);
    assert_eq!(c.result.as_ref().map(|i| i.length).ok(), Some(5));
    let (_, buf) = b.take::<Vec<u8>>(c.id).expect("owned buffer").expect("ok");
    assert_eq!(&buf[..5], b"first");
    assert_eq!(seen.lock().unwrap().as_slice(), &[(22, Some(6))]);
}

#[test]
fn cancel_unmatched_receive() {
    let (mut a, mut b, ab, _) = pair("self");
    let id = match b
        .tag_recv(vec![0u8; 8], 77, TAG_MASK_ALL, Op::new())
        .expect("recv")
    {
        Posted::InFlight(id) => id,
        Posted::Done(..) => panic!("nothing was sent"),
    };
    assert!(b.request_cancel(id));
    match b.take::<Vec<u8>>(id) {
        Some(Err(e)) => assert!(matches!(e.error, Error::Canceled)),
        other => panic!("expected canceled, got {other:?}"),
    }
    // The message sent later is not lost: it waits for the next receive.
    a.tag_send_blocking(ab, b"late", 77).expect("send");
    let mut buf = [0u8; 8];
    drive(&mut a, &mut b, |_, b| {
        b.tag_probe(77, TAG_MASK_ALL).is_some()
    });
    let i = b
        .tag_recv_blocking(&mut buf, 77, TAG_MASK_ALL)
        .expect("recv");
    assert_eq!(&buf[..i.length], b"late");
}

#[test]
fn scope_drains_leaked_tokens() {
    let (mut a, mut b, ab, _) = pair("tcp");
    let big = pattern(4 << 20, 3);
    let mut sink = vec![0u8; 16];
    // Posted first: a rendezvous send can only finish once received.
    let r = match b
        .tag_recv(vec![0u8; 4 << 20], 1, TAG_MASK_ALL, Op::new())
        .expect("recv")
    {
        Posted::InFlight(id) => id,
        Posted::Done(..) => panic!("nothing sent yet"),
    };
    a.scope(|s| {
        // Neither token is waited for: one is leaked, one dropped. The
        // scope must still drain both before `big` and `sink` are free.
        std::mem::forget(s.tag_send(ab, &big, 1));
        drop(s.tag_recv(&mut sink, 12345, TAG_MASK_ALL));
        // Let the receiver take the data while we are in the scope.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
        while b.request_is_active(r) {
            assert!(std::time::Instant::now() < deadline, "receive timed out");
            s.progress();
            b.progress();
        }
    });
    let (i, got) = b.take::<Vec<u8>>(r).expect("done").expect("recv");
    assert_eq!(i.length, big.len());
    assert!(got == big);
    assert_eq!(a.requests_outstanding(), 0);
    sink[0] = 1; // the borrow ended with the scope
}

#[test]
fn bad_addresses_are_errors() {
    let ctx = context("tcp,self");
    let mut w = ctx.create_worker().expect("worker");
    for bad in [&b""[..], &[1u8][..], &[9u8; 40][..], &w.address()[..5]] {
        assert!(w.connect(bad).is_err());
    }
    let mut addr = w.address();
    addr.push(0);
    assert!(w.connect(&addr).is_err(), "trailing byte accepted");
}

#[test]
fn ep_close_fails_queued_sends() {
    let (mut a, _b, ab, _) = pair("tcp");
    // Queue enough that some of it must wait for the socket.
    let mut ids = Vec::new();
    for _ in 0..8 {
        if let Posted::InFlight(id) = a.tag_send(ab, vec![1u8; 4 << 20], 1, Op::new()).unwrap() {
            ids.push(id);
        }
    }
    a.ep_close(ab).expect("close");
    progress_until(&mut a, 30, |a| {
        ids.iter().all(|&id| !a.request_is_active(id))
    });
    for id in ids {
        // Each completes: sent before the close, or canceled by it.
        assert!(a.take::<Vec<u8>>(id).is_some());
    }
    assert!(a.ep_status(ab).is_err(), "closed endpoint is still usable");
    assert!(a.tag_send_blocking(ab, b"x", 1).is_err());
}

#[test]
fn flush_waits_until_sends_left() {
    let (mut a, mut b, ab, _) = pair("tcp");
    let out = pattern(8 << 20, 4);
    let id = match a.tag_send(ab, out.clone(), 3, Op::new()).expect("send") {
        Posted::InFlight(id) => id,
        Posted::Done(..) => panic!("8 MiB cannot leave at once"),
    };
    // The receiver runs in its own thread; workers are Send.
    let rx = std::thread::spawn(move || {
        let mut buf = vec![0u8; 8 << 20];
        let i = b
            .tag_recv_blocking(&mut buf, 3, TAG_MASK_ALL)
            .expect("recv");
        (i.length, buf)
    });
    a.ep_flush(ab).expect("flush");
    assert!(
        !a.request_is_active(id),
        "flush returned before the send left"
    );
    a.flush().expect("flush all");
    let (len, buf) = rx.join().expect("receiver");
    assert_eq!(len, out.len());
    assert!(buf == out);
    assert!(matches!(
        a.request_test(rucx::ReqId::clone(&id)),
        Some(Ok(_))
    ));
    assert!(matches!(
        a.request_test(id),
        Some(Err(Error::InvalidHandle))
    ));
}

/// A worker sleeps on its event fd and wakes when a message arrives.
fn sleeping_receiver(tls: &str) {
    let (mut a, mut b, ab, _) = pair(tls);
    let rx = std::thread::spawn(move || {
        let mut wakeups = 0u32;
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
        while b.tag_probe(8, TAG_MASK_ALL).is_none() {
            assert!(std::time::Instant::now() < deadline, "never woke up");
            b.wait_event(Some(std::time::Duration::from_secs(5)))
                .expect("wait");
            b.progress();
            wakeups += 1;
        }
        let mut buf = [0u8; 4];
        let i = b
            .tag_recv_blocking(&mut buf, 8, TAG_MASK_ALL)
            .expect("recv");
        (wakeups, buf[..i.length].to_vec())
    });
    std::thread::sleep(std::time::Duration::from_millis(200));
    a.tag_send_blocking(ab, b"wake", 8).expect("send");
    // Keep the sender progressing until the receiver has the message.
    while !rx.is_finished() {
        a.progress();
    }
    let (wakeups, got) = rx.join().expect("receiver");
    assert_eq!(got, b"wake");
    // A receiver that slept wakes a handful of times, not thousands (which
    // would mean arm/wait_event never actually slept).
    assert!(wakeups < 100, "{wakeups} wakeups: the worker did not sleep");
}

#[test]
fn self_sleeping_receiver() {
    sleeping_receiver("self");
}

#[test]
fn tcp_sleeping_receiver() {
    sleeping_receiver("tcp");
}

#[test]
fn cancel_queued_send() {
    // Eager only: rendezvous sends do not wait in the queue. Without a
    // limit on unexpected data, the receiver grants all the eager credit
    // these large messages need.
    let ctx = context_vars(&[
        ("RUCX_TLS", "tcp"),
        ("RUCX_RNDV_THRESH", "inf"),
        ("RUCX_UNEXPECTED_MAX", "inf"),
    ]);
    let mut a = ctx.create_worker().expect("worker a");
    let mut b = ctx.create_worker().expect("worker b");
    let ab = a.connect(&b.address()).expect("a->b");
    // Establish the connection first (it needs both sides' progress),
    // with a message back: what b sent before it (its grant) has arrived.
    a.tag_send_blocking(ab, b"hi", 100).expect("send");
    let mut hi = [0u8; 2];
    drive(&mut a, &mut b, |_, b| {
        b.tag_probe(100, TAG_MASK_ALL).is_some()
    });
    b.tag_recv_blocking(&mut hi, 100, TAG_MASK_ALL)
        .expect("recv");
    let ba = b.connect(&a.address()).expect("b->a");
    b.tag_send_blocking(ba, b"ok", 101).expect("send back");
    drive(&mut a, &mut b, |a, _| {
        a.tag_probe(101, TAG_MASK_ALL).is_some()
    });
    a.tag_recv_blocking(&mut hi, 101, TAG_MASK_ALL)
        .expect("recv back");
    // Fill the connection so that later sends wait in the queue.
    let mut ids = Vec::new();
    for i in 0..16u64 {
        if let Posted::InFlight(id) = a
            .tag_send(ab, vec![i as u8; 1 << 20], i, Op::new())
            .unwrap()
        {
            ids.push((i, id));
        }
    }
    let (last_tag, last) = *ids.last().expect("some sends must wait");
    assert!(
        a.request_cancel(last),
        "a send still in the queue can be canceled"
    );
    match a.take::<Vec<u8>>(last) {
        Some(Err(e)) => assert!(matches!(e.error, Error::Canceled)),
        other => panic!("expected canceled, got {other:?}"),
    }
    // A send already under way (part of it is in the socket) is not.
    let (_, first) = ids[0];
    assert!(a.request_is_active(first));
    assert!(!a.request_cancel(first));
    // Everything else still arrives, in order; the canceled one never does.
    let mut buf = vec![0u8; 1 << 20];
    for i in 0..16u64 {
        if i == last_tag {
            continue;
        }
        let r = b.scope(|s| {
            let p = s.tag_recv(&mut buf, i, TAG_MASK_ALL);
            loop {
                if s.test(&p) {
                    break s.wait(p).0;
                }
                s.progress();
                a.progress();
            }
        });
        assert_eq!(r.expect("recv").length, 1 << 20);
    }
    drive(&mut a, &mut b, |a, _| {
        ids.iter().all(|&(_, id)| !a.request_is_active(id))
    });
    assert!(b.tag_probe(last_tag, TAG_MASK_ALL).is_none());
}

/// `completed_count` stays put while nothing completes, and moves when a
/// receive (the fast eager path) or a multi-fragment send completes.
fn completed_count_tracks_completions(tls: &str) {
    let (mut a, mut b, ab, _) = pair(tls);
    let recv = match b
        .tag_recv(vec![0u8; 64], 7, TAG_MASK_ALL, Op::new())
        .expect("recv")
    {
        Posted::InFlight(id) => id,
        Posted::Done(..) => panic!("receive done before send"),
    };
    let before = b.completed_count();
    for _ in 0..100 {
        a.progress();
        b.progress();
    }
    assert_eq!(b.completed_count(), before, "{tls}: nothing completed");
    assert!(b.request_is_active(recv));
    a.tag_send_blocking(ab, b"eight by", 7).expect("send");
    drive(&mut a, &mut b, |_, b| b.completed_count() != before);
    assert!(
        !b.request_is_active(recv),
        "{tls}: count moved, receive done"
    );
    let (info, _) = b.take::<Vec<u8>>(recv).expect("done").expect("recv ok");
    assert_eq!(info.length, 8);

    let big = pattern(4 << 20, 3);
    let sends_before = a.completed_count();
    let recv = b
        .tag_recv(vec![0u8; big.len()], 8, TAG_MASK_ALL, Op::new())
        .expect("recv");
    if let Posted::InFlight(send) = a.tag_send(ab, big, 8, Op::new()).expect("send") {
        assert_eq!(a.completed_count(), sends_before);
        drive(&mut a, &mut b, |a, _| a.completed_count() != sends_before);
        assert!(!a.request_is_active(send), "{tls}: count moved, send done");
    }
    if let Posted::InFlight(id) = recv {
        drive(&mut a, &mut b, |_, b| !b.request_is_active(id));
    }
}

#[test]
fn completed_count_self() {
    completed_count_tracks_completions("self");
}

#[test]
fn completed_count_tcp() {
    completed_count_tracks_completions("tcp");
}

/// Released receives: counted when they complete (eager and rendezvous,
/// and one that had completed before its release), their slots freed, and
/// a truncation kept for `take_released_error`.
fn released_receives_are_counted(tls: &str) {
    let (mut a, mut b, ab, _) = pair(tls);
    let start = b.released_completed();
    let mut bufs: Vec<Vec<u8>> = vec![vec![0u8; 8], vec![0u8; 100_000], vec![0u8; 8]];
    for (i, buf) in bufs.iter_mut().enumerate() {
        // SAFETY: the buffers outlive the receives, which are waited for
        // below through the released count.
        let p = unsafe {
            b.tag_recv_raw(
                buf.as_mut_ptr(),
                buf.len(),
                20 + i as u64,
                TAG_MASK_ALL,
                Op::new(),
            )
        }
        .expect("recv");
        match p {
            Posted::InFlight(id) => b.request_release(id),
            Posted::Done(..) => panic!("{tls}: receive {i} done before its send"),
        }
    }
    // Connects (over tcp `b` must accept) before a blocking send.
    for _ in 0..100 {
        a.progress();
        b.progress();
    }
    assert_eq!(b.released_completed(), start, "{tls}: nothing done yet");
    a.tag_send_blocking(ab, b"eight by", 20).expect("send");
    // Rendezvous: the receiver must progress too.
    let big = a
        .tag_send(ab, pattern(100_000, 21), 21, Op::new())
        .expect("send");
    // Too long for its 8-byte receive.
    a.tag_send_blocking(ab, &[7u8; 9], 22).expect("send");
    drive(&mut a, &mut b, |_, b| {
        b.released_completed().wrapping_sub(start) == 3
    });
    if let Posted::InFlight(id) = big {
        drive(&mut a, &mut b, |a, _| !a.request_is_active(id));
    }
    assert_eq!(&bufs[0], b"eight by", "{tls}");
    assert!(bufs[1] == pattern(100_000, 21), "{tls}: rendezvous data");
    let e = b.take_released_error().expect("the truncation is kept");
    assert!(matches!(e, rucx::Error::Truncated { .. }), "{tls}: {e}");
    assert!(b.take_released_error().is_none(), "{tls}: taken once");
    assert_eq!(b.requests_outstanding(), 0, "{tls}: slots freed");

    // Released after it completed: counted at the release.
    let recv = b
        .tag_recv(vec![0u8; 8], 30, TAG_MASK_ALL, Op::new())
        .expect("recv");
    a.tag_send_blocking(ab, b"late rel", 30).expect("send");
    if let Posted::InFlight(id) = recv {
        drive(&mut a, &mut b, |_, b| !b.request_is_active(id));
        let before = b.released_completed();
        b.request_release(id);
        assert_eq!(b.released_completed(), before.wrapping_add(1), "{tls}");
    }
    assert_eq!(b.requests_outstanding(), 0, "{tls}: slots freed");
}

#[test]
fn released_receives_shm() {
    released_receives_are_counted("shm");
}

#[test]
fn released_receives_tcp() {
    released_receives_are_counted("tcp");
}
