//! Active messages between two workers (`self`, `posix`, `tcp`,
//! `rc_iwarp`): every size from empty to several fragments, eager and by
//! rendezvous; inline handlers that consume messages where they arrive
//! or pass them on; handlers that consume the data inline, keep it, answer
//! through the reply endpoint, fetch rendezvous data into a buffer of
//! their choosing, keep the message to fetch it later, or drop it.

mod common;

use common::*;
use rucx::ucp::{AmParams, Op, Posted, ReqId};
use rucx::{AmMsg, Worker};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

fn pair(tls: &str) -> (Worker, Worker, rucx::Ep) {
    let ctx = context(tls);
    let mut a = ctx.create_worker().expect("worker");
    let b = ctx.create_worker().expect("worker");
    let ep = a.connect(&b.address()).expect("connect");
    (a, b, ep)
}

/// Progresses both until `done` (20 s at most).
fn until(a: &mut Worker, b: &mut Worker, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while !done() {
        assert!(Instant::now() < deadline, "timed out");
        a.progress();
        b.progress();
    }
}

/// Sends and lets the worker finish the send on its own.
fn send(w: &mut Worker, ep: rucx::Ep, id: u16, (h, d): (&[u8], &[u8]), p: AmParams) {
    if let Posted::InFlight(r) = w.am_send(ep, id, h, d, p).expect("send") {
        w.request_release(r);
    }
}

/// Progresses both until `a`'s request `id` completed (20 s at most).
fn settle(a: &mut Worker, b: &mut Worker, id: ReqId) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while a.request_is_active(id) {
        assert!(Instant::now() < deadline, "timed out");
        a.progress();
        b.progress();
    }
}

/// Progresses both until `b` has no request outstanding (20 s at most).
fn drained(a: &mut Worker, b: &mut Worker) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while b.requests_outstanding() > 0 {
        assert!(Instant::now() < deadline, "timed out");
        a.progress();
        b.progress();
    }
}

/// Sets a handler of `id` on `w` that keeps every message: the list.
fn keep_messages(w: &mut Worker, id: u16) -> Arc<Mutex<Vec<AmMsg>>> {
    let kept: Arc<Mutex<Vec<AmMsg>>> = Arc::default();
    let k = Arc::clone(&kept);
    w.am_set_handler(id, move |_, m: AmMsg| k.lock().unwrap().push(m));
    kept
}

/// Posts `data` as rendezvous message `id` without a header: the
/// request, which waits for the receiver.
fn rndv_send(w: &mut Worker, ep: rucx::Ep, id: u16, data: &[u8]) -> ReqId {
    let p = w
        .am_send(ep, id, b"", data, AmParams::new().rndv())
        .expect("send");
    let Posted::InFlight(r) = p else {
        panic!("a rendezvous waits for the receiver");
    };
    r
}

/// A message's header and data as its handler saw them.
type Seen = (Vec<u8>, Vec<u8>);

fn every_size(tls: &str) {
    let (mut a, mut b, ep) = pair(tls);
    let seen: Arc<Mutex<Vec<Seen>>> = Arc::default();
    let keep = Arc::clone(&seen);
    b.am_set_handler(3, move |_, m: AmMsg| {
        keep.lock()
            .unwrap()
            .push((m.header().to_vec(), m.data().to_vec()));
    });
    let sizes = [0usize, 1, 100, 8000, 65_536, 1 << 20, 5 << 20];
    for (i, &size) in sizes.iter().enumerate() {
        let header = pattern(i * 7 % 40, i as u64 + 100);
        let data = pattern(size, i as u64);
        send(&mut a, ep, 3, (&header, &data), AmParams::new().eager());
        until(&mut a, &mut b, || seen.lock().unwrap().len() > i);
        let got = &seen.lock().unwrap()[i];
        assert_eq!(got.0, header, "size {size}: header");
        assert!(got.1 == data, "size {size}: data corrupted");
    }
}

