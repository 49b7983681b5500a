//! Back-pressure: full sockets, pending queues, partial zero-copy writes.

mod common;

use common::{connect_ready, drive, lo, pattern, Recorder};
use rucx_tcp::TcpConfig;
use uct::ucs::config::MemUnits;
use uct::{Iov, Posted, Token};

/// Small socket buffers, and every send written at once (no batching), so
/// that only a full socket makes a send wait.
fn small_buffers() -> TcpConfig {
    TcpConfig {
        sndbuf: MemUnits::Bytes(65536),
        rcvbuf: MemUnits::Bytes(65536),
        tx_batch: false,
        ..TcpConfig::default()
    }
}

#[test]
fn flood_pending_and_order() {
    let cfg = small_buffers();
    let (mut a, mut b) = (lo(&cfg), lo(&cfg));
    let (mut sa, mut sb) = (Recorder::default(), Recorder::default());
    let ep = connect_ready(a.as_mut(), &mut sa, b.as_mut(), &mut sb);
    let len = 3000;
    let total = 2000u32;
    let mut next = 0u32;
    let mut refused = 0;
    let mut waiting = false;
    let mut token = 0u64;
    while next < total || sb.ams.len() < total as usize {
        if !waiting && next < total {
            let mut msg = next.to_le_bytes().to_vec();
            msg.extend_from_slice(&pattern(len, u64::from(next)));
            match a.am().unwrap().am_bcopy(ep, 6, &[&msg]).unwrap() {
                (Posted::Done, n) => {
                    assert_eq!(n, msg.len());
                    next += 1;
                }
                (Posted::NoResource, _) => {
                    refused += 1;
                    token += 1;
                    a.pending_add(ep, Token(token)).unwrap();
                    waiting = true;
                    // Refused again while the queue is not empty.
                    assert_eq!(
                        a.am().unwrap().am_short(ep, 6, 0, &[]).unwrap(),
                        Posted::NoResource
                    );
                }
                (Posted::InFlight, _) => panic!("bcopy never in flight"),
            }
            // The receiver only reads while the sender is blocked.
            continue;
        }
        a.progress(&mut sa);
        if let Some(&(e, t)) = sa.ready.last() {
            if waiting && t == Token(token) {
                assert_eq!(e, ep);
                waiting = false;
            }
        }
        b.progress(&mut sb);
    }
    assert!(refused > 0, "the socket never filled up");
    let tokens: Vec<u64> = sa.ready.iter().map(|(_, t)| t.0).collect();
    assert_eq!(
        tokens,
        (1..=token).collect::<Vec<_>>(),
        "each token once, in order"
    );
    let src = sb.ams[0].1;
    for (i, (id, s, data)) in sb.ams.iter().enumerate() {
        assert_eq!((*id, *s), (6, src));
        assert_eq!(data[..4], (i as u32).to_le_bytes(), "in order");
        assert!(
            data[4..] == pattern(len, i as u64)[..],
            "message {i} intact"
        );
    }
    assert!(sa.ep_failed.is_empty() && sb.src_failed.is_empty());
}

#[test]
fn pending_on_a_free_endpoint_comes_back_next_progress() {
    let cfg = TcpConfig::default();
    let (mut a, mut b) = (lo(&cfg), lo(&cfg));
    let (mut sa, mut sb) = (Recorder::default(), Recorder::default());
    let ep = connect_ready(a.as_mut(), &mut sa, b.as_mut(), &mut sb);
    a.pending_add(ep, Token(1)).unwrap();
    a.pending_add(ep, Token(2)).unwrap();
    assert_eq!(a.arm().unwrap(), uct::Armed::Busy);
    assert!(a.progress(&mut sa) >= 2);
    let tokens: Vec<_> = sa.ready.iter().map(|r| r.1).collect();
    assert!(tokens.ends_with(&[Token(1), Token(2)]));
    assert_eq!(a.arm().unwrap(), uct::Armed::Sleep);
}

