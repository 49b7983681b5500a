//! A small workload of the tokio driver and a shared worker's futures
//! over the in-process `self` transport, small enough for Miri, which
//! checks the unsafe code of owned buffers, requests and the driver
//! (Miri emulates eventfd and epoll; it has no sockets or shared memory,
//! so other transports cannot run under it):
//!
//! ```sh
//! MIRIFLAGS=-Zmiri-disable-isolation cargo +nightly miri test --features tokio --test async_miri
//! ```
//!
//! It also runs as an ordinary test.

use rucx::ucp::uct::{self_tl, Registry};
use rucx::ucp::{tokio as driver, Context};
use std::future::Future;
use std::pin::Pin;
use std::task::Poll;

/// Sends and receives on worker `w` (shared or local) to itself over
/// `ep`, `n` times: a receive dropped after one poll or never polled, a
/// send whose future is dropped or awaited, every byte checked.
macro_rules! workload {
    ($w:ident, $ep:expr, $n:expr) => {
        for i in 0..$n {
            let len = [1usize, 40, 3000][i % 3];
            let msg: Vec<u8> = (0..len).map(|k| (k + i) as u8).collect();
            // A receive dropped after one poll, or never polled.
            let mut dropped = $w.tag_recv(vec![0u8; len], 1000, u64::MAX).expect("post");
            if i % 2 == 0 {
                let _ = std::future::poll_fn(|cx| {
                    Poll::Ready(Pin::new(&mut dropped).poll(cx).is_ready())
                })
                .await;
            }
            drop(dropped);
            let rx = $w
                .tag_recv(vec![0u8; len], i as u64, u64::MAX)
                .expect("post");
            let tx = $w.tag_send($ep, msg.clone(), i as u64).expect("post");
            if i % 3 == 0 {
                // The send's future dropped: the message still goes.
                drop(tx);
            } else {
                tx.await.map_err(|e| e.error).expect("send");
            }
            let (info, buf) = rx.await.map_err(|e| e.error).expect("recv");
            assert_eq!(info.length, len);
            assert!(buf == msg, "message {i} differs");
        }
    };
}

#[test]
fn self_transport_futures_and_drops() {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    rt.block_on(async {
        let ctx = Context::from_env(&Registry::new().with(&self_tl::COMPONENT)).expect("context");
        let w = ctx.create_worker().expect("worker").into_shared();
        let d = driver::spawn(&w);
        let ep = w.connect(&w.address()).expect("connect");
        workload!(w, ep, if cfg!(miri) { 6 } else { 200 });
        w.flush().await.expect("flush");
        drop(w);
        d.await.expect("driver task").expect("driver");
    });
}

/// The same workload on a local worker (no lock) and its driver, on a
/// `LocalSet`.
#[test]
fn self_transport_local_futures_and_drops() {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    tokio::task::LocalSet::new().block_on(&rt, async {
        let ctx = Context::from_env(&Registry::new().with(&self_tl::COMPONENT)).expect("context");
        let w = ctx.create_worker().expect("worker").into_local();
        let d = rucx::ucp::local::tokio::spawn_local(&w);
        let ep = w.connect(&w.address()).expect("connect");
        workload!(w, ep, if cfg!(miri) { 6 } else { 200 });
        w.flush().await.expect("flush");
        drop(w);
        d.await.expect("driver task").expect("driver");
    });
}
