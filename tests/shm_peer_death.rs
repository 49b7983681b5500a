//! A peer killed with SIGKILL in the middle of shared-memory traffic
//! (`RUCX_TLS=shm`): the survivor's operations on it fail, its endpoint
//! reports the failure, nothing hangs, no request is left behind, and the
//! survivor takes no signal from the shared mappings of the dead process.
//!
//! * A sender dies after a stream of messages and a rendezvous send:
//!   - `sender_killed_before_rendezvous_read`: default scheme (the
//!     receiver reads with CMA); the receiver was not progressing when the
//!     sender died, so it finds the stream and the rendezvous request in
//!     its FIFO afterwards: the stream arrives whole, and the large
//!     receive fails instead of reading (the dead sender's endpoint is
//!     found failed by then).
//!   - `sender_killed_mid_rendezvous_put`: `put_zcopy` (the sender
//!     writes with CMA); the sender stops before writing, the receiver's
//!     matched receive waits for data until the sender is found dead.
//!   - `sender_killed_before_writing_split_tail`: the default scheme with
//!     the receiver progressing: it reads one half and offers the
//!     other to the sender, which stops before writing it; the receive
//!     waits until the sender is found dead, then fails.
//!   - `unexpected_rendezvous_from_dead_sender`: the rendezvous request
//!     is unexpected when the sender dies; a receive posted afterwards
//!     must not hang.
//! * [`receiver_killed_while_sending`] (and with the receiver's segment in
//!   a file, [`receiver_killed_while_sending_file_segment`]): the sender
//!   keeps streaming and has a rendezvous send waiting for the receiver;
//!   after the kill its FIFO fills, and the endpoint fails within about a
//!   second (peers' processes are checked every 100 ms). The failure
//!   usually comes from `cma`, which watches its peers too;
//!   [`receiver_killed_while_sending_posix_only`] (`RUCX_TLS=posix`)
//!   checks that the FIFO transport finds the dead receiver by itself.
//!   [`receiver_killed_while_a_shared_worker_sends`]: the same for a
//!   `SharedWorker`, whose short sends pass its lock by the endpoint's
//!   own send path.
//!
//! The test binary starts itself again as the peer (see `common`).

mod common;

use common::*;
use rucx::ucp::proto::select::ProtocolId;
use rucx::{Ep, Op, Posted, ReqId, Worker, TAG_MASK_ALL};
use std::collections::VecDeque;
use std::time::{Duration, Instant};

const GO: u64 = 1;
/// The large message the receiver asks for.
const BIG: u64 = 2;
/// A large message the receiver never asks for.
const BIG_UNWANTED: u64 = 3;
/// Set in the tags of stream messages (the rest is the sequence number).
const STREAM: u64 = 1 << 40;
/// Stream messages a stalling sender sends before its large one; with the
/// large message's request they fit in the receiver's FIFO (64 elements).
const STREAM_N: u64 = 40;
/// Size of the large message: far above the rendezvous threshold.
const BIG_LEN: usize = 16 << 20;
/// Sends in flight at most in a stream.
const WINDOW: usize = 64;

/// Size of stream message `seq`: inline, in a descriptor, at the limit.
fn stream_size(seq: u64) -> usize {
    match seq % 10 {
        0 => 8184,
        1..=3 => 113 + (seq as usize * 977) % 8000,
        _ => (seq as usize * 31) % 113,
    }
}

fn shm_vars(scheme: Option<&str>) -> Vec<(&'static str, &str)> {
    let mut v = vec![("RUCX_TLS", "shm")];
    if let Some(s) = scheme {
        v.push(("RUCX_RNDV_SCHEME", s));
    }
    v
}

fn scheme_from_env() -> Option<String> {
    std::env::var("RUCX_TEST_SCHEME").ok()
}

/// Child: sends its address, waits for the go, sends [`STREAM_N`] stream
/// messages and the large one without ever progressing again, says
/// `stalled` and waits to be killed.
#[test]
fn stalling_sender() {
    if !is_child() {
        return;
    }
    let scheme = scheme_from_env();
    let ctx = context_vars(&shm_vars(scheme.as_deref()));
    let mut w = ctx.create_worker().expect("worker");
    let parent = unhex(&std::env::var("RUCX_TEST_PEER").expect("peer address"));
    let ep = w.connect(&parent).expect("connect");
    w.tag_send_blocking(ep, &w.address(), 0)
        .expect("send address");
    let mut go = [0u8; 1];
    w.tag_recv_blocking(&mut go, GO, TAG_MASK_ALL).expect("go");
    for seq in 0..STREAM_N {
        let data = pattern(stream_size(seq), STREAM | seq);
        match w.tag_send(ep, data, STREAM | seq, Op::new()) {
            Ok(Posted::Done(..)) => {}
            Ok(Posted::InFlight(_)) => panic!("stream message {seq} did not fit"),
            Err(e) => panic!("stream message {seq}: {e}"),
        }
    }
    let big = pattern(BIG_LEN, BIG);
    let posted = w.tag_send(ep, big, BIG, Op::new()).expect("post big");
    assert!(
        matches!(posted, Posted::InFlight(_)),
        "big send done at once"
    );
    println!("stalled");
    sleep_until_killed();
}

