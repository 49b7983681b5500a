//! `SharedWorker` (thread mode multi): many threads on one worker, the
//! progress thread serving one-sided operations while the target's own
//! thread never progresses, futures woken from other threads' progress,
//! and dropped receive futures that cancel without losing later messages.

mod common;

use common::*;
use rucx::ucp::{AtomicOp, AtomicValue, SharedWorker};
use rucx::Access;
use std::future::Future;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::task::{Context as TaskContext, Poll, Wake, Waker};
use std::time::{Duration, Instant};

const THREADS: u64 = 4;

fn shared_pair(tls: &str) -> (rucx::Context, SharedWorker, SharedWorker) {
    let ctx = context(tls);
    let a = ctx.create_worker().expect("worker a").into_shared();
    let b = ctx.create_worker().expect("worker b").into_shared();
    (ctx, a, b)
}

/// Size of thread `t`'s message `i`: small, medium and rendezvous sizes.
fn size(t: u64, i: u64) -> usize {
    [1, 8, 100, 4096, 70_000, 300_000][((t + i) % 6) as usize]
}

/// Four threads send on one worker, four receive on the other, each
/// pair of threads its own tag space; every byte and the order checked.
fn threads_share_workers(tls: &str) {
    let (_ctx, a, b) = shared_pair(tls);
    let ep = a.connect(&b.address()).expect("connect");
    let _back = b.connect(&a.address()).expect("connect back");
    const N: u64 = 60;
    std::thread::scope(|s| {
        for t in 0..THREADS {
            let (a, b) = (&a, &b);
            s.spawn(move || {
                for i in 0..N {
                    let data = pattern(size(t, i), t << 32 | i);
                    let (info, back) = a
                        .tag_send(ep, data.clone(), t << 32 | i)
                        .expect("send")
                        .wait()
                        .expect("send done");
                    assert_eq!((info.length, back), (data.len(), data));
                }
            });
            s.spawn(move || recv_in_order(b, t, N, size));
        }
    });
}

#[test]
fn threads_share_workers_shm() {
    threads_share_workers("shm");
}

#[test]
fn threads_share_workers_tcp() {
    threads_share_workers("tcp");
}

#[test]
fn threads_share_workers_rc_iwarp() {
    threads_share_workers("rc_iwarp");
}

/// The target maps memory and starts its progress thread; its own thread
/// then only sleeps. Put, get and atomics of 1 MiB complete, with the
/// bytes where they belong.
fn busy_target(tls: &str) {
    let (ctx, a, b) = shared_pair(tls);
    b.start_progress_thread().expect("progress thread");
    assert!(b.has_progress_thread());
    let ep = a.connect(&b.address()).expect("connect");
    const LEN: usize = 1 << 20;
    let mut backing = vec![0u64; LEN / 8 + 1];
    let access = Access::REMOTE_READ | Access::REMOTE_WRITE | Access::REMOTE_ATOMIC;
    // SAFETY: `backing` outlives the map (dropped below, before it) and is
    // only read through the map while mapped.
    let map = unsafe { ctx.mem_map(backing.as_mut_ptr().cast(), LEN + 8, access) }.expect("map");
    let rkey = a
        .with(|w| w.rkey_unpack(ep, &map.rkey_pack().expect("pack")))
        .expect("unpack");
    let done = AtomicBool::new(false);
    std::thread::scope(|s| {
        // The target's application thread: computes, never progresses.
        s.spawn(|| {
            let start = Instant::now();
            while !done.load(Ordering::Acquire) {
                assert!(start.elapsed() < Duration::from_secs(60), "initiator hung");
                std::hint::black_box((0..1000u64).sum::<u64>());
            }
        });
        let data = pattern(LEN, 7);
        let base = map.addr();
        a.put(ep, data.clone(), base, &rkey)
            .expect("put")
            .wait()
            .expect("put done");
        let (_, got) = a
            .get(ep, vec![0u8; LEN], base, &rkey)
            .expect("get")
            .wait()
            .expect("get done");
        assert!(got == data, "get returns what put wrote");
        let word = base + LEN as u64;
        for k in 0..3u64 {
            let (_, old) = a
                .atomic_fetch(ep, AtomicOp::Add, AtomicValue::U64(5), 0, word, &rkey)
                .expect("fadd")
                .wait()
                .expect("fadd done");
            assert_eq!(old.value(), 5 * k);
        }
        a.flush().wait().expect("flush");
        done.store(true, Ordering::Release);
    });
    let mut check = vec![0u8; LEN];
    map.read(0, &mut check).expect("read");
    assert!(check == pattern(LEN, 7), "target memory holds the put");
    assert_eq!(map.load_u64(LEN).expect("word"), 15);
    drop(map);
}

