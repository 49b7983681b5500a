//! Tag ping-pong latency between two processes, awaited on tokio or
//! blocking: what the async path costs over the blocking one.
//!
//! ```sh
//! RUCX_TLS=shm cargo run --release --features tokio --example async_lat -- -s 8 -n 100000
//! RUCX_TLS=shm cargo run --release --features tokio --example async_lat -- -m tokio --spin 0
//! RUCX_TLS=shm cargo run --release --features tokio --example async_lat -- --cpus 0,1
//! ```
//!
//! The parent starts a copy of itself as the peer, each side with one
//! worker; the parent sends a message, the peer sends it back, `-n` times
//! after `-w` warm-up round trips, and the parent times each round trip.
//! It prints the median, 10th and 90th percentiles of the one-way latency
//! (half a round trip) in microseconds, per mode (`-m`, default `all`):
//!
//! * `blocking`: a [`Worker`] on each side, `tag_send_blocking` and
//!   `tag_recv_blocking` (busy progress; what `rucx-perftest -t tag_lat`
//!   does);
//! * `shared`: a `SharedWorker` on each side, its futures waited for
//!   with `OpFuture::wait` (busy progress, through the lock);
//! * `tokio`: a `SharedWorker` on each side driven by
//!   `rucx::ucp::tokio::Driver` (spin `--spin` µs, default 50; futures'
//!   poll spin `--poll-spin` µs, default 5) on a current-thread runtime,
//!   its futures awaited by a task;
//! * `local`: a `LocalWorker` on each side (no lock) driven by
//!   `rucx::ucp::local::tokio::LocalDriver` with the same spins, on a
//!   `LocalSet` of a current-thread runtime.
//!
//! `--cpus A,B` binds the measuring side to CPU `A` and the peer to `B`.
//!
//! `all` runs the four and prints the ratios of tokio's and local's
//! medians to the blocking one's.

use rucx::ucp::local::tokio::LocalDriver;
use rucx::ucp::tokio as driver;
use rucx::ucp::Posted;
use rucx::{Context, Worker};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

type Error = Box<dyn std::error::Error + Send + Sync>;

const TAG: u64 = 7;

/// The timed round trips of `n` (the first `warmup` untimed) on a shared
/// or local worker `w`: a future of the latencies.
macro_rules! timed_pings {
    ($w:ident, $ep:expr, $n:expr, $warmup:expr, $iters:expr, $size:expr) => {
        async move {
            let mut lat = Vec::with_capacity($iters);
            let (mut msg, mut buf) = (vec![1u8; $size], vec![0u8; $size]);
            for i in 0..$n {
                let t = Instant::now();
                let rx = $w.tag_recv(buf, TAG, u64::MAX)?;
                msg = $w.tag_send($ep, msg, TAG)?.await.map_err(|e| e.error)?.1;
                buf = rx.await.map_err(|e| e.error)?.1;
                if i >= $warmup {
                    lat.push(t.elapsed());
                }
            }
            Ok::<_, Error>(lat)
        }
    };
}

/// The answers to `n` round trips on a shared or local worker `w`, then a
/// flush: a future.
macro_rules! echoes {
    ($w:ident, $ep:expr, $n:expr, $size:expr) => {
        async move {
            let mut buf = vec![0u8; $size];
            for _ in 0..$n {
                buf = $w
                    .tag_recv(buf, TAG, u64::MAX)?
                    .await
                    .map_err(|e| e.error)?
                    .1;
                buf = $w.tag_send($ep, buf, TAG)?.await.map_err(|e| e.error)?.1;
            }
            $w.flush().await?;
            Ok::<_, Error>(())
        }
    };
}

struct Opts {
    size: usize,
    iters: usize,
    warmup: usize,
    mode: String,
    spin: Duration,
    poll_spin: Duration,
    /// The CPUs of the measuring side and of the peer (`--cpus A,B`).
    cpus: Option<(usize, usize)>,
}

fn opts() -> Result<Opts, Error> {
    let mut o = Opts {
        size: 8,
        iters: 100_000,
        warmup: 10_000,
        mode: "all".into(),
        spin: driver::DEFAULT_SPIN,
        poll_spin: driver::DEFAULT_POLL_SPIN,
        cpus: None,
    };
    let args: Vec<String> = std::env::args().skip(1).collect();
    let mut it = args.iter();
    while let Some(a) = it.next() {
        let mut val = || it.next().ok_or(format!("{a} takes a value"));
        match a.as_str() {
            "-s" => o.size = val()?.parse()?,
            "-n" => o.iters = val()?.parse()?,
            "-w" => o.warmup = val()?.parse()?,
            "-m" => o.mode = val()?.clone(),
            "--spin" => o.spin = Duration::from_micros(val()?.parse()?),
            "--poll-spin" => o.poll_spin = Duration::from_micros(val()?.parse()?),
            "--cpus" => {
                let v = val()?;
                let (a, b) = v.split_once(',').ok_or("--cpus takes two CPUs, A,B")?;
                o.cpus = Some((a.parse()?, b.parse()?));
            }
            _ => return Err(format!("unknown option {a}").into()),
        }
    }
    Ok(o)
}

