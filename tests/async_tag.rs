//! Tag ping-pong on shared workers awaited from tokio tasks, with the
//! driver (`rucx::ucp::tokio`) progressing them: over shared memory and
//! tcp, between two workers of one process and between two processes, on
//! current-thread and multi-thread runtimes.

mod async_common;
mod common;

use async_common::{current, driven, multi, ping, ping_pong, within};
use common::{context_vars, hex, is_child, spawn_child, unhex, ChildGuard};
use std::io::BufRead;

/// Two driven workers of one context limited to `tls`, connected both
/// ways; `size`-byte ping-pongs of `iters` round trips.
async fn in_process(tls: &str, sizes: &[usize], iters: usize) {
    let ctx = context_vars(&[("RUCX_TLS", tls)]);
    let (a, da) = driven(&ctx);
    let (b, db) = driven(&ctx);
    let ab = a.connect(&b.address()).expect("connect a->b");
    let ba = b.connect(&a.address()).expect("connect b->a");
    for (k, &size) in sizes.iter().enumerate() {
        let n = within(60, ping_pong(&a, ab, &b, ba, 10 * k as u64, size, iters)).await;
        assert_eq!(n, iters, "{tls}, {size} B");
    }
    within(30, a.flush()).await.expect("flush a");
    drop((a, b));
    // The drivers end once the workers' handles are gone.
    within(5, da).await.expect("driver task").expect("driver a");
    within(5, db).await.expect("driver task").expect("driver b");
}

#[test]
fn shm_in_process_current_thread() {
    current().block_on(in_process("shm", &[8, 4096, 200_000], 200));
}

#[test]
fn shm_in_process_multi_thread() {
    multi().block_on(in_process("shm", &[8, 4096, 200_000], 200));
}

#[test]
fn tcp_in_process_current_thread() {
    current().block_on(in_process("tcp", &[8, 65536, 300_000], 50));
}

#[test]
fn tcp_in_process_multi_thread() {
    multi().block_on(in_process("tcp", &[8, 65536, 300_000], 50));
}

/// Sizes of the two-process ping-pongs: eager and rendezvous.
const SIZES: [usize; 3] = [8, 8192, 300_000];
const ITERS: usize = 100;

/// Child side: connects to the parent's worker, sends its own address
/// (tag 0), answers the ping-pongs.
#[test]
fn child_echo() {
    if !is_child() {
        return;
    }
    let tls = std::env::var("RUCX_TEST_TLS").expect("tls");
    let parent = unhex(&std::env::var("RUCX_TEST_ADDR").expect("addr"));
    current().block_on(async {
        let ctx = context_vars(&[("RUCX_TLS", &tls)]);
        let (w, _d) = driven(&ctx);
        let ep = w.connect(&parent).expect("connect");
        w.tag_send(ep, w.address(), 0)
            .expect("post")
            .await
            .map_err(async_common::err)
            .expect("send address");
        for (k, &size) in SIZES.iter().enumerate() {
            within(
                60,
                async_common::echo(&w, ep, 100 + 10 * k as u64, size, ITERS),
            )
            .await;
        }
        within(30, w.flush()).await.expect("flush");
        println!("child done");
    });
}

fn two_processes(tls: &str) {
    let rt = current();
    rt.block_on(async {
        let ctx = context_vars(&[("RUCX_TLS", tls)]);
        let (w, _d) = driven(&ctx);
        let mut child: ChildGuard = spawn_child(
            "child_echo",
            &[
                ("RUCX_TEST_TLS", tls.to_string()),
                ("RUCX_TEST_ADDR", hex(&w.address())),
            ],
        );
        let (info, mut addr) = within(30, async {
            w.tag_recv(vec![0u8; 4096], 0, u64::MAX)
                .expect("post")
                .await
        })
        .await
        .map_err(async_common::err)
        .expect("child's address");
        addr.truncate(info.length);
        let ep = w.connect(&addr).expect("connect back");
        for (k, &size) in SIZES.iter().enumerate() {
            let n = within(60, ping(&w, ep, 100 + 10 * k as u64, size, ITERS)).await;
            assert_eq!(n, ITERS, "{tls}, {size} B");
        }
        let out = child.stdout.take().expect("stdout");
        let lines: Vec<String> = std::io::BufReader::new(out)
            .lines()
            .map_while(Result::ok)
            .collect();
        let st = child.wait().expect("wait child");
        assert!(st.success(), "child failed: {st}\n{}", lines.join("\n"));
        assert!(
            lines.iter().any(|l| l.ends_with("child done")),
            "{}",
            lines.join("\n")
        );
    });
}

#[test]
fn shm_two_processes() {
    if is_child() {
        return;
    }
    two_processes("shm");
}

#[test]
fn tcp_two_processes() {
    if is_child() {
        return;
    }
    two_processes("tcp");
}
