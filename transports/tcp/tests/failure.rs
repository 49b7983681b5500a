//! Peers that misbehave, close or vanish fail only their own connection.

mod common;

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::time::Duration;

use common::{connect, connect_ready, drive, lo, pattern, port, settle, short_when_open, Recorder};
use rucx_tcp::TcpConfig;
use uct::ucs::PeerMisbehaved;
use uct::{Error, Iface, Iov, Posted, Token};

const MAGIC: &[u8; 8] = b"rucx-tcp";

/// A hello from a made-up iface listening on 127.0.0.1:`port`.
fn hello(port: u16) -> Vec<u8> {
    let mut v = MAGIC.to_vec();
    v.extend_from_slice(&3u16.to_le_bytes());
    v.extend_from_slice(&port.to_be_bytes());
    v.extend_from_slice(&[4, 127, 0, 0, 1]);
    v
}

const ACCEPT: [u8; 5] = [0xf0, 0, 0, 0, 0];
const REJECT: [u8; 5] = [0xf1, 0, 0, 0, 0];

fn frame(id: u8, payload: &[u8]) -> Vec<u8> {
    let mut v = vec![id];
    v.extend_from_slice(&(payload.len() as u32).to_le_bytes());
    v.extend_from_slice(payload);
    v
}

fn raw_to(iface: &dyn Iface) -> TcpStream {
    let s = TcpStream::connect(("127.0.0.1", port(iface))).unwrap();
    s.set_nodelay(true).unwrap();
    s
}

/// Progresses until the iface closes `s` (read sees EOF or a reset);
/// returns what the iface sent before.
fn wait_closed(s: &mut TcpStream, ifaces: &mut [(&mut dyn Iface, &mut Recorder)]) -> Vec<u8> {
    s.set_nonblocking(true).unwrap();
    let mut got = Vec::new();
    drive(ifaces, |_| {
        let mut b = [0u8; 64];
        match s.read(&mut b) {
            Ok(0) => true,
            Ok(n) => {
                got.extend_from_slice(&b[..n]);
                false
            }
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => false,
            Err(_) => true,
        }
    });
    got
}

/// A healthy endpoint from `a` to `b` delivers a message after each attack.
fn still_works(
    a: &mut dyn Iface,
    sa: &mut Recorder,
    b: &mut dyn Iface,
    sb: &mut Recorder,
    ep: uct::EpId,
    n: u64,
) {
    let before = sb.ams.len();
    let posted = short_when_open(
        &mut [(&mut *a, &mut *sa), (&mut *b, &mut *sb)],
        ep,
        0,
        n,
        b"ok",
    );
    assert_eq!(posted.unwrap(), Posted::Done);
    drive(&mut [(a, sa), (b, sb)], |x| x[1].1.ams.len() > before);
    let (_, _, data) = sb.ams.last().unwrap();
    assert_eq!(data[..8], n.to_le_bytes());
}

