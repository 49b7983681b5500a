//! A target killed while one-sided operations it must execute are in
//! flight: the initiator's requests end with an error (no hang, no write
//! into the local buffer afterwards), over shared memory and over TCP.
//!
//! The test binary starts itself again as the target (see `common`).

mod common;

use common::*;
use rucx::{Access, Op, Posted, TAG_MASK_ALL};
use std::io::{BufRead, BufReader};
use std::time::{Duration, Instant};

const INFO: u64 = 1;
const STOP: u64 = 2;

/// Target side: maps memory of its own (so operations on it are executed
/// here, not through a mapping), tells the parent how to reach it, then
/// stops progressing and waits to be killed.
#[test]
fn rma_target() {
    if !is_child() {
        return;
    }
    let ctx = context(&std::env::var("RUCX_TEST_TLS").expect("tls"));
    let mut w = ctx.create_worker().expect("worker");
    let parent = unhex(&std::env::var("RUCX_TEST_PEER").expect("peer address"));
    let ep = w.connect(&parent).expect("connect");
    let mut backing = vec![0u64; 1 << 14];
    // SAFETY: `backing` is never dropped (the process is killed) and only
    // reached through the map.
    let m = unsafe { ctx.mem_map(backing.as_mut_ptr().cast(), 1 << 17, Access::REMOTE_READ) }
        .expect("mem_map");
    let (addr, key) = (w.address(), m.rkey_pack().expect("pack"));
    let mut info = Vec::new();
    for part in [&addr[..], &key[..]] {
        info.extend_from_slice(&(part.len() as u32).to_le_bytes());
        info.extend_from_slice(part);
    }
    info.extend_from_slice(&m.addr().to_le_bytes());
    w.tag_send_blocking(ep, &info, INFO).expect("send info");
    let mut stop = [0u8; 1];
    w.tag_recv_blocking(&mut stop, STOP, TAG_MASK_ALL)
        .expect("stop");
    println!("stopped");
    sleep_until_killed();
}

fn target_killed(tls: &str) {
    let ctx = context(tls);
    let mut w = ctx.create_worker().expect("worker");
    let mut child = spawn_child(
        "rma_target",
        &[
            ("RUCX_TEST_TLS", tls.to_string()),
            ("RUCX_TEST_PEER", hex(&w.address())),
        ],
    );
    let out = child.0.stdout.take().expect("stdout");
    let (tx, stopped) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for l in BufReader::new(out).lines().map_while(|l| l.ok()) {
            if l.trim().ends_with("stopped") {
                let _ = tx.send(());
            }
        }
    });
    let mut info = vec![0u8; 1 << 16];
    let n = w
        .tag_recv_blocking(&mut info, INFO, TAG_MASK_ALL)
        .expect("info")
        .length;
    let take = |at: &mut usize| {
        let len = u32::from_le_bytes(info[*at..*at + 4].try_into().unwrap()) as usize;
        *at += 4 + len;
        info[*at - len..*at].to_vec()
    };
    let mut at = 0;
    let (addr, key) = (take(&mut at), take(&mut at));
    let maddr = u64::from_le_bytes(info[at..n].try_into().unwrap());
    let ep = w.connect(&addr).expect("connect to the target");
    let rkey = w.rkey_unpack(ep, &key).expect("rkey");
    w.tag_send_blocking(ep, &[0], STOP).expect("stop");
    stopped
        .recv_timeout(Duration::from_secs(30))
        .expect("target stopped");

    // A read the stopped target would have to execute.
    let mut buf = vec![0xaau8; 1 << 17];
    // SAFETY: `buf` outlives the request, which ends below (the loop
    // waits for its result).
    let p = unsafe { w.get_raw(ep, buf.as_mut_ptr(), buf.len(), maddr, &rkey, Op::new()) }
        .expect("get");
    let Posted::InFlight(id) = p else {
        panic!("{tls}: the get finished without the target");
    };
    child.kill().expect("kill");
    let t = Instant::now();
    let r = loop {
        if let Some(r) = w.request_test(id) {
            break r;
        }
        assert!(
            t.elapsed() < Duration::from_secs(30),
            "{tls}: the get hangs after the kill"
        );
        w.progress();
    };
    assert!(r.is_err(), "{tls}: a get from a killed target succeeded");
    println!(
        "{tls}: get failed {:?} after the kill: {}",
        t.elapsed(),
        r.unwrap_err()
    );
    // The target never answered (it had stopped progressing), and nothing
    // writes the buffer after the failure.
    for _ in 0..1000 {
        w.progress();
    }
    assert!(
        buf.iter().all(|&b| b == 0xaa),
        "{tls}: the buffer was written"
    );
}

#[test]
fn target_killed_mid_get_over_posix() {
    if is_child() {
        return;
    }
    target_killed("posix");
}

#[test]
fn target_killed_mid_get_over_tcp() {
    if is_child() {
        return;
    }
    target_killed("tcp");
}
