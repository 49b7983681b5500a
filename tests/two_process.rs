//! Two processes exchange tag-matched messages over TCP.
//!
//! The test binary starts itself again as the peer (see `common`).

mod common;

use common::*;
use rucx::{Op, Posted, TAG_MASK_ALL};
use std::time::Duration;

const SIZES: [usize; 7] = [0, 1, 8, 4095, 65536, 1 << 20, 64 << 20];

/// Child side of `tcp_sizes_verified_rendezvous`: as `echo_child`.
#[test]
fn echo_child_rndv() {
    echo_child();
}

/// Child side of `tcp_sizes_verified`: echoes every message back.
#[test]
fn echo_child() {
    if !is_child() {
        return;
    }
    let ctx = context("tcp");
    let mut w = ctx.create_worker().expect("worker");
    let parent = unhex(&std::env::var("RUCX_TEST_PEER").expect("peer address"));
    let ep = w.connect(&parent).expect("connect");
    w.tag_send_blocking(ep, &w.address(), 0)
        .expect("send address");
    for (i, &size) in SIZES.iter().enumerate() {
        let mut buf = vec![0u8; size];
        let info = w
            .tag_recv_blocking(&mut buf, 100 + i as u64, TAG_MASK_ALL)
            .expect("recv");
        assert_eq!(info.length, size);
        assert!(
            buf == pattern(size, i as u64),
            "child: size {size} corrupted"
        );
        w.tag_send_blocking(ep, &buf, 200 + i as u64).expect("echo");
    }
    // Wait for the parent's goodbye so that our last echo is not cut off.
    let mut bye = [0u8; 1];
    w.tag_recv_blocking(&mut bye, 999, TAG_MASK_ALL)
        .expect("bye");
}

#[test]
fn tcp_sizes_verified() {
    if is_child() {
        return;
    }
    sizes_verified(None);
}

#[test]
fn tcp_sizes_verified_rendezvous() {
    if is_child() {
        return;
    }
    sizes_verified(Some("4k"));
}

fn sizes_verified(rndv: Option<&str>) {
    let ctx = context_rndv("tcp", rndv);
    let mut w = ctx.create_worker().expect("worker");
    let mut env = vec![("RUCX_TEST_PEER", hex(&w.address()))];
    if let Some(t) = rndv {
        env.push(("RUCX_TEST_RNDV_THRESH", t.to_string()));
    }
    let name = if rndv.is_some() {
        "echo_child_rndv"
    } else {
        "echo_child"
    };
    let mut child = spawn_child(name, &env);
    let _forward = watch_stdout(&mut child, "");
    let ep = accept_peer(&mut w);
    for (i, &size) in SIZES.iter().enumerate() {
        let out = pattern(size, i as u64);
        let mut back = vec![0u8; size];
        let info = w.scope(|s| {
            let r = s.tag_recv(&mut back, 200 + i as u64, TAG_MASK_ALL);
            let snd = s.tag_send(ep, &out, 100 + i as u64);
            let (sr, _) = s.wait(snd);
            sr.expect("send");
            let (rr, _) = s.wait(r);
            rr
        });
        let info = info.expect("echo");
        assert_eq!(info.length, size);
        assert!(back == out, "size {size}: echo differs");
    }
    w.tag_send_blocking(ep, &[1], 999).expect("bye");
    let status = child.wait().expect("wait child");
    assert!(status.success(), "child failed: {status}");
}

/// Child side of `peer_killed_mid_transfer`: starts a huge send, pushes
/// part of it, then stops progressing until it is killed.
#[test]
fn stalling_child() {
    if !is_child() {
        return;
    }
    let ctx = context("tcp");
    let mut w = ctx.create_worker().expect("worker");
    let parent = unhex(&std::env::var("RUCX_TEST_PEER").expect("peer address"));
    let ep = w.connect(&parent).expect("connect");
    w.tag_send_blocking(ep, &w.address(), 0)
        .expect("send address");
    let big = vec![7u8; 512 << 20];
    let posted = w.tag_send(ep, big, 1, Op::new()).expect("post");
    assert!(matches!(posted, Posted::InFlight(_)));
    progress_for(&mut w, 300);
    println!("stalled");
    loop {
        std::thread::sleep(Duration::from_secs(1));
    }
}

#[test]
fn peer_killed_mid_transfer() {
    if is_child() {
        return;
    }
    killed_mid_transfer(None);
}

#[test]
fn peer_killed_mid_rendezvous() {
    if is_child() {
        return;
    }
    killed_mid_transfer(Some("64k"));
}

fn killed_mid_transfer(rndv: Option<&str>) {
    let ctx = context_rndv("tcp", rndv);
    let mut w = ctx.create_worker().expect("worker");
    let mut env = vec![("RUCX_TEST_PEER", hex(&w.address()))];
    if let Some(t) = rndv {
        env.push(("RUCX_TEST_RNDV_THRESH", t.to_string()));
    }
    let mut child = spawn_child("stalling_child", &env);
    let stalled = watch_stdout(&mut child, "stalled");
    let ep = accept_peer(&mut w);
    // A receive for the child's huge message ...
    let recv = match w
        .tag_recv(vec![0u8; 512 << 20], 1, TAG_MASK_ALL, Op::new())
        .expect("post recv")
    {
        Posted::InFlight(id) => id,
        Posted::Done(..) => panic!("512 MiB arrived at once"),
    };
    progress_until(&mut w, 30, |_| stalled.try_recv().is_ok());
    // ... and, once the child has stopped progressing, a send it never reads.
    let send = match w
        .tag_send(ep, vec![3u8; 64 << 20], 2, Op::new())
        .expect("post send")
    {
        Posted::InFlight(id) => id,
        Posted::Done(..) => panic!("64 MiB sent at once"),
    };
    progress_for(&mut w, 300);
    assert!(
        w.request_is_active(recv),
        "receive finished although the child stalled"
    );
    assert!(
        w.request_is_active(send),
        "send finished although the child never reads"
    );
    child.kill().expect("kill child");
    child.wait().expect("reap child");
    progress_until(&mut w, 20, |w| {
        !w.request_is_active(recv) && !w.request_is_active(send)
    });
    let r = w.take::<Vec<u8>>(recv).expect("recv result");
    assert!(r.is_err(), "receive from a killed peer succeeded");
    let s = w.take::<Vec<u8>>(send).expect("send result");
    assert!(s.is_err(), "send to a killed peer succeeded");
    assert!(w.ep_status(ep).is_err(), "endpoint still healthy");
    assert_eq!(w.requests_outstanding(), 0, "requests leaked");
}
