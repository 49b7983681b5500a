//! One side of `netns_link_down.rs`, run in its own network namespace:
//! traffic both ways on a peer-mode endpoint until the endpoint fails,
//! then a report line for the test to read.
//!
//! The server prints its worker address (`addr=<hex>`); the client
//! connects to it (`RUCX_TEST_PEER`) and sends its own address and the
//! server answers with a key to memory of its own, so both have a
//! peer-mode endpoint with an error handler. Then each keeps `DEPTH` tag
//! sends of `MSG` bytes (rendezvous) and as many receives in flight, and
//! the client a put and a get on the server's memory, printing `flowing`
//! once traffic moved both ways. When the handler has run, each stops
//! posting, waits for its sends, puts and gets to end (with an error, or
//! done if they had made it) and prints
//! `report handler_ns=<epoch ns> op_error_ns=<epoch ns or 0> ok=<ops>
//! unfinished=<ops> why=<handler's error>`.

use crate::common::{hex, unhex};
use rucx::{Access, Ep, EpParams, Op, Posted, ReqId, Rkey, Worker, TAG_MASK_ALL};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// Tag sends kept in flight each way.
const DEPTH: usize = 4;
/// Size of a tag message: rendezvous on every transport.
const MSG: usize = 1 << 20;
/// Size of the client's puts and gets.
const RMA: usize = 256 << 10;
const DATA: u64 = 1;
const SETUP: u64 = 2;
/// However the link goes, a side gives up after this long.
const LIFETIME: Duration = Duration::from_secs(120);
/// How long operations in flight may take to end once the handler ran.
const SETTLE: Duration = Duration::from_secs(10);

/// Nanoseconds since the epoch: the test compares them with its own
/// clock (one machine, one clock for every namespace).
pub(crate) fn epoch_ns(t: SystemTime) -> u128 {
    t.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_nanos())
}

type Failed = Arc<Mutex<Option<(SystemTime, String)>>>;

fn peer_mode(failed: &Failed) -> EpParams {
    let f = Arc::clone(failed);
    EpParams::new().on_error(move |_, _, e| {
        let at = SystemTime::now();
        // The error and its causes, each once.
        let mut why = e.to_string();
        let mut cause = std::error::Error::source(&e);
        while let Some(c) = cause {
            let c_text = c.to_string();
            if !why.contains(&c_text) {
                why = format!("{why} <- {c_text}");
            }
            cause = c.source();
        }
        f.lock().unwrap().get_or_insert((at, why));
    })
}

/// The client's view of the server's memory: local buffers, the key, and
/// the put and get in flight.
struct Rma {
    local: Vec<u8>,
    rkey: Rkey,
    remote: u64,
    ops: Vec<ReqId>,
}

