//! Messages of every kind and size between two ifaces on loopback.

mod common;

use common::{connect, drive, lo, pattern, short_when_open, Recorder};
use rucx_tcp::TcpConfig;
use uct::{Caps, Iov, Posted, Token};

#[test]
fn attributes_are_consistent() {
    let a = lo(&TcpConfig::default());
    let attr = a.attr();
    for cap in [
        Caps::AM_SHORT,
        Caps::AM_BCOPY,
        Caps::AM_ZCOPY,
        Caps::PENDING,
        Caps::CONNECT_TO_IFACE,
        Caps::PEER_FAILURE,
        Caps::EVENT_FD,
    ] {
        assert!(attr.caps.contains(cap), "{cap:?}");
    }
    assert!(attr.max_short >= 1024 && attr.max_short < attr.max_bcopy);
    assert!(attr.max_bcopy < attr.max_zcopy);
    assert!(attr.max_hdr >= 64 && attr.max_iov >= 4);
    let m = attr.model;
    assert!(m.latency > 5e-6 && m.overhead > 0.0 && m.bandwidth > 1e8);
    assert!(a.event_fd().is_some());
}

#[test]
fn short_bcopy_zcopy_round_trip() {
    let cfg = TcpConfig::default();
    let (mut a, mut b) = (lo(&cfg), lo(&cfg));
    let (mut sa, mut sb) = (Recorder::default(), Recorder::default());
    let ep = connect(a.as_mut(), b.as_ref());
    let max_short = a.attr().max_short;
    let max_bcopy = a.attr().max_bcopy;
    let max_zcopy = a.attr().max_zcopy;

    let mut expect: Vec<(u8, Vec<u8>)> = Vec::new();
    // am_short: sizes 0..=max_short (a selection), header first.
    for (i, len) in [0, 1, 7, 8, 100, 2047, 2048, 2049, max_short]
        .into_iter()
        .enumerate()
    {
        let payload = pattern(len, i as u64);
        let header = 0x0102_0304_0506_0700 + i as u64;
        let mut posted;
        loop {
            posted = a.am().unwrap().am_short(ep, 1, header, &payload).unwrap();
            if posted != Posted::NoResource {
                break;
            }
            a.progress(&mut sa);
            b.progress(&mut sb);
        }
        assert_eq!(posted, Posted::Done);
        let mut data = header.to_le_bytes().to_vec();
        data.extend_from_slice(&payload);
        expect.push((1, data));
    }
    // am_bcopy: several parts, up to max_bcopy.
    for (i, len) in [0, 1, 3000, 40_000, max_bcopy].into_iter().enumerate() {
        let whole = pattern(len, 100 + i as u64);
        let (p1, rest) = whole.split_at(len / 3);
        let (p2, p3) = rest.split_at(rest.len() / 2);
        loop {
            match a.am().unwrap().am_bcopy(ep, 2, &[p1, p2, p3]).unwrap() {
                (Posted::Done, n) => {
                    assert_eq!(n, len);
                    break;
                }
                (Posted::NoResource, _) => {
                    a.progress(&mut sa);
                    b.progress(&mut sb);
                }
                (Posted::InFlight, _) => panic!("bcopy is never in flight"),
            }
        }
        expect.push((2, whole));
    }
    // am_zcopy: header and several iov entries, up to max_zcopy.
    let mut bufs = Vec::new();
    for (i, len) in [0, 10, 70_000, max_zcopy].into_iter().enumerate() {
        let header = pattern(16, 200 + i as u64);
        bufs.push((header, pattern(len, 300 + i as u64)));
    }
    for (i, (header, body)) in bufs.iter().enumerate() {
        let (x, y) = body.split_at(body.len() / 2);
        let iov = [Iov::from_slice(x), Iov::from_slice(&[]), Iov::from_slice(y)];
        let token = Token(i as u64);
        loop {
            // SAFETY: `bufs` outlives every completion (waited for below).
            match unsafe { a.zcopy().unwrap().am_zcopy(ep, 3, header, &iov, token) }.unwrap() {
                Posted::NoResource => {
                    a.progress(&mut sa);
                    b.progress(&mut sb);
                }
                Posted::Done => break,
                Posted::InFlight => {
                    drive(&mut [(a.as_mut(), &mut sa), (b.as_mut(), &mut sb)], |x| {
                        x[0].1.completed.iter().any(|(t, _)| *t == token)
                    });
                    break;
                }
            }
        }
        let mut data = header.clone();
        data.extend_from_slice(body);
        expect.push((3, data));
    }
    let n = expect.len();
    drive(&mut [(a.as_mut(), &mut sa), (b.as_mut(), &mut sb)], |x| {
        x[1].1.ams.len() >= n
    });
    assert_eq!(sb.ams.len(), n);
    let src = sb.ams[0].1;
    for (i, ((id, s, data), (eid, edata))) in sb.ams.iter().zip(&expect).enumerate() {
        assert_eq!((*id, *s), (*eid, src), "message {i}");
        assert!(
            data == edata,
            "message {i}: {} bytes, expected {}",
            data.len(),
            edata.len()
        );
    }
    assert!(sa.completed.iter().all(|(_, r)| r.is_ok()));
    assert!(sa.ep_failed.is_empty() && sb.src_failed.is_empty());
    assert!(
        sa.ams.is_empty(),
        "nothing flows back on a send-only connection"
    );
}