/// Posts one receive per message of the stalling sender's stream.
fn post_stream(w: &mut Worker) -> Vec<Posted<Vec<u8>>> {
    (0..STREAM_N)
        .map(|seq| {
            w.tag_recv(
                vec![0u8; stream_size(seq)],
                STREAM | seq,
                TAG_MASK_ALL,
                Op::new(),
            )
            .expect("post stream recv")
        })
        .collect()
}

/// Posts the receives of the stalling sender's stream and large message.
fn post_receives(w: &mut Worker) -> (Vec<Posted<Vec<u8>>>, ReqId) {
    let stream = post_stream(w);
    let big = match w
        .tag_recv(vec![0u8; BIG_LEN], BIG, TAG_MASK_ALL, Op::new())
        .expect("post big recv")
    {
        Posted::InFlight(id) => id,
        Posted::Done(..) => panic!("big message there before the go"),
    };
    (stream, big)
}

/// Checks that every stream receive completed with its message.
fn check_stream(w: &mut Worker, stream: Vec<Posted<Vec<u8>>>) {
    for (seq, p) in (0..).zip(stream) {
        let (info, buf) = match p {
            Posted::Done(info, buf) => (info, buf),
            Posted::InFlight(id) => match w.take::<Vec<u8>>(id) {
                Some(Ok(done)) => done,
                Some(Err(e)) => panic!("stream message {seq}: {}", e.error),
                None => panic!("stream message {seq} still in flight"),
            },
        };
        assert_eq!(info.length, stream_size(seq), "stream message {seq}");
        assert!(
            buf == pattern(stream_size(seq), STREAM | seq),
            "stream message {seq} differs"
        );
    }
}

fn all_done(w: &Worker, stream: &[Posted<Vec<u8>>], big: ReqId) -> bool {
    !w.request_is_active(big)
        && stream.iter().all(|p| match p {
            Posted::InFlight(id) => !w.request_is_active(*id),
            Posted::Done(..) => true,
        })
}

/// Progresses until the endpoint reports a failure; returns how long that
/// took.
fn until_ep_failed(w: &mut Worker, ep: Ep, secs: u64) -> Duration {
    let t = Instant::now();
    progress_until(w, secs, |w| w.ep_status(ep).is_err());
    t.elapsed()
}

#[test]
fn sender_killed_before_rendezvous_read() {
    if is_child() {
        return;
    }
    let ctx = context_vars(&shm_vars(None));
    let mut w = ctx.create_worker().expect("worker");
    let env = [("RUCX_TEST_PEER", hex(&w.address()))];
    let mut child = spawn_child("stalling_sender", &env);
    let stalled = watch_stdout(&mut child, "stalled");
    let ep = accept_peer(&mut w);
    let (stream, big) = post_receives(&mut w);
    w.tag_send_blocking(ep, &[1], GO).expect("go");
    // No progress here: everything the sender sends waits in our FIFO.
    stalled
        .recv_timeout(Duration::from_secs(30))
        .expect("child stalled");
    child.kill().expect("kill child");
    child.wait().expect("reap child");
    let t = Instant::now();
    progress_until(&mut w, 20, |w| all_done(w, &stream, big));
    println!("receives done {:?} after the kill", t.elapsed());
    let r = w.take::<Vec<u8>>(big).expect("big result");
    assert!(r.is_err(), "read from a killed sender succeeded");
    println!("big receive: {}", r.err().map(|e| e.error).expect("error"));
    // What the sender published before it died arrives whole.
    check_stream(&mut w, stream);
    let took = until_ep_failed(&mut w, ep, 10);
    println!("endpoint failed {took:?} later: {:?}", w.ep_status(ep));
    assert_eq!(w.requests_outstanding(), 0, "requests leaked");
}

#[test]
fn sender_killed_mid_rendezvous_put() {
    killed_before_writing("put_zcopy", ProtocolId::RndvPutZcopy);
}

