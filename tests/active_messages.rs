//! Active messages between two workers (`self` and `tcp`): every size
//! from empty to several fragments, handlers that consume the data
//! inline, keep it, or answer through the reply endpoint.

mod common;

use common::*;
use rucx::ucp::AmParams;
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
        a.am_send(ep, 3, &header, &data, AmParams::new())
            .expect("send");
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
        w.am_send(back, 2, &answer, &[], AmParams::new())
            .expect("answer");
    });
    let answers: Arc<Mutex<Vec<Vec<u8>>>> = Arc::default();
    let got = Arc::clone(&answers);
    a.am_set_handler(2, move |_, m: AmMsg| {
        assert!(m.reply_ep().is_none(), "not asked for");
        got.lock().unwrap().push(m.header().to_vec());
    });
    for i in 0..3u8 {
        a.am_send(
            ep,
            1,
            &[b'q', b'0' + i],
            &pattern(300_000, i.into()),
            AmParams::new().reply(),
        )
        .expect("send");
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

#[test]
fn a_message_without_a_handler_is_dropped_and_later_ones_still_served() {
    let (mut a, mut b, ep) = pair("tcp");
    a.am_send(ep, 9, b"nobody", b"listens", AmParams::new())
        .expect("send");
    for _ in 0..2000 {
        a.progress();
        b.progress();
    }
    let n = Arc::new(Mutex::new(0));
    let count = Arc::clone(&n);
    b.am_set_handler(9, move |_, _| *count.lock().unwrap() += 1);
    a.am_send(ep, 9, b"now", b"someone does", AmParams::new())
        .expect("send");
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