fn main() -> Result<(), Error> {
    let o = opts()?;
    if let Ok(peer) = std::env::var("ASYNC_LAT_PEER") {
        if let Some((_, b)) = o.cpus {
            pin(b)?;
        }
        return answer(&o, &unhex(&peer));
    }
    if let Some((a, b)) = o.cpus {
        // Both checked against this process's CPUs before it binds to
        // one (the peer, started later, inherits that binding).
        allowed(a)?;
        allowed(b)?;
        pin(a)?;
    }
    let modes: Vec<&str> = match o.mode.as_str() {
        "all" => vec!["blocking", "shared", "tokio", "local"],
        m @ ("blocking" | "shared" | "tokio" | "local") => vec![m],
        m => return Err(format!("unknown mode {m}").into()),
    };
    println!(
        "# {} B, {} round trips, one-way latency in µs",
        o.size, o.iters
    );
    let mut medians = Vec::new();
    for m in modes {
        let mut lat = ping(&o, m)?;
        lat.sort_unstable();
        let at = |q: f64| lat[((lat.len() - 1) as f64 * q) as usize].as_nanos() as f64 / 2000.0;
        println!(
            "{m:>8}: median {:.3}  p10 {:.3}  p90 {:.3}",
            at(0.5),
            at(0.1),
            at(0.9)
        );
        medians.push((m, at(0.5)));
    }
    let get = |m: &str| medians.iter().find(|(n, _)| *n == m).map(|(_, v)| *v);
    if let (Some(b), Some(t)) = (get("blocking"), get("tokio")) {
        println!("tokio / blocking: {:.3}", t / b);
    }
    if let (Some(b), Some(t)) = (get("blocking"), get("local")) {
        println!("local / blocking: {:.3}", t / b);
    }
    Ok(())
}

/// The measuring side: starts the peer in `mode`, times each round trip.
fn ping(o: &Opts, mode: &str) -> Result<Vec<Duration>, Error> {
    let ctx = Context::new()?;
    let mut w = ctx.create_worker()?;
    let mut child = Command::new(std::env::current_exe()?)
        .args(["-s", &o.size.to_string(), "-n", &o.iters.to_string()])
        .args(["-w", &o.warmup.to_string(), "-m", mode])
        .args(["--spin", &o.spin.as_micros().to_string()])
        .args(["--poll-spin", &o.poll_spin.as_micros().to_string()])
        .args(
            o.cpus
                .map(|(a, b)| ["--cpus".to_string(), format!("{a},{b}")])
                .into_iter()
                .flatten(),
        )
        .env("ASYNC_LAT_PEER", hex(&w.address()))
        .stdin(Stdio::null())
        .spawn()?;
    // The peer's address, unless it ends first.
    let (info, mut addr) = match w.tag_recv(vec![0u8; 4096], 0, u64::MAX, Default::default())? {
        Posted::Done(info, b) => (info, b),
        Posted::InFlight(id) => loop {
            w.progress();
            if let Some(r) = w.take::<Vec<u8>>(id) {
                break r.map_err(|e| e.error)?;
            }
            if let Some(st) = child.try_wait()? {
                return Err(format!("the peer ended ({st}) before it sent its address").into());
            }
        },
    };
    addr.truncate(info.length);
    let ep = w.connect(&addr)?;
    let n = o.warmup + o.iters;
    let lat = match mode {
        "blocking" => {
            let msg = vec![1u8; o.size];
            let mut buf = vec![0u8; o.size];
            let mut lat = Vec::with_capacity(o.iters);
            for i in 0..n {
                let t = Instant::now();
                w.tag_send_blocking(ep, &msg, TAG)?;
                w.tag_recv_blocking(&mut buf, TAG, u64::MAX)?;
                if i >= o.warmup {
                    lat.push(t.elapsed());
                }
            }
            lat
        }
        "shared" => {
            let w = w.into_shared();
            let mut lat = Vec::with_capacity(o.iters);
            let (mut msg, mut buf) = (vec![1u8; o.size], vec![0u8; o.size]);
            for i in 0..n {
                let t = Instant::now();
                let rx = w.tag_recv(buf, TAG, u64::MAX)?;
                msg = w.tag_send(ep, msg, TAG)?.wait().map_err(|e| e.error)?.1;
                buf = rx.wait().map_err(|e| e.error)?.1;
                if i >= o.warmup {
                    lat.push(t.elapsed());
                }
            }
            lat
        }
        "local" => {
            let w = w.into_local();
            let local = tokio::task::LocalSet::new();
            local.block_on(&runtime()?, async {
                let _d = tokio::task::spawn_local(
                    LocalDriver::new(&w)
                        .spin(o.spin)
                        .poll_spin(o.poll_spin)
                        .run(),
                );
                let (iters, warmup, size) = (o.iters, o.warmup, o.size);
                tokio::task::spawn_local(timed_pings!(w, ep, n, warmup, iters, size)).await?
            })?
        }
        _ => {
            let w = w.into_shared();
            runtime()?.block_on(async {
                let _d = tokio::spawn(
                    driver::Driver::new(&w)
                        .spin(o.spin)
                        .poll_spin(o.poll_spin)
                        .run(),
                );
                // A task of its own, as an application's would be (the
                // runtime polls its main future less eagerly).
                let (iters, warmup, size) = (o.iters, o.warmup, o.size);
                tokio::spawn(timed_pings!(w, ep, n, warmup, iters, size)).await?
            })?
        }
    };
    let st = child.wait()?;
    if !st.success() {
        return Err(format!("the peer failed: {st}").into());
    }
    Ok(lat)
}

