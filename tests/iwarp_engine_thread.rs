//! `RUCX_IWARP_THREAD=y` under the protocol layer: a target process whose
//! worker (a plain `Worker`, no progress thread) stops progressing after
//! setup still serves a peer's 1 MiB puts, gets and flushes over
//! `rc_iwarp`, as a target with an RDMA NIC would; its memory holds what
//! was put.
//!
//! The parent is the initiator; the child (this test binary started
//! again, with the variable set) the target. The child progresses until
//! the parent's warm-up made the lanes, then computes until told to stop.
//! Each phase prints its bandwidth (for comparison; not asserted).

mod common;

use common::*;
use rucx::Access;
use std::io::{BufRead, Write};
use std::sync::mpsc;
use std::time::{Duration, Instant};

const LEN: usize = 1 << 20;
const SEED: u64 = 0x1ea7;
const ROUNDS: usize = 8;
const TEST: &str = "a_computing_target_serves_puts_and_gets_with_the_engine_thread";

/// Lines of this process's standard input, read on a thread.
fn stdin_lines() -> mpsc::Receiver<String> {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for l in std::io::stdin().lock().lines() {
            let Ok(l) = l else { break };
            if tx.send(l).is_err() {
                break;
            }
        }
    });
    rx
}

/// The child: maps a buffer, sends its address and key to the parent,
/// progresses until `busy`, then computes (never progressing) until
/// `done`, and checks the buffer.
fn target() {
    let ctx = context("rc_iwarp");
    let mut w = ctx.create_worker().expect("worker");
    let mut backing = vec![0u8; LEN];
    // SAFETY: `backing` outlives the map (dropped at the end, after it);
    // this thread reads it only through the map.
    let map = unsafe {
        ctx.mem_map(
            backing.as_mut_ptr(),
            LEN,
            Access::REMOTE_READ | Access::REMOTE_WRITE,
        )
    }
    .expect("map");
    let parent = unhex(&std::env::var("RUCX_TEST_PARENT").expect("parent address"));
    let ep = w.connect(&parent).expect("connect");
    w.tag_send_blocking(ep, &w.address(), 0).expect("address");
    let mut key = map.rkey_pack().expect("pack");
    key.extend_from_slice(&map.addr().to_le_bytes());
    w.tag_send_blocking(ep, &key, 1).expect("key");
    let lines = stdin_lines();
    let deadline = Instant::now() + Duration::from_secs(120);
    while lines.try_recv().is_err() {
        assert!(Instant::now() < deadline, "no word from the parent");
        w.progress();
    }
    println!("busy");
    let mut x = 1u64;
    while lines.try_recv().is_err() {
        assert!(Instant::now() < deadline, "no word from the parent");
        for _ in 0..4096 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
        }
        std::hint::black_box(x);
    }
    let mut check = vec![0u8; LEN];
    map.read(0, &mut check).expect("read");
    assert!(
        check == pattern(LEN, SEED),
        "the target's memory holds the put"
    );
    println!("memory checked");
    drop(map);
    drop(backing);
}

/// `ROUNDS` of a 1 MiB put, a flush and a get of it back; the MB/s of
/// the puts and the gets.
fn rounds(w: &mut rucx::Worker, ep: rucx::Ep, base: u64, rkey: &rucx::Rkey) -> (f64, f64) {
    let data = pattern(LEN, SEED);
    let mut back = vec![0u8; LEN];
    let (mut put, mut get) = (Duration::ZERO, Duration::ZERO);
    for _ in 0..ROUNDS {
        let t = Instant::now();
        w.put_blocking(ep, &data, base, rkey).expect("put");
        w.flush().expect("flush");
        put += t.elapsed();
        back.fill(0);
        let t = Instant::now();
        w.get_blocking(ep, &mut back, base, rkey).expect("get");
        get += t.elapsed();
        assert!(back == data, "get returns what put wrote");
    }
    let mbs = |d: Duration| (ROUNDS * LEN) as f64 / d.as_secs_f64() / 1e6;
    (mbs(put), mbs(get))
}

#[test]
fn a_computing_target_serves_puts_and_gets_with_the_engine_thread() {
    if is_child() {
        return target();
    }
    let ctx = context("rc_iwarp");
    let mut w = ctx.create_worker().expect("worker");
    let mut child = spawn_child_with(
        TEST,
        &[
            ("RUCX_TEST_PARENT", hex(&w.address())),
            ("RUCX_TLS", "rc_iwarp".into()),
            ("RUCX_IWARP_THREAD", "y".into()),
        ],
        &[],
        false,
    );
    let busy = watch_stdout(&mut child, "busy");
    let ep = accept_peer(&mut w);
    let mut key = vec![0u8; 4096];
    let info = w.tag_recv_blocking(&mut key, 1, u64::MAX).expect("key");
    let (packed, at) = key[..info.length].split_at(info.length - 8);
    let base = u64::from_le_bytes(at.try_into().expect("8 bytes"));
    let rkey = w.rkey_unpack(ep, packed).expect("unpack");
    // With the target progressing: also connects the lanes.
    let (put, get) = rounds(&mut w, ep, base, &rkey);
    println!("progressing target: put {put:.0} MB/s, get {get:.0} MB/s");
    let stdin = child.stdin.as_mut().expect("child stdin is piped");
    stdin.write_all(b"busy\n").expect("tell the child");
    stdin.flush().expect("flush");
    busy.recv_timeout(Duration::from_secs(30))
        .expect("the child computes");
    // On a thread: without the engine thread these would wait forever,
    // and the test must fail instead.
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let r = rounds(&mut w, ep, base, &rkey);
        let _ = tx.send(r);
        w
    });
    let (put, get) = rx
        .recv_timeout(Duration::from_secs(60))
        .expect("puts and gets complete while the target computes");
    println!("computing target, engine thread: put {put:.0} MB/s, get {get:.0} MB/s");
    let stdin = child.stdin.as_mut().expect("child stdin is piped");
    stdin.write_all(b"done\n").expect("tell the child");
    stdin.flush().expect("flush");
    let st = wait_exit(&mut child, 60);
    assert!(st.success(), "child: {st}");
}