#[test]
fn sender_killed_before_writing_split_tail() {
    killed_before_writing("auto", ProtocolId::RndvGetZcopy);
}

/// The sender stalls before it writes what `scheme` has it write (all of
/// the message, or the tail of a split rendezvous by get).
fn killed_before_writing(scheme: &str, proto: ProtocolId) {
    if is_child() {
        return;
    }
    let ctx = context_vars(&shm_vars(Some(scheme)));
    let mut w = ctx.create_worker().expect("worker");
    let env = [
        ("RUCX_TEST_PEER", hex(&w.address())),
        ("RUCX_TEST_SCHEME", scheme.to_string()),
    ];
    let mut child = spawn_child("stalling_sender", &env);
    let stalled = watch_stdout(&mut child, "stalled");
    let ep = accept_peer(&mut w);
    let table = &w.ep_protocols(ep).expect("tables")[0];
    assert_eq!(table.lookup(BIG_LEN).proto, proto, "{table}");
    let (stream, big) = post_receives(&mut w);
    w.tag_send_blocking(ep, &[1], GO).expect("go");
    progress_until(&mut w, 30, |_| stalled.try_recv().is_ok());
    progress_for(&mut w, 300);
    assert!(
        w.request_is_active(big),
        "large receive finished although the sender stalled before writing"
    );
    child.kill().expect("kill child");
    child.wait().expect("reap child");
    let t = Instant::now();
    progress_until(&mut w, 20, |w| all_done(w, &stream, big));
    let took = t.elapsed();
    let r = w.take::<Vec<u8>>(big).expect("big result");
    assert!(r.is_err(), "receive from a killed sender succeeded");
    println!(
        "big receive failed {took:?} after the kill: {}",
        r.err().map(|e| e.error).expect("error")
    );
    assert!(took < Duration::from_secs(5), "failure took {took:?}");
    check_stream(&mut w, stream);
    let took = until_ep_failed(&mut w, ep, 10);
    println!("endpoint failed {took:?} later: {:?}", w.ep_status(ep));
    assert_eq!(w.requests_outstanding(), 0, "requests leaked");
}

#[test]
fn unexpected_rendezvous_from_dead_sender() {
    if is_child() {
        return;
    }
    let ctx = context_vars(&shm_vars(None));
    let mut w = ctx.create_worker().expect("worker");
    let env = [("RUCX_TEST_PEER", hex(&w.address()))];
    let mut child = spawn_child("stalling_sender", &env);
    let stalled = watch_stdout(&mut child, "stalled");
    let ep = accept_peer(&mut w);
    w.tag_send_blocking(ep, &[1], GO).expect("go");
    progress_until(&mut w, 30, |w| {
        w.tag_probe(BIG, TAG_MASK_ALL).is_some() && stalled.try_recv().is_ok()
    });
    child.kill().expect("kill child");
    child.wait().expect("reap child");
    let took = until_ep_failed(&mut w, ep, 10);
    println!(
        "endpoint failed {took:?} after the kill: {:?}",
        w.ep_status(ep)
    );
    // The stream arrived before; it is still there to take.
    let (stream, big) = post_receives_after(&mut w);
    if let Some(big) = big {
        let t = Instant::now();
        progress_until(&mut w, 20, |w| all_done(w, &stream, big));
        let r = w.take::<Vec<u8>>(big).expect("big result");
        assert!(r.is_err(), "read from a killed sender succeeded");
        println!(
            "big receive failed {:?} after posting: {}",
            t.elapsed(),
            r.err().map(|e| e.error).expect("error")
        );
    }
    check_stream(&mut w, stream);
    assert_eq!(w.requests_outstanding(), 0, "requests leaked");
}

/// As [`post_receives`], for messages that may all have arrived; no id
/// for the large receive if posting it failed.
fn post_receives_after(w: &mut Worker) -> (Vec<Posted<Vec<u8>>>, Option<ReqId>) {
    let stream = post_stream(w);
    let big = match w.tag_recv(vec![0u8; BIG_LEN], BIG, TAG_MASK_ALL, Op::new()) {
        Ok(Posted::InFlight(id)) => Some(id),
        Ok(Posted::Done(..)) => panic!("big message read from a dead process at once"),
        // Refused at once: as good as failing later.
        Err(e) => {
            println!("big receive refused: {e}");
            None
        }
    };
    (stream, big)
}