#[test]
fn limits_are_enforced_on_the_sender() {
    let cfg = TcpConfig::default();
    let (mut a, b) = (lo(&cfg), lo(&cfg));
    let ep = connect(a.as_mut(), b.as_ref());
    let attr = a.attr().clone();
    let big = vec![0u8; attr.max_zcopy + 1];
    assert!(a
        .am()
        .unwrap()
        .am_short(ep, 0, 0, &big[..attr.max_short + 1])
        .is_err());
    assert!(a
        .am()
        .unwrap()
        .am_bcopy(ep, 0, &[&big[..attr.max_bcopy + 1]])
        .is_err());
    assert!(a
        .am()
        .unwrap()
        .am_short(ep, uct::AM_ID_MAX, 0, &[])
        .is_err());
    let hdr = vec![0u8; attr.max_hdr + 1];
    // SAFETY: each call is refused before touching memory.
    unsafe {
        assert!(a
            .zcopy()
            .unwrap()
            .am_zcopy(ep, 0, &[], &[Iov::from_slice(&big)], Token(0))
            .is_err());
        assert!(a
            .zcopy()
            .unwrap()
            .am_zcopy(ep, 0, &hdr, &[], Token(0))
            .is_err());
        let many = vec![Iov::from_slice(&big[..1]); attr.max_iov + 1];
        assert!(a
            .zcopy()
            .unwrap()
            .am_zcopy(ep, 0, &[], &many, Token(0))
            .is_err());
    }
    assert!(a.am().unwrap().am_short(uct::EpId(999), 0, 0, &[]).is_err());
    assert!(a.flush(Some(uct::EpId(999)), Token(0)).is_err());
    assert!(a.pending_add(uct::EpId(999), Token(0)).is_err());
    a.ep_destroy(uct::EpId(999));
}