/// The answering side: connects to `parent`, sends its address, echoes.
fn answer(o: &Opts, parent: &[u8]) -> Result<(), Error> {
    let ctx = Context::new()?;
    let mut w = ctx.create_worker()?;
    let ep = w.connect(parent)?;
    w.tag_send_blocking(ep, &w.address(), 0)?;
    let n = o.warmup + o.iters;
    match o.mode.as_str() {
        "blocking" => {
            let mut buf = vec![0u8; o.size];
            for _ in 0..n {
                w.tag_recv_blocking(&mut buf, TAG, u64::MAX)?;
                w.tag_send_blocking(ep, &buf, TAG)?;
            }
            flush(&mut w)
        }
        "shared" => {
            let sw = w.into_shared();
            let mut buf = vec![0u8; o.size];
            for _ in 0..n {
                buf = sw
                    .tag_recv(buf, TAG, u64::MAX)?
                    .wait()
                    .map_err(|e| e.error)?
                    .1;
                buf = sw.tag_send(ep, buf, TAG)?.wait().map_err(|e| e.error)?.1;
            }
            sw.flush().wait()?;
            Ok(())
        }
        "local" => {
            let lw = w.into_local();
            let local = tokio::task::LocalSet::new();
            local.block_on(&runtime()?, async {
                let _d = tokio::task::spawn_local(
                    LocalDriver::new(&lw)
                        .spin(o.spin)
                        .poll_spin(o.poll_spin)
                        .run(),
                );
                let size = o.size;
                tokio::task::spawn_local(echoes!(lw, ep, n, size)).await?
            })
        }
        _ => {
            let sw = w.into_shared();
            runtime()?.block_on(async {
                let _d = tokio::spawn(
                    driver::Driver::new(&sw)
                        .spin(o.spin)
                        .poll_spin(o.poll_spin)
                        .run(),
                );
                let size = o.size;
                tokio::spawn(echoes!(sw, ep, n, size)).await?
            })
        }
    }
}

fn flush(w: &mut Worker) -> Result<(), Error> {
    w.flush()?;
    Ok(())
}

fn runtime() -> Result<tokio::runtime::Runtime, Error> {
    Ok(tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?)
}

/// An error for a CPU number a `cpu_set_t` cannot hold (the libc macros
/// would index past it).
fn in_range(cpu: usize) -> Result<(), Error> {
    if cpu >= libc::CPU_SETSIZE as usize {
        return Err(format!("no CPU {cpu}").into());
    }
    Ok(())
}

/// Whether this process may run on `cpu`: an error if not.
fn allowed(cpu: usize) -> Result<(), Error> {
    in_range(cpu)?;
    // SAFETY: `set` is a zeroed cpu_set_t, filled by the kernel and read
    // by the libc macro, with its size.
    let ok = unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) == 0
            && libc::CPU_ISSET(cpu, &set)
    };
    if !ok {
        return Err(format!("CPU {cpu} is not one this process may run on").into());
    }
    Ok(())
}

/// Binds this process to `cpu`.
fn pin(cpu: usize) -> Result<(), Error> {
    in_range(cpu)?;
    // SAFETY: `set` is a zeroed cpu_set_t, filled by the libc macros and
    // passed with its size.
    let rc = unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(cpu, &mut set);
        libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set)
    };
    if rc != 0 {
        return Err(format!("bind to CPU {cpu}: {}", std::io::Error::last_os_error()).into());
    }
    Ok(())
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

fn unhex(s: &str) -> Vec<u8> {
    (0..s.len() / 2)
        .filter_map(|i| u8::from_str_radix(s.get(2 * i..2 * i + 2)?, 16).ok())
        .collect()
}
