//! The operations of a shared worker awaited from tokio tasks, with the
//! driver progressing both sides: client–server connection
//! (`listen`, `accept`, `connect_to`), streams, active messages (sent
//! with `am_send`, received by a handler that feeds a channel), put, get
//! and flush, endpoint close; and the driver's own rules (one per worker,
//! ends with the worker, stops when aborted).

mod async_common;
mod common;

use async_common::{closed_port, connected, current, driven, err, multi, within};
use common::{context_vars, pattern};
use rucx::ucp::tokio as rt;
use rucx::ucp::{Access, AmParams, CloseMode, EpParams};
use std::time::Duration;

async fn connect_listen_accept(tls: &str) {
    let ctx = context_vars(&[("RUCX_TLS", tls)]);
    let (s, c, cep, sep) = connected(&ctx).await;
    // Both directions carry tagged messages.
    let n = within(30, async_common::ping_pong(&c, cep, &s, sep, 1, 100, 20)).await;
    assert_eq!(n, 20);
    let n = within(30, async_common::ping_pong(&s, sep, &c, cep, 3, 50_000, 5)).await;
    assert_eq!(n, 5);
    // A second client while the first stays connected.
    let lis = s
        .listen("127.0.0.1:0".parse().expect("addr"))
        .expect("listen");
    let at = lis.addr().expect("addr");
    let (c2, _) = driven(&ctx);
    let (e2, s2) = within(30, async {
        tokio::join!(
            c2.connect_to(at, EpParams::default()),
            lis.accept(EpParams::default())
        )
    })
    .await;
    let (e2, s2) = (e2.expect("connect_to"), s2.expect("accept"));
    let n = within(30, async_common::ping_pong(&c2, e2, &s, s2, 5, 8, 10)).await;
    assert_eq!(n, 10);
    within(30, c2.ep_close(e2, CloseMode::Flush))
        .await
        .expect("close");
    within(30, c.ep_close(cep, CloseMode::Flush))
        .await
        .expect("close");
}

#[test]
fn connect_listen_accept_tcp() {
    current().block_on(connect_listen_accept("tcp"));
}

#[test]
fn connect_listen_accept_shm() {
    multi().block_on(connect_listen_accept("shm,tcp"));
}

/// A connect to a port nobody listens on fails; it does not hang.
#[test]
fn connect_to_nobody_fails() {
    current().block_on(async {
        let ctx = context_vars(&[("RUCX_TLS", "tcp")]);
        let (c, _) = driven(&ctx);
        let r = within(60, c.connect_to(closed_port(), EpParams::default())).await;
        assert!(r.is_err(), "connected to a closed port");
    });
}

async fn streams(tls: &str) {
    let ctx = context_vars(&[("RUCX_TLS", tls)]);
    let (s, c, cep, sep) = connected(&ctx).await;
    let sizes = [1usize, 7, 1000, 70_000, 3];
    let total: usize = sizes.iter().sum();
    let recv = {
        let s = s.clone();
        tokio::spawn(async move {
            let (info, buf) = s
                .stream_recv_all(sep, vec![0u8; total])
                .expect("post")
                .await
                .map_err(err)
                .expect("stream recv");
            assert_eq!(info.length, total);
            buf
        })
    };
    let mut sent = Vec::new();
    for (i, &n) in sizes.iter().enumerate() {
        let b = pattern(n, i as u64);
        sent.extend_from_slice(&b);
        c.stream_send(cep, b)
            .expect("post")
            .await
            .map_err(err)
            .expect("stream send");
    }
    let got = within(30, recv).await.expect("task");
    assert!(got == sent, "stream bytes differ");
    // stream_recv takes what is there (at least one byte).
    c.stream_send(cep, b"xyz".to_vec())
        .expect("post")
        .await
        .map_err(err)
        .expect("send");
    let mut have = Vec::new();
    while have.len() < 3 {
        let (info, b) = within(30, s.stream_recv(sep, vec![0u8; 16]).expect("post"))
            .await
            .map_err(err)
            .expect("recv");
        assert!(info.length >= 1);
        have.extend_from_slice(&b[..info.length]);
    }
    assert_eq!(have, b"xyz");
}

#[test]
fn streams_tcp() {
    current().block_on(streams("tcp"));
}

#[test]
fn streams_shm() {
    multi().block_on(streams("shm,tcp"));
}

