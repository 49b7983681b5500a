//! Cancel against arrival, at every step: a receive canceled after `k`
//! progress steps either completes `Canceled` (and the message waits for
//! the next receive, intact) or was already matched (and completes with
//! the data) — never both, never lost. Runs on `self`, whose progress is
//! deterministic, for every protocol.

mod common;

use common::*;
use rucx::ucp::UcpConfig;
use rucx::Context;
use rucx::{Error, Op, Posted, ReqId, Worker, TAG_MASK_ALL};
use std::time::{Duration, Instant};

fn context(vars: &[(&str, &str)]) -> Context {
    let cfg = UcpConfig::from_lookup(|k| {
        if k == "RUCX_TLS" {
            return Some("self".into());
        }
        vars.iter()
            .find(|(n, _)| format!("RUCX_{n}") == k)
            .map(|(_, v)| v.to_string())
    })
    .expect("config");
    Context::with_config(cfg).expect("context")
}

fn drive(a: &mut Worker, b: &mut Worker, mut done: impl FnMut(&Worker, &Worker) -> bool) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while !done(a, b) {
        assert!(Instant::now() < deadline, "timed out");
        a.progress();
        b.progress();
    }
}

fn recv(b: &mut Worker, size: usize, tag: u64) -> ReqId {
    match b
        .tag_recv(vec![0u8; size], tag, TAG_MASK_ALL, Op::new())
        .expect("recv")
    {
        Posted::InFlight(id) => id,
        Posted::Done(..) => panic!("nothing was sent yet"),
    }
}

/// One protocol: cancel after 0, 1, 2, ... steps until the receive
/// completes before the cancel. Returns (canceled, completed) counts.
fn race(vars: &[(&str, &str)], size: usize) -> (usize, usize) {
    let ctx = context(vars);
    let (mut canceled, mut completed) = (0, 0);
    for k in 0..10_000 {
        let mut a = ctx.create_worker().expect("worker");
        let mut b = ctx.create_worker().expect("worker");
        let ep = a.connect(&b.address()).expect("connect");
        let out = pattern(size, k as u64);
        let r = recv(&mut b, size, 1);
        let s = a.tag_send(ep, out.clone(), 1, Op::new()).expect("send");
        for i in 0..k {
            if i % 2 == 0 {
                a.progress();
            } else {
                b.progress();
            }
        }
        let finished_before = !b.request_is_active(r);
        let was_canceled = b.request_cancel(r);
        assert!(
            !(finished_before && was_canceled),
            "k {k}: a completed receive was canceled"
        );
        let r = if was_canceled {
            canceled += 1;
            match b.take::<Vec<u8>>(r) {
                Some(Err(e)) => assert!(matches!(e.error, Error::Canceled), "{:?}", e.error),
                other => panic!("k {k}: canceled receive gave {other:?}"),
            }
            // The message is still there for the next receive.
            recv(&mut b, size, 1)
        } else {
            completed += 1;
            r
        };
        let send_id = match &s {
            Posted::InFlight(id) => Some(*id),
            Posted::Done(..) => None,
        };
        drive(&mut a, &mut b, |a, b| {
            !b.request_is_active(r) && send_id.is_none_or(|id| !a.request_is_active(id))
        });
        let (info, got) = b.take::<Vec<u8>>(r).expect("done").expect("data");
        assert_eq!(info.length, size);
        assert!(got == out, "k {k}: corrupted");
        if let Some(id) = send_id {
            assert!(a.take::<Vec<u8>>(id).expect("send done").is_ok());
        }
        assert_eq!(a.requests_outstanding(), 0, "k {k}: sender leaked");
        assert_eq!(b.requests_outstanding(), 0, "k {k}: receiver leaked");
        if finished_before {
            break;
        }
    }
    (canceled, completed)
}

#[test]
fn cancel_races_every_protocol() {
    let cases: [(&[(&str, &str)], usize); 6] = [
        (&[], 8),
        (&[("ZCOPY_THRESH", "1")], 5000),
        (&[("RNDV_THRESH", "inf"), ("ZCOPY_THRESH", "inf")], 300_000),
        (&[("RNDV_THRESH", "1k"), ("RNDV_SCHEME", "am")], 300_000),
        (
            &[("RNDV_THRESH", "1k"), ("RNDV_SCHEME", "get_zcopy")],
            300_000,
        ),
        (
            &[("RNDV_THRESH", "1k"), ("RNDV_SCHEME", "put_zcopy")],
            300_000,
        ),
    ];
    for (vars, size) in cases {
        let (canceled, completed) = race(vars, size);
        // Both outcomes happened: the race was really run.
        assert!(canceled > 0, "{vars:?}: never canceled");
        assert!(completed > 0, "{vars:?}: never completed first");
    }
}

#[test]
fn a_send_is_cancelable_only_until_the_receiver_asks() {
    // A rendezvous send that waits for its answer cannot be canceled (the
    // receiver may be reading it); it completes normally.
    let ctx = context(&[("RNDV_THRESH", "1k"), ("RNDV_SCHEME", "put_zcopy")]);
    let mut a = ctx.create_worker().expect("worker");
    let mut b = ctx.create_worker().expect("worker");
    let ep = a.connect(&b.address()).expect("connect");
    let out = pattern(100_000, 3);
    let s = match a.tag_send(ep, out.clone(), 2, Op::new()).expect("send") {
        Posted::InFlight(id) => id,
        Posted::Done(..) => panic!("rendezvous done at once"),
    };
    a.progress();
    assert!(!a.request_cancel(s));
    let r = recv(&mut b, out.len(), 2);
    drive(&mut a, &mut b, |a, b| {
        !a.request_is_active(s) && !b.request_is_active(r)
    });
    assert!(a.take::<Vec<u8>>(s).expect("send").is_ok());
    let (_, got) = b.take::<Vec<u8>>(r).expect("recv").expect("data");
    assert!(got == out);
}