#[test]
fn malformed_input_fails_only_that_connection() {
    let cfg = TcpConfig::default();
    let (mut a, mut b) = (lo(&cfg), lo(&cfg));
    let (mut sa, mut sb) = (Recorder::default(), Recorder::default());
    let ep = connect(a.as_mut(), b.as_ref());
    still_works(a.as_mut(), &mut sa, b.as_mut(), &mut sb, ep, 0);
    let good_src = sb.ams[0].1;

    // Bad magic: closed, never announced, so no src_failed.
    let mut s = raw_to(b.as_ref());
    s.write_all(b"GET / HTTP/1.0\r\n\r\n").unwrap();
    assert_eq!(wait_closed(&mut s, &mut [(b.as_mut(), &mut sb)]), b"");
    assert!(sb.src_failed.is_empty());
    still_works(a.as_mut(), &mut sa, b.as_mut(), &mut sb, ep, 1);

    // A frame above the limit after a good one.
    let mut s = raw_to(b.as_ref());
    let mut bytes = hello(1);
    bytes.extend(frame(3, b"fine"));
    bytes.extend([1, 0xff, 0xff, 0xff, 0x7f]);
    s.write_all(&bytes).unwrap();
    assert_eq!(wait_closed(&mut s, &mut [(b.as_mut(), &mut sb)]), ACCEPT);
    assert_eq!(sb.src_failed.len(), 1);
    let (src, err) = &sb.src_failed[0];
    assert_ne!(*src, good_src);
    assert!(
        matches!(
            err,
            Error::PeerMisbehaved {
                what: PeerMisbehaved::FrameTooLong {
                    len: 0x7fff_ffff,
                    ..
                },
                ..
            }
        ),
        "{err:?}"
    );
    assert!(sb
        .ams
        .iter()
        .any(|(id, s, d)| *id == 3 && s == src && d == b"fine"));
    still_works(a.as_mut(), &mut sa, b.as_mut(), &mut sb, ep, 2);

    // An id reserved above AM_ID_MAX.
    let mut s = raw_to(b.as_ref());
    let mut bytes = hello(2);
    bytes.extend(frame(0, b"x"));
    bytes.extend(frame(200, b"y"));
    s.write_all(&bytes).unwrap();
    wait_closed(&mut s, &mut [(b.as_mut(), &mut sb)]);
    assert!(matches!(
        sb.src_failed.last().unwrap().1,
        Error::PeerMisbehaved {
            what: PeerMisbehaved::UnknownId(200),
            ..
        }
    ));

    // Closed in the middle of a frame.
    let mut s = raw_to(b.as_ref());
    let mut bytes = hello(3);
    bytes.extend(frame(0, b"x"));
    bytes.extend(&frame(0, b"truncated")[..8]);
    s.write_all(&bytes).unwrap();
    drop(s);
    let n = sb.src_failed.len();
    drive(&mut [(b.as_mut(), &mut sb)], |x| {
        x[0].1.src_failed.len() > n
    });
    assert!(matches!(sb.src_failed[n].1, Error::ConnectionLost { .. }));

    // Closed cleanly at a frame boundary: not a failure, but the source's
    // end is still reported (a message in pieces from it cannot finish).
    let mut s = raw_to(b.as_ref());
    let mut bytes = hello(4);
    bytes.extend(frame(9, b"last"));
    s.write_all(&bytes).unwrap();
    drop(s);
    drive(&mut [(b.as_mut(), &mut sb)], |x| {
        x[0].1.ams.iter().any(|m| m.2 == b"last")
    });
    settle(&mut [(b.as_mut(), &mut sb)], Duration::from_millis(50));
    assert_eq!(sb.src_failed.len(), n + 2);
    still_works(a.as_mut(), &mut sa, b.as_mut(), &mut sb, ep, 3);
    assert!(sa.ep_failed.is_empty());
}

#[test]
fn byte_by_byte_input_is_reassembled() {
    let cfg = TcpConfig::default();
    let mut b = lo(&cfg);
    let mut sb = Recorder::default();
    let mut s = raw_to(b.as_ref());
    let mut bytes = hello(5);
    let big = pattern(70_000, 1);
    bytes.extend(frame(1, b"a"));
    bytes.extend(frame(2, &big));
    bytes.extend(frame(3, b""));
    let (head, rest) = bytes.split_at(61);
    let (middle, tail) = rest.split_at(rest.len() - 60);
    for chunk in head.chunks(1) {
        s.write_all(chunk).unwrap();
        b.progress(&mut sb);
    }
    s.write_all(middle).unwrap();
    for chunk in tail.chunks(1) {
        s.write_all(chunk).unwrap();
        b.progress(&mut sb);
    }
    drive(&mut [(b.as_mut(), &mut sb)], |x| x[0].1.ams.len() == 3);
    assert_eq!(sb.ams[0].2, b"a");
    assert!(sb.ams[1].2 == big);
    assert_eq!((sb.ams[2].0, sb.ams[2].2.len()), (3, 0));
    assert!(sb.src_failed.is_empty());
}