#[test]
fn busy_target_tcp() {
    busy_target("tcp");
}

#[test]
fn busy_target_rc_iwarp() {
    busy_target("rc_iwarp");
}

/// A waker that counts its wakes.
struct Count(std::sync::atomic::AtomicUsize);

impl Wake for Count {
    fn wake(self: Arc<Self>) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }
}

/// A receive future polled once is woken by another thread's progress
/// when its message arrives, and is then ready.
#[test]
fn future_woken_by_other_progress() {
    let (_ctx, a, b) = shared_pair("tcp");
    let ep = a.connect(&b.address()).expect("connect");
    let count = Arc::new(Count(Default::default()));
    let waker = Waker::from(Arc::clone(&count));
    let mut cx = TaskContext::from_waker(&waker);
    let mut fut = b.tag_recv(vec![0u8; 64], 3, u64::MAX).expect("recv");
    assert!(std::pin::Pin::new(&mut fut).poll(&mut cx).is_pending());
    a.tag_send(ep, b"woken".to_vec(), 3)
        .expect("send")
        .wait()
        .expect("sent");
    // Another thread progresses the workers until the waker fires.
    let (a2, b2) = (a.clone(), b.clone());
    let c2 = Arc::clone(&count);
    std::thread::spawn(move || {
        let start = Instant::now();
        while c2.0.load(Ordering::SeqCst) == 0 {
            assert!(start.elapsed() < Duration::from_secs(30), "never woken");
            // The sender too: its send may wait in its transport for the
            // connection, as UCX's do, until it progresses.
            a2.progress();
            b2.progress();
        }
    })
    .join()
    .expect("progress thread");
    match std::pin::Pin::new(&mut fut).poll(&mut cx) {
        Poll::Ready(Ok((info, buf))) => assert_eq!(&buf[..info.length], b"woken"),
        other => panic!("not ready after the wake: {other:?}"),
    }
}

/// Receives dropped before completion are canceled: the messages sent
/// afterwards go to the receives posted afterwards, intact.
#[test]
fn dropped_receives_cancel() {
    for tls in ["shm", "tcp"] {
        let (_ctx, a, b) = shared_pair(tls);
        let ep = a.connect(&b.address()).expect("connect");
        for i in 0..10 {
            drop(b.tag_recv(vec![0u8; 100_000], i, u64::MAX).expect("recv"));
        }
        let recvs: Vec<_> = (0..10)
            .map(|i| b.tag_recv(vec![0u8; 100_000], i, u64::MAX).expect("recv"))
            .collect();
        let sends: Vec<_> = (0..10)
            .map(|i| a.tag_send(ep, pattern(90_000, i), i).expect("send"))
            .collect();
        let waiter = std::thread::spawn(move || {
            for s in sends {
                s.wait().expect("send done");
            }
        });
        for (i, r) in recvs.into_iter().enumerate() {
            let (info, buf) = r.wait().expect("recv done");
            assert_eq!(info.length, 90_000, "{tls}");
            assert!(buf[..90_000] == pattern(90_000, i as u64)[..], "{tls} {i}");
        }
        waiter.join().expect("sends");
    }
}

/// Dropping the last handle of a worker with a progress thread joins the
/// thread (which sleeps on the event fd: the drop wakes it) and closes
/// the worker; a second start is a no-op.
#[test]
fn progress_thread_ends_with_worker() {
    let (_ctx, a, b) = shared_pair("tcp");
    a.start_progress_thread().expect("start");
    a.start_progress_thread().expect("start twice is fine");
    let ep = b.connect(&a.address()).expect("connect");
    drop(a);
    // The peer learns the worker is gone: its endpoint fails or its
    // sends keep completing into nothing, but nothing hangs here.
    let _ = b.tag_send(ep, vec![1u8; 10], 1).map(|f| f.wait());
}
