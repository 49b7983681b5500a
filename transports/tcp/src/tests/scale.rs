//! Many connections on one iface: what each holds, and what `progress`
//! costs when they are quiet. The peers are plain sockets speaking the
//! wire protocol, so one iface can have thousands of connections.

use std::io::{ErrorKind, Read, Write};
use std::net::{IpAddr, Ipv4Addr, SocketAddr, TcpListener, TcpStream};
use std::time::{Duration, Instant};

use uct::ip_addr as addr;
use uct::{EpId, Iface, Posted};

use super::alloc::{held, vm_rss};
use super::{open, Rec};
use crate::iface::TcpIface;
use crate::wire::{self, CTRL_ACCEPT, FRAME_HDR};

/// The address the `k`-th fake peer iface claims to listen on.
fn fake(k: usize) -> SocketAddr {
    SocketAddr::new(
        IpAddr::V4(Ipv4Addr::new(127, 1, (k >> 8) as u8, k as u8)),
        9,
    )
}

fn until(a: &mut TcpIface, rec: &mut Rec, mut done: impl FnMut(&TcpIface, &Rec) -> bool) {
    let start = Instant::now();
    while !done(a, rec) {
        a.progress(rec);
        assert!(start.elapsed() < Duration::from_secs(60), "stuck");
    }
}

fn all_open(a: &TcpIface, n: usize) -> bool {
    a.conns.len() == n && a.unopened == 0
}

/// `n` plain clients connected to `a`, each having said hello as the
/// iface at `fake(k)`, all accepted.
fn accepted(a: &mut TcpIface, rec: &mut Rec, n: usize) -> Vec<TcpStream> {
    let mut out = Vec::with_capacity(n);
    for k in 0..n {
        let mut s = TcpStream::connect(crate::sys::local_addr(&a.listener).unwrap()).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
        s.write_all(&wire::hello(fake(k))).unwrap();
        out.push(s);
        if k % 64 == 63 {
            // Keeps the listen backlog short.
            a.progress(rec);
        }
    }
    until(a, rec, |a, _| all_open(a, n));
    for s in &mut out {
        let mut b = [0u8; FRAME_HDR];
        s.read_exact(&mut b).unwrap();
        assert_eq!(b, wire::frame_hdr(CTRL_ACCEPT, 0));
    }
    out
}

/// A plain listener standing for a peer iface that `a` connects to.
struct RawPeer {
    listener: TcpListener,
    conn: Option<TcpStream>,
    got: Vec<u8>,
    answered: bool,
}

/// `n` endpoints of `a` to as many plain listeners, which accept the
/// connections.
fn connected(a: &mut TcpIface, rec: &mut Rec, n: usize) -> (Vec<RawPeer>, Vec<EpId>) {
    let mut peers = Vec::with_capacity(n);
    let mut eps = Vec::with_capacity(n);
    for _ in 0..n {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        listener.set_nonblocking(true).unwrap();
        let port = listener.local_addr().unwrap().port();
        let dev = addr::pack_dev(IpAddr::V4(Ipv4Addr::LOCALHOST), a.local.host_id);
        eps.push(a.ep_create(&dev, &addr::pack_iface(port)).unwrap());
        peers.push(RawPeer {
            listener,
            conn: None,
            got: Vec::new(),
            answered: false,
        });
    }
    let hello_len = a.hello.len();
    let start = Instant::now();
    while peers.iter().any(|p| !p.answered) {
        a.progress(rec);
        for p in peers.iter_mut().filter(|p| !p.answered) {
            if p.conn.is_none() {
                match p.listener.accept() {
                    Ok((s, _)) => {
                        s.set_nonblocking(true).unwrap();
                        p.conn = Some(s);
                    }
                    Err(e) if e.kind() == ErrorKind::WouldBlock => continue,
                    Err(e) => panic!("accept: {e}"),
                }
            }
            let s = p.conn.as_mut().unwrap();
            let mut b = [0u8; 64];
            match s.read(&mut b) {
                Ok(k) => p.got.extend_from_slice(&b[..k]),
                Err(e) if e.kind() == ErrorKind::WouldBlock => {}
                Err(e) => panic!("read: {e}"),
            }
            if p.got.len() >= hello_len {
                s.write_all(&wire::frame_hdr(CTRL_ACCEPT, 0)).unwrap();
                s.set_nonblocking(false).unwrap();
                s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
                p.answered = true;
            }
        }
        assert!(start.elapsed() < Duration::from_secs(60), "stuck");
    }
    until(a, rec, |a, _| all_open(a, n));
    (peers, eps)
}

