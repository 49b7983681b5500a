//! Which transports two processes of one host pick by default, and what
//! happens when shared memory cannot be used.
//!
//! * `default_picks_posix_and_cma`: without `RUCX_TLS` (every transport
//!   allowed) the endpoint's active-message lane is `posix/memory`, short
//!   and medium messages go by the FIFO, and rendezvous sizes (4 MiB) by a
//!   CMA read. Both processes' tables must agree. By default the receiver
//!   splits a large rendezvous: it reads one half and the sender
//!   writes the other, so a 4 MiB receive from a sender that does not
//!   progress stays open until the sender progresses again, and then
//!   arrives whole.
//! * `unsplit_read_needs_no_sender_progress`: with
//!   `RUCX_RNDV_SPLIT_THRESH=inf` the read is seen at work alone: the
//!   receiver gets a 4 MiB message while its sender does not progress at
//!   all, which only a one-sided read of the sender's memory can do (the
//!   FIFO and TCP both need the sender to push).
//! * `posix_alone`: `RUCX_TLS=posix` has no `cma` lane and sends 4 MiB
//!   as eager fragments through the FIFO.
//! * `posix_unavailable_falls_back_to_tcp`: with
//!   `RUCX_POSIX_BACKEND=file RUCX_POSIX_DIR=/nonexistent` the posix iface
//!   cannot open; the worker logs why and goes on without it, and the two
//!   processes talk over TCP. (Segment options are read from the
//!   environment when the memory domain opens, so the test runs a child
//!   with them set, which starts its own peer.)
//!
//! The test binary starts itself again as the peers (see `common`).

mod common;

use common::*;
use rucx::ucp::proto::select::{ProtoClass, ProtocolId, SelectionTable};
use rucx::{Context, Ep, Op, Posted, Worker, TAG_MASK_ALL};
use std::io::{BufRead, Write};
use std::time::{Duration, Instant};

/// Variables that would change what the processes select; removed from
/// the children's environment.
const UNSET: &[&str] = &[
    "RUCX_TLS",
    "RUCX_NET_DEVICES",
    "RUCX_RNDV_THRESH",
    "RUCX_RNDV_SCHEME",
    "RUCX_ZCOPY_THRESH",
    "RUCX_BCOPY_THRESH",
    "RUCX_MAX_RNDV_LANES",
    "RUCX_RNDV_SPLIT_THRESH",
    "RUCX_POSIX_BACKEND",
    "RUCX_POSIX_DIR",
    "RUCX_MM_SEG_SIZE",
    "RUCX_MM_FIFO_SIZE",
    "RUCX_MM_FIFO_ELEM_SIZE",
    "RUCX_TEST_RNDV_THRESH",
];

/// Sizes exchanged both ways: inline, descriptor, fragments, rendezvous.
const SIZES: [usize; 7] = [0, 8, 112, 113, 8000, 100_000, 4 << 20];
/// Size of the message the stalled sender sends.
const BIG: usize = 4 << 20;

// Tags: echo request ECHO + i, its answer BACK + i.
const ECHO: u64 = 100;
const BACK: u64 = 200;
const STALLED_SEND: u64 = 300;
const BYE: u64 = 999;
/// Prefix of the child's line with its lanes.
const LANES_LINE: &str = "lanes|";

fn lanes_of(t: &SelectionTable, size: usize) -> Vec<String> {
    t.lookup(size)
        .lanes
        .iter()
        .map(|(i, _)| t.lane_names()[i].clone())
        .collect()
}

/// Child: configured from its environment only. Sends its address and its
/// lanes; sends [`BIG`] bytes and progresses no more until the parent
/// writes a line to its standard input (if `RUCX_TEST_STALL` is set);
/// then echoes [`SIZES`] and waits for the goodbye.
#[test]
fn selection_peer() {
    if !is_child() {
        return;
    }
    let ctx = Context::new().expect("context from the environment");
    let mut w = ctx.create_worker().expect("worker");
    let names: Vec<String> = w.ifaces().map(|i| i.tl_name().to_string()).collect();
    println!("ifaces: {names:?}");
    let parent = unhex(&std::env::var("RUCX_TEST_PEER").expect("peer address"));
    let ep = w.connect(&parent).expect("connect");
    let tables = w.ep_protocols(ep).expect("tables");
    println!("{LANES_LINE}{}", tables[0].lane_names().join(","));
    w.tag_send_blocking(ep, &w.address(), 0)
        .expect("send address");
    if std::env::var("RUCX_TEST_STALL").is_ok() {
        let big = pattern(BIG, STALLED_SEND);
        let id = match w.tag_send(ep, big, STALLED_SEND, Op::new()) {
            Ok(Posted::InFlight(id)) => id,
            Ok(Posted::Done(..)) => panic!("4 MiB sent at once"),
            Err(e) => panic!("stalled send: {e}"),
        };
        println!("posted");
        let mut line = String::new();
        std::io::stdin()
            .lock()
            .read_line(&mut line)
            .expect("read stdin");
        let deadline = Instant::now() + Duration::from_secs(30);
        while w.request_is_active(id) {
            assert!(Instant::now() < deadline, "stalled send never finished");
            w.progress();
        }
        let r = w.take::<Vec<u8>>(id).expect("stalled send result");
        assert!(r.is_ok(), "stalled send failed");
    }
    echo(&mut w, ep);
}