#[test]
fn self_every_size() {
    every_size("self");
}

#[test]
fn tcp_every_size() {
    every_size("tcp");
}

#[test]
fn a_handler_keeps_the_data_and_answers_through_the_reply_endpoint() {
    let (mut a, mut b, ep) = pair("tcp");
    let kept: Arc<Mutex<Vec<Vec<u8>>>> = Arc::default();
    let keep = Arc::clone(&kept);
    b.am_set_handler(1, move |w, m: AmMsg| {
        let back = m.reply_ep().expect("a reply endpoint");
        let answer = [m.header(), b"-ack"].concat();
        keep.lock().unwrap().push(m.into_data());
        // Handlers may post sends: answer on the sender's id 2.
        if let Posted::InFlight(id) = w.am_send(back, 2, &answer, &[], AmParams::new()).unwrap() {
            w.request_release(id);
        }
    });
    let answers: Arc<Mutex<Vec<Vec<u8>>>> = Arc::default();
    let got = Arc::clone(&answers);
    a.am_set_handler(2, move |_, m: AmMsg| {
        assert!(m.reply_ep().is_none(), "not asked for");
        got.lock().unwrap().push(m.header().to_vec());
    });
    for i in 0..3u8 {
        let data = pattern(300_000, i.into());
        let params = AmParams::new().reply().eager();
        send(&mut a, ep, 1, (&[b'q', b'0' + i], &data), params);
    }
    until(&mut a, &mut b, || answers.lock().unwrap().len() == 3);
    assert_eq!(
        *answers.lock().unwrap(),
        [b"q0-ack".to_vec(), b"q1-ack".to_vec(), b"q2-ack".to_vec()],
        "in order"
    );
    let kept = kept.lock().unwrap();
    for i in 0..3u8 {
        assert!(kept[usize::from(i)] == pattern(300_000, i.into()));
    }
}

/// An inline handler sees whole eager messages where they arrived and
/// consumes the ones it wants; the others, rendezvous messages and
/// messages that asked for a reply go to the regular handler, in order
/// with the rest of the id's messages.
fn inline_handler(tls: &str) {
    let (mut a, mut b, ep) = pair(tls);
    let inline: Arc<Mutex<Vec<Seen>>> = Arc::default();
    let regular: Arc<Mutex<Vec<Seen>>> = Arc::default();
    let (i2, r2) = (Arc::clone(&inline), Arc::clone(&regular));
    // Consumes messages whose data is of even length.
    b.am_set_inline_handler(4, move |h, d| {
        if d.len() % 2 != 0 {
            return false;
        }
        i2.lock().unwrap().push((h.to_vec(), d.to_vec()));
        true
    });
    b.am_set_handler(4, move |_, m: AmMsg| {
        // A rendezvous message is dropped (its data discarded, the send
        // still completes): its length stands for the data.
        let data = match m.is_rndv() {
            true => (m.data_len() as u64).to_le_bytes().to_vec(),
            false => m.data().to_vec(),
        };
        r2.lock().unwrap().push((m.header().to_vec(), data));
    });
    // (data length, reply, rendezvous) and where it must land.
    let cases = [
        (10, false, false, true),
        (11, false, false, false),
        (20_000, false, false, true),
        (3 * 65_536 + 2, false, false, true),
        (12, true, false, false),
        (100_000, false, true, false),
    ];
    for (k, &(len, reply, rndv, consumed)) in cases.iter().enumerate() {
        let (h, d) = (pattern(k + 1, k as u64), pattern(len, k as u64 + 50));
        let mut p = if rndv {
            AmParams::new().rndv()
        } else {
            AmParams::new().eager()
        };
        if reply {
            p = p.reply();
        }
        let before = (inline.lock().unwrap().len(), regular.lock().unwrap().len());
        send(&mut a, ep, 4, (&h, &d), p);
        until(&mut a, &mut b, || {
            inline.lock().unwrap().len() + regular.lock().unwrap().len() > before.0 + before.1
        });
        let got = if consumed {
            assert_eq!(regular.lock().unwrap().len(), before.1, "{tls} case {k}");
            inline.lock().unwrap().last().cloned().unwrap()
        } else {
            assert_eq!(inline.lock().unwrap().len(), before.0, "{tls} case {k}");
            regular.lock().unwrap().last().cloned().unwrap()
        };
        let want = match rndv {
            true => (len as u64).to_le_bytes().to_vec(),
            false => d.clone(),
        };
        assert!(got.1 == want, "{tls} case {k}: data");
        assert_eq!(got.0, h, "{tls} case {k}: header");
    }
    // Cleared with the regular handler: the next message finds neither.
    b.am_clear_handler(4);
    send(&mut a, ep, 4, (b"", b"gone"), AmParams::new());
    for _ in 0..2000 {
        a.progress();
        b.progress();
    }
    assert_eq!(inline.lock().unwrap().len(), 3);
    assert_eq!(regular.lock().unwrap().len(), 3);
}

