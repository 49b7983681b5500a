//! A local worker's futures, polled by hand over the self transport.

use super::{LocalFuture, LocalWorker};
use crate::uct::{self_tl, Registry};
use crate::{Context, Error};
use std::future::Future;
use std::pin::Pin;
use std::task::{Context as TaskContext, Poll, Waker};

fn worker() -> (LocalWorker, crate::Ep) {
    let ctx = Context::from_env(&Registry::new().with(&self_tl::COMPONENT)).expect("context");
    let w = ctx.create_worker().expect("worker").into_local();
    let ep = w.connect(&w.address()).expect("endpoint");
    (w, ep)
}

/// Polls `f` until it is ready, progressing `w` between polls.
fn block_on<F: Future + Unpin>(w: &LocalWorker, mut f: F) -> F::Output {
    let mut cx = TaskContext::from_waker(Waker::noop());
    for _ in 0..1_000_000 {
        if let Poll::Ready(r) = Pin::new(&mut f).poll(&mut cx) {
            return r;
        }
        w.progress();
    }
    panic!("a future of the local worker never completed");
}

fn recv(w: &LocalWorker, f: LocalFuture<Vec<u8>>) -> (usize, Vec<u8>) {
    let (info, buf) = block_on(w, f).map_err(|e| e.error).expect("receive");
    (info.length, buf)
}

#[test]
fn tag_messages_arrive_with_their_bytes_and_buffers_come_back() {
    let (w, ep) = worker();
    for size in [0usize, 1, 8, 4000, 300_000] {
        let data: Vec<u8> = (0..size).map(|i| (i * 7 + size) as u8).collect();
        let rx = w
            .tag_recv(vec![0u8; size], 5, u64::MAX)
            .expect("post receive");
        let tx = w.tag_send(ep, data.clone(), 5).expect("post send");
        let (len, buf) = recv(&w, rx);
        assert_eq!((len, &buf[..]), (size, &data[..]), "{size} B");
        let (_, back) = block_on(&w, tx).map_err(|e| e.error).expect("send");
        assert_eq!(back, data, "the send's buffer comes back whole");
    }
    block_on(&w, w.flush()).expect("flush");
}

#[test]
fn a_dropped_receive_is_canceled_and_the_next_one_matches() {
    let (w, ep) = worker();
    let first = w.tag_recv(vec![0u8; 16], 3, u64::MAX).expect("post");
    drop(first);
    let second = w.tag_recv(vec![0u8; 16], 3, u64::MAX).expect("post");
    let _sent = w.tag_send(ep, b"after the drop".to_vec(), 3).expect("send");
    let (len, buf) = recv(&w, second);
    assert_eq!(&buf[..len], b"after the drop");
}

#[test]
fn a_dropped_send_runs_on_with_its_buffer() {
    let (w, ep) = worker();
    let size = 1 << 20;
    let data: Vec<u8> = (0..size).map(|i| (i % 251) as u8).collect();
    // Large enough for a rendezvous: the send is in flight when dropped.
    let tx = w.tag_send(ep, data.clone(), 8).expect("send");
    drop(tx);
    let rx = w.tag_recv(vec![0u8; size], 8, u64::MAX).expect("receive");
    let (len, buf) = recv(&w, rx);
    assert_eq!(len, size);
    assert!(buf == data, "the dropped send's bytes arrived intact");
}

#[test]
fn a_failed_receive_gives_its_buffer_back_with_the_error() {
    let (w, ep) = worker();
    let rx = w.tag_recv(vec![9u8; 4], 2, u64::MAX).expect("post");
    let _sent = w.tag_send(ep, vec![1u8; 64], 2).expect("send");
    match block_on(&w, rx) {
        Err(e) => {
            assert!(matches!(e.error, Error::Truncated { .. }), "{}", e.error);
            assert_eq!(e.buf.len(), 4);
        }
        Ok(_) => panic!("a 64-byte message fit a 4-byte buffer"),
    }
}

#[test]
fn a_future_dropped_inside_with_is_disposed_of_later() {
    let (w, ep) = worker();
    let rx = w.tag_recv(vec![0u8; 8], 4, u64::MAX).expect("post");
    // The worker is borrowed while the future drops.
    w.with(|_| drop(rx));
    let next = w.tag_recv(vec![0u8; 8], 4, u64::MAX).expect("post");
    let _sent = w.tag_send(ep, b"12345678".to_vec(), 4).expect("send");
    let (len, buf) = recv(&w, next);
    assert_eq!(
        &buf[..len],
        b"12345678",
        "the orphaned receive was canceled"
    );
    assert_eq!(w.progress(), 0);
}

#[test]
fn a_post_from_inside_with_is_an_error_not_a_panic() {
    let (w, ep) = worker();
    let (send, connect) = w.with(|_| {
        (
            w.tag_send(ep, vec![1u8; 4], 1).map(drop),
            w.connect(&[1, 2]),
        )
    });
    for r in [send, connect.map(drop)] {
        match r {
            Err(Error::InvalidParam(why)) => {
                assert!(why.contains("inside its own `with`"), "{why}")
            }
            other => panic!("{other:?}"),
        }
    }
    assert_eq!(w.progress(), 0, "nothing was posted");
}
