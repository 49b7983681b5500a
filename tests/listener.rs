//! Client–server connections: a listener on a socket address, clients
//! that connect to it, accepted (on the listening worker or another one)
//! or rejected, and messages over the endpoints that result.

mod common;

use common::*;
use rucx::ucp::{ConnRequest, Connecting, EpParams, Listener};
use rucx::{Ep, ErrMode, Worker, TAG_MASK_ALL};
use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

fn localhost() -> SocketAddr {
    SocketAddr::from((Ipv4Addr::LOCALHOST, 0))
}

/// A server worker listening on `at`, whose handler accepts every client
/// unless `reject(n)` says so for the `n`-th; returns the endpoints it
/// accepted as they come.
fn server(
    w: &mut Worker,
    at: SocketAddr,
    reject: impl Fn(usize) -> bool + Send + 'static,
) -> (Listener, Arc<Mutex<Vec<Ep>>>) {
    let accepted = Arc::new(Mutex::new(Vec::new()));
    let seen = Arc::clone(&accepted);
    let mut n = 0;
    let l = w
        .listen(at, move |w, req: ConnRequest| {
            assert!(req.client_addr().ip().is_loopback());
            n += 1;
            if reject(n) {
                req.reject().expect("reject");
            } else {
                let ep = w.accept(req, EpParams::new()).expect("accept");
                seen.lock().unwrap().push(ep);
            }
        })
        .expect("listen");
    (l, accepted)
}

/// Progresses the server and the client until the connect ends.
fn finish(server: &mut Worker, client: &mut Worker, c: &mut Connecting) -> rucx::Result<Ep> {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        assert!(Instant::now() < deadline, "the connect never ended");
        server.progress();
        if let Some(r) = client.connect_poll(c) {
            return r;
        }
        client.progress();
    }
}

/// Progresses `s` until its listener's handler held a request; that one.
fn next_request(s: &mut Worker, held: &Mutex<Vec<ConnRequest>>) -> ConnRequest {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        if let Some(req) = held.lock().unwrap().pop() {
            return req;
        }
        assert!(Instant::now() < deadline, "no request");
        s.progress();
    }
}

/// Sends `msg` from `a` on `ep` and receives it at `b`.
fn message(a: &mut Worker, ep: Ep, b: &mut Worker, msg: &[u8], tag: u64) {
    let deadline = Instant::now() + Duration::from_secs(20);
    let mut buf = vec![0u8; msg.len()];
    let got = b.scope(|s| {
        let r = s.tag_recv(&mut buf, tag, TAG_MASK_ALL);
        a.tag_send_blocking(ep, msg, tag).expect("send");
        loop {
            assert!(Instant::now() < deadline, "no message");
            if s.test(&r) {
                break s.wait(r).0;
            }
            s.progress();
            a.progress();
        }
    });
    assert_eq!(got.expect("recv").length, msg.len());
    assert_eq!(buf, msg);
}

#[test]
fn a_client_connects_by_socket_address_and_both_ends_talk() {
    let ctx = context("tcp");
    let (mut s, mut c) = (ctx.create_worker().unwrap(), ctx.create_worker().unwrap());
    let (l, accepted) = server(&mut s, localhost(), |_| false);
    let addr = s.listener_addr(l).expect("addr");
    assert_ne!(addr.port(), 0);
    let mut conn = c.connect_start(addr, EpParams::new()).expect("start");
    let ep = finish(&mut s, &mut c, &mut conn).expect("connected");
    assert_eq!(c.ep_remote_uuid(ep).unwrap(), s.uuid());
    message(&mut c, ep, &mut s, b"client to server", 1);
    let back = accepted.lock().unwrap()[0];
    assert_eq!(s.ep_remote_uuid(back).unwrap(), c.uuid());
    message(&mut s, back, &mut c, b"server to client", 2);
}

#[test]
fn many_clients_at_once_some_rejected() {
    let ctx = context("tcp");
    let mut s = ctx.create_worker().unwrap();
    // Every third client is rejected.
    let (l, accepted) = server(&mut s, localhost(), |n| n % 3 == 0);
    let addr = s.listener_addr(l).unwrap();
    let mut clients: Vec<(Worker, Connecting)> = (0..12)
        .map(|_| {
            let mut w = ctx.create_worker().unwrap();
            let c = w.connect_start(addr, EpParams::new()).expect("start");
            (w, c)
        })
        .collect();
    let mut results: Vec<Option<rucx::Result<Ep>>> = (0..clients.len()).map(|_| None).collect();
    let deadline = Instant::now() + Duration::from_secs(30);
    while results.iter().any(Option::is_none) {
        assert!(Instant::now() < deadline, "clients still waiting");
        s.progress();
        for ((w, c), r) in clients.iter_mut().zip(&mut results) {
            if r.is_none() {
                *r = w.connect_poll(c);
            }
            w.progress();
        }
    }
    let ok = results.iter().filter(|r| matches!(r, Some(Ok(_)))).count();
    let rejected = results
        .iter()
        .filter(|r| matches!(r, Some(Err(e)) if e.status() == rucx::ucp::ucs::Status::Rejected))
        .count();
    assert_eq!((ok, rejected), (8, 4), "{results:?}");
    assert_eq!(accepted.lock().unwrap().len(), 8);
    // An accepted client talks to the server.
    let (i, ep) = results
        .iter()
        .enumerate()
        .find_map(|(i, r)| match r {
            Some(Ok(ep)) => Some((i, *ep)),
            _ => None,
        })
        .unwrap();
    message(&mut clients[i].0, ep, &mut s, b"one of many", 3);
}