/// Echoes [`SIZES`], then waits for the goodbye.
fn echo(w: &mut Worker, ep: Ep) {
    for (i, &size) in SIZES.iter().enumerate() {
        let mut buf = vec![0u8; size];
        let info = w
            .tag_recv_blocking(&mut buf, ECHO + i as u64, TAG_MASK_ALL)
            .expect("recv");
        assert_eq!(info.length, size);
        assert!(buf == pattern(size, i as u64), "size {size} corrupted");
        w.tag_send_blocking(ep, &buf, BACK + i as u64)
            .expect("echo");
    }
    let mut bye = [0u8; 1];
    w.tag_recv_blocking(&mut bye, BYE, TAG_MASK_ALL)
        .expect("bye");
    assert_eq!(w.requests_outstanding(), 0, "requests leaked");
}

/// Sends [`SIZES`] to the peer and checks the echoes, then says goodbye.
fn exchange(w: &mut Worker, ep: Ep) {
    for (i, &size) in SIZES.iter().enumerate() {
        let out = pattern(size, i as u64);
        let mut back = vec![0u8; size];
        let info = w.scope(|s| {
            let r = s.tag_recv(&mut back, BACK + i as u64, TAG_MASK_ALL);
            let snd = s.tag_send(ep, &out, ECHO + i as u64);
            let (sr, _) = s.wait(snd);
            sr.expect("send");
            let (rr, _) = s.wait(r);
            rr
        });
        let info = info.expect("echo");
        assert_eq!(info.length, size);
        assert!(back == out, "size {size}: echo differs");
    }
    w.tag_send_blocking(ep, &[1], BYE).expect("bye");
}

/// Reads the child's output; returns its lanes line through a channel and
/// signals `want` lines through another.
fn watch_child(
    child: &mut ChildGuard,
    want: &str,
) -> (
    std::sync::mpsc::Receiver<String>,
    std::sync::mpsc::Receiver<()>,
) {
    let out = child.stdout.take().expect("child stdout is piped");
    let (lanes_tx, lanes_rx) = std::sync::mpsc::channel();
    let (want_tx, want_rx) = std::sync::mpsc::channel();
    let want = want.to_string();
    std::thread::spawn(move || {
        for l in std::io::BufReader::new(out).lines() {
            let Ok(l) = l else { break };
            println!("child: {l}");
            if let Some(at) = l.find(LANES_LINE) {
                let _ = lanes_tx.send(l[at + LANES_LINE.len()..].to_string());
            }
            if !want.is_empty() && l.trim().ends_with(want.as_str()) {
                let _ = want_tx.send(());
            }
        }
    });
    (lanes_rx, want_rx)
}

#[test]
fn default_picks_posix_and_cma() {
    stalled_sender(true);
}

#[test]
fn unsplit_read_needs_no_sender_progress() {
    stalled_sender(false);
}