#[test]
fn tcp_inline_handler() {
    inline_handler("tcp");
}

#[test]
fn shm_inline_handler() {
    inline_handler("posix,cma");
}

#[test]
fn a_message_without_a_handler_is_dropped_and_later_ones_still_served() {
    let (mut a, mut b, ep) = pair("tcp");
    send(&mut a, ep, 9, (b"nobody", b"listens"), AmParams::new());
    for _ in 0..2000 {
        a.progress();
        b.progress();
    }
    let n = Arc::new(Mutex::new(0));
    let count = Arc::clone(&n);
    b.am_set_handler(9, move |_, _| *count.lock().unwrap() += 1);
    send(&mut a, ep, 9, (b"now", b"someone does"), AmParams::new());
    until(&mut a, &mut b, || *n.lock().unwrap() == 1);
    for _ in 0..2000 {
        a.progress();
        b.progress();
    }
    assert_eq!(*n.lock().unwrap(), 1, "the first message was not kept back");
}

#[test]
fn too_large_a_message_is_refused_at_once() {
    let (mut a, _b, ep) = pair("self");
    let big = vec![0u8; (256 << 20) + 1];
    let e = a.am_send(ep, 1, &[], &big, AmParams::new()).unwrap_err();
    assert!(matches!(e, rucx::Error::Limit { .. }), "{e}");
}

/// What a handler that fetches rendezvous data got: the header, and the
/// data or the request fetching it.
enum Got {
    Data(Vec<u8>, Vec<u8>),
    Fetching(Vec<u8>, ReqId),
}

type Gots = Arc<Mutex<Vec<Got>>>;

/// A handler for id 4 that fetches every message's data into a buffer it
/// allocates, and counts the rendezvous ones.
fn fetching_handler(b: &mut Worker) -> (Gots, Arc<Mutex<usize>>) {
    let gots: Gots = Arc::default();
    let rndv = Arc::new(Mutex::new(0usize));
    let (g, r) = (Arc::clone(&gots), Arc::clone(&rndv));
    b.am_set_handler(4, move |w, m: AmMsg| {
        *r.lock().unwrap() += usize::from(m.is_rndv());
        let header = m.header().to_vec();
        let buf = vec![0u8; m.data_len()];
        let got = match w.am_recv_data(m, buf, Op::new()).expect("recv_data") {
            Posted::InFlight(id) => Got::Fetching(header, id),
            Posted::Done(_, buf) => Got::Data(header, buf),
        };
        g.lock().unwrap().push(got);
    });
    (gots, rndv)
}

