//! Helpers of the tokio tests (`tests/async_*.rs`): runtimes, driven
//! shared workers, and a checked tag ping-pong.
#![allow(dead_code)]

use rucx::ucp::tokio as rt;
use rucx::ucp::{Ep, OpError, SharedWorker};
use std::future::Future;
use std::time::Duration;

/// A current-thread runtime with I/O and time.
pub(crate) fn current() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime")
}

/// A multi-thread runtime of two threads with I/O and time.
pub(crate) fn multi() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime")
}

/// `f`, failing the test after `secs` seconds.
pub(crate) async fn within<T>(secs: u64, f: impl Future<Output = T>) -> T {
    tokio::time::timeout(Duration::from_secs(secs), f)
        .await
        .unwrap_or_else(|_| panic!("timed out after {secs} s"))
}

/// A shared worker of `ctx` with its driver spawned on the current runtime.
pub(crate) fn driven(
    ctx: &rucx::Context,
) -> (SharedWorker, tokio::task::JoinHandle<rucx::Result<()>>) {
    let w = ctx.create_worker().expect("worker").into_shared();
    let d = rt::spawn(&w);
    (w, d)
}

/// The error of a failed owned operation, without its buffer.
pub(crate) fn err<B>(e: OpError<B>) -> rucx::Error {
    e.error
}

/// `iters` round trips of `size`-byte messages: `a` sends on `ab` with tag
/// `tag`, `b` answers each on `ba` with its bytes reversed; every byte is
/// checked on both sides. Returns the number of round trips checked.
pub(crate) async fn ping_pong(
    a: &SharedWorker,
    ab: Ep,
    b: &SharedWorker,
    ba: Ep,
    tag: u64,
    size: usize,
    iters: usize,
) -> usize {
    let echo = {
        let b = b.clone();
        tokio::spawn(async move { echo(&b, ba, tag, size, iters).await })
    };
    let checked = ping(a, ab, tag, size, iters).await;
    echo.await.expect("echo task");
    checked
}

/// The pinging side of [`ping_pong`].
pub(crate) async fn ping(a: &SharedWorker, ab: Ep, tag: u64, size: usize, iters: usize) -> usize {
    let mut checked = 0;
    for i in 0..iters {
        let msg = crate::common::pattern(size, i as u64);
        // Post the receive of the answer first: it may come back before
        // the send's future is polled again.
        let rx = a
            .tag_recv(vec![0u8; size], tag + 1, u64::MAX)
            .expect("post recv");
        a.tag_send(ab, msg.clone(), tag)
            .expect("post send")
            .await
            .map_err(err)
            .expect("send");
        let (info, got) = rx.await.map_err(err).expect("recv");
        assert_eq!(info.length, size, "round trip {i}");
        let want: Vec<u8> = msg.iter().rev().copied().collect();
        assert!(got == want, "round trip {i}: wrong bytes");
        checked += 1;
    }
    checked
}

/// The answering side of [`ping_pong`].
pub(crate) async fn echo(b: &SharedWorker, ba: Ep, tag: u64, size: usize, iters: usize) {
    for i in 0..iters {
        let (info, mut got) = b
            .tag_recv(vec![0u8; size], tag, u64::MAX)
            .expect("post recv")
            .await
            .map_err(err)
            .expect("recv");
        assert_eq!(info.length, size, "message {i}");
        got.reverse();
        b.tag_send(ba, got, tag + 1)
            .expect("post send")
            .await
            .map_err(err)
            .expect("answer");
    }
}

/// A server worker listening on loopback and a client worker connected
/// to it through the listener; endpoints (client's, server's).
pub(crate) async fn connected(
    ctx: &rucx::Context,
) -> (SharedWorker, SharedWorker, rucx::ucp::Ep, rucx::ucp::Ep) {
    let (s, _) = driven(ctx);
    let (c, _) = driven(ctx);
    let lis = s
        .listen("127.0.0.1:0".parse().expect("addr"))
        .expect("listen");
    let at = lis.addr().expect("listener address");
    let (cep, sep) = within(30, async {
        tokio::join!(
            c.connect_to(at, rucx::ucp::EpParams::default()),
            lis.accept(rucx::ucp::EpParams::default())
        )
    })
    .await;
    (s, c, cep.expect("connect_to"), sep.expect("accept"))
}

/// A loopback address nobody listens on (bound, then closed): a connect
/// to it is refused.
pub(crate) fn closed_port() -> std::net::SocketAddr {
    let sock = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    sock.local_addr().expect("addr")
}
