//! Two processes that meet through a listener: the client knows only the
//! server's socket address; after the handshake their endpoints are made
//! from the model, so on one host they talk over shared memory (`posix`
//! for messages, `cma` for rendezvous data).
//!
//! The test binary starts itself again as the client (see `common`).

mod common;

use common::*;
use rucx::ucp::EpParams;
use rucx::{Ep, Worker, TAG_MASK_ALL};
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

const BIG: usize = 4 << 20;

fn lanes(w: &Worker, ep: Ep) -> Vec<String> {
    let t = &w.ep_protocols(ep).expect("tables")[0];
    t.lane_names().to_vec()
}

/// Client side of `processes_meet_through_a_listener_and_use_shared_memory`.
#[test]
fn listener_client() {
    if !is_child() {
        return;
    }
    let ctx = context("shm");
    let mut w = ctx.create_worker().expect("worker");
    let at: SocketAddr = std::env::var("RUCX_TEST_LISTENER")
        .expect("listener address")
        .parse()
        .expect("socket address");
    let ep = w
        .connect_to(at, EpParams::new())
        .expect("connect to the listener");
    assert!(
        lanes(&w, ep).iter().any(|l| l == "posix/memory"),
        "client lanes {:?}",
        lanes(&w, ep)
    );
    w.tag_send_blocking(ep, &pattern(BIG, 1), 1).expect("send");
    let mut back = vec![0u8; 64];
    let got = w
        .tag_recv_blocking(&mut back, 2, TAG_MASK_ALL)
        .expect("answer");
    assert_eq!(&back[..got.length], b"got it");
    println!("client done");
}

#[test]
fn processes_meet_through_a_listener_and_use_shared_memory() {
    if is_child() {
        return;
    }
    let ctx = context("shm");
    let mut w = ctx.create_worker().expect("worker");
    let accepted = Arc::new(Mutex::new(None));
    let keep = Arc::clone(&accepted);
    let l = w
        .listen("127.0.0.1:0".parse().unwrap(), move |w, req| {
            *keep.lock().unwrap() = Some(w.accept(req, EpParams::new()).expect("accept"));
        })
        .expect("listen");
    let at = w.listener_addr(l).expect("address");
    let mut child = spawn_child("listener_client", &[("RUCX_TEST_LISTENER", at.to_string())]);
    let mut buf = vec![0u8; BIG];
    let got = w
        .tag_recv_blocking(&mut buf, 1, TAG_MASK_ALL)
        .expect("recv");
    assert_eq!(got.length, BIG);
    assert!(buf == pattern(BIG, 1), "the message arrived corrupted");
    let ep = accepted.lock().unwrap().expect("the client was accepted");
    let names = lanes(&w, ep);
    assert!(names.iter().any(|l| l == "posix/memory"), "{names:?}");
    assert!(names.iter().any(|l| l == "cma/memory"), "{names:?}");
    w.tag_send_blocking(ep, b"got it", 2).expect("answer");
    progress_until(&mut w, 30, |_| child.try_wait().expect("child").is_some());
    assert!(wait_exit(&mut child, 30).success(), "the client failed");
}