/// The header and data of message `i`, once fetched.
fn fetched(a: &mut Worker, b: &mut Worker, gots: &Gots, i: usize) -> (Vec<u8>, Vec<u8>) {
    until(a, b, || gots.lock().unwrap().len() > i);
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        assert!(Instant::now() < deadline, "fetch timed out");
        let mut g = gots.lock().unwrap();
        match &g[i] {
            Got::Data(h, d) => return (h.clone(), d.clone()),
            Got::Fetching(h, id) => {
                if let Some(r) = b.take::<Vec<u8>>(*id) {
                    let (_, d) = r.expect("fetch");
                    let h = h.clone();
                    g[i] = Got::Data(h.clone(), d.clone());
                    return (h, d);
                }
            }
        }
        drop(g);
        a.progress();
        b.progress();
    }
}

/// Rendezvous messages of every size (forced, then chosen by size), each
/// fetched by the handler into a buffer it chose.
fn rndv_every_size(tls: &str) {
    let (mut a, mut b, ep) = pair(tls);
    let (gots, rndv) = fetching_handler(&mut b);
    let sizes = [1usize, 100, 65_536, 1 << 20, 5 << 20];
    let mut i = 0;
    for params in [AmParams::new().rndv(), AmParams::new()] {
        for &size in &sizes {
            let data = pattern(size, i as u64);
            let header = pattern(i % 20, 77);
            let p = a
                .am_send_owned(ep, 4, &header, data.clone(), params, Op::new())
                .expect("send");
            let (h, d) = fetched(&mut a, &mut b, &gots, i);
            assert_eq!(h, header, "{tls} size {size}: header");
            assert!(d == data, "{tls} size {size}: data corrupted");
            if let Posted::InFlight(id) = p {
                settle(&mut a, &mut b, id);
                a.take::<Vec<u8>>(id)
                    .expect("taken")
                    .expect("send succeeded");
            }
            i += 1;
        }
    }
    let forced = sizes.len();
    let n = *rndv.lock().unwrap();
    assert!(n > forced, "{tls}: {n} by rendezvous, none chosen by size");
}

#[test]
fn self_rndv_every_size() {
    rndv_every_size("self");
}

#[test]
fn shm_rndv_every_size() {
    rndv_every_size("posix,cma");
}

#[test]
fn tcp_rndv_every_size() {
    rndv_every_size("tcp");
}

#[test]
fn rc_iwarp_rndv_every_size() {
    rndv_every_size("rc_iwarp");
}

#[cfg(feature = "verbs")]
#[test]
fn rc_verbs_rndv_every_size() {
    if let Some(tls) = rc_verbs() {
        rndv_every_size(tls);
    }
}

#[test]
fn a_kept_rndv_message_is_fetched_later_into_the_programs_buffer() {
    let (mut a, mut b, ep) = pair("tcp");
    let kept = keep_messages(&mut b, 6);
    let data = pattern(3 << 20, 5);
    send(&mut a, ep, 6, (b"later", &data), AmParams::new().rndv());
    until(&mut a, &mut b, || !kept.lock().unwrap().is_empty());
    let m = kept.lock().unwrap().pop().unwrap();
    assert!(m.is_rndv() && m.data().is_empty());
    assert_eq!((m.header(), m.data_len()), (&b"later"[..], 3 << 20));
    // The program fetches it after the handler returned, with the sender
    // progressing in another thread.
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let s = Arc::clone(&stop);
    let sender = std::thread::spawn(move || {
        while !s.load(std::sync::atomic::Ordering::Relaxed) {
            a.progress();
        }
        a
    });
    let mut mine = vec![0u8; 3 << 20];
    let info = b.am_recv_data_blocking(m, &mut mine).expect("fetch");
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let _a = sender.join().unwrap();
    assert_eq!(info.length, 3 << 20);
    assert!(mine == data);
}