/// Child: sends its address and receives stream messages, [`WINDOW`]
/// receives posted at once, checking each; says `receiving` after the
/// first thousand and goes on until killed.
#[test]
fn draining_receiver() {
    if !is_child() {
        return;
    }
    let ppid = std::os::unix::process::parent_id();
    let tls = std::env::var("RUCX_TEST_TLS").unwrap_or_else(|_| "shm".into());
    let ctx = context_vars(&[("RUCX_TLS", &tls)]);
    let mut w = ctx.create_worker().expect("worker");
    let parent = unhex(&std::env::var("RUCX_TEST_PEER").expect("peer address"));
    let ep = w.connect(&parent).expect("connect");
    w.tag_send_blocking(ep, &w.address(), 0)
        .expect("send address");
    let mut window: VecDeque<Posted<Vec<u8>>> = VecDeque::new();
    let mut seq = 0u64;
    loop {
        while window.len() < WINDOW {
            let p = w
                .tag_recv(vec![0u8; 8192], STREAM, STREAM, Op::new())
                .expect("post recv");
            window.push_back(p);
        }
        w.progress();
        while let Some(front) = window.front_mut() {
            if let Posted::InFlight(id) = *front {
                match w.take::<Vec<u8>>(id) {
                    None => break,
                    Some(Ok((info, buf))) => *front = Posted::Done(info, buf),
                    Some(Err(e)) => panic!("receive {seq}: {}", e.error),
                }
            }
            let Some(Posted::Done(info, buf)) = window.pop_front() else {
                unreachable!("the head is done")
            };
            assert_eq!(info.tag, STREAM | seq, "stream out of order");
            assert!(
                buf[..info.length] == pattern(stream_size(seq), STREAM | seq)[..],
                "stream message {seq} differs"
            );
            seq += 1;
            if seq == 1000 {
                println!("receiving");
            }
        }
        if seq % 1024 == 0 && std::os::unix::process::parent_id() != ppid {
            std::process::exit(3);
        }
    }
}

#[test]
fn receiver_killed_while_sending() {
    if is_child() {
        return;
    }
    receiver_killed("shm", &[]);
}

/// Without `cma`, which also watches its peers: the FIFO transport finds
/// the dead receiver by itself.
#[test]
fn receiver_killed_while_sending_posix_only() {
    if is_child() {
        return;
    }
    receiver_killed("posix", &[]);
}

#[test]
fn receiver_killed_while_sending_file_segment() {
    if is_child() {
        return;
    }
    receiver_killed(
        "shm",
        &[
            ("RUCX_POSIX_BACKEND", "file".to_string()),
            ("RUCX_POSIX_DIR", "/dev/shm".to_string()),
        ],
    );
}

/// A shared worker, whose short sends go by the endpoint's own send path
/// past the worker's lock: after the receiver is killed, its sends fail
/// within seconds as well, and none waits forever.
#[test]
fn receiver_killed_while_a_shared_worker_sends() {
    if is_child() {
        return;
    }
    let ctx = context_vars(&[("RUCX_TLS", "shm")]);
    let mut w = ctx.create_worker().expect("worker");
    let env = vec![
        ("RUCX_TEST_PEER", hex(&w.address())),
        ("RUCX_TEST_TLS", "shm".to_string()),
    ];
    let mut child = spawn_child("draining_receiver", &env);
    let receiving = watch_stdout(&mut child, "receiving");
    let ep = accept_peer(&mut w);
    let w = w.into_shared();
    let mut inflight = VecDeque::new();
    let mut killed_at: Option<Instant> = None;
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut seq = 0u64;
    let mut failed = false;
    while !failed {
        assert!(Instant::now() < deadline, "the endpoint never failed");
        match killed_at {
            Some(t) => assert!(
                t.elapsed() < Duration::from_secs(10),
                "sends still succeed 10 s after the kill"
            ),
            None if receiving.try_recv().is_ok() => {
                child.kill().expect("kill child");
                child.wait().expect("reap child");
                killed_at = Some(Instant::now());
            }
            None => {}
        }
        if inflight.len() < WINDOW {
            let data = pattern(stream_size(seq), STREAM | seq);
            match w.tag_send(ep, data, STREAM | seq) {
                Ok(f) => inflight.push_back(f),
                Err(_) => failed = true,
            }
            seq += 1;
        }
        w.progress();
        while inflight.front_mut().is_some_and(|f| f.is_done()) {
            if let Some(f) = inflight.pop_front() {
                failed |= f.wait().is_err();
            }
        }
    }
    assert!(killed_at.is_some(), "a send failed before the kill");
    assert!(
        w.endpoint_path_sends() > 0,
        "no send took the endpoint's path"
    );
    // What is still in flight ends too.
    let end = Instant::now() + Duration::from_secs(10);
    for mut f in inflight {
        while !f.is_done() {
            assert!(Instant::now() < end, "a send never ended after the kill");
            w.progress();
        }
    }
}

