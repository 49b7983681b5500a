//! A process sends one message and exits at once, without progressing or
//! closing anything: the message still arrives. A send reported done must
//! already be on its way (in the kernel, or posted to the device), not
//! held in the process until a connection that needs its progress opens.
//! Over tcp. Not yet over the RC transports: a send on a connection to
//! another process that is not established yet is held by the provider
//! and reported done (`send_slot` in transports/rdma/src/rc/ops.rs).
//!
//! The test binary starts itself again as the sender (see `common`).

mod common;

use common::*;
use rucx::{Op, Posted, TAG_MASK_ALL};

const TAG: u64 = 5;

/// Child side: connects, sends, exits.
#[test]
fn sender_child() {
    if !is_child() {
        return;
    }
    let ctx = context(&std::env::var("RUCX_TEST_TLS").expect("tls"));
    let mut w = ctx.create_worker().expect("worker");
    let parent = unhex(&std::env::var("RUCX_TEST_PEER").expect("peer address"));
    let ep = w.connect(&parent).expect("connect");
    w.tag_send_blocking(ep, b"sent before exit", TAG)
        .expect("send");
    // No progress, no close, no flush: the process ends here.
    std::process::exit(0);
}

fn arrives_after_the_sender_exited(tls: &str) {
    let ctx = context(tls);
    let mut w = ctx.create_worker().expect("worker");
    let mut child = spawn_child(
        "sender_child",
        &[
            ("RUCX_TEST_TLS", tls.to_string()),
            ("RUCX_TEST_PEER", hex(&w.address())),
        ],
    );
    let id = match w
        .tag_recv(vec![0u8; 64], TAG, TAG_MASK_ALL, Op::new())
        .expect("post receive")
    {
        Posted::InFlight(id) => id,
        Posted::Done(..) => panic!("{tls}: a message before the sender started"),
    };
    progress_until(&mut w, 60, |w| !w.request_is_active(id));
    let (info, buf) = w
        .take::<Vec<u8>>(id)
        .expect("result")
        .unwrap_or_else(|e| panic!("{tls}: the message did not arrive: {}", e.error));
    assert_eq!(&buf[..info.length], b"sent before exit", "{tls}");
    assert!(wait_exit(&mut child, 30).success(), "{tls}: sender failed");
}

#[test]
fn tcp_message_arrives_after_the_sender_exited() {
    if is_child() {
        return;
    }
    arrives_after_the_sender_exited("tcp");
}