/// One short message (`am_short`, id 1, header `h`) as framed on the wire.
fn short_frame(h: u64) -> Vec<u8> {
    let mut v = wire::frame_hdr(1, 8).to_vec();
    v.extend_from_slice(&h.to_le_bytes());
    v
}

/// Sends one message each way on every connection of `clients`.
fn traffic(a: &mut TcpIface, rec: &mut Rec, clients: &mut [TcpStream], eps: &[EpId]) {
    let before = rec.ams.len();
    for (k, s) in clients.iter_mut().enumerate() {
        s.write_all(&short_frame(k as u64)).unwrap();
    }
    until(a, rec, |_, r| r.ams.len() == before + clients.len());
    for (k, (s, &e)) in clients.iter_mut().zip(eps).enumerate() {
        let am = a.am().unwrap();
        assert_eq!(am.am_short(e, 1, k as u64, &[]).unwrap(), Posted::Done);
        let mut b = [0u8; FRAME_HDR + 8];
        s.read_exact(&mut b).unwrap();
        assert_eq!(b.to_vec(), short_frame(k as u64));
    }
}

/// Endpoints of `a` to the fake peers `0..n`.
fn eps_to_fakes(a: &mut TcpIface, n: usize) -> Vec<EpId> {
    (0..n)
        .map(|k| {
            let f = fake(k);
            let dev = addr::pack_dev(f.ip(), a.local.host_id);
            a.ep_create(&dev, &addr::pack_iface(f.port())).unwrap()
        })
        .collect()
}

/// Bytes of buffers all connections of `a` hold.
fn buffers(a: &TcpIface) -> usize {
    a.conns
        .indices()
        .map(|i| a.conns.get(i).map_or(0, |c| c.held()))
        .sum()
}

/// Runs `progress` until no connection of `a` holds a buffer.
fn idle(a: &mut TcpIface, rec: &mut Rec) {
    until(a, rec, |a, _| buffers(a) == 0);
}

fn per_conn(after: isize, before: isize, n: usize) -> isize {
    (after - before) / n as isize
}