#[test]
fn a_dropped_rndv_message_still_completes_its_send() {
    let (mut a, mut b, ep) = pair("tcp");
    let n = Arc::new(Mutex::new(0));
    let count = Arc::clone(&n);
    b.am_set_handler(7, move |_, m: AmMsg| {
        *count.lock().unwrap() += 1;
        drop(m);
    });
    let data = pattern(1 << 20, 9);
    let id = rndv_send(&mut a, ep, 7, &data);
    settle(&mut a, &mut b, id);
    a.request_wait(id).expect("the send completes");
    send(&mut a, ep, 7, (b"", b"next"), AmParams::new());
    until(&mut a, &mut b, || *n.lock().unwrap() == 2);
    assert_eq!(b.requests_outstanding(), 0, "the discarded data is gone");
}

/// A rendezvous message kept by its handler and dropped later, outside
/// any handler, with no other message arriving: the receiver's progress
/// discards its data and the sender's send completes.
#[test]
fn a_kept_rndv_message_dropped_later_still_completes_its_send() {
    let (mut a, mut b, ep) = pair("tcp");
    let kept = keep_messages(&mut b, 8);
    let data = pattern(1 << 20, 4);
    let id = rndv_send(&mut a, ep, 8, &data);
    until(&mut a, &mut b, || !kept.lock().unwrap().is_empty());
    let m = kept.lock().unwrap().pop();
    drop(m);
    settle(&mut a, &mut b, id);
    a.request_wait(id).expect("the send completes");
    // The discarded data is gone.
    drained(&mut a, &mut b);
}

#[test]
fn waiting_for_eager_sends_bounds_what_is_queued() {
    let (mut a, mut b, ep) = pair("tcp");
    let n = Arc::new(Mutex::new(0usize));
    let count = Arc::clone(&n);
    b.am_set_handler(8, move |_, _| *count.lock().unwrap() += 1);
    let data = pattern(60_000, 1);
    let mut in_flight = 0;
    for _ in 0..2000 {
        match a
            .am_send(ep, 8, b"", &data, AmParams::new().eager())
            .unwrap()
        {
            Posted::InFlight(id) => {
                in_flight += 1;
                settle(&mut a, &mut b, id);
                a.request_wait(id).expect("send");
            }
            Posted::Done(..) => {}
        }
        // The receiver runs rarely: the sender must meet a full lane.
        if in_flight == 0 {
            continue;
        }
        b.progress();
    }
    until(&mut a, &mut b, || *n.lock().unwrap() == 2000);
    assert!(in_flight > 0, "the lane never filled");
}

/// Sends released while queued behind a full lane are still counted when
/// they leave, like any released request (the C API's legacy active
/// messages report their completion this way).
fn released_sends_are_counted(tls: &str) {
    let (mut a, mut b, ep) = pair(tls);
    let n = Arc::new(Mutex::new(0usize));
    let count = Arc::clone(&n);
    b.am_set_handler(9, move |_, _| *count.lock().unwrap() += 1);
    let data = pattern(3000, 2);
    let start = a.released_completed();
    let mut released = 0u64;
    // The receiver does not progress: the lane fills and later sends queue.
    for _ in 0..2000 {
        if let Posted::InFlight(id) = a
            .am_send(ep, 9, b"hdr", &data, AmParams::new().eager())
            .unwrap()
        {
            a.request_release(id);
            released += 1;
        }
    }
    assert!(released > 0, "{tls}: the lane never filled");
    until(&mut a, &mut b, || *n.lock().unwrap() == 2000);
    let deadline = Instant::now() + Duration::from_secs(20);
    while a.released_completed().wrapping_sub(start) != released {
        assert!(
            Instant::now() < deadline,
            "{tls}: {} of {released} released sends counted",
            a.released_completed().wrapping_sub(start)
        );
        a.progress();
        b.progress();
    }
    assert!(a.take_released_error().is_none());
}

#[test]
fn shm_released_sends_are_counted() {
    released_sends_are_counted("posix");
}

#[test]
fn tcp_released_sends_are_counted() {
    released_sends_are_counted("tcp");
}
