//! Kill-to-error-handler probe: how long after a peer is killed with
//! SIGKILL does the handler of a peer-mode endpoint to it run? The
//! counterpart of `benches/keepalive/ka_ucx.c` on UCX (same roles, same
//! messages, same output); `benches/keepalive/run.sh` runs both.
//!
//! ```sh
//! cargo build --release --example keepalive_probe
//! P=target/release/examples/keepalive_probe
//! $P client /tmp/ka.addr &                      # the peer to kill
//! $P server /tmp/ka.addr idle 30 > /tmp/ka.out & # waits for its failure
//! $P kill <client pid>                          # prints kill_ns=…
//! ```
//!
//! - `client <addrfile>` writes its worker address (hex) to `addrfile`,
//!   receives the server's address (tag 1), connects back and answers
//!   every tag-2 message with a tag-3 message, until killed.
//! - `server <addrfile> <idle|traffic> <timeout_s>` connects to the
//!   client with [`ErrMode::Peer`] and an error handler, sends its own
//!   address, checks one round trip and prints `ready`. Then it
//!   progresses, with no traffic (`idle`) or with a tag-2 send and a tag-3
//!   receive always in flight (`traffic`). The handler takes
//!   `CLOCK_MONOTONIC`; the server prints `error_ns=<ns> status=<error>`
//!   and exits 0, or `timeout` and exits 2 if no handler ran within
//!   `timeout_s` of `ready`.
//! - `kill <pid>` takes `CLOCK_MONOTONIC`, sends SIGKILL to `pid` and
//!   prints `kill_ns=<ns>`.
//!
//! `CLOCK_MONOTONIC` is one clock for all processes of a Linux host, so
//! `error_ns - kill_ns` is the detection time. The transports and the
//! keepalive come from the environment (`RUCX_TLS`,
//! `RUCX_KEEPALIVE_INTERVAL`, `RUCX_KEEPALIVE_NUM_EPS`).

use rucx::{Context, Ep, EpParams, ErrMode, Op, Posted, ReqId, Worker};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// The server's address, client-bound.
const TAG_ADDR: u64 = 1;
/// Server to client.
const TAG_PING: u64 = 2;
/// Client to server.
const TAG_PONG: u64 = 3;
/// Bytes of a ping and of a pong.
const PING_LEN: usize = 64;

type Res<T> = Result<T, Box<dyn std::error::Error>>;

fn main() -> Res<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    match args.as_slice() {
        ["client", file] => client(file),
        ["server", file, mode, timeout] => {
            let traffic = match *mode {
                "idle" => false,
                "traffic" => true,
                _ => return Err("mode is idle or traffic".into()),
            };
            let timeout = Duration::from_secs_f64(timeout.parse()?);
            std::process::exit(server(file, traffic, timeout)?)
        }
        ["kill", pid] => kill(pid.parse()?),
        _ => Err("usage: keepalive_probe client <addrfile> \
                  | server <addrfile> <idle|traffic> <timeout_s> | kill <pid>"
            .into()),
    }
}

/// `CLOCK_MONOTONIC` in nanoseconds (the clock `Instant` uses, but as a
/// number another process can compare).
fn now_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid timespec to write to.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    assert_eq!(rc, 0, "clock_gettime");
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

fn kill(pid: libc::pid_t) -> Res<()> {
    let t = now_ns();
    // SAFETY: kill has no memory-safety preconditions.
    if unsafe { libc::kill(pid, libc::SIGKILL) } != 0 {
        return Err(std::io::Error::last_os_error().into());
    }
    println!("kill_ns={t}");
    Ok(())
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

fn unhex(s: &str) -> Res<Vec<u8>> {
    (0..s.len() / 2)
        .map(|i| Ok(u8::from_str_radix(&s[2 * i..2 * i + 2], 16)?))
        .collect()
}

/// Writes `addr` to `file` whole (through a rename).
fn write_addr(file: &str, addr: &[u8]) -> Res<()> {
    let tmp = format!("{file}.tmp");
    std::fs::write(&tmp, hex(addr) + "\n")?;
    std::fs::rename(tmp, file)?;
    Ok(())
}

/// Waits up to 20 s for `file` and decodes it.
fn read_addr(file: &str) -> Res<Vec<u8>> {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        match std::fs::read_to_string(file) {
            Ok(s) => return unhex(s.trim()),
            Err(_) if Instant::now() < deadline => {
                std::thread::sleep(Duration::from_millis(10));
            }
            Err(e) => return Err(format!("no address in {file}: {e}").into()),
        }
    }
}

