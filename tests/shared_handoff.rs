//! Posts handed to the thread that holds a `SharedWorker`'s lock (on a
//! worker with tcp, whose corked sends batch): they run when it lets go,
//! in the order each thread made them; a handed receive whose future is
//! dropped before it ran is canceled; a handed post's failure reaches its
//! future with the buffer. Without tcp, posts wait for the lock.

mod common;

use common::*;
use rucx::ucp::{CloseMode, Handed, OpFuture, OpResult, SharedWorker};
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// Waits for `f`, progressing `w`; fails the test after 20 s.
fn wait_bounded<B: Send + 'static>(w: &SharedWorker, mut f: OpFuture<B>) -> OpResult<B> {
    let start = Instant::now();
    while !f.is_done() {
        w.progress();
        assert!(start.elapsed() < Duration::from_secs(20), "stuck");
    }
    f.wait()
}

/// Two workers; the sender `a` has a progress thread, so that what it
/// sent leaves (and its connection opens) while the test waits on `b`.
fn shared_pair(tls: &str) -> (rucx::Context, SharedWorker, SharedWorker) {
    let ctx = context(tls);
    let a = ctx.create_worker().expect("worker a").into_shared();
    let b = ctx.create_worker().expect("worker b").into_shared();
    a.start_progress_thread().expect("progress thread");
    (ctx, a, b)
}

/// Runs `post` in this thread while another thread holds `w`'s lock, and
/// lets go of it once `post` returned.
fn while_locked<R>(w: &SharedWorker, post: impl FnOnce() -> R) -> R {
    let (locked_tx, locked_rx) = mpsc::channel();
    let (done_tx, done_rx) = mpsc::channel::<()>();
    std::thread::scope(|s| {
        s.spawn(move || {
            w.with(|_| {
                locked_tx.send(()).expect("tell locked");
                done_rx.recv().expect("wait for the posts");
            })
        });
        locked_rx.recv().expect("wait for the lock");
        let r = post();
        done_tx.send(()).expect("release");
        r
    })
}

/// Sends posted while another thread holds the lock are handed over, run
/// when it lets go, and arrive in the order posted, every byte intact.
fn handed_sends_keep_order(tls: &str) {
    let (_ctx, a, b) = shared_pair(tls);
    let ep = a.connect(&b.address()).expect("connect");
    let _back = b.connect(&a.address()).expect("connect back");
    const N: u64 = 40;
    let sends = while_locked(&a, || {
        let probe = a.post_with(|_| ());
        assert!(
            matches!(probe, Handed::Queued(_)),
            "a post while the lock is held is handed over"
        );
        assert!(a.try_with(|_| ()).is_none(), "the lock is held");
        (0..N)
            .map(|i| {
                let len = [1, 8, 64, 2000, 9000][(i % 5) as usize];
                a.tag_send(ep, pattern(len, i), i).expect("send")
            })
            .collect::<Vec<_>>()
    });
    std::thread::scope(|sc| {
        // The sends complete while the receiver progresses its worker
        // (rendezvous sizes need both sides).
        sc.spawn(|| {
            for (i, s) in sends.into_iter().enumerate() {
                let (_, buf) = s.wait().expect("send done");
                assert_eq!(buf.len(), [1, 8, 64, 2000, 9000][i % 5]);
            }
        });
        for i in 0..N {
            let len = [1, 8, 64, 2000, 9000][(i % 5) as usize];
            let (info, buf) = b
                .tag_recv(vec![0u8; len], 0, 0)
                .expect("recv")
                .wait()
                .expect("recv done");
            assert_eq!(info.tag, i, "handed sends arrive in posting order");
            assert!(buf == pattern(len, i), "bytes of message {i}");
        }
    });
}

#[test]
fn handed_sends_keep_order_tcp() {
    handed_sends_keep_order("tcp");
}