/// A 4 MiB message from a sender that stalls until told to go on: read
/// alone (`split == false`) it arrives meanwhile; split, only after.
fn stalled_sender(split: bool) {
    if is_child() {
        return;
    }
    // Every transport, whatever this process's environment says.
    let vars: &[(&str, &str)] = if split {
        &[]
    } else {
        &[("RUCX_RNDV_SPLIT_THRESH", "inf")]
    };
    let ctx = context_vars(vars);
    let mut w = ctx.create_worker().expect("worker");
    let names: Vec<String> = w.ifaces().map(|i| i.tl_name().to_string()).collect();
    if !names.iter().any(|n| n == "cma") {
        skip_or_fail(&format!("no cma iface here (ifaces {names:?})"));
        return;
    }
    assert!(names.iter().any(|n| n == "posix"), "{names:?}");
    let env = [
        ("RUCX_TEST_PEER", hex(&w.address())),
        ("RUCX_TEST_STALL", "1".to_string()),
        ("RUCX_WARN_UNUSED_ENV_VARS", "n".to_string()),
    ];
    let mut child = spawn_child_with("selection_peer", &env, UNSET, false);
    let (lanes, posted) = watch_child(&mut child, "posted");
    let ep = accept_peer(&mut w);

    let tables = w.ep_protocols(ep).expect("tables");
    let t = &tables[0];
    println!("{t}");
    assert_eq!(t.lane_names(), ["posix/memory", "cma/memory"], "{t}");
    assert_eq!(t.lookup(8).proto, ProtocolId::EagerShort, "{t}");
    for size in [0, 8, 112, 113, 8000] {
        assert_eq!(lanes_of(t, size), ["posix/memory"], "size {size}\n{t}");
    }
    for size in [1 << 20, BIG, 64 << 20] {
        let c = t.lookup(size);
        assert_eq!(c.proto.class(), ProtoClass::Rndv, "size {size}\n{t}");
        assert_eq!(lanes_of(t, size), ["cma/memory"], "size {size}\n{t}");
    }
    let child_lanes = lanes
        .recv_timeout(Duration::from_secs(30))
        .expect("child's lanes");
    assert_eq!(child_lanes, "posix/memory,cma/memory", "child's lanes");

    posted
        .recv_timeout(Duration::from_secs(30))
        .expect("child posted its send");
    let mut stdin = child.stdin.take().expect("child stdin is piped");
    if split {
        // The sender writes the second half once it progresses again.
        let id = match w
            .tag_recv(vec![0u8; BIG], STALLED_SEND, TAG_MASK_ALL, Op::new())
            .expect("post the big receive")
        {
            Posted::InFlight(id) => id,
            Posted::Done(..) => panic!("4 MiB received at once"),
        };
        progress_for(&mut w, 300);
        assert!(
            w.request_is_active(id),
            "a split receive finished while its sender stalled"
        );
        writeln!(stdin, "go on").expect("tell the child to go on");
        progress_until(&mut w, 30, |w| !w.request_is_active(id));
        let (info, big) = w
            .take::<Vec<u8>>(id)
            .expect("big result")
            .expect("receive from the sender");
        assert_eq!(info.length, BIG);
        assert!(big == pattern(BIG, STALLED_SEND), "4 MiB message differs");
    } else {
        // The 4 MiB message arrives while its sender does not progress.
        let mut big = vec![0u8; BIG];
        let t0 = Instant::now();
        let info = w
            .tag_recv_blocking(&mut big, STALLED_SEND, TAG_MASK_ALL)
            .expect("receive from the stalled sender");
        println!("4 MiB read from the stalled sender in {:?}", t0.elapsed());
        assert_eq!(info.length, BIG);
        assert!(big == pattern(BIG, STALLED_SEND), "4 MiB message differs");
        writeln!(stdin, "go on").expect("tell the child to go on");
    }

    exchange(&mut w, ep);
    let status = wait_exit(&mut child, 60);
    assert!(status.success(), "child failed: {status}");
    assert_eq!(w.requests_outstanding(), 0, "requests leaked");
}

#[test]
fn posix_alone() {
    if is_child() {
        return;
    }
    let ctx = context_vars(&[("RUCX_TLS", "posix")]);
    let mut w = ctx.create_worker().expect("worker");
    let env = [
        ("RUCX_TEST_PEER", hex(&w.address())),
        ("RUCX_TLS", "posix".to_string()),
        ("RUCX_WARN_UNUSED_ENV_VARS", "n".to_string()),
    ];
    let mut child = spawn_child_with("selection_peer", &env, UNSET, false);
    let (lanes, _) = watch_child(&mut child, "");
    let ep = accept_peer(&mut w);
    let tables = w.ep_protocols(ep).expect("tables");
    let t = &tables[0];
    println!("{t}");
    assert_eq!(t.lane_names(), ["posix/memory"], "{t}");
    assert_eq!(t.lookup(BIG).proto, ProtocolId::EagerBcopyMulti, "{t}");
    let child_lanes = lanes
        .recv_timeout(Duration::from_secs(30))
        .expect("child's lanes");
    assert_eq!(child_lanes, "posix/memory", "child's lanes");
    exchange(&mut w, ep);
    let status = wait_exit(&mut child, 60);
    assert!(status.success(), "child failed: {status}");
}