#[test]
fn partial_zcopy_completes_from_progress() {
    let cfg = small_buffers();
    let (mut a, mut b) = (lo(&cfg), lo(&cfg));
    let (mut sa, mut sb) = (Recorder::default(), Recorder::default());
    let ep = connect_ready(a.as_mut(), &mut sa, b.as_mut(), &mut sb);
    let max = a.attr().max_zcopy;
    let body = pattern(max, 5);
    let header = pattern(100, 6);
    let parts: Vec<&[u8]> = body.chunks(max / 10 + 1).collect();
    let iov: Vec<Iov> = parts.iter().map(|p| Iov::from_slice(p)).collect();
    let posted = loop {
        // SAFETY: `body` lives until the completion is seen below.
        match unsafe { a.zcopy().unwrap().am_zcopy(ep, 7, &header, &iov, Token(42)) }.unwrap() {
            Posted::NoResource => {
                a.progress(&mut sa);
            }
            p => break p,
        }
    };
    assert_eq!(
        posted,
        Posted::InFlight,
        "1 MiB cannot fit 64 KiB socket buffers"
    );
    // While the zero-copy send is in flight, everything else waits.
    assert_eq!(
        a.am().unwrap().am_short(ep, 7, 1, &[]).unwrap(),
        Posted::NoResource
    );
    assert_eq!(a.flush(Some(ep), Token(43)).unwrap(), Posted::InFlight);
    assert_eq!(a.flush(None, Token(44)).unwrap(), Posted::InFlight);
    a.pending_add(ep, Token(45)).unwrap();
    drive(&mut [(a.as_mut(), &mut sa), (b.as_mut(), &mut sb)], |x| {
        x[1].1.ams.len() == 1 && x[0].1.completed.len() == 3 && x[0].1.ready.len() == 1
    });
    let done: Vec<_> = sa.completed.iter().map(|(t, r)| (t.0, r.is_ok())).collect();
    assert_eq!(done[..2], [(42, true), (43, true)]);
    assert!(done.contains(&(44, true)));
    assert_eq!(sa.ready, vec![(ep, Token(45))]);
    let (id, _, data) = &sb.ams[0];
    assert_eq!(*id, 7);
    assert!(data[..100] == header[..] && data[100..] == body[..]);
    // Free again.
    assert_eq!(
        a.am().unwrap().am_short(ep, 7, 1, &[]).unwrap(),
        Posted::Done
    );
}

#[test]
fn copy_sends_queue_behind_a_partial_write() {
    let cfg = small_buffers();
    let (mut a, mut b) = (lo(&cfg), lo(&cfg));
    let (mut sa, mut sb) = (Recorder::default(), Recorder::default());
    let ep = connect_ready(a.as_mut(), &mut sa, b.as_mut(), &mut sb);
    let max = a.attr().max_bcopy;
    let big = pattern(max, 9);
    let mut sent = 0u64;
    // Fill the socket and the endpoint buffer with small and large sends.
    loop {
        let r = if sent % 3 == 0 {
            a.am().unwrap().am_bcopy(ep, 8, &[&big]).unwrap().0
        } else {
            a.am().unwrap().am_short(ep, 9, sent, b"xy").unwrap()
        };
        if r == Posted::NoResource {
            break;
        }
        sent += 1;
    }
    assert!(sent > 1);
    assert_eq!(a.flush(Some(ep), Token(1)).unwrap(), Posted::InFlight);
    drive(&mut [(a.as_mut(), &mut sa), (b.as_mut(), &mut sb)], |x| {
        x[1].1.ams.len() == sent as usize
    });
    drive(&mut [(a.as_mut(), &mut sa), (b.as_mut(), &mut sb)], |x| {
        x[0].1.completed.iter().any(|(t, _)| *t == Token(1))
    });
    for (i, (id, _, data)) in sb.ams.iter().enumerate() {
        if i % 3 == 0 {
            assert_eq!(*id, 8);
            assert!(*data == big);
        } else {
            assert_eq!(*id, 9);
            assert_eq!(data[..8], (i as u64).to_le_bytes());
            assert_eq!(data[8..], *b"xy");
        }
    }
}
