//! Micro-benchmarks, ignored by default (they measure, never assert a time):
//!
//! ```text
//! cargo test -p rucx-tcp --release --test bench -- --ignored --nocapture
//! ```

mod common;

use std::time::{Duration, Instant};

use common::lo;
use rucx_tcp::TcpConfig;
use uct::{AmId, AmSink, EpId, Error, Iface, Iov, Posted, SrcId, Token};

/// Counts messages and copies them out, as a protocol layer would.
struct Sink {
    msgs: u64,
    bytes: u64,
    last: u64,
    copy_to: Vec<u8>,
    pos: usize,
    completed: u64,
    ready: u64,
}

impl Sink {
    fn new(copy: usize) -> Sink {
        Sink {
            msgs: 0,
            bytes: 0,
            last: 0,
            copy_to: vec![0; copy],
            pos: 0,
            completed: 0,
            ready: 0,
        }
    }
}

impl AmSink for Sink {
    fn am(&mut self, _id: AmId, _src: SrcId, data: &[u8]) {
        self.msgs += 1;
        self.bytes += data.len() as u64;
        if data.len() >= 8 {
            self.last = u64::from_le_bytes(data[..8].try_into().unwrap());
        }
        // Copy out at a moving offset, as a receiver filling a large
        // buffer fragment by fragment would.
        let cap = self.copy_to.len();
        if cap > 0 {
            let n = data.len().min(cap);
            let at = if self.pos + n > cap { 0 } else { self.pos };
            self.copy_to[at..at + n].copy_from_slice(&data[..n]);
            self.pos = (at + n) % cap;
        }
    }
    fn completed(&mut self, _token: Token, result: uct::Result<()>) {
        result.unwrap();
        self.completed += 1;
    }
    fn pending_ready(&mut self, _ep: EpId, _token: Token) {
        self.ready += 1;
    }
    fn ep_failed(&mut self, ep: EpId, error: Error) {
        panic!("{ep:?} failed: {error}");
    }
    fn src_failed(&mut self, src: SrcId, error: Error) {
        panic!("{src:?} failed: {error}");
    }
}

fn pair() -> (Box<dyn Iface>, EpId, Box<dyn Iface>, EpId) {
    let mut cfg = TcpConfig::default();
    // BENCH_MAX_ZCOPY=256k: fragment size for large messages.
    if let Ok(v) = std::env::var("BENCH_MAX_ZCOPY") {
        use uct::ucs::config::ConfigValue;
        cfg.max_zcopy = uct::ucs::config::MemUnits::parse(&v).unwrap();
    }
    let (mut a, mut b) = (lo(&cfg), lo(&cfg));
    let ab = a.ep_create(b.device_addr(), b.iface_addr()).unwrap();
    let ba = b.ep_create(a.device_addr(), a.iface_addr()).unwrap();
    (a, ab, b, ba)
}

fn send_short(i: &mut dyn Iface, s: &mut Sink, ep: EpId, v: u64) {
    while i.am().unwrap().am_short(ep, 1, v, &[]).unwrap() != Posted::Done {
        i.progress(s);
    }
}