#[test]
fn many_endpoints_per_iface() {
    let cfg = TcpConfig::default();
    let mut a = lo(&cfg);
    let mut b = lo(&cfg);
    let mut c = lo(&cfg);
    let (mut sa, mut sb, mut sc) = (
        Recorder::default(),
        Recorder::default(),
        Recorder::default(),
    );
    let mut eps = Vec::new();
    for i in 0..40u64 {
        let ep = if i % 2 == 0 {
            connect(a.as_mut(), b.as_ref())
        } else {
            connect(a.as_mut(), c.as_ref())
        };
        eps.push(ep);
    }
    // Endpoints from the receivers back to the sender too.
    let back = connect(b.as_mut(), a.as_ref());
    for (i, &ep) in eps.iter().enumerate() {
        for k in 0..5u64 {
            loop {
                match a
                    .am()
                    .unwrap()
                    .am_short(ep, 4, (i as u64) << 8 | k, &[i as u8; 3])
                    .unwrap()
                {
                    Posted::Done => break,
                    _ => {
                        // Not yet accepted, or the socket is full.
                        a.progress(&mut sa);
                        b.progress(&mut sb);
                        c.progress(&mut sc);
                    }
                }
            }
        }
    }
    let posted = short_when_open(
        &mut [(b.as_mut(), &mut sb), (a.as_mut(), &mut sa)],
        back,
        5,
        77,
        b"back",
    );
    assert_eq!(posted.unwrap(), Posted::Done);
    drive(
        &mut [
            (a.as_mut(), &mut sa),
            (b.as_mut(), &mut sb),
            (c.as_mut(), &mut sc),
        ],
        |x| x[1].1.ams.len() == 100 && x[2].1.ams.len() == 100 && x[0].1.ams.len() == 1,
    );
    for (sink, parity) in [(&sb, 0), (&sc, 1)] {
        let mut per_ep: std::collections::HashMap<_, Vec<u64>> = Default::default();
        for (id, src, data) in &sink.ams {
            assert_eq!(*id, 4);
            assert_eq!(
                *src, sink.ams[0].1,
                "one connection, one source per peer iface"
            );
            let h = u64::from_le_bytes(data[..8].try_into().unwrap());
            assert_eq!((h >> 8) % 2, parity);
            assert_eq!(&data[8..], &[(h >> 8) as u8; 3]);
            per_ep.entry(h >> 8).or_default().push(h & 0xff);
        }
        assert_eq!(per_ep.len(), 20);
        for ks in per_ep.values() {
            assert_eq!(*ks, vec![0, 1, 2, 3, 4], "in order per endpoint");
        }
    }
    assert_eq!(sa.ams[0].2[8..], *b"back");
    // b's endpoint back to a went over a's connection to b (full duplex).
    let b_src_at_a = sa.ams[0].1;
    assert_eq!(
        b.am().unwrap().am_short(back, 5, 78, b"again").unwrap(),
        Posted::Done
    );
    drive(&mut [(a.as_mut(), &mut sa), (b.as_mut(), &mut sb)], |x| {
        x[0].1.ams.len() == 2
    });
    assert_eq!(sa.ams[1].1, b_src_at_a);
}

#[test]
fn endpoint_to_itself() {
    let cfg = TcpConfig::default();
    let mut a = lo(&cfg);
    let mut sa = Recorder::default();
    let (dev, addr) = (a.device_addr().to_vec(), a.iface_addr().to_vec());
    let ep = a.ep_create(&dev, &addr).unwrap();
    let posted = short_when_open(&mut [(a.as_mut(), &mut sa)], ep, 0, 5, b"self");
    assert_eq!(posted.unwrap(), Posted::Done);
    drive(&mut [(a.as_mut(), &mut sa)], |x| x[0].1.ams.len() == 1);
    assert_eq!(sa.ams[0].2[8..], *b"self");
}

#[test]
fn flush_completes_after_data_left() {
    let cfg = TcpConfig::default();
    let (mut a, mut b) = (lo(&cfg), lo(&cfg));
    let (mut sa, mut sb) = (Recorder::default(), Recorder::default());
    let ep = connect(a.as_mut(), b.as_ref());
    let ep2 = connect(a.as_mut(), b.as_ref());
    // Right after creation the handshake may still be queued.
    let mut flushes = 0;
    for (i, e) in [Some(ep), Some(ep2), None].into_iter().enumerate() {
        match a.flush(e, Token(i as u64)).unwrap() {
            Posted::Done => {}
            Posted::InFlight => flushes += 1,
            Posted::NoResource => panic!("flush never refuses"),
        }
    }
    drive(&mut [(a.as_mut(), &mut sa), (b.as_mut(), &mut sb)], |x| {
        x[0].1.completed.len() == flushes
    });
    // Idle endpoints flush at once.
    assert_eq!(a.flush(Some(ep), Token(10)).unwrap(), Posted::Done);
    assert_eq!(a.flush(None, Token(11)).unwrap(), Posted::Done);
    assert!(sa.completed.iter().all(|(_, r)| r.is_ok()));
}
