//! A peer killed (`kill -9`) while both sides have operations of every
//! kind in flight toward each other: tag sends and receives (eager and
//! rendezvous), stream sends and receives, active messages (eager and
//! rendezvous) and one-sided puts and gets. On the survivor, every request
//! ends (those that needed the peer with an error), the endpoint's error
//! handler runs once, later operations fail at once, and nothing hangs;
//! over tcp, posix+cma and rc_iwarp, with the kill-to-handler time
//! printed.
//!
//! The test binary starts itself again as the peer (see `common`).

mod common;

use common::*;
use rucx::ucp::{EpParams, ErrMode};
use rucx::{Access, AmMsg, AmParams, Op, Posted, ReqId, Worker, TAG_MASK_ALL};
use std::io::{BufRead, BufReader};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

const INFO: u64 = 1;
const BIG: usize = 4 << 20;
const WIN: usize = 1 << 20;

fn ctx(tls: &str) -> rucx::Context {
    context_vars(&[
        ("RUCX_TLS", tls),
        // Long enough that a side busy filling its buffers on a loaded
        // machine is not taken for dead before the kill.
        ("RUCX_KEEPALIVE_INTERVAL", "1s"),
        ("RUCX_KEEPALIVE_MISSES", "3"),
    ])
}

type Failed = Arc<Mutex<Vec<(Instant, String)>>>;

fn peer_mode(failed: &Failed) -> EpParams {
    let f = Arc::clone(failed);
    EpParams::new()
        .err_mode(ErrMode::Peer)
        .on_error(move |_, _, e| f.lock().unwrap().push((Instant::now(), e.to_string())))
}

/// Both sides: an endpoint to the other, a window of memory mapped for
/// the other's puts and gets, and its key and address sent over.
struct Side {
    w: Worker,
    ep: rucx::Ep,
    failed: Failed,
    kept: Arc<Mutex<Vec<AmMsg>>>,
    _window: rucx::MemMap,
}

fn info_of(w: &Worker, m: &rucx::MemMap) -> Vec<u8> {
    let mut out = Vec::new();
    for part in [&w.address()[..], &m.rkey_pack().expect("pack")[..]] {
        out.extend_from_slice(&(part.len() as u32).to_le_bytes());
        out.extend_from_slice(part);
    }
    out.extend_from_slice(&m.addr().to_le_bytes());
    out
}

fn parse_info(info: &[u8]) -> (Vec<u8>, Vec<u8>, u64) {
    let mut at = 0;
    let mut take = || {
        let len = u32::from_le_bytes(info[at..at + 4].try_into().unwrap()) as usize;
        at += 4 + len;
        info[at - len..at].to_vec()
    };
    let (addr, key) = (take(), take());
    (
        addr,
        key,
        u64::from_le_bytes(info[at..at + 8].try_into().unwrap()),
    )
}

impl Side {
    /// A worker with a mapped window and a handler that keeps every
    /// active message unfetched (a rendezvous one then waits for data).
    fn open(ctx: &rucx::Context) -> (Worker, rucx::MemMap, Arc<Mutex<Vec<AmMsg>>>) {
        let mut w = ctx.create_worker().expect("worker");
        let backing: &'static mut [u8] = Box::leak(vec![0u8; WIN].into_boxed_slice());
        // SAFETY: leaked, so valid for the process; reached only through
        // the map.
        let window = unsafe {
            ctx.mem_map(
                backing.as_mut_ptr(),
                WIN,
                Access::REMOTE_READ | Access::REMOTE_WRITE,
            )
        }
        .expect("mem_map");
        let kept: Arc<Mutex<Vec<AmMsg>>> = Arc::default();
        let k = Arc::clone(&kept);
        w.am_set_handler(3, move |_, m| k.lock().unwrap().push(m));
        (w, window, kept)
    }

    /// Connects `w` to the peer at `addr` in peer error mode.
    fn connect(
        (mut w, window, kept): (Worker, rucx::MemMap, Arc<Mutex<Vec<AmMsg>>>),
        addr: &[u8],
    ) -> Side {
        let failed = Failed::default();
        let ep = w.connect_with(addr, peer_mode(&failed)).expect("connect");
        Side {
            w,
            ep,
            failed,
            kept,
            _window: window,
        }
    }