#[test]
fn a_request_accepted_on_another_worker_connects_the_client_there() {
    let ctx = context("tcp");
    let mut s = ctx.create_worker().unwrap();
    let mut other = ctx.create_worker().unwrap();
    let mut c = ctx.create_worker().unwrap();
    let held = Arc::new(Mutex::new(Vec::new()));
    let keep = Arc::clone(&held);
    let l = s
        .listen(localhost(), move |_, req| keep.lock().unwrap().push(req))
        .unwrap();
    let mut conn = c
        .connect_start(s.listener_addr(l).unwrap(), EpParams::new())
        .unwrap();
    let req = next_request(&mut s, &held);
    assert_eq!(req.client_uuid(), c.uuid());
    let back = other
        .accept(req, EpParams::new())
        .expect("accept elsewhere");
    let ep = finish(&mut other, &mut c, &mut conn).expect("connected");
    assert_eq!(c.ep_remote_uuid(ep).unwrap(), other.uuid());
    message(&mut c, ep, &mut other, b"to the other worker", 4);
    message(&mut other, back, &mut c, b"and back", 5);
}

#[test]
fn a_listener_on_ipv6_loopback() {
    let ctx = context("tcp");
    let (mut s, mut c) = (ctx.create_worker().unwrap(), ctx.create_worker().unwrap());
    let any6 = SocketAddr::from((Ipv6Addr::LOCALHOST, 0));
    let accepted = Arc::new(Mutex::new(0));
    let seen = Arc::clone(&accepted);
    let l = match s.listen(any6, move |w, req| {
        w.accept(req, EpParams::new()).expect("accept");
        *seen.lock().unwrap() += 1;
    }) {
        Ok(l) => l,
        Err(e) => return skip_or_fail(&format!("no IPv6 loopback: {e}")),
    };
    let addr = s.listener_addr(l).unwrap();
    assert!(addr.is_ipv6());
    let mut conn = c.connect_start(addr, EpParams::new()).unwrap();
    let ep = finish(&mut s, &mut c, &mut conn).expect("connected");
    message(&mut c, ep, &mut s, b"over a v6 listener", 6);
    assert_eq!(*accepted.lock().unwrap(), 1);
}

#[test]
fn garbage_on_the_listener_does_not_stop_it() {
    use std::io::Write;
    let ctx = context("tcp");
    let (mut s, mut c) = (ctx.create_worker().unwrap(), ctx.create_worker().unwrap());
    let (l, _) = server(&mut s, localhost(), |_| false);
    let addr = s.listener_addr(l).unwrap();
    let mut junk = std::net::TcpStream::connect(addr).unwrap();
    junk.write_all(b"\x00\x01garbage that is no hello").unwrap();
    let _silent = std::net::TcpStream::connect(addr).unwrap();
    let mut conn = c.connect_start(addr, EpParams::new()).unwrap();
    finish(&mut s, &mut c, &mut conn).expect("served despite the others");
}

#[test]
fn a_closed_listener_takes_no_clients() {
    let ctx = context("tcp");
    let (mut s, mut c) = (ctx.create_worker().unwrap(), ctx.create_worker().unwrap());
    let (l, _) = server(&mut s, localhost(), |_| false);
    let addr = s.listener_addr(l).unwrap();
    s.listener_close(l).unwrap();
    assert!(s.listener_addr(l).is_err());
    assert!(c.connect_start(addr, EpParams::new()).is_err());
}

/// Closes `s` with a reset (SO_LINGER 0), as a client that dies does.
fn reset(s: std::net::TcpStream) {
    use std::os::fd::AsRawFd;
    let lg = libc::linger {
        l_onoff: 1,
        l_linger: 0,
    };
    // SAFETY: a valid socket and option of the size given.
    let r = unsafe {
        libc::setsockopt(
            s.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_LINGER,
            (&lg as *const libc::linger).cast(),
            std::mem::size_of::<libc::linger>() as libc::socklen_t,
        )
    };
    assert_eq!(r, 0, "SO_LINGER: {}", std::io::Error::last_os_error());
}

#[test]
fn an_accept_whose_client_left_keeps_the_endpoint_the_worker_had() {
    use std::io::Write;
    let ctx = context("tcp");
    let (mut s, mut c) = (ctx.create_worker().unwrap(), ctx.create_worker().unwrap());
    // The server has an endpoint to the client's worker already, in use,
    // whose failures it wants to hear of.
    let ep = s
        .connect_with(&c.address(), EpParams::new().err_mode(ErrMode::Peer))
        .unwrap();
    message(&mut s, ep, &mut c, b"before", 7);
    let held = Arc::new(Mutex::new(Vec::new()));
    let keep = Arc::clone(&held);
    let l = s
        .listen(localhost(), move |_, req| keep.lock().unwrap().push(req))
        .unwrap();
    // A hello that names the client's worker, from a socket that is then
    // reset before the server answers.
    let address = c.address();
    let mut hello = b"RUCXCM\x01\x00".to_vec();
    hello.extend_from_slice(&(address.len() as u32).to_le_bytes());
    hello.extend_from_slice(&address);
    let mut raw = std::net::TcpStream::connect(s.listener_addr(l).unwrap()).unwrap();
    raw.write_all(&hello).unwrap();
    let req = next_request(&mut s, &held);
    assert_eq!(req.client_uuid(), c.uuid());
    reset(raw);
    std::thread::sleep(Duration::from_millis(100));
    s.accept(req, EpParams::new())
        .expect_err("the client is gone");
    // The endpoint the server had still works, both ways.
    s.ep_status(ep).expect("the endpoint it had is open");
    assert_eq!(
        s.ep_err_mode(ep).unwrap(),
        ErrMode::Peer,
        "a failed accept changed the endpoint's error mode"
    );
    message(&mut s, ep, &mut c, b"after", 8);
    let back = c.connect(&s.address()).unwrap();
    message(&mut c, back, &mut s, b"and back", 9);
}
