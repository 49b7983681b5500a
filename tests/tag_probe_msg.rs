//! Matched probes: `tag_probe_remove` takes a message out of the
//! unexpected queue and `tag_msg_recv` receives it, for every protocol.

mod common;

use common::*;
use rucx::{Error, Op, Posted, Worker, TAG_MASK_ALL};
use std::time::{Duration, Instant};

fn pair(tls: &str, rndv: Option<&str>) -> (Worker, Worker, rucx::Ep) {
    let ctx = context_rndv(tls, rndv);
    let mut a = ctx.create_worker().expect("worker");
    let b = ctx.create_worker().expect("worker");
    let ep = a.connect(&b.address()).expect("connect");
    (a, b, ep)
}

/// Progresses both until `b` has a message with `tag` to remove.
fn probe_remove(a: &mut Worker, b: &mut Worker, tag: u64) -> rucx::Message {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        if let Some(m) = b.tag_probe_remove(tag, TAG_MASK_ALL) {
            return m;
        }
        assert!(Instant::now() < deadline, "tag {tag} never arrived");
        a.progress();
        b.progress();
    }
}

/// Waits for owned request `r` on `b` while `a` progresses too.
fn finish(a: &mut Worker, b: &mut Worker, r: Posted<Vec<u8>>) -> rucx::Result<Vec<u8>> {
    let id = match r {
        Posted::Done(_, buf) => return Ok(buf),
        Posted::InFlight(id) => id,
    };
    let deadline = Instant::now() + Duration::from_secs(20);
    while b.request_is_active(id) {
        assert!(Instant::now() < deadline, "receive timed out");
        a.progress();
        b.progress();
    }
    match b.take::<Vec<u8>>(id).expect("complete") {
        Ok((_, buf)) => Ok(buf),
        Err(e) => Err(e.error),
    }
}

fn send(a: &mut Worker, ep: rucx::Ep, data: Vec<u8>, tag: u64) {
    let _sent = a.tag_send(ep, data, tag, Op::new()).expect("send");
}

#[test]
fn removed_messages_of_every_protocol_are_received_once() {
    // Eager short/bcopy/zcopy, multi-fragment eager, and rendezvous.
    let cases: [(&str, Option<&str>, usize); 6] = [
        ("self", None, 8),
        ("tcp", None, 8),
        ("tcp", None, 100_000),
        ("tcp", Some("16k"), 300_000),
        ("self", Some("16k"), 300_000),
        ("tcp", None, 0),
    ];
    for (i, &(tls, rndv, size)) in cases.iter().enumerate() {
        let (mut a, mut b, ep) = pair(tls, rndv);
        let tag = 40 + i as u64;
        let out = pattern(size, tag);
        send(&mut a, ep, out.clone(), tag);
        // A second message with the same tag stays for a normal receive.
        send(&mut a, ep, vec![7u8; 3], tag);
        let m = probe_remove(&mut a, &mut b, tag);
        assert_eq!(m.info().tag, tag);
        assert_eq!(m.info().length, size, "{tls} {size}");
        let r = b
            .tag_msg_recv(m, vec![0u8; size], Op::new())
            .expect("msg_recv");
        let got = finish(&mut a, &mut b, r).expect("received");
        assert!(got == out, "{tls} {size}: corrupted");
        // The removed message no longer matches; the second one does.
        let mut small = [0u8; 3];
        let info = b
            .tag_recv_blocking(&mut small, tag, TAG_MASK_ALL)
            .expect("second");
        assert_eq!((info.length, small), (3, [7u8; 3]));
        assert!(b.tag_probe(tag, TAG_MASK_ALL).is_none());
        assert_eq!(b.requests_outstanding(), 0, "{tls} {size}: leaked");
    }
}

#[test]
fn a_short_buffer_truncates() {
    for rndv in [None, Some("1k")] {
        let (mut a, mut b, ep) = pair("tcp", rndv);
        send(&mut a, ep, pattern(5000, 1), 5);
        let m = probe_remove(&mut a, &mut b, 5);
        let r = b.tag_msg_recv(m, vec![0u8; 100], Op::new());
        let r = match r {
            Ok(p) => finish(&mut a, &mut b, p),
            Err(e) => Err(e),
        };
        assert!(
            matches!(
                r,
                Err(Error::Truncated {
                    length: 5000,
                    capacity: 100
                })
            ),
            "{rndv:?}: {r:?}"
        );
    }
}

#[test]
fn blocking_form_and_wildcards() {
    let (mut a, mut b, ep) = pair("self", None);
    send(&mut a, ep, pattern(64, 9), 0x1234);
    let m = probe_remove(&mut a, &mut b, 0x1234);
    // A wildcard probe finds nothing more.
    assert!(b.tag_probe_remove(0, 0).is_none());
    let mut buf = vec![0u8; 64];
    let info = b.tag_msg_recv_blocking(m, &mut buf).expect("recv");
    assert_eq!(info.length, 64);
    assert_eq!(buf, pattern(64, 9));
}

#[test]
fn raw_form_completes_through_the_queue() {
    // Eager and rendezvous: the raw receive of a removed message reports
    // through the completion queue with its user data.
    for rndv in [None, Some("1k")] {
        let (mut a, mut b, ep) = pair("tcp", rndv);
        let out = pattern(4000, 3);
        send(&mut a, ep, out.clone(), 77);
        let m = probe_remove(&mut a, &mut b, 77);
        let mut buf = vec![0u8; 4000];
        // SAFETY: `buf` outlives the request, which is waited for below
        // before `buf` is read or dropped.
        let posted = unsafe {
            b.tag_msg_recv_raw(
                m,
                buf.as_mut_ptr(),
                buf.len(),
                Op::new().queue().user_data(9),
            )
        }
        .expect("msg_recv_raw");
        let info = match posted {
            Posted::Done(info, ()) => info,
            Posted::InFlight(id) => {
                let deadline = Instant::now() + Duration::from_secs(20);
                loop {
                    a.progress();
                    b.progress();
                    if let Some(c) = b.next_completion() {
                        assert_eq!((c.id, c.user_data), (id, 9));
                        break c.result.expect("received");
                    }
                    assert!(Instant::now() < deadline, "{rndv:?}: timed out");
                }
            }
        };
        assert_eq!((info.tag, info.length), (77, 4000), "{rndv:?}");
        assert!(buf == out, "{rndv:?}: corrupted");
        assert_eq!(b.requests_outstanding(), 0, "{rndv:?}: leaked");
    }
}
