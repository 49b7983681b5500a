//! A local worker's operations beyond messages, awaited from tokio tasks
//! on a `LocalSet` with `LocalDriver`s progressing both sides: a
//! listener's accepts and `connect_to` (and a refused one), streams read
//! whole, atomics that post and that fetch (old values and the target's
//! memory checked), endpoint and worker flushes, and endpoint close.

mod async_common;
mod common;

use async_common::{closed_port, current, within};
use common::{context_vars, pattern};
use rucx::ucp::local::tokio::spawn_local;
use rucx::ucp::{Access, AtomicOp, AtomicValue, CloseMode, Ep, EpParams, LocalWorker};
use tokio::task::LocalSet;

/// A server and a client worker of `ctx`, each driven, connected through
/// the server's listener: (server, client, client's endpoint, server's).
async fn connected(ctx: &rucx::Context) -> (LocalWorker, LocalWorker, Ep, Ep) {
    let s = ctx.create_worker().expect("worker").into_local();
    let c = ctx.create_worker().expect("worker").into_local();
    spawn_local(&s);
    spawn_local(&c);
    let lis = s
        .listen("127.0.0.1:0".parse().expect("addr"))
        .expect("listen");
    let at = lis.addr().expect("addr");
    let (cep, sep) = within(30, async {
        tokio::join!(
            c.connect_to(at, EpParams::default()),
            lis.accept(EpParams::default())
        )
    })
    .await;
    (s, c, cep.expect("connect_to"), sep.expect("accept"))
}

/// `size`-byte tag messages both ways over a fresh connection.
async fn round_trip(a: &LocalWorker, ab: Ep, b: &LocalWorker, ba: Ep, size: usize) {
    for (from, ep, to, tag) in [(a, ab, b, 1u64), (b, ba, a, 2)] {
        let rx = to.tag_recv(vec![0u8; size], tag, u64::MAX).expect("post");
        let data = pattern(size, tag);
        from.tag_send(ep, data.clone(), tag)
            .expect("post")
            .await
            .map_err(|e| e.error)
            .expect("send");
        let (info, got) = within(30, rx).await.map_err(|e| e.error).expect("recv");
        assert_eq!(info.length, size);
        assert!(got == data, "{size} B tag {tag}: bytes differ");
    }
}

async fn listen_connect_close(tls: &str) {
    let ctx = context_vars(&[("RUCX_TLS", tls)]);
    let (s, c, cep, sep) = connected(&ctx).await;
    round_trip(&c, cep, &s, sep, 8).await;
    round_trip(&c, cep, &s, sep, 100_000).await;
    // Streams, read whole.
    let rx = s.stream_recv_all(sep, vec![0u8; 70_003]).expect("post");
    let sent = pattern(70_003, 9);
    c.stream_send(cep, sent.clone())
        .expect("post")
        .await
        .map_err(|e| e.error)
        .expect("stream send");
    let (info, got) = within(30, rx).await.map_err(|e| e.error).expect("recv");
    assert_eq!(info.length, sent.len());
    assert!(got == sent, "stream bytes differ");
    within(30, c.ep_flush(cep)).await.expect("ep flush");
    within(30, c.flush()).await.expect("flush");
    within(30, c.ep_close(cep, CloseMode::Flush))
        .await
        .expect("close");
    // A closed endpoint takes no more sends.
    let after = c.tag_send(cep, vec![1u8; 8], 1);
    let failed = match after {
        Err(_) => true,
        Ok(f) => f.await.is_err(),
    };
    assert!(failed, "a send on a closed endpoint succeeded");
    // A second close of it fails at once; it does not hang.
    assert!(within(30, c.ep_close(cep, CloseMode::Flush)).await.is_err());
}

#[test]
fn listen_connect_close_tcp() {
    LocalSet::new().block_on(&current(), listen_connect_close("tcp"));
}

#[test]
fn listen_connect_close_shm() {
    LocalSet::new().block_on(&current(), listen_connect_close("shm,tcp"));
}

/// A connect to a port nobody listens on fails; it does not hang.
#[test]
fn connect_to_nobody_fails() {
    LocalSet::new().block_on(&current(), async {
        let ctx = context_vars(&[("RUCX_TLS", "tcp")]);
        let c = ctx.create_worker().expect("worker").into_local();
        spawn_local(&c);
        let r = within(60, c.connect_to(closed_port(), EpParams::default())).await;
        assert!(r.is_err(), "connected to a closed port");
    });
}

/// Posted and fetching atomics on a word of the server's memory, from the
/// client; the server only runs its driver.
async fn atomics(tls: &str) {
    let ctx = context_vars(&[("RUCX_TLS", tls)]);
    let (_s, c, cep, _sep) = connected(&ctx).await;
    let mem = ctx
        .mem_alloc(
            64,
            Access::REMOTE_READ | Access::REMOTE_WRITE | Access::REMOTE_ATOMIC,
        )
        .expect("mem_alloc");
    mem.write(0, &100u64.to_le_bytes()).expect("write");
    let packed = mem.rkey_pack().expect("pack");
    let rkey = c.with(|w| w.rkey_unpack(cep, &packed)).expect("unpack");
    let word = mem.addr();
    let mut want = 100u64;
    for k in 1..=20u64 {
        c.atomic_post(cep, AtomicOp::Add, AtomicValue::U64(k), word, &rkey)
            .expect("post")
            .await
            .map_err(|e| e.error)
            .expect("atomic add");
        want += k;
        let (_, old) = within(
            30,
            c.atomic_fetch(cep, AtomicOp::Add, AtomicValue::U64(1), 0, word, &rkey)
                .expect("post"),
        )
        .await
        .map_err(|e| e.error)
        .expect("fetch add");
        assert_eq!(old.value(), want, "fetch add {k}: old value");
        want += 1;
    }
    // A compare and swap that matches, then one that does not.
    let (_, old) = within(
        30,
        c.atomic_fetch(cep, AtomicOp::Cswap, AtomicValue::U64(7), want, word, &rkey)
            .expect("post"),
    )
    .await
    .map_err(|e| e.error)
    .expect("cswap");
    assert_eq!(old.value(), want);
    let (_, old) = within(
        30,
        c.atomic_fetch(cep, AtomicOp::Cswap, AtomicValue::U64(9), 1, word, &rkey)
            .expect("post"),
    )
    .await
    .map_err(|e| e.error)
    .expect("cswap");
    assert_eq!(old.value(), 7, "a failed compare leaves the word");
    within(30, c.ep_flush(cep)).await.expect("ep flush");
    let mut at = [0u8; 8];
    mem.read(0, &mut at).expect("read");
    assert_eq!(u64::from_le_bytes(at), 7);
}

#[test]
fn atomics_tcp() {
    LocalSet::new().block_on(&current(), atomics("tcp"));
}

#[test]
fn atomics_shm() {
    LocalSet::new().block_on(&current(), atomics("shm,tcp"));
}
