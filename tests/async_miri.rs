//! A small workload of a shared and a local worker's futures over the
//! in-process `self` transport, small enough for Miri, which checks the
//! unsafe code of owned buffers and requests (Miri has no sockets or
//! shared memory, so other transports cannot run under it, and emulates
//! only edge-triggered epoll registrations: under it every operation
//! completes within its own future's polls, and the tokio driver, whose
//! sleep is a level-triggered registration, is spawned but never gets
//! that far):
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
/// send whose future is dropped or awaited, every byte checked; then `n`
/// active messages through a receiver.
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
        // Active messages through a receiver: eager and rendezvous, the
        // data fetched into a buffer or (every fourth) dropped unfetched.
        // (A block: the receiver holds a handle of the worker, whose
        // driver ends once every handle is gone.)
        {
            let ams = $w.am_receiver(9);
            for i in 0..$n {
                // Not under Miri: a rendezvous takes more than one poll, so
                // the task yields to the driver, whose level-triggered epoll
                // registration Miri does not emulate.
                let rndv = !cfg!(miri) && i % 2 == 1;
                let len = if rndv { 5000 } else { 30 + i };
                let msg: Vec<u8> = (0..len).map(|k| (k * 3 + i) as u8).collect();
                let p = match rndv {
                    true => rucx::AmParams::new().rndv(),
                    false => rucx::AmParams::new().eager(),
                };
                let tx = $w
                    .am_send($ep, 9, &[i as u8], msg.clone(), p)
                    .expect("post");
                let m = ams.recv().await;
                assert_eq!(
                    (m.header(), m.data_len(), m.is_rndv()),
                    (&[i as u8][..], len, rndv)
                );
                if i % 4 == 3 {
                    // Its data is discarded; the send still completes.
                    drop(m);
                } else {
                    let (_, got) = $w
                        .am_recv_data(m, vec![0u8; len])
                        .expect("post")
                        .await
                        .map_err(|e| e.error)
                        .expect("data");
                    assert!(got == msg, "active message {i} differs");
                }
                tx.await.map_err(|e| e.error).expect("am send");
            }
            assert!(ams.try_recv().is_none());
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
