//! Local workers (`LocalWorker`, one thread, no lock) awaited from tokio
//! tasks on a `LocalSet`, with `LocalDriver` progressing them: ping-pongs
//! over shared memory and tcp with every byte checked; a receive whose
//! message comes from another thread while the driver sleeps on the event
//! fd; a post made while the driver sleeps; the driver's end; active
//! messages sent and received as futures.

mod async_common;
mod common;

use async_common::{current, within};
use common::context_vars;
use rucx::ucp::local::tokio::{spawn_local, LocalDriver};
use rucx::ucp::{Ep, LocalWorker};
use std::time::Duration;
use tokio::task::LocalSet;

/// `iters` round trips of `size`-byte messages from `a` to `b` and back
/// (answered with the bytes reversed), checked on both sides.
async fn ping_pong(a: &LocalWorker, ab: Ep, b: &LocalWorker, ba: Ep, size: usize, iters: usize) {
    let echo = {
        let b = b.clone();
        tokio::task::spawn_local(async move {
            let mut buf = vec![0u8; size];
            for _ in 0..iters {
                let (info, mut got) = b
                    .tag_recv(buf, 11, u64::MAX)
                    .expect("post receive")
                    .await
                    .map_err(|e| e.error)
                    .expect("receive");
                assert_eq!(info.length, size);
                got.reverse();
                buf = b
                    .tag_send(ba, got, 12)
                    .expect("post send")
                    .await
                    .map_err(|e| e.error)
                    .expect("send")
                    .1;
            }
        })
    };
    for i in 0..iters {
        let msg: Vec<u8> = (0..size).map(|k| (k + i * 3) as u8).collect();
        let rx = a.tag_recv(vec![0u8; size], 12, u64::MAX).expect("post");
        let _sent = a.tag_send(ab, msg.clone(), 11).expect("send").await;
        let (_, got) = rx.await.map_err(|e| e.error).expect("reply");
        assert!(got.iter().eq(msg.iter().rev()), "round trip {i}, {size} B");
    }
    echo.await.expect("echo task");
}

fn in_process(tls: &str, sizes: &[usize], iters: usize) {
    let ctx = context_vars(&[("RUCX_TLS", tls)]);
    LocalSet::new().block_on(&current(), async {
        let a = ctx.create_worker().expect("worker").into_local();
        let b = ctx.create_worker().expect("worker").into_local();
        let (da, db) = (spawn_local(&a), spawn_local(&b));
        let ab = a.connect(&b.address()).expect("connect a->b");
        let ba = b.connect(&a.address()).expect("connect b->a");
        for &size in sizes {
            within(60, ping_pong(&a, ab, &b, ba, size, iters)).await;
        }
        within(30, a.flush()).await.expect("flush a");
        drop((a, b));
        // The drivers end once the workers' handles are gone.
        within(5, da).await.expect("driver task").expect("driver a");
        within(5, db).await.expect("driver task").expect("driver b");
    });
}

#[test]
fn shm_ping_pong_on_a_local_set() {
    in_process("shm", &[8, 4096, 200_000], 200);
}

#[test]
fn tcp_ping_pong_on_a_local_set() {
    in_process("tcp", &[8, 65536, 300_000], 50);
}

/// The receive waits while the driver sleeps (no spin): the message, sent
/// later by a thread of its own, wakes it through the event fd.
#[test]
fn a_message_from_another_thread_wakes_the_sleeping_driver() {
    for tls in ["shm", "tcp"] {
        let ctx = context_vars(&[("RUCX_TLS", tls)]);
        let w = ctx.create_worker().expect("worker").into_local();
        let addr = w.address();
        let sender = std::thread::spawn({
            let ctx = ctx.clone();
            move || {
                let mut s = ctx.create_worker().expect("worker");
                let ep = s.connect(&addr).expect("connect");
                std::thread::sleep(Duration::from_millis(200));
                s.tag_send_blocking(ep, b"late news", 21).expect("send");
                s.flush().expect("flush");
            }
        });
        LocalSet::new().block_on(&current(), async {
            let d = tokio::task::spawn_local(
                LocalDriver::new(&w)
                    .spin(Duration::ZERO)
                    .poll_spin(Duration::ZERO)
                    .run(),
            );
            let (info, buf) = within(10, w.tag_recv(vec![0u8; 32], 21, u64::MAX).expect("post"))
                .await
                .map_err(|e| e.error)
                .expect("receive");
            assert_eq!(&buf[..info.length], b"late news", "{tls}");
            drop(w);
            within(5, d).await.expect("driver task").expect("driver");
        });
        sender.join().expect("sender");
    }
}