/// Without an iface that batches (shared memory, self), a post waits for
/// the lock instead of being handed over.
#[test]
fn posts_wait_for_the_lock_without_batching() {
    let (_ctx, a, _b) = shared_pair("shm");
    let (tx, rx) = mpsc::channel();
    std::thread::scope(|s| {
        s.spawn(|| {
            a.with(|_| {
                tx.send(()).expect("tell locked");
                std::thread::sleep(Duration::from_millis(50));
            })
        });
        rx.recv().expect("wait for the lock");
        let t = Instant::now();
        assert!(matches!(a.post_with(|_| ()), Handed::Done(())));
        assert!(
            t.elapsed() >= Duration::from_millis(20),
            "it waited for the holder"
        );
    });
}

/// A handed receive whose future is dropped before the post ran is
/// canceled when it runs: the next message goes to the next receive.
#[test]
fn dropped_handed_receive_is_canceled() {
    let (_ctx, a, b) = shared_pair("tcp");
    let ep = a.connect(&b.address()).expect("connect");
    let _back = b.connect(&a.address()).expect("connect back");
    while_locked(&b, || {
        let r = b.tag_recv(vec![0u8; 16], 7, u64::MAX).expect("recv");
        drop(r);
    });
    let send = a.tag_send(ep, pattern(16, 1), 7).expect("send");
    let recv = b.tag_recv(vec![0u8; 16], 7, u64::MAX).expect("recv");
    let (info, buf) = wait_bounded(&b, recv).expect("recv done");
    send.wait().expect("send done");
    assert_eq!((info.tag, info.length), (7, 16));
    assert!(buf == pattern(16, 1));
}

/// A handed post's failure reaches its future with the buffer.
#[test]
fn handed_send_failure_returns_buffer() {
    let (_ctx, a, b) = shared_pair("tcp");
    let ep = a.connect(&b.address()).expect("connect");
    a.ep_close(ep, CloseMode::Force).wait().expect("close");
    // Posted now it fails at once; handed to the progress thread (which
    // holds the lock now and then) its future fails.
    if let Ok(f) = a.tag_send(ep, vec![1u8], 1) {
        let e = f.wait().expect_err("a send on a closed endpoint fails");
        assert_eq!(e.buf, vec![1u8]);
    }
    let f = while_locked(&a, || a.tag_send(ep, vec![5u8; 32], 1).expect("handed"));
    let e = f.wait().expect_err("a send on a closed endpoint fails");
    assert_eq!(e.buf, vec![5u8; 32], "the buffer comes back");
    drop(b);
}

/// A handed closure that panics does not unwind in the thread that holds
/// the lock: the panic goes on in the thread that takes the result, and
/// the worker goes on serving posts.
#[test]
fn a_handed_panic_goes_to_the_thread_that_takes_the_result() {
    let (_ctx, a, b) = shared_pair("tcp");
    let ep = a.connect(&b.address()).expect("connect");
    let queued = while_locked(&a, || {
        match a.post_with(|_| -> u32 { panic!("boom in a post") }) {
            Handed::Queued(q) => q,
            Handed::Done(_) => panic!("a post while the lock is held is handed over"),
        }
    });
    // `while_locked`'s holder ran the post when it let go, and did not
    // panic (the scope would have re-raised it).
    let taker = std::thread::spawn(move || loop {
        if let Some(v) = queued.take() {
            return v;
        }
        std::thread::yield_now();
    });
    let err = taker
        .join()
        .expect_err("the post's panic goes on in the taker");
    let msg = err.downcast_ref::<&str>().copied().unwrap_or_default();
    assert_eq!(msg, "boom in a post");
    // The worker still works.
    let sent = a.tag_send(ep, b"after".to_vec(), 5).expect("send");
    let (info, buf) =
        wait_bounded(&b, b.tag_recv(vec![0u8; 8], 5, u64::MAX).expect("recv")).expect("recv done");
    assert_eq!(&buf[..info.length], b"after");
    wait_bounded(&a, sent).expect("send done");
}