#[test]
fn dropped_peer_fails_endpoint() {
    let cfg = TcpConfig::default();
    let (mut a, mut b) = (lo(&cfg), lo(&cfg));
    let (mut sa, mut sb) = (Recorder::default(), Recorder::default());
    let ep = connect(a.as_mut(), b.as_ref());
    let other = lo(&cfg);
    let ep_other = connect(a.as_mut(), other.as_ref());
    still_works(a.as_mut(), &mut sa, b.as_mut(), &mut sb, ep, 0);
    // A zero-copy send that cannot finish: b stops reading.
    let body = pattern(a.attr().max_zcopy, 3);
    let iov = [Iov::from_slice(&body)];
    let mut inflight = Vec::new();
    for t in 0..64u64 {
        // SAFETY: `body` outlives the completions awaited below.
        match unsafe { a.zcopy().unwrap().am_zcopy(ep, 1, &[], &iov, Token(t)) }.unwrap() {
            Posted::InFlight => {
                inflight.push(Token(t));
                break;
            }
            Posted::Done => {}
            Posted::NoResource => panic!("free endpoint refused"),
        }
    }
    assert_eq!(inflight.len(), 1, "socket buffers never filled");
    a.pending_add(ep, Token(100)).unwrap();
    assert_eq!(a.flush(Some(ep), Token(101)).unwrap(), Posted::InFlight);
    drop(b);
    drive(&mut [(a.as_mut(), &mut sa)], |x| {
        !x[0].1.ep_failed.is_empty()
    });
    assert_eq!(sa.ep_failed.len(), 1);
    assert_eq!(sa.ep_failed[0].0, ep);
    let failed: Vec<_> = sa
        .completed
        .iter()
        .filter(|c| c.1.is_err())
        .map(|c| c.0)
        .collect();
    assert_eq!(failed, vec![inflight[0], Token(101)]);
    assert_eq!(sa.ready, vec![(ep, Token(100))]);
    for r in [
        a.am().unwrap().am_short(ep, 0, 0, &[]).map(drop),
        a.am().unwrap().am_bcopy(ep, 0, &[b"x"]).map(drop),
        a.pending_add(ep, Token(5)),
        a.flush(Some(ep), Token(6)).map(drop),
    ] {
        assert!(
            matches!(&r, Err(Error::EndpointFailed { transport, .. }) if transport.starts_with("tcp ")),
            "{r:?}"
        );
    }
    // The other endpoint is untouched.
    assert_eq!(
        a.am().unwrap().am_short(ep_other, 0, 0, &[]).unwrap(),
        Posted::Done
    );
    settle(&mut [(a.as_mut(), &mut sa)], Duration::from_millis(30));
    assert_eq!(sa.ep_failed.len(), 1, "reported once");
    a.ep_destroy(ep);
}

/// An endpoint of `a` towards a raw listener pretending to be an iface;
/// returns the endpoint and the accepted socket, after checking the hello.
fn ep_to_raw(a: &mut dyn Iface, sa: &mut Recorder, l: &TcpListener) -> (uct::EpId, TcpStream) {
    let port = l.local_addr().unwrap().port();
    // Same host id as `a`: its own device address serves.
    let dev = a.device_addr().to_vec();
    let ep = a.ep_create(&dev, &port.to_be_bytes()).unwrap();
    let (mut s, _) = l.accept().unwrap();
    s.set_nodelay(true).unwrap();
    // The IPv4 hello: magic, version, port, family 4, address.
    let mut hs = [0u8; 17];
    drive(&mut [(a, sa)], |_| {
        s.set_read_timeout(Some(Duration::from_millis(1))).unwrap();
        s.read_exact(&mut hs).is_ok()
    });
    assert_eq!(&hs[..8], MAGIC);
    assert_eq!(u16::from_le_bytes([hs[8], hs[9]]), 3);
    assert_eq!(hs[12], 4);
    (ep, s)
}