    /// Posts operations of every kind toward the peer (addressed by its
    /// info); returns them. The buffers are leaked: a request may still
    /// hold them when its process dies.
    fn post_everything(
        &mut self,
        key: &[u8],
        raddr: u64,
        tags: (u64, u64),
    ) -> Vec<(&'static str, ReqId)> {
        let (w, ep) = (&mut self.w, self.ep);
        let rkey = w.rkey_unpack(ep, key).expect("rkey");
        let mut ids = Vec::new();
        let mut keep = |what: &'static str, p: Posted<Vec<u8>>| {
            if let Posted::InFlight(id) = p {
                ids.push((what, id));
            }
        };
        keep(
            "big tag send",
            w.tag_send(ep, pattern(BIG, 1), tags.0, Op::new())
                .expect("big send"),
        );
        keep(
            "small tag send",
            w.tag_send(ep, pattern(100, 2), tags.0 + 1, Op::new())
                .expect("small send"),
        );
        keep(
            "tag recv",
            w.tag_recv(vec![0; BIG], tags.1, TAG_MASK_ALL, Op::new())
                .expect("recv"),
        );
        keep(
            "unsent tag recv",
            w.tag_recv(vec![0; 64], tags.1 + 7, TAG_MASK_ALL, Op::new())
                .expect("never sent"),
        );
        keep(
            "stream send",
            w.stream_send(ep, pattern(BIG, 3), Op::new())
                .expect("stream send"),
        );
        keep(
            "stream recv",
            w.stream_recv_all(ep, vec![0; 2 * BIG], Op::new())
                .expect("stream recv"),
        );
        keep(
            "rndv am",
            w.am_send_owned(
                ep,
                3,
                b"h",
                pattern(BIG, 4),
                AmParams::new().rndv(),
                Op::new(),
            )
            .expect("am"),
        );
        keep(
            "eager am",
            w.am_send_owned(
                ep,
                3,
                b"h",
                pattern(64, 5),
                AmParams::new().eager(),
                Op::new(),
            )
            .expect("am"),
        );
        for i in 0..4u64 {
            let src: &'static [u8] = Box::leak(pattern(WIN / 4, 6 + i).into_boxed_slice());
            let dst: &'static mut [u8] = Box::leak(vec![0u8; WIN / 4].into_boxed_slice());
            let at = raddr + i * (WIN as u64 / 4);
            // SAFETY: both buffers are leaked, valid for the process.
            let p = unsafe { w.put_raw(ep, src.as_ptr(), src.len(), at, &rkey, Op::new()) };
            if let Ok(Posted::InFlight(id)) = p {
                ids.push(("put", id));
            }
            // SAFETY: as above.
            let g = unsafe { w.get_raw(ep, dst.as_mut_ptr(), dst.len(), at, &rkey, Op::new()) };
            if let Ok(Posted::InFlight(id)) = g {
                ids.push(("get", id));
            }
        }
        ids
    }
}

/// The peer: connects to the parent, swaps window keys, posts everything
/// toward the parent, says so and progresses until it is killed.
#[test]
fn busy_peer() {
    if !is_child() {
        return;
    }
    let tls = std::env::var("RUCX_TEST_TLS").expect("tls");
    let ctx = ctx(&tls);
    let (paddr, pkey, praddr) = parse_info(&unhex(&std::env::var("RUCX_TEST_PEER").expect("peer")));
    let opened = Side::open(&ctx);
    let info = info_of(&opened.0, &opened.1);
    let mut me = Side::connect(opened, &paddr);
    me.w.tag_send_blocking(me.ep, &info, INFO).expect("info");
    let _ids = me.post_everything(&pkey, praddr, (20, 10));
    for _ in 0..20_000 {
        me.w.progress();
    }
    println!("busy");
    let ppid = std::os::unix::process::parent_id();
    loop {
        for _ in 0..10_000 {
            me.w.progress();
        }
        if std::os::unix::process::parent_id() != ppid {
            std::process::exit(3);
        }
    }
}