/// Prints what connections cost: heap bytes this thread holds and the
/// process's VmRSS, per connection, accepted and opened, idle and after
/// one message each way. Run alone:
/// `cargo test -p rucx-tcp --lib memory_per_connection -- --ignored --nocapture`.
#[test]
#[ignore = "measurement; prints numbers"]
fn memory_per_connection() {
    const N: usize = 2000;
    println!(
        "size_of: Conn {}, RxState {}, TxState {}, Ep {}",
        std::mem::size_of::<crate::conn::Conn>(),
        std::mem::size_of::<crate::rx::RxState>(),
        std::mem::size_of::<crate::tx::TxState>(),
        std::mem::size_of::<crate::iface::Ep>()
    );
    let mut a = open();
    let mut rec = Rec::default();
    let (h0, r0) = (held(), vm_rss());
    let mut clients = accepted(&mut a, &mut rec, N);
    let (h1, r1) = (held(), vm_rss());
    println!(
        "accepted {N}: heap {} B/conn, rss {} B/conn",
        per_conn(h1, h0, N),
        per_conn(r1 as isize, r0 as isize, N)
    );
    let eps = eps_to_fakes(&mut a, N);
    let (h2, r2) = (held(), vm_rss());
    println!(
        "  + {N} endpoints: heap {} B/ep, rss {} B/ep",
        per_conn(h2, h1, N),
        per_conn(r2 as isize, r1 as isize, N)
    );
    traffic(&mut a, &mut rec, &mut clients, &eps);
    let (h3, r3) = (held(), vm_rss());
    println!(
        "  after one message each way: heap {} B/conn, rss {} B/conn (from start)",
        per_conn(h3, h0, N),
        per_conn(r3 as isize, r0 as isize, N)
    );
    idle(&mut a, &mut rec);
    let (h3i, r3i) = (held(), vm_rss());
    println!(
        "  idle again: heap {} B/conn, rss {} B/conn (from start); buffers held {} B",
        per_conn(h3i, h0, N),
        per_conn(r3i as isize, r0 as isize, N),
        buffers(&a)
    );
    let mut b = open();
    let mut rb = Rec::default();
    let (h4, r4) = (held(), vm_rss());
    let (mut peers, beps) = connected(&mut b, &mut rb, N);
    let (h5, r5) = (held(), vm_rss());
    println!(
        "opened {N} (with their endpoints): heap {} B/conn, rss {} B/conn",
        per_conn(h5, h4, N),
        per_conn(r5 as isize, r4 as isize, N)
    );
    let mut streams: Vec<TcpStream> = peers.iter_mut().map(|p| p.conn.take().unwrap()).collect();
    traffic(&mut b, &mut rb, &mut streams, &beps);
    let (h6, r6) = (held(), vm_rss());
    println!(
        "  after one message each way: heap {} B/conn, rss {} B/conn (from start)",
        per_conn(h6, h4, N),
        per_conn(r6 as isize, r4 as isize, N)
    );
    idle(&mut b, &mut rb);
    let (h7, r7) = (held(), vm_rss());
    println!(
        "  idle again: heap {} B/conn, rss {} B/conn (from start)",
        per_conn(h7, h4, N),
        per_conn(r7 as isize, r4 as isize, N)
    );
}

#[test]
fn quiet_connections_hold_nothing_and_cost_progress_nothing() {
    const N: usize = 2000;
    let mut a = open();
    let mut rec = Rec::default();
    let _clients = accepted(&mut a, &mut rec, N);
    // The handshake's buffers went back as the connections opened.
    assert_eq!(buffers(&a), 0);
    assert!(a.holders.is_empty());
    let mut b = open();
    let mut rb = Rec::default();
    let (_peers, _eps) = connected(&mut b, &mut rb, 200);
    assert_eq!(buffers(&b), 0);
    assert!(b.holders.is_empty());
    // Nothing arrives: progress looks at no connection.
    let visits = a.visits;
    for _ in 0..1000 {
        assert_eq!(a.progress(&mut rec), 0);
    }
    assert_eq!(a.visits, visits);
    assert_eq!(rec.failed, 0);
}

#[test]
fn endpoints_find_their_connection_among_many() {
    const N: usize = 2000;
    let mut a = open();
    let mut rec = Rec::default();
    let mut clients = accepted(&mut a, &mut rec, N);
    let eps = eps_to_fakes(&mut a, N);
    assert_eq!(a.conns.len(), N, "no new connection");
    for (k, e) in eps.iter().enumerate() {
        let ci = a.eps.get(e.0).unwrap().conn.unwrap();
        assert_eq!(a.conns.get(ci).unwrap().key(), Some(wire::key(fake(k))));
    }
    // Both ways, each message on its own connection.
    traffic(&mut a, &mut rec, &mut clients, &eps);
    for &(_, src, k) in &rec.ams {
        let c = a.conns.get(src.0 & 0xffff).unwrap();
        assert_eq!(c.src(), src);
        assert_eq!(c.key(), Some(wire::key(fake(k as usize))));
    }
    // A second endpoint to a peer shares the connection.
    let again = eps_to_fakes(&mut a, 1)[0];
    assert_eq!(
        a.eps.get(again.0).unwrap().conn,
        a.eps.get(eps[0].0).unwrap().conn
    );
    assert_eq!(a.conns.len(), N);
}