#[test]
fn raw_peer_talks_back_then_breaks_the_protocol() {
    let cfg = TcpConfig {
        conn_timeout: uct::ucs::config::Time(Duration::from_millis(300)),
        ..TcpConfig::default()
    };
    let mut a = lo(&cfg);
    let mut sa = Recorder::default();
    let l = TcpListener::bind("127.0.0.1:0").unwrap();

    // Accepted, full duplex: its messages reach us; then it closes.
    let (ep, mut s) = ep_to_raw(a.as_mut(), &mut sa, &l);
    // A send before the answer waits in the pending queue for it.
    assert_eq!(
        a.am().unwrap().am_short(ep, 4, 44, b"early").unwrap(),
        Posted::NoResource
    );
    a.pending_add(ep, Token(44)).unwrap();
    let mut bytes = ACCEPT.to_vec();
    bytes.extend(frame(6, b"from raw"));
    s.write_all(&bytes).unwrap();
    drive(&mut [(a.as_mut(), &mut sa)], |x| {
        x[0].1.ams.len() == 1 && x[0].1.ready.contains(&(ep, Token(44)))
    });
    assert_eq!(sa.ams[0].0, 6);
    assert_eq!(sa.ams[0].2, b"from raw");
    assert_eq!(
        a.am().unwrap().am_short(ep, 4, 44, b"early").unwrap(),
        Posted::Done
    );
    let mut got = [0u8; 5 + 8 + 5];
    s.set_read_timeout(None).unwrap();
    s.read_exact(&mut got).unwrap();
    assert_eq!(got[0], 4, "the message sent once accepted");
    assert_eq!(&got[13..], b"early");
    drop(s);
    drive(&mut [(a.as_mut(), &mut sa)], |x| {
        x[0].1.ep_failed.len() == 1
    });
    assert_eq!(sa.ep_failed[0].0, ep);
    assert!(a.am().unwrap().am_short(ep, 0, 0, &[]).is_err());
    // It closed between messages: its end is reported once, as a source.
    assert_eq!(sa.src_failed.len(), 1);

    // Accepted, then an unknown id: misbehaved.
    let (ep, mut s) = ep_to_raw(a.as_mut(), &mut sa, &l);
    let mut bytes = ACCEPT.to_vec();
    bytes.extend(frame(5, b"ok"));
    bytes.extend(frame(0x99, b""));
    s.write_all(&bytes).unwrap();
    drive(&mut [(a.as_mut(), &mut sa)], |x| {
        x[0].1.ep_failed.len() == 2
    });
    assert_eq!(sa.ep_failed[1].0, ep);
    assert!(
        sa.ep_failed[1].1.contains("misbehaved"),
        "{}",
        sa.ep_failed[1].1
    );
    assert_eq!(sa.src_failed.len(), 2, "it had delivered a message");

    // A message before the accept: misbehaved.
    let (ep, mut s) = ep_to_raw(a.as_mut(), &mut sa, &l);
    s.write_all(&frame(5, b"too early")).unwrap();
    drive(&mut [(a.as_mut(), &mut sa)], |x| {
        x[0].1.ep_failed.len() == 3
    });
    assert_eq!(sa.ep_failed[2].0, ep);

    // Rejected, and the peer never connects back: the deadline fails it.
    let (ep, mut s) = ep_to_raw(a.as_mut(), &mut sa, &l);
    s.write_all(&REJECT).unwrap();
    drive(&mut [(a.as_mut(), &mut sa)], |x| {
        x[0].1.ep_failed.len() == 4
    });
    assert_eq!(sa.ep_failed[3].0, ep);
    assert!(
        sa.ep_failed[3].1.contains("timed out"),
        "{}",
        sa.ep_failed[3].1
    );
}

