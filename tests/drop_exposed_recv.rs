//! A worker dropped while a peer may still write into one of its receive
//! buffers without its progress: a rendezvous by put over `cma`, where the
//! sender writes with `process_vm_writev` once it has the receiver's key.
//!
//! The parent receives, the child (this test binary started again) sends
//! and holds back its writes until the parent says so. Dropping the
//! parent's worker must never let those writes reach memory the parent
//! uses again:
//! * a raw-tier receive: the drop waits for the writes, so when it
//!   returns the whole message is in the buffer;
//! * an owned-tier receive: the drop leaks the buffer, so fresh
//!   allocations of the same size (which malloc would otherwise serve from
//!   the freed one) stay untouched by the late writes.

mod common;

use common::*;
use rucx::{Op, Posted, TAG_MASK_ALL};
use std::io::{BufRead, Write};
use std::time::Duration;

/// Below glibc's mmap threshold, so a freed buffer goes back to the heap
/// and is handed out again.
const SIZE: usize = 96 * 1024;
const TAG: u64 = 7;
const SEED: u64 = 0x5eed;

fn context() -> rucx::Context {
    context_vars(&[
        ("RUCX_TLS", "shm"),
        ("RUCX_RNDV_SCHEME", "put_zcopy"),
        ("RUCX_RNDV_THRESH", "8k"),
    ])
}

/// Whether the shared-memory transports can do a rendezvous by put here
/// (CMA needs ptrace rights).
fn cma_available(ctx: &rucx::Context) -> bool {
    ctx.resources().iter().any(|r| r.tl_name == "cma")
}

/// The child: sends the message, says `sent`, and progresses only after
/// a line on its standard input (plus a pause), until the send is over.
fn sender() {
    let ctx = context();
    let mut w = ctx.create_worker().expect("worker");
    let addr = unhex(&std::env::var("RUCX_TEST_PARENT").expect("parent address"));
    let ep = w.connect(&addr).expect("connect");
    let id = match w
        .tag_send(ep, pattern(SIZE, SEED), TAG, Op::new())
        .expect("send")
    {
        Posted::InFlight(id) => id,
        Posted::Done(..) => panic!("a rendezvous send cannot finish at once"),
    };
    println!("sent");
    let mut line = String::new();
    std::io::stdin().lock().read_line(&mut line).expect("stdin");
    // Time for the parent to go on without us, as a slow peer would.
    std::thread::sleep(Duration::from_millis(200));
    progress_until(&mut w, 30, |w| !w.request_is_active(id));
    println!("send over: {:?}", w.take::<Vec<u8>>(id).map(|r| r.is_ok()));
}

/// Starts the child and waits until its request to send is out.
fn start_sender(test: &str, w: &rucx::Worker) -> ChildGuard {
    let mut child = spawn_child_with(test, &[("RUCX_TEST_PARENT", hex(&w.address()))], &[], false);
    let sent = watch_stdout(&mut child, "sent");
    sent.recv_timeout(Duration::from_secs(30))
        .expect("the child's send");
    child
}

/// The parent's worker, or `None` (after saying why) where cross-memory
/// attach is not available.
fn receiver() -> Option<rucx::Worker> {
    let ctx = context();
    if !cma_available(&ctx) {
        skip_or_fail("cross-memory attach is not available");
        return None;
    }
    Some(ctx.create_worker().expect("worker"))
}

fn go(child: &mut ChildGuard) {
    let stdin = child.stdin.as_mut().expect("child stdin is piped");
    stdin.write_all(b"go\n").expect("tell the child");
    stdin.flush().expect("flush");
}

#[test]
fn dropping_waits_for_writes_into_a_raw_receive() {
    if is_child() {
        return sender();
    }
    let Some(mut w) = receiver() else { return };
    let mut buf = vec![0u8; SIZE].into_boxed_slice();
    // SAFETY: `buf` outlives the worker, which the test drops below, and
    // nothing else touches it until then.
    let posted = unsafe {
        w.tag_recv_raw(buf.as_mut_ptr(), SIZE, TAG, TAG_MASK_ALL, Op::new())
            .expect("recv")
    };
    assert!(matches!(posted, Posted::InFlight(_)));
    let mut child = start_sender("dropping_waits_for_writes_into_a_raw_receive", &w);
    // The request to send arrives and the receive answers with its key.
    progress_for(&mut w, 300);
    go(&mut child);
    drop(w);
    assert!(
        buf.as_ref() == pattern(SIZE, SEED).as_slice(),
        "the drop returned before the sender's writes were in"
    );
    let st = wait_exit(&mut child, 30);
    assert!(st.success(), "child: {st}");
}

#[test]
fn dropping_leaks_an_owned_receive_buffer_a_peer_may_write() {
    if is_child() {
        return sender();
    }
    let Some(mut w) = receiver() else { return };
    let posted = w
        .tag_recv(vec![0u8; SIZE], TAG, TAG_MASK_ALL, Op::new())
        .expect("recv");
    assert!(matches!(posted, Posted::InFlight(_)));
    let mut child = start_sender(
        "dropping_leaks_an_owned_receive_buffer_a_peer_may_write",
        &w,
    );
    progress_for(&mut w, 300);
    drop(w);
    // Were the buffer freed, these would be made from it.
    let fresh: Vec<Vec<u8>> = (0..8).map(|_| vec![0u8; SIZE]).collect();
    go(&mut child);
    let st = wait_exit(&mut child, 30);
    assert!(st.success(), "child: {st}");
    for (i, b) in fresh.iter().enumerate() {
        assert!(
            b.iter().all(|&x| x == 0),
            "fresh buffer {i} was written by the peer after the drop"
        );
    }
}