/// The parent streams to a `draining_receiver` over `tls`, kills it, and
/// checks that its sends fail. Over `shm` a rendezvous send the receiver
/// never asks for waits meanwhile, and must fail too.
fn receiver_killed(tls: &str, child_env: &[(&str, String)]) {
    if !std::path::Path::new("/dev/shm").is_dir() && !child_env.is_empty() {
        skip_or_fail("no /dev/shm for the file backend");
        return;
    }
    let ctx = context_vars(&[("RUCX_TLS", tls)]);
    let mut w = ctx.create_worker().expect("worker");
    let mut env = vec![
        ("RUCX_TEST_PEER", hex(&w.address())),
        ("RUCX_TEST_TLS", tls.to_string()),
    ];
    env.extend(child_env.iter().cloned());
    let mut child = spawn_child("draining_receiver", &env);
    let receiving = watch_stdout(&mut child, "receiving");
    let ep = accept_peer(&mut w);
    // A rendezvous send the receiver never asks for: it waits for the
    // receiver until the end.
    let unwanted = (tls == "shm").then(|| {
        match w
            .tag_send(ep, vec![5u8; 4 << 20], BIG_UNWANTED, Op::new())
            .expect("post unwanted")
        {
            Posted::InFlight(id) => id,
            Posted::Done(..) => panic!("rendezvous send done at once"),
        }
    });
    let mut inflight: VecDeque<ReqId> = VecDeque::new();
    let (mut ok, mut failed, mut refused) = (0u64, 0u64, 0u64);
    let mut killed_at: Option<Instant> = None;
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut seq = 0u64;
    // Stream until the endpoint fails after the kill.
    while w.ep_status(ep).is_ok() {
        assert!(Instant::now() < deadline, "endpoint never failed");
        if let Some(t) = killed_at {
            assert!(
                t.elapsed() < Duration::from_secs(10),
                "endpoint still healthy 10 s after the kill ({ok} sends done, {} in flight)",
                inflight.len()
            );
        } else if receiving.try_recv().is_ok() {
            child.kill().expect("kill child");
            child.wait().expect("reap child");
            killed_at = Some(Instant::now());
        }
        if inflight.len() < WINDOW {
            let data = pattern(stream_size(seq), STREAM | seq);
            match w.tag_send(ep, data, STREAM | seq, Op::new()) {
                Ok(Posted::Done(..)) => ok += 1,
                Ok(Posted::InFlight(id)) => inflight.push_back(id),
                Err(_) => refused += 1,
            }
            seq += 1;
        }
        w.progress();
        while let Some(&id) = inflight.front() {
            if w.request_is_active(id) {
                break;
            }
            match w.take::<Vec<u8>>(id).expect("send result") {
                Ok(_) => ok += 1,
                Err(_) => failed += 1,
            }
            inflight.pop_front();
        }
    }
    let killed_at = killed_at.expect("endpoint failed before the kill");
    let took = killed_at.elapsed();
    println!(
        "endpoint failed {took:?} after the kill: {:?}; {seq} sends posted",
        w.ep_status(ep)
    );
    // Everything still in flight fails, and new sends too.
    progress_until(&mut w, 10, |w| {
        unwanted.is_none_or(|id| !w.request_is_active(id))
            && inflight.iter().all(|&id| !w.request_is_active(id))
    });
    for id in inflight {
        match w.take::<Vec<u8>>(id).expect("send result") {
            Ok(_) => ok += 1,
            Err(_) => failed += 1,
        }
    }
    println!("{ok} sends done, {failed} failed, {refused} refused");
    if let Some(id) = unwanted {
        let r = w.take::<Vec<u8>>(id).expect("unwanted result");
        assert!(r.is_err(), "rendezvous send to a killed receiver succeeded");
    }
    match w.tag_send(ep, vec![1u8; 10], STREAM, Op::new()) {
        Err(_) => {}
        Ok(Posted::Done(..)) => panic!("send on a failed endpoint succeeded"),
        Ok(Posted::InFlight(id)) => {
            progress_until(&mut w, 5, |w| !w.request_is_active(id));
            let r = w.take::<Vec<u8>>(id).expect("late send result");
            assert!(r.is_err(), "send on a failed endpoint succeeded");
        }
    }
    assert!(ok >= 1000, "only {ok} sends done before the kill");
    assert!(
        took < Duration::from_secs(3),
        "endpoint failed only {took:?} after the kill"
    );
    assert_eq!(w.requests_outstanding(), 0, "requests leaked");
}