/// Progresses `w` until owned request `r` completes; its buffer.
fn wait(w: &mut Worker, r: ReqId) -> Res<Vec<u8>> {
    loop {
        if let Some(done) = w.take::<Vec<u8>>(r) {
            return Ok(done.map_err(|e| e.error)?.1);
        }
        w.progress();
    }
}

/// A receive of `tag`, completed or in flight.
fn recv(w: &mut Worker, tag: u64, len: usize) -> Res<Posted<Vec<u8>>> {
    Ok(w.tag_recv(vec![0u8; len], tag, u64::MAX, Op::new())?)
}

/// The peer to kill: answers pings until it is.
fn client(file: &str) -> Res<()> {
    let ctx = Context::new()?;
    let mut w = ctx.create_worker()?;
    write_addr(file, &w.address())?;
    let mut addr = vec![0u8; 8192];
    let info = w.tag_recv_blocking(&mut addr, TAG_ADDR, u64::MAX)?;
    addr.truncate(info.length);
    // Its own end is the kill; should the server go first, it leaves.
    let ep = w.connect_with(
        &addr,
        EpParams::new().on_error(|_, _, _| std::process::exit(4)),
    )?;
    let ppid = std::os::unix::process::parent_id();
    loop {
        let ping = match recv(&mut w, TAG_PING, PING_LEN)? {
            Posted::Done(_, b) => b,
            Posted::InFlight(r) => loop {
                if let Some(done) = w.take::<Vec<u8>>(r) {
                    break done.map_err(|e| e.error)?.1;
                }
                w.progress();
                if std::os::unix::process::parent_id() != ppid {
                    // Orphaned: the harness went away.
                    std::process::exit(3);
                }
            },
        };
        w.tag_send_blocking(ep, &ping, TAG_PONG)?;
    }
}

/// When the error handler ran (`CLOCK_MONOTONIC` ns), and the error.
type Failed = Arc<Mutex<Option<(u64, String)>>>;

/// The watching side; returns the exit code.
fn server(file: &str, traffic: bool, timeout: Duration) -> Res<i32> {
    let ctx = Context::new()?;
    let mut w = ctx.create_worker()?;
    let peer = read_addr(file)?;
    let failed = Failed::default();
    let f = Arc::clone(&failed);
    let params = EpParams::new()
        .err_mode(ErrMode::Peer)
        .on_error(move |_, _, e| {
            let at = now_ns();
            let mut f = f.lock().unwrap();
            if f.is_none() {
                *f = Some((at, e.to_string()));
            }
        });
    let ep = w.connect_with(&peer, params)?;
    w.tag_send_blocking(ep, &w.address(), TAG_ADDR)?;

    // One round trip: both directions are wired up.
    let ping = vec![0x5au8; PING_LEN];
    let pong = recv(&mut w, TAG_PONG, PING_LEN)?;
    w.tag_send_blocking(ep, &ping, TAG_PING)?;
    if let Posted::InFlight(r) = pong {
        wait(&mut w, r)?;
    }
    println!("ready");
    let limit = Instant::now() + timeout;

    let mut rounds = 0u64;
    let mut inflight: Vec<ReqId> = Vec::new();
    loop {
        w.progress();
        if let Some((at, why)) = failed.lock().unwrap().clone() {
            println!("error_ns={at} status={why} rounds={rounds}");
            return Ok(0);
        }
        if traffic {
            // Results are not looked at: a failure here is the peer's
            // death, which the handler reports.
            inflight.retain(|&r| w.take::<Vec<u8>>(r).is_none());
            if inflight.is_empty() {
                rounds += 1;
                start_round(&mut w, ep, &ping, &mut inflight)?;
            }
        }
        if Instant::now() > limit {
            println!("timeout rounds={rounds}");
            return Ok(2);
        }
    }
}

/// Posts a pong receive and a ping send, keeping those in flight.
fn start_round(w: &mut Worker, ep: Ep, ping: &[u8], inflight: &mut Vec<ReqId>) -> Res<()> {
    if let Posted::InFlight(r) = recv(w, TAG_PONG, PING_LEN)? {
        inflight.push(r);
    }
    // A send on a failed endpoint fails at once; the handler tells.
    if let Ok(Posted::InFlight(r)) = w.tag_send(ep, ping.to_vec(), TAG_PING, Op::new()) {
        inflight.push(r);
    }
    Ok(())
}