/// Runs side `server` (or the client) until its endpoint fails.
pub(crate) fn run(server: bool) {
    let started = Instant::now();
    let ctx = rucx::Context::new().expect("context");
    let mut w = ctx.create_worker().expect("worker");
    let failed = Failed::default();
    let (ep, mut rma, _mem) = if server {
        println!("addr={}", hex(&w.address()));
        let mut addr = vec![0u8; 4096];
        let n = w.tag_recv_blocking(&mut addr, SETUP, TAG_MASK_ALL);
        addr.truncate(n.expect("the client's address").length);
        let ep = w.connect_with(&addr, peer_mode(&failed)).expect("connect");
        let all = Access::REMOTE_READ | Access::REMOTE_WRITE;
        let mem = ctx.mem_alloc(2 * RMA, all).expect("mem_alloc");
        let mut key = mem.addr().to_le_bytes().to_vec();
        key.extend(mem.rkey_pack().expect("pack"));
        w.tag_send_blocking(ep, &key, SETUP).expect("send the key");
        (ep, None, Some(mem))
    } else {
        let peer = unhex(&std::env::var("RUCX_TEST_PEER").expect("server address"));
        let ep = w.connect_with(&peer, peer_mode(&failed)).expect("connect");
        w.tag_send_blocking(ep, &w.address(), SETUP)
            .expect("send the address");
        let mut key = vec![0u8; 4096];
        let n = w.tag_recv_blocking(&mut key, SETUP, TAG_MASK_ALL);
        key.truncate(n.expect("the server's key").length);
        let rma = Rma {
            local: vec![0u8; 2 * RMA],
            rkey: w.rkey_unpack(ep, &key[8..]).expect("rkey"),
            remote: u64::from_le_bytes(key[..8].try_into().unwrap()),
            ops: Vec::new(),
        };
        (ep, Some(rma), None)
    };

    let (mut sends, mut recvs) = (Vec::new(), Vec::new());
    let (mut ok, mut flowing) = ((0u64, 0u64), false);
    let mut op_error: Option<SystemTime> = None;
    let mut settle_from = None;
    let ppid = std::os::unix::process::parent_id();
    let mut turn = 0u64;
    loop {
        turn += 1;
        w.progress();
        if settle_from.is_none() && failed.lock().unwrap().is_some() {
            settle_from = Some(Instant::now());
        }
        let mut ended = Vec::new();
        sends.retain(|&id| match w.take::<Vec<u8>>(id) {
            None => true,
            Some(r) => {
                ended.push((true, r.is_ok()));
                false
            }
        });
        recvs.retain(|&id| match w.take::<Vec<u8>>(id) {
            None => true,
            Some(r) => {
                ended.push((false, r.is_ok()));
                false
            }
        });
        if let Some(rma) = &mut rma {
            rma.ops.retain(|&id| match w.request_test(id) {
                None => true,
                Some(r) => {
                    ended.push((true, r.is_ok()));
                    false
                }
            });
        }
        for (sent, fine) in ended {
            match (fine, sent) {
                (true, true) => ok.0 += 1,
                (true, false) => ok.1 += 1,
                (false, _) => _ = op_error.get_or_insert_with(SystemTime::now),
            }
        }
        let posting = settle_from.is_none() && op_error.is_none();
        if posting && post(&mut w, ep, &mut sends, &mut recvs, rma.as_mut(), turn).is_err() {
            op_error.get_or_insert_with(SystemTime::now);
        }
        if !flowing && ok.0 >= 8 && ok.1 >= 8 {
            flowing = true;
            println!("flowing");
        }
        let unfinished = sends.len() + rma.as_ref().map_or(0, |r| r.ops.len());
        if let Some(from) = settle_from {
            if unfinished == 0 || from.elapsed() > SETTLE {
                let (at, why) = failed.lock().unwrap().clone().unwrap();
                println!(
                    "report handler_ns={} op_error_ns={} ok={} unfinished={unfinished} why={why}",
                    epoch_ns(at),
                    op_error.map_or(0, epoch_ns),
                    ok.0 + ok.1,
                );
                // Operations still in flight may use the buffers of `rma`.
                drop(w);
                drop(rma);
                return;
            }
        }
        if turn % 1024 == 0 {
            assert!(started.elapsed() < LIFETIME, "no failure in {LIFETIME:?}");
            if std::os::unix::process::parent_id() != ppid {
                std::process::exit(3);
            }
        }
    }
}

/// Tops up the sends, receives and (on the client) the put and the get.
fn post(
    w: &mut Worker,
    ep: Ep,
    sends: &mut Vec<ReqId>,
    recvs: &mut Vec<ReqId>,
    rma: Option<&mut Rma>,
    turn: u64,
) -> rucx::Result<()> {
    while sends.len() < DEPTH {
        let msg = vec![turn as u8; MSG];
        if let Posted::InFlight(id) = w.tag_send(ep, msg, DATA, Op::new())? {
            sends.push(id);
        }
    }
    while recvs.len() < DEPTH {
        let buf = vec![0u8; MSG];
        if let Posted::InFlight(id) = w.tag_recv(buf, DATA, TAG_MASK_ALL, Op::new())? {
            recvs.push(id);
        }
    }
    let Some(rma) = rma else { return Ok(()) };
    if rma.ops.is_empty() {
        let p = rma.local.as_mut_ptr();
        let (at, key) = (rma.remote, &rma.rkey);
        // SAFETY: the two halves of `local` are used by this put and get
        // only, posted again only once both ended; `run` drops the worker
        // before `local`.
        let put = unsafe { w.put_raw(ep, p, RMA, at, key, Op::new())? };
        let get = unsafe { w.get_raw(ep, p.add(RMA), RMA, at + RMA as u64, key, Op::new())? };
        for posted in [put, get] {
            if let Posted::InFlight(id) = posted {
                rma.ops.push(id);
            }
        }
    }
    Ok(())
}