/// Two ifaces with an endpoint from `a` to `b`, the connection open.
fn pair() -> (TcpIface, TcpIface, EpId, Rec, Rec) {
    let (mut a, mut b) = (open(), open());
    let (mut ra, mut rb) = (Rec::default(), Rec::default());
    let e = super::ep(&mut a, &b);
    super::send(&mut a, &mut ra, e, 1, 1);
    super::drive(&mut [(&mut a, &mut ra), (&mut b, &mut rb)], |x| {
        x[1].1.ams.len() == 1 && x[0].0.unopened == 0
    });
    (a, b, e, ra, rb)
}

#[test]
fn buffers_come_back_once_a_burst_is_over() {
    let (mut a, mut b, e, mut ra, mut rb) = pair();
    const BURST: usize = 300;
    let data = vec![7u8; 8 << 10];
    let mut sent = 0;
    let mut peak = (0, 0);
    let start = Instant::now();
    while rb.ams.len() < 1 + BURST {
        while sent < BURST {
            let h = (sent as u64).to_le_bytes();
            match a.am().unwrap().am_bcopy(e, 2, &[&h, &data]).unwrap().0 {
                Posted::Done => sent += 1,
                _ => break,
            }
        }
        peak.0 = peak.0.max(buffers(&a));
        a.progress(&mut ra);
        b.progress(&mut rb);
        peak.1 = peak.1.max(buffers(&b));
        assert!(start.elapsed() < Duration::from_secs(20), "stuck");
    }
    assert!(peak.1 >= 64 << 10, "the receiver read a segment at a time");
    // Nothing proportional to the burst.
    assert!(
        peak.0 <= 2 * (64 << 10) && peak.1 <= 2 * (64 << 10),
        "{peak:?}"
    );
    // Quiet now: both sides give their buffers back, and a sweep takes
    // the connections off the list.
    super::drive(&mut [(&mut a, &mut ra), (&mut b, &mut rb)], |x| {
        let done = |i: &TcpIface| buffers(i) == 0 && i.holders.is_empty();
        done(x[0].0) && done(x[1].0)
    });
    assert!(a.holders.is_empty() && b.holders.is_empty());
    assert_eq!((ra.failed, rb.failed), (0, 0));
    // And the connection still works, allocating again on demand.
    super::send(&mut a, &mut ra, e, 3, 1);
    super::drive(&mut [(&mut a, &mut ra), (&mut b, &mut rb)], |x| {
        x[1].1.ams.len() == 2 + BURST
    });
}

#[test]
fn a_busy_connection_keeps_its_buffers_between_messages() {
    let (mut a, mut b, e, mut ra, mut rb) = pair();
    let f = super::ep(&mut b, &a);
    // Only the sweeps of the rounds: a timed one between a send and its
    // arrival would find the receiver quiet.
    let later = Instant::now() + Duration::from_secs(3600);
    a.next_sweep = later;
    b.next_sweep = later;
    let round = |a: &mut TcpIface, b: &mut TcpIface, ra: &mut Rec, rb: &mut Rec, k: u64| {
        super::send(a, ra, e, 1, 1);
        super::drive(&mut [(&mut *a, &mut *ra), (&mut *b, &mut *rb)], |x| {
            x[1].1.ams.len() as u64 == 2 + k
        });
        super::send(b, rb, f, 1, 1);
        super::drive(&mut [(&mut *a, &mut *ra), (&mut *b, &mut *rb)], |x| {
            x[0].1.ams.len() as u64 == 1 + k
        });
        // Sweeps between messages find both sides active.
        a.sweep();
        b.sweep();
    };
    // A young connection gives its buffers back after each message; past
    // its first drains it is busy.
    let young = u64::from(crate::idle::YOUNG_DRAINS);
    for k in 0..young {
        round(&mut a, &mut b, &mut ra, &mut rb, k);
    }
    ra.ams.reserve(200);
    rb.ams.reserve(200);
    let (held_a, held_b) = (buffers(&a), buffers(&b));
    assert!(held_a > 0 && held_b > 0);
    let allocs = super::alloc::allocs();
    for k in young..young + 100 {
        round(&mut a, &mut b, &mut ra, &mut rb, k);
    }
    assert_eq!(super::alloc::allocs(), allocs, "no allocation per message");
    assert_eq!((buffers(&a), buffers(&b)), (held_a, held_b));
}