async fn active_messages(tls: &str) {
    let ctx = context_vars(&[("RUCX_TLS", tls)]);
    let (s, c, cep, _sep) = connected(&ctx).await;
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    s.with(|w| {
        w.am_set_handler(7, move |_, msg| {
            let _ = tx.send((
                msg.header().to_vec(),
                msg.reply_ep().is_some(),
                msg.into_data(),
            ));
        })
    });
    let (atx, mut arx) = tokio::sync::mpsc::unbounded_channel();
    c.with(|w| {
        w.am_set_handler(8, move |_, msg| {
            let _ = atx.send(msg.into_data());
        })
    });
    for i in 0..20u64 {
        let data = pattern(100 + 37 * i as usize, i);
        c.am_send(
            cep,
            7,
            &i.to_le_bytes(),
            data.clone(),
            AmParams::new().eager().reply(),
        )
        .expect("post")
        .await
        .map_err(err)
        .expect("am send");
        let (hdr, reply, got) = within(30, rx.recv()).await.expect("message");
        assert_eq!(hdr, i.to_le_bytes());
        assert!(reply, "asked for a reply endpoint");
        assert!(got == data, "message {i}: wrong data");
    }
    // Answers from the server's side, sent from a task of its own.
    let sends = {
        let s = s.clone();
        tokio::spawn(async move {
            for i in 0..10u64 {
                let sep = _sep;
                s.am_send(sep, 8, &[], pattern(64, 100 + i), AmParams::new())
                    .expect("post")
                    .await
                    .map_err(err)
                    .expect("answer");
            }
        })
    };
    for i in 0..10u64 {
        let got = within(30, arx.recv()).await.expect("answer");
        assert!(got == pattern(64, 100 + i), "answer {i}");
    }
    sends.await.expect("task");
}

#[test]
fn active_messages_tcp() {
    current().block_on(active_messages("tcp"));
}

#[test]
fn active_messages_shm() {
    multi().block_on(active_messages("shm,tcp"));
}

/// Put into the server's memory, flush, get it back, from the client;
/// the server only runs its driver (tcp emulates one-sided operations
/// with active messages its driver answers).
async fn put_get_flush(tls: &str) {
    let ctx = context_vars(&[("RUCX_TLS", tls)]);
    let (s, c, cep, _sep) = connected(&ctx).await;
    let len = 256 * 1024;
    let mem = ctx
        .mem_alloc(len, Access::REMOTE_READ | Access::REMOTE_WRITE)
        .expect("mem_alloc");
    let packed = mem.rkey_pack().expect("pack");
    let rkey = c.with(|w| w.rkey_unpack(cep, &packed)).expect("unpack");
    let mut want = vec![0u8; len];
    for (i, (off, n)) in [(0usize, 8usize), (100, 4000), (8192, 200_000)]
        .into_iter()
        .enumerate()
    {
        let data = pattern(n, 7 + i as u64);
        want[off..off + n].copy_from_slice(&data);
        c.put(cep, data, mem.addr() + off as u64, &rkey)
            .expect("post put")
            .await
            .map_err(err)
            .expect("put");
    }
    within(30, c.ep_flush(cep)).await.expect("ep flush");
    within(30, c.flush()).await.expect("flush");
    let mut at_server = vec![0u8; len];
    mem.read(0, &mut at_server).expect("read");
    assert!(at_server == want, "put bytes differ at the target");
    let (info, got) = within(
        30,
        c.get(cep, vec![0u8; 210_000], mem.addr() + 50, &rkey)
            .expect("post get"),
    )
    .await
    .map_err(err)
    .expect("get");
    assert_eq!(info.length, 210_000);
    assert!(got[..] == want[50..50 + 210_000], "get bytes differ");
    drop(s);
}

#[test]
fn put_get_flush_tcp() {
    current().block_on(put_get_flush("tcp"));
}

#[test]
fn put_get_flush_shm() {
    multi().block_on(put_get_flush("shm,tcp"));
}

/// A second driver of one worker is refused; the first ends once the
/// worker's handles are gone; an aborted driver can be replaced.
#[test]
fn driver_rules() {
    current().block_on(async {
        let ctx = context_vars(&[("RUCX_TLS", "self")]);
        let w = ctx.create_worker().expect("worker").into_shared();
        let first = rt::spawn(&w);
        tokio::time::sleep(Duration::from_millis(20)).await;
        let second = within(5, rt::drive(w.clone())).await;
        assert!(second.is_err(), "a second driver ran");
        first.abort();
        assert!(first.await.is_err_and(|e| e.is_cancelled()));
        // The aborted driver released the worker: a new one drives it.
        let third = rt::spawn(&w);
        let ep = w.connect(&w.address()).expect("connect");
        let rx = w.tag_recv(vec![0u8; 4], 1, u64::MAX).expect("post");
        w.tag_send(ep, b"ping".to_vec(), 1)
            .expect("post")
            .await
            .map_err(err)
            .expect("send");
        let (_, got) = within(10, rx).await.map_err(err).expect("recv");
        assert_eq!(got, b"ping");
        drop(w);
        within(5, third).await.expect("task").expect("driver");
    });
}