/// Child of [`posix_unavailable_falls_back_to_tcp`], with the posix
/// segments pointed at a missing directory: checks that its worker has no
/// posix iface, starts its own peer (which inherits the setting) and
/// exchanges messages with it.
#[test]
fn fallback_parent() {
    if !is_child() || std::env::var("RUCX_TEST_FALLBACK").is_err() {
        return;
    }
    let ctx = Context::new().expect("context");
    let mut w = ctx.create_worker().expect("worker without posix");
    let names: Vec<String> = w.ifaces().map(|i| i.tl_name().to_string()).collect();
    println!("ifaces: {names:?}");
    assert!(
        !names.iter().any(|n| n == "posix"),
        "posix opened: {names:?}"
    );
    if !names.iter().any(|n| n == "tcp") {
        println!("fallback: no tcp iface");
        return;
    }
    let env = [
        ("RUCX_TEST_PEER", hex(&w.address())),
        ("RUCX_WARN_UNUSED_ENV_VARS", "n".to_string()),
    ];
    // The peer inherits RUCX_POSIX_* and this process's standard error.
    let mut child = spawn_child_with("selection_peer", &env, &["RUCX_TEST_FALLBACK"], false);
    let (lanes, _) = watch_child(&mut child, "");
    let ep = accept_peer(&mut w);
    let tables = w.ep_protocols(ep).expect("tables");
    let t = &tables[0];
    println!("{t}");
    assert!(t.lane_names()[0].starts_with("tcp/"), "{t}");
    assert!(
        t.lane_names().iter().all(|l| l.starts_with("tcp/")),
        "a lane other than tcp: {t}"
    );
    let child_lanes = lanes
        .recv_timeout(Duration::from_secs(30))
        .expect("child's lanes");
    assert!(
        child_lanes.starts_with("tcp/"),
        "child's lanes {child_lanes}"
    );
    exchange(&mut w, ep);
    let status = wait_exit(&mut child, 60);
    assert!(status.success(), "peer failed: {status}");
    println!("fallback: exchanged over {}", t.lane_names()[0]);
}

#[test]
fn posix_unavailable_falls_back_to_tcp() {
    if is_child() {
        return;
    }
    let env = [
        ("RUCX_TEST_FALLBACK", "1".to_string()),
        ("RUCX_POSIX_BACKEND", "file".to_string()),
        ("RUCX_POSIX_DIR", "/nonexistent".to_string()),
        ("RUCX_LOG_LEVEL", "warn".to_string()),
        ("RUCX_WARN_UNUSED_ENV_VARS", "n".to_string()),
    ];
    let unset: Vec<&str> = UNSET
        .iter()
        .copied()
        .filter(|v| !v.starts_with("RUCX_POSIX_"))
        .chain(["RUCX_LOG_FILE"])
        .collect();
    let mut child = spawn_child_with("fallback_parent", &env, &unset, true);
    let out = child.stdout.take().expect("child stdout is piped");
    let report = std::thread::spawn(move || {
        let mut lines = Vec::new();
        for l in std::io::BufReader::new(out).lines() {
            let Ok(l) = l else { break };
            println!("child: {l}");
            lines.push(l);
        }
        lines
    });
    let err = child.stderr.take().expect("child stderr is piped");
    let log = std::thread::spawn(move || {
        let mut lines = Vec::new();
        for l in std::io::BufReader::new(err).lines() {
            let Ok(l) = l else { break };
            eprintln!("child stderr: {l}");
            lines.push(l);
        }
        lines
    });
    let status = wait_exit(&mut child, 120);
    let log = log.join().expect("child stderr");
    let out = report.join().expect("child stdout");
    assert!(status.success(), "fallback child failed: {status}");
    if out.iter().any(|l| l.contains("fallback: no tcp iface")) {
        skip_or_fail("no tcp iface to fall back to");
        return;
    }
    assert!(
        out.iter()
            .any(|l| l.contains("fallback: exchanged over tcp/")),
        "the fallback child did not exchange messages"
    );
    // Both processes say why posix is missing, naming the directory and
    // the ways out.
    let warnings: Vec<&String> = log
        .iter()
        .filter(|l| l.contains("cannot open posix/memory"))
        .collect();
    assert!(
        warnings.len() >= 2,
        "expected a warning from each process:\n{}",
        log.join("\n")
    );
    for w in warnings {
        assert!(
            w.contains("/nonexistent") && w.contains("RUCX_POSIX_DIR"),
            "unclear warning: {w}"
        );
    }
}