#[test]
#[ignore = "measurement, not a check: run with --ignored --nocapture in release"]
fn pingpong_8b() {
    let (mut a, ab, mut b, ba) = pair();
    let iters: u64 = std::env::var("PP_ITERS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(200_000);
    let warm = iters / 20;
    let echo = std::thread::spawn(move || {
        let mut s = Sink::new(0);
        for k in 0..iters + warm {
            while s.msgs <= k {
                b.progress(&mut s);
            }
            let v = s.last;
            send_short(b.as_mut(), &mut s, ba, v);
        }
    });
    let mut s = Sink::new(0);
    let mut rtt = Vec::with_capacity(iters as usize);
    for k in 0..iters + warm {
        let t = Instant::now();
        send_short(a.as_mut(), &mut s, ab, k);
        while s.msgs <= k {
            a.progress(&mut s);
        }
        assert_eq!(s.last, k);
        if k >= warm {
            rtt.push(t.elapsed());
        }
    }
    echo.join().unwrap();
    rtt.sort();
    let med = rtt[rtt.len() / 2];
    println!(
        "am_short 8 B ping-pong: median round trip {:.2} us, one way {:.2} us (p99 rtt {:.2} us)",
        med.as_secs_f64() * 1e6,
        med.as_secs_f64() * 0.5e6,
        rtt[rtt.len() * 99 / 100].as_secs_f64() * 1e6
    );
}

/// One-way stream of `size`-byte messages; the receiver copies each out.
fn stream(size: usize, secs: f64) {
    let (mut a, ab, mut b, _ba) = pair();
    let zcopy = size > a.attr().max_bcopy;
    let max_zcopy = a.attr().max_zcopy;
    let frags = size.div_ceil(max_zcopy) as u64;
    let msg = vec![7u8; size];
    let stop = Duration::from_secs_f64(secs);
    let rx = std::thread::spawn(move || {
        let mut s = Sink::new(size);
        let t = Instant::now();
        let mut first = None;
        loop {
            if b.progress(&mut s) > 0 && first.is_none() {
                first = Some(Instant::now());
            }
            if s.msgs > 0 && s.last == u64::MAX {
                break;
            }
            assert!(t.elapsed() < stop * 10, "stream stuck");
        }
        let el = first.unwrap().elapsed().as_secs_f64();
        (s.msgs - 1, s.bytes, el)
    });
    let mut s = Sink::new(0);
    let t = Instant::now();
    let mut sent = 0u64;
    let mut hdr = msg.clone();
    while t.elapsed() < stop {
        for _ in 0..64 {
            hdr[..8].copy_from_slice(&sent.to_le_bytes());
            let r = if size <= 8 {
                a.am().unwrap().am_short(ab, 1, sent, &[]).unwrap()
            } else if !zcopy {
                a.am().unwrap().am_bcopy(ab, 1, &[&hdr]).unwrap().0
            } else {
                // Fragments of at most max_zcopy, as a protocol would send.
                let mut r = Posted::Done;
                for (i, frag) in msg.chunks(max_zcopy).enumerate() {
                    let iov = [Iov::from_slice(frag)];
                    let h = (sent << 16 | i as u64).to_le_bytes();
                    loop {
                        // SAFETY: `msg` is never changed and outlives every
                        // completion (flushed below).
                        r = unsafe { a.zcopy().unwrap().am_zcopy(ab, 1, &h, &iov, Token(sent)) }
                            .unwrap();
                        if r != Posted::NoResource {
                            break;
                        }
                        a.progress(&mut s);
                    }
                }
                r
            };
            if r == Posted::NoResource {
                a.progress(&mut s);
            } else {
                sent += 1;
            }
        }
    }
    send_short(a.as_mut(), &mut s, ab, u64::MAX);
    while a.flush(Some(ab), Token(0)).unwrap() != Posted::Done {
        a.progress(&mut s);
    }
    let (msgs, bytes, el) = rx.join().unwrap();
    let msgs = if zcopy { msgs / frags } else { msgs };
    assert_eq!(msgs, sent);
    println!(
        "{size:>8} B {}: {:.0} msg/s, {:.1} MB/s (MiB/s)",
        if size <= 8 {
            "short"
        } else if zcopy {
            "zcopy"
        } else {
            "bcopy"
        },
        msgs as f64 / el,
        bytes as f64 / el / 1048576.0
    );
}

#[test]
#[ignore = "measurement, not a check: run with --ignored --nocapture in release"]
fn bandwidth() {
    for size in [8, 4096, 65536, 1 << 20] {
        stream(size, 2.0);
    }
}

/// The floor: the same ping-pong on plain sockets, spinning on `recv`.
#[test]
#[ignore = "measurement, not a check: run with --ignored --nocapture in release"]
fn pingpong_raw_sockets() {
    use std::io::{Read, Write};
    let iters: u64 = std::env::var("PP_ITERS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(200_000);
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let mut c = std::net::TcpStream::connect(l.local_addr().unwrap()).unwrap();
    let (mut s, _) = l.accept().unwrap();
    // PP_TWO=1: one connection per direction (why the transport shares one
    // connection between two ifaces: separate ACK packets cost latency).
    let two = std::env::var("PP_TWO").is_ok();
    let (mut c_rx, mut s_tx) = if two {
        let c2 = std::net::TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let (s2, _) = l.accept().unwrap();
        (s2, c2)
    } else {
        (c.try_clone().unwrap(), s.try_clone().unwrap())
    };
    for x in [&c, &s, &c_rx, &s_tx] {
        x.set_nodelay(true).unwrap();
        x.set_nonblocking(true).unwrap();
    }
    fn get(x: &mut std::net::TcpStream, b: &mut [u8; 13]) {
        let mut n = 0;
        while n < 13 {
            if let Ok(k) = x.read(&mut b[n..]) {
                n += k;
            }
        }
    }
    let echo = std::thread::spawn(move || {
        let mut b = [0u8; 13];
        for _ in 0..iters {
            get(&mut s, &mut b);
            s_tx.write_all(&b).unwrap();
        }
    });
    let mut rtt = Vec::new();
    let mut b = [0u8; 13];
    for _ in 0..iters {
        let t = Instant::now();
        c.write_all(&b).unwrap();
        get(&mut c_rx, &mut b);
        rtt.push(t.elapsed());
    }
    echo.join().unwrap();
    rtt.sort();
    let med = rtt[rtt.len() / 2];
    println!(
        "raw sockets 13 B ping-pong: median round trip {:.2} us, one way {:.2} us",
        med.as_secs_f64() * 1e6,
        med.as_secs_f64() * 0.5e6
    );
}

/// What `mem_reg` costs (the model's `reg_cost`), and a whole
/// registration's life.
#[test]
#[ignore = "measurement, not a check: run with --ignored --nocapture in release"]
fn registration() {
    use uct::{Access, Component};
    let md = rucx_tcp::COMPONENT.md_open().unwrap().pop().unwrap();
    let mut buf = vec![0u8; 1 << 20];
    let n = 200_000;
    let mut handles = Vec::with_capacity(n);
    let t = Instant::now();
    for i in 0..n {
        // SAFETY: `buf` outlives the registrations (ended below).
        let h = unsafe {
            md.mem_reg(
                buf.as_mut_ptr().wrapping_add(i % 4096),
                4096,
                Access::REMOTE_WRITE,
            )
        };
        handles.push(h.unwrap());
    }
    let reg = t.elapsed().as_secs_f64() / n as f64;
    let t = Instant::now();
    for h in &handles {
        md.mem_dereg(h).unwrap();
    }
    let dereg = t.elapsed().as_secs_f64() / n as f64;
    let t = Instant::now();
    for _ in 0..n {
        // SAFETY: as above.
        let h = unsafe { md.mem_reg(buf.as_mut_ptr(), 1 << 20, Access::REMOTE_WRITE) }.unwrap();
        let k = md.mkey_pack(&h).unwrap();
        std::hint::black_box(&k);
        md.mem_dereg(&h).unwrap();
    }
    let cycle = t.elapsed().as_secs_f64() / n as f64;
    println!(
        "mem_reg {:.0} ns, mem_dereg {:.0} ns, reg + pack + dereg {:.0} ns (model: {:?})",
        reg * 1e9,
        dereg * 1e9,
        cycle * 1e9,
        md.reg_cost()
    );
}

/// `put_zcopy` streamed into a registered buffer of a target that
/// progresses on its own thread; each put waits for its acknowledgement
/// only to bound the puts in flight.
#[test]
#[ignore = "measurement, not a check: run with --ignored --nocapture in release"]
fn put_bandwidth() {
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Arc;
    use uct::{Access, Component};
    const WINDOW: u64 = 8;
    let md = rucx_tcp::COMPONENT.md_open().unwrap().pop().unwrap();
    for size in [4096usize, 65536, 1 << 20] {
        let mut dst = vec![0u8; size];
        let src = vec![7u8; size];
        // SAFETY: `dst` outlives the registration (ended below, after the
        // target stopped) and is not touched meanwhile.
        let memh = unsafe { md.mem_reg(dst.as_mut_ptr(), size, Access::REMOTE_WRITE) }.unwrap();
        let key = md.rkey_unpack(&md.mkey_pack(&memh).unwrap()).unwrap();
        let (mut a, ab, mut b, _) = pair();
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let target = std::thread::spawn(move || {
            let mut s = Sink::new(0);
            while !flag.load(Ordering::Relaxed) {
                b.progress(&mut s);
            }
            b
        });
        let mut s = Sink::new(0);
        let (mut sent, t) = (0u64, Instant::now());
        while t.elapsed() < Duration::from_secs(2) {
            if sent - s.completed >= WINDOW {
                a.progress(&mut s);
                continue;
            }
            let iov = [Iov::from_slice(&src)];
            // SAFETY: `src` is not changed and outlives every completion
            // (all are awaited below).
            match unsafe {
                a.put()
                    .unwrap()
                    .put_zcopy(ab, &iov, memh.addr as u64, &key, Token(sent))
            }
            .unwrap()
            {
                Posted::InFlight => sent += 1,
                _ => {
                    a.progress(&mut s);
                }
            }
        }
        while s.completed < sent {
            a.progress(&mut s);
        }
        let el = t.elapsed().as_secs_f64();
        stop.store(true, Ordering::Relaxed);
        drop(target.join().unwrap());
        md.mem_dereg(&memh).unwrap();
        println!(
            "{size:>8} B put_zcopy: {:.0} puts/s, {:.1} MB/s (MiB/s)",
            sent as f64 / el,
            (sent * size as u64) as f64 / el / 1048576.0
        );
        assert_eq!(dst[size - 1], 7);
    }
}
