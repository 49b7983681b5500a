//! The connection manager against well-formed and misbehaving clients.

use super::*;
use std::net::{Ipv4Addr, Ipv6Addr, SocketAddrV4, SocketAddrV6};

fn listener(cfg: CmConfig) -> CmListener {
    let any = SocketAddr::V4(SocketAddrV4::new(Ipv4Addr::LOCALHOST, 0));
    CmListener::bind(any, cfg).expect("listen")
}

fn short() -> CmConfig {
    CmConfig {
        timeout: Duration::from_millis(300),
        max_pending: 4,
    }
}

/// Progresses `l` until a request is out (5 s at most), closing what
/// misbehaves meanwhile.
fn next_request(l: &mut CmListener) -> CmRequest {
    let deadline = Instant::now() + Duration::from_secs(5);
    let mut out = Vec::new();
    while out.is_empty() {
        assert!(Instant::now() < deadline, "no request");
        l.progress(&mut out);
    }
    assert_eq!(out.len(), 1);
    out.pop().expect("request")
}

fn answer(c: &mut CmClient) -> Result<Vec<u8>> {
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        if let Some(r) = c.poll() {
            return r;
        }
        assert!(Instant::now() < deadline, "no answer");
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// A well-formed client is served: the request carries its data and it
/// gets the server's.
fn served(l: &mut CmListener) {
    let addr = l.local_addr().expect("addr");
    let mut c = CmClient::connect(addr, b"client", Duration::from_secs(5)).expect("connect");
    let r = next_request(l);
    assert_eq!(r.data(), b"client");
    assert!(r.peer().ip().is_loopback());
    r.accept(b"server").expect("accept");
    assert_eq!(answer(&mut c).expect("accepted"), b"server");
}

#[test]
fn a_client_is_accepted_with_the_data_of_both_sides() {
    let mut l = listener(CmConfig::default());
    assert_ne!(l.local_addr().expect("addr").port(), 0, "an ephemeral port");
    served(&mut l);
    served(&mut l);
}

#[test]
fn a_rejected_client_learns_it() {
    let mut l = listener(CmConfig::default());
    let addr = l.local_addr().expect("addr");
    let mut c = CmClient::connect(addr, b"x", Duration::from_secs(5)).expect("connect");
    next_request(&mut l).reject().expect("reject");
    let e = answer(&mut c).expect_err("rejected");
    assert!(matches!(e, Error::Rejected(_)), "{e}");
    assert_eq!(e.status(), crate::ucs::Status::Rejected);
}

/// Connects a raw socket that sends `bytes` (and closes if `close`).
fn raw(l: &CmListener, bytes: &[u8], close: bool) -> TcpStream {
    let mut s = TcpStream::connect(l.local_addr().expect("addr")).expect("connect");
    s.write_all(bytes).expect("write");
    if close {
        s.shutdown(std::net::Shutdown::Write).expect("shutdown");
    }
    s
}

/// Whether the listener closed `s` (it reads EOF or a reset).
fn closed(l: &mut CmListener, s: &mut TcpStream) -> bool {
    s.set_read_timeout(Some(Duration::from_millis(20)))
        .expect("timeout");
    let deadline = Instant::now() + Duration::from_secs(5);
    let mut out = Vec::new();
    while Instant::now() < deadline {
        l.progress(&mut out);
        assert!(out.is_empty(), "a misbehaving client made a request");
        let mut b = [0u8; 16];
        match s.read(&mut b) {
            Ok(0) => return true,
            Err(e) if e.kind() == ErrorKind::ConnectionReset => return true,
            Ok(_) => return false,
            Err(_) => {}
        }
    }
    false
}

#[test]
fn garbage_truncated_and_oversized_hellos_are_closed_and_others_served() {
    let mut l = listener(short());
    let mut big = wire::encode(Kind::Hello, b"").expect("hello");
    big[8..12].copy_from_slice(&(wire::MAX_DATA as u32 + 1).to_le_bytes());
    let mut trailing = wire::encode(Kind::Hello, b"x").expect("hello");
    trailing.push(0);
    let answer_kind = wire::encode(Kind::Accept, b"x").expect("accept");
    let half = wire::encode(Kind::Hello, b"half a hello").expect("hello");
    for (what, bytes, close) in [
        ("garbage", &b"GET / HTTP/1.0\r\n\r\n"[..], false),
        ("oversized", &big[..], false),
        ("bytes after the hello", &trailing[..], false),
        ("an answer for a hello", &answer_kind[..], false),
        ("truncated, then closed", &half[..9], true),
    ] {
        let mut s = raw(&l, bytes, close);
        assert!(closed(&mut l, &mut s), "{what}: not closed");
        served(&mut l);
    }
}

#[test]
fn a_silent_connection_is_closed_after_the_timeout() {
    let mut l = listener(short());
    let mut silent = raw(&l, b"", false);
    // Served meanwhile.
    served(&mut l);
    assert!(closed(&mut l, &mut silent), "a silent client stays");
    assert_eq!(l.pending(), 0);
}

#[test]
fn connections_beyond_the_pending_limit_are_closed() {
    let mut l = listener(short());
    let mut held: Vec<TcpStream> = (0..4).map(|_| raw(&l, b"RUCX", false)).collect();
    let mut out = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(5);
    while l.pending() < 4 {
        assert!(Instant::now() < deadline, "the four were not taken");
        l.progress(&mut out);
    }
    let mut extra = raw(&l, b"", false);
    assert!(closed(&mut l, &mut extra), "a fifth handshake was let in");
    // The four time out in turn, and the listener serves again.
    for s in &mut held {
        assert!(closed(&mut l, s));
    }
    served(&mut l);
}

#[test]
fn a_client_of_no_listener_fails_to_connect() {
    let l = listener(CmConfig::default());
    let addr = l.local_addr().expect("addr");
    drop(l);
    assert!(CmClient::connect(addr, b"x", Duration::from_secs(2)).is_err());
}

#[test]
fn ipv6_loopback() {
    let addr = SocketAddr::V6(SocketAddrV6::new(Ipv6Addr::LOCALHOST, 0, 0, 0));
    let mut l = match CmListener::bind(addr, CmConfig::default()) {
        Ok(l) => l,
        Err(e) => {
            if std::env::var("RUCX_REQUIRE_ALL").is_ok_and(|v| v == "1") {
                panic!("required but unavailable: IPv6 loopback: {e}");
            }
            println!("skipped: no IPv6 loopback here: {e}");
            return;
        }
    };
    assert!(l.local_addr().expect("addr").is_ipv6());
    served(&mut l);
}