#[test]
fn connect_to_closed_port_fails() {
    let cfg = TcpConfig::default();
    let mut a = lo(&cfg);
    let mut sa = Recorder::default();
    let port = {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let dev = a.device_addr().to_vec();
    match a.ep_create(&dev, &port.to_be_bytes()) {
        Err(e) => assert_eq!(e.status(), uct::Status::Unreachable, "{e}"),
        Ok(ep) => {
            // Sends are buffered while connecting, then the failure comes.
            let _ = a.am().unwrap().am_short(ep, 0, 0, b"lost").unwrap();
            drive(&mut [(a.as_mut(), &mut sa)], |x| {
                !x[0].1.ep_failed.is_empty()
            });
            assert!(a.am().unwrap().am_short(ep, 0, 0, &[]).is_err());
        }
    }
}

#[test]
fn destroy_cancels_in_flight() {
    let cfg = TcpConfig::default();
    let (mut a, mut b) = (lo(&cfg), lo(&cfg));
    let (mut sa, mut sb) = (Recorder::default(), Recorder::default());
    let ep = connect_ready(a.as_mut(), &mut sa, b.as_mut(), &mut sb);
    let body = pattern(a.attr().max_zcopy, 4);
    let iov = [Iov::from_slice(&body)];
    let mut token = None;
    for t in 0..64u64 {
        let r = loop {
            // SAFETY: `body` outlives the cancellation awaited below.
            match unsafe { a.zcopy().unwrap().am_zcopy(ep, 1, &[], &iov, Token(t)) }.unwrap() {
                Posted::NoResource => {
                    a.progress(&mut sa);
                }
                r => break r,
            }
        };
        if r == Posted::InFlight {
            token = Some(Token(t));
            break;
        }
    }
    let token = token.expect("the socket buffers never filled");
    assert_eq!(a.flush(None, Token(500)).unwrap(), Posted::InFlight);
    a.pending_add(ep, Token(501)).unwrap();
    a.ep_destroy(ep);
    assert_eq!(a.arm().unwrap(), uct::Armed::Busy);
    a.progress(&mut sa);
    assert!(sa
        .completed
        .iter()
        .any(|(t, r)| *t == token && r.as_ref().unwrap_err() == "canceled"));
    assert!(a.am().unwrap().am_short(ep, 0, 0, &[]).is_err());
    // The user's memory is no longer needed: the rest of the frame went
    // into a copy, and the connection stays usable for new endpoints.
    drop(body);
    drive(&mut [(a.as_mut(), &mut sa), (b.as_mut(), &mut sb)], |x| {
        x[0].1.completed.iter().any(|(t, _)| *t == Token(500))
    });
    assert!(sa
        .completed
        .iter()
        .any(|(t, r)| *t == Token(500) && r.is_ok()));
    let ep2 = connect(a.as_mut(), b.as_ref());
    assert_eq!(
        a.am().unwrap().am_short(ep2, 2, 7, b"after").unwrap(),
        Posted::Done
    );
    drive(&mut [(a.as_mut(), &mut sa), (b.as_mut(), &mut sb)], |x| {
        x[1].1.ams.iter().any(|m| m.2[8..] == *b"after")
    });
    assert!(
        sa.ready.is_empty(),
        "pending tokens of a destroyed endpoint are dropped"
    );
    assert!(sa.ep_failed.is_empty() && sb.src_failed.is_empty());
}

#[test]
fn bad_addresses_are_refused() {
    let cfg = TcpConfig::default();
    let mut a = lo(&cfg);
    let dev = a.device_addr().to_vec();
    assert!(matches!(
        a.ep_create(&dev[..5], &[1, 2]),
        Err(Error::InvalidAddr(_))
    ));
    assert!(matches!(
        a.ep_create(&dev, &[0, 0]),
        Err(Error::InvalidAddr(_))
    ));
    let mut other_host = dev.clone();
    // The host id is the last 8 bytes.
    let last = other_host.len() - 1;
    other_host[last] ^= 0xff;
    assert!(!a.is_reachable(&other_host, &[1, 2]));
    assert!(matches!(
        a.ep_create(&other_host, &[1, 2]),
        Err(Error::Unreachable(_))
    ));
}