/// A task posts while the driver sleeps (no spin): the driver wakes (the
/// transport signals the event fd of the armed worker, and the post kicks
/// the driver), and its progress completes the self-addressed message the
/// other task awaits.
#[test]
fn a_post_while_the_driver_sleeps_is_progressed() {
    let ctx = context_vars(&[("RUCX_TLS", "shm")]);
    LocalSet::new().block_on(&current(), async {
        let w = ctx.create_worker().expect("worker").into_local();
        let ep = w.connect(&w.address()).expect("connect");
        let d = tokio::task::spawn_local(
            LocalDriver::new(&w)
                .spin(Duration::ZERO)
                .poll_spin(Duration::ZERO)
                .run(),
        );
        let rx = w.tag_recv(vec![0u8; 8], 31, u64::MAX).expect("post");
        let sender = {
            let w = w.clone();
            tokio::task::spawn_local(async move {
                // Long enough for the driver to arm and sleep.
                tokio::time::sleep(Duration::from_millis(100)).await;
                w.tag_send(ep, b"wake up!".to_vec(), 31)
                    .expect("post")
                    .await
                    .map_err(|e| e.error)
                    .expect("send");
            })
        };
        let (_, buf) = within(5, rx).await.map_err(|e| e.error).expect("receive");
        assert_eq!(&buf, b"wake up!");
        sender.await.expect("sender task");
        drop(w);
        within(5, d).await.expect("driver task").expect("driver");
    });
}

/// Active messages between local workers: eager ones with a header and a
/// reply endpoint, answered from the task that took them, and rendezvous
/// ones fetched with `am_recv_data`; every byte checked.
fn active_messages(tls: &str) {
    let ctx = context_vars(&[("RUCX_TLS", tls)]);
    LocalSet::new().block_on(&current(), async {
        let a = ctx.create_worker().expect("worker").into_local();
        let b = ctx.create_worker().expect("worker").into_local();
        let (da, db) = (spawn_local(&a), spawn_local(&b));
        let ab = a.connect(&b.address()).expect("connect a->b");
        let (requests, answers) = (b.am_receiver(5), a.am_receiver(6));
        assert_eq!((requests.id(), answers.id()), (5, 6));
        let server = {
            let b = b.clone();
            tokio::task::spawn_local(async move {
                for i in 0..12u64 {
                    let m = within(30, requests.recv()).await;
                    assert_eq!(m.header(), i.to_le_bytes(), "order");
                    let reply = m.reply_ep().expect("a reply endpoint");
                    let len = m.data_len();
                    assert_eq!(m.is_rndv(), i % 4 == 3);
                    let (_, data) = b
                        .am_recv_data(m, vec![0u8; len])
                        .expect("post the data's receive")
                        .await
                        .map_err(|e| e.error)
                        .expect("the data");
                    assert!(data == common::pattern(len, i), "message {i}");
                    b.am_send(
                        reply,
                        6,
                        &[],
                        (len as u64).to_le_bytes().to_vec(),
                        Default::default(),
                    )
                    .expect("post the answer")
                    .await
                    .map_err(|e| e.error)
                    .expect("the answer");
                }
            })
        };
        for i in 0..12u64 {
            let (len, p) = match i % 4 {
                3 => (300_000, rucx::ucp::AmParams::new().rndv().reply()),
                _ => (
                    100 + 50 * i as usize,
                    rucx::ucp::AmParams::new().eager().reply(),
                ),
            };
            let sent = a
                .am_send(ab, 5, &i.to_le_bytes(), common::pattern(len, i), p)
                .expect("post");
            within(30, sent).await.map_err(|e| e.error).expect("send");
            let got = within(30, answers.recv()).await;
            assert_eq!(got.data(), (len as u64).to_le_bytes(), "answer {i}");
        }
        within(30, server).await.expect("server task");
        assert!(answers.try_recv().is_none());
        within(30, a.flush()).await.expect("flush a");
        drop((a, b, answers));
        within(5, da).await.expect("driver task").expect("driver a");
        within(5, db).await.expect("driver task").expect("driver b");
    });
}

#[test]
fn shm_active_messages_on_a_local_set() {
    active_messages("shm");
}

#[test]
fn tcp_active_messages_on_a_local_set() {
    active_messages("tcp");
}