fn killed_with_everything_in_flight(tls: &str) {
    let ctx = ctx(tls);
    let opened = Side::open(&ctx);
    let info = info_of(&opened.0, &opened.1);
    let (mut w, window, kept) = opened;
    let mut child = spawn_child(
        "busy_peer",
        &[
            ("RUCX_TEST_TLS", tls.to_string()),
            ("RUCX_TEST_PEER", hex(&info)),
        ],
    );
    let out = child.0.stdout.take().expect("stdout");
    let (tx, busy) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for l in BufReader::new(out).lines().map_while(|l| l.ok()) {
            if l.trim().ends_with("busy") {
                let _ = tx.send(());
            }
        }
    });
    let mut cinfo = vec![0u8; 1 << 16];
    let n = w
        .tag_recv_blocking(&mut cinfo, INFO, TAG_MASK_ALL)
        .expect("info")
        .length;
    let (caddr, ckey, craddr) = parse_info(&cinfo[..n]);
    let mut me = Side::connect((w, window, kept), &caddr);
    let ids = me.post_everything(&ckey, craddr, (10, 20));
    let t = Instant::now();
    while busy.try_recv().is_err() {
        assert!(
            t.elapsed() < Duration::from_secs(30),
            "{tls}: the peer never got busy"
        );
        me.w.progress();
    }
    for _ in 0..2_000 {
        me.w.progress();
    }
    let outstanding = ids
        .iter()
        .filter(|(_, id)| me.w.request_is_active(*id))
        .count();
    child.kill().expect("kill");
    let killed = Instant::now();
    let _ = child.0.wait();
    // A tag receive belongs to the worker, not to an endpoint (any peer
    // may send the tag), so the failure leaves it posted, as in UCX.
    let (unsent, ids): (Vec<_>, Vec<_>) =
        ids.into_iter().partition(|(w, _)| *w == "unsent tag recv");
    let mut failed_ops: Vec<&str> = Vec::new();
    let mut pending = ids;
    while !pending.is_empty() {
        assert!(
            killed.elapsed() < Duration::from_secs(15),
            "{tls}: requests still in flight 15 s after the kill: {:?}",
            pending.iter().map(|(w, _)| *w).collect::<Vec<_>>()
        );
        me.w.progress();
        pending.retain(|(what, id)| {
            let r = match me.w.take::<Vec<u8>>(*id) {
                Some(r) => r.is_err(),
                None => match me.w.request_test(*id) {
                    Some(r) => r.is_err(),
                    None => return true,
                },
            };
            if r {
                failed_ops.push(what);
            }
            false
        });
    }
    let done = killed.elapsed();
    let deadline = killed + Duration::from_secs(10);
    while me.failed.lock().unwrap().is_empty() {
        assert!(
            Instant::now() < deadline,
            "{tls}: no error handler after the kill"
        );
        me.w.progress();
    }
    for _ in 0..1000 {
        me.w.progress();
    }
    let f = me.failed.lock().unwrap().clone();
    assert_eq!(f.len(), 1, "{tls}: the handler ran {} times", f.len());
    assert!(
        f[0].0 >= killed,
        "{tls}: the endpoint failed before the kill: {}",
        f[0].1
    );
    println!(
        "{tls}: kill -9 to error handler {:?} ({}); {outstanding} outstanding requests ended after {done:?}, with an error: {failed_ops:?}",
        f[0].0 - killed,
        f[0].1
    );
    // What needed the peer to go on cannot have succeeded.
    for what in ["stream recv", "rndv am"] {
        assert!(
            failed_ops.contains(&what),
            "{tls}: {what} did not fail ({failed_ops:?})"
        );
    }
    for (_, id) in unsent {
        assert!(
            me.w.request_is_active(id),
            "{tls}: a worker's tag receive ended"
        );
        assert!(
            me.w.request_cancel(id),
            "{tls}: the posted receive cannot be canceled"
        );
        me.w.progress();
        let r = me.w.take::<Vec<u8>>(id).expect("canceled");
        assert!(matches!(r, Err(ref e) if matches!(e.error, rucx::Error::Canceled)));
    }
    let later = me.w.tag_send(me.ep, vec![1u8; 8], 99, Op::new());
    match later {
        Err(_) => {}
        Ok(Posted::InFlight(id)) => {
            let t = Instant::now();
            let r = loop {
                if let Some(r) = me.w.take::<Vec<u8>>(id) {
                    break r;
                }
                assert!(
                    t.elapsed() < Duration::from_secs(5),
                    "{tls}: a later send hangs"
                );
                me.w.progress();
            };
            assert!(r.is_err(), "{tls}: a send on the failed endpoint succeeded");
        }
        Ok(Posted::Done(..)) => panic!("{tls}: a send on the failed endpoint succeeded"),
    }
    drop(me.kept.lock().unwrap().drain(..));
    assert_eq!(
        me.w.requests_outstanding(),
        0,
        "{tls}: requests left behind"
    );
}

#[test]
fn killed_peer_with_everything_in_flight() {
    if is_child() {
        return;
    }
    for tls in ["tcp", "posix,cma", "rc_iwarp"] {
        killed_with_everything_in_flight(tls);
    }
}
