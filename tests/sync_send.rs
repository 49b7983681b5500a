//! Synchronous sends complete only once the receiver matched them, and
//! wireup gives the receiver a way back even when it never connected.

mod common;

use common::*;
use rucx::{Op, Posted, Worker, TAG_MASK_ALL};
use std::time::{Duration, Instant};

/// A connects to B; B never calls connect.
fn one_way(tls: &str) -> (Worker, Worker, rucx::Ep) {
    let ctx = context(tls);
    let mut a = ctx.create_worker().expect("worker a");
    let b = ctx.create_worker().expect("worker b");
    let ab = a.connect(&b.address()).expect("a->b");
    (a, b, ab)
}

fn spin(a: &mut Worker, b: &mut Worker, d: Duration) {
    let until = Instant::now() + d;
    while Instant::now() < until {
        a.progress();
        b.progress();
    }
}

fn completes_on_match(tls: &str, size: usize) {
    let (mut a, mut b, ab) = one_way(tls);
    let out = pattern(size, 9);
    let id = match a
        .tag_send(ab, out.clone(), 5, Op::new().sync())
        .expect("send")
    {
        Posted::InFlight(id) => id,
        Posted::Done(..) => panic!("a synchronous send cannot complete before a match"),
    };
    // All the data can arrive, but nothing matches it yet.
    spin(&mut a, &mut b, Duration::from_millis(200));
    assert!(
        b.tag_probe(5, TAG_MASK_ALL).is_some(),
        "message did not arrive"
    );
    assert!(
        a.request_is_active(id),
        "completed before the receiver matched"
    );
    // Both progress: a rendezvous by put needs the sender to write.
    let r = match b
        .tag_recv(vec![0u8; size], 5, TAG_MASK_ALL, Op::new())
        .expect("recv")
    {
        Posted::Done(info, buf) => Ok((info, buf)),
        Posted::InFlight(r) => Err(r),
    };
    let (info, buf) = r.unwrap_or_else(|r| {
        let deadline = Instant::now() + Duration::from_secs(10);
        while b.request_is_active(r) {
            assert!(Instant::now() < deadline, "receive never completed");
            a.progress();
            b.progress();
        }
        b.take::<Vec<u8>>(r).expect("done").expect("recv")
    });
    assert_eq!(info.length, size);
    assert!(buf == out);
    // The acknowledgement leaves when B progresses.
    let deadline = Instant::now() + Duration::from_secs(10);
    while a.request_is_active(id) {
        assert!(Instant::now() < deadline, "acknowledgement never came");
        a.progress();
        b.progress();
    }
    let (i, _) = a.take::<Vec<u8>>(id).expect("done").expect("ok");
    assert_eq!(i.length, size);
}

#[test]
fn self_sync_small() {
    completes_on_match("self", 10);
}

#[test]
fn self_sync_multi_fragment() {
    completes_on_match("self", 3 << 20);
}

#[test]
fn tcp_sync_small() {
    completes_on_match("tcp", 10);
}

#[test]
fn tcp_sync_multi_fragment() {
    completes_on_match("tcp", 3 << 20);
}

#[test]
fn sync_with_receive_posted_first() {
    let (mut a, mut b, ab) = one_way("tcp");
    let r = match b
        .tag_recv(vec![0u8; 64], 3, TAG_MASK_ALL, Op::new())
        .expect("recv")
    {
        Posted::InFlight(id) => id,
        Posted::Done(..) => panic!("nothing sent yet"),
    };
    let s = match a
        .tag_send(ab, b"sync!".to_vec(), 3, Op::new().sync())
        .expect("send")
    {
        Posted::InFlight(id) => id,
        Posted::Done(..) => panic!("sync send done at once"),
    };
    let deadline = Instant::now() + Duration::from_secs(10);
    while a.request_is_active(s) || b.request_is_active(r) {
        assert!(Instant::now() < deadline, "timed out");
        a.progress();
        b.progress();
    }
    assert!(matches!(a.request_test(s), Some(Ok(_))));
    // B got an endpoint back to A through wireup, without calling connect;
    // connect now returns that endpoint.
    let ba = b.connect(&a.address()).expect("connect back");
    assert!(b.ep_status(ba).is_ok());
    assert_eq!(b.ep_remote_uuid(ba).expect("uuid"), a.uuid());
}

#[test]
fn sync_send_fails_when_receiver_goes_away() {
    let (mut a, b, ab) = one_way("tcp");
    let id = match a
        .tag_send(ab, vec![1u8; 100], 1, Op::new().sync())
        .expect("send")
    {
        Posted::InFlight(id) => id,
        Posted::Done(..) => panic!("sync send done at once"),
    };
    let mut b = b;
    spin(&mut a, &mut b, Duration::from_millis(100));
    drop(b);
    progress_until(&mut a, 20, |a| !a.request_is_active(id));
    assert!(
        matches!(a.request_test(id), Some(Err(_))),
        "a synchronous send to a vanished receiver must fail"
    );
}

#[test]
fn blocking_and_scoped_sync_sends() {
    let ctx = context("tcp");
    let mut a = ctx.create_worker().expect("worker");
    let mut b = ctx.create_worker().expect("worker");
    let ab = a.connect(&b.address()).expect("connect");
    let rx = std::thread::spawn(move || {
        let mut buf = [0u8; 8];
        let one = b
            .tag_recv_blocking(&mut buf, 1, TAG_MASK_ALL)
            .expect("recv 1");
        let two = b
            .tag_recv_blocking(&mut buf, 2, TAG_MASK_ALL)
            .expect("recv 2");
        // Keep answering until the sender is done.
        progress_for(&mut b, 300);
        (one.length, two.length)
    });
    a.tag_send_sync_blocking(ab, b"first", 1).expect("sync 1");
    let data = b"second".to_vec();
    let r = a.scope(|s| {
        let p = s.tag_send_sync(ab, &data, 2);
        s.wait(p).0
    });
    r.expect("sync 2");
    assert_eq!(rx.join().expect("receiver"), (5, 6));
}
