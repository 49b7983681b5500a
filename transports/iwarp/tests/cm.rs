//! Connection setup: private data, ORD/IRD negotiation, MPA revisions,
//! CRC and peer-to-peer settings, rejects, timeouts, and a hand-made
//! siw-style peer on a raw socket.

mod common;

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::time::{Duration, Instant};

use common::*;
use rucx_iwarp::wire::ddp::{DdpHeader, QN_SEND};
use rucx_iwarp::wire::fpdu;
use rucx_iwarp::wire::mpa::{MpaFrame, KEY_REP};
use rucx_iwarp::wire::rdmap::Opcode;
use rucx_iwarp::wire::Terminate;
use rucx_rdma::{Access, CmEvent, ConnParam, ConnReqId, QpState, SendFlags, SendOp, WcStatus};

fn param(pd: &[u8], ord: u32, ird: u32) -> ConnParam {
    ConnParam {
        private_data: pd.to_vec(),
        ord,
        ird,
    }
}

#[test]
fn private_data_and_read_depths() {
    let mut a = Node::new(device(&[]));
    let mut b = Node::new(device(&[]));
    let seen = connect(
        &mut a,
        &mut b,
        &param(b"from a", 8, 4),
        &param(b"reply from b", 16, 2),
    );
    assert_eq!(seen, param(b"from a", 8, 4));
    // b's ORD is cut to a's IRD, its IRD raised to a's ORD.
    assert_eq!(established(&b).unwrap(), param(b"reply from b", 4, 8));
    assert_eq!(established(&a).unwrap(), param(b"reply from b", 4, 8));
    assert_eq!(a.ctx.qp_state(a.qp), Some(QpState::Rts));
    assert_eq!(b.ctx.qp_state(b.qp), Some(QpState::Rts));
}

#[test]
fn largest_private_data() {
    let mut a = Node::new(device(&[]));
    let mut b = Node::new(device(&[]));
    let big = vec![7u8; a.dev.attr().max_private_data];
    let seen = connect(&mut a, &mut b, &param(&big, 1, 1), &param(&big, 1, 1));
    assert_eq!(seen.private_data, big);
    assert!(a
        .ctx
        .connect(
            a.qp,
            "127.0.0.1:1".parse().unwrap(),
            &param(&[0; 509], 1, 1)
        )
        .is_err());
}

#[test]
fn revisions_crc_and_peer_to_peer() {
    type Vars = &'static [(&'static str, &'static str)];
    let cases: &[(Vars, Vars)] = &[
        (&[("MPA_REV", "1")], &[]),
        (&[("MPA_REV", "1")], &[("MPA_REV", "1")]),
        (&[("MPA_CRC", "n")], &[("MPA_CRC", "n")]),
        (&[("MPA_CRC", "n")], &[]),
        (&[], &[("MPA_CRC", "n")]),
        (&[("P2P", "n")], &[]),
        (&[("MPA_REV", "1"), ("MPA_CRC", "n")], &[("MPA_CRC", "n")]),
    ];
    for (va, vb) in cases {
        let mut a = Node::new(device(va));
        let mut b = Node::new(device(vb));
        let seen = connect(&mut a, &mut b, &param(b"x", 3, 5), &param(b"y", 3, 5));
        assert_eq!(seen.private_data, b"x");
        if va.contains(&("MPA_REV", "1")) {
            // No IRD/ORD word: the responder assumes its defaults.
            assert_eq!((seen.ord, seen.ird), (32, 32));
        } else {
            assert_eq!((seen.ord, seen.ird), (3, 5));
        }
        // Data flows both ways.
        let x = a.buf(5000, 9, Access::LOCAL_WRITE);
        let y = b.buf(5000, 0, Access::LOCAL_WRITE);
        b.post_recv(1, &[y.sge(0, 5000)]);
        a.post_send(1, SendOp::Send, &[x.sge(0, 5000)], SendFlags::empty());
        ok(&wait_wc(&mut a, &mut b, 1, 1));
        a.post_recv(2, &[x.sge(0, 5000)]);
        b.post_send(2, SendOp::Send, &[y.sge(0, 100)], SendFlags::empty());
        assert_eq!(wait_wc(&mut a, &mut b, 0, 2).byte_len, 100);
    }
}

#[test]
fn revision_2_request_to_a_revision_1_responder_is_rejected() {
    let mut a = Node::new(device(&[]));
    let mut b = Node::new(device(&[("MPA_REV", "1")]));
    let addr = listen(&mut b);
    a.ctx.connect(a.qp, addr, &ConnParam::default()).unwrap();
    drive(&mut a, &mut b, |a, _| !a.cm.is_empty());
    // The responder answers with its own revision and R set.
    assert!(matches!(a.cm[0], CmEvent::Rejected { .. }), "{:?}", a.cm);
    assert!(b.cm.is_empty());
}

#[test]
fn reject_with_private_data() {
    let mut a = Node::new(device(&[]));
    let mut b = Node::new(device(&[]));
    let rbuf = a.buf(8, 0, Access::LOCAL_WRITE);
    a.post_recv(1, &[rbuf.sge(0, 8)]);
    let addr = listen(&mut b);
    a.ctx.connect(a.qp, addr, &param(b"please", 1, 1)).unwrap();
    drive(&mut a, &mut b, |_, b| !b.cm.is_empty());
    let CmEvent::ConnectRequest { req, .. } = b.cm[0].clone() else {
        panic!("{:?}", b.cm)
    };
    b.ctx.reject(req, b"go away").unwrap();
    assert!(b.ctx.reject(req, b"twice").is_err());
    drive(&mut a, &mut b, |a, _| !a.cm.is_empty());
    assert_eq!(
        a.cm[0],
        CmEvent::Rejected {
            qp: a.qp,
            private_data: b"go away".to_vec()
        }
    );
    assert_eq!(a.ctx.qp_state(a.qp), Some(QpState::Error));
    assert_eq!(wait_wc(&mut a, &mut b, 0, 1).status, WcStatus::WrFlushErr);
}

#[test]
fn nobody_listening() {
    let mut a = Node::new(device(&[]));
    let mut b = Node::new(device(&[]));
    let port = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap();
    a.ctx.connect(a.qp, port, &ConnParam::default()).unwrap();
    drive(&mut a, &mut b, |a, _| !a.cm.is_empty());
    assert!(
        matches!(a.cm[0], CmEvent::ConnectError { .. }),
        "{:?}",
        a.cm
    );
}

#[test]
fn silent_responder_times_out() {
    let mut a = Node::new(device(&[("MPA_TIMEOUT", "200ms")]));
    let mut b = Node::new(device(&[]));
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    a.ctx
        .connect(a.qp, l.local_addr().unwrap(), &ConnParam::default())
        .unwrap();
    let (_s, _) = l.accept().unwrap();
    drive(&mut a, &mut b, |a, _| !a.cm.is_empty());
    let CmEvent::ConnectError { reason, .. } = &a.cm[0] else {
        panic!("{:?}", a.cm)
    };
    assert!(reason.contains("timed out"), "{reason}");
}

#[test]
fn silent_initiator_is_dropped() {
    let mut a = Node::new(device(&[]));
    let mut b = Node::new(device(&[("MPA_TIMEOUT", "200ms")]));
    let addr = listen(&mut b);
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_nonblocking(true).unwrap();
    let mut closed = false;
    drive(&mut a, &mut b, |_, _| {
        let mut x = [0u8; 1];
        closed = matches!(s.read(&mut x), Ok(0));
        closed
    });
    assert!(b.cm.is_empty());
}

fn read_exact_timeout(s: &mut TcpStream, n: usize, b: &mut Node) -> Vec<u8> {
    s.set_nonblocking(true).unwrap();
    let mut out = vec![0u8; n];
    let mut got = 0;
    let mut a = Node::new(device(&[]));
    drive(&mut a, b, |_, _| {
        match s.read(&mut out[got..]) {
            Ok(0) => panic!("EOF after {got} of {n} bytes"),
            Ok(k) => got += k,
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
            Err(e) => panic!("{e}"),
        }
        got == n
    });
    out
}

/// Connects a raw socket to a listener of `b` and sends a Linux
/// siw-style request: rev 2, S set, no CRC, no markers, IRD = ORD = 16
/// and no other private data. Returns the socket and the request `b` saw.
fn siw_request(b: &mut Node) -> (TcpStream, ConnReqId, ConnParam) {
    let addr = listen(b);
    let mut s = TcpStream::connect(addr).unwrap();
    let mut req = b"MPA ID Req Frame".to_vec();
    req.extend_from_slice(&[0x10, 2, 0, 4, 0x00, 0x10, 0x00, 0x10]);
    s.write_all(&req).unwrap();
    let mut a = Node::new(device(&[]));
    drive(&mut a, b, |_, b| !b.cm.is_empty());
    let CmEvent::ConnectRequest { req, param, .. } = b.cm.remove(0) else {
        panic!("{:?}", b.cm)
    };
    (s, req, param)
}

/// A siw-style initiator on a raw socket.
#[test]
fn siw_style_request_on_a_raw_socket() {
    let mut b = Node::new(device(&[("MPA_CRC", "n")]));
    let (mut s, req, p) = siw_request(&mut b);
    let mut a = Node::new(device(&[]));
    assert_eq!(p, param(b"", 16, 16));
    b.ctx.accept(req, b.qp, &param(b"", 4, 4)).unwrap();
    let reply = read_exact_timeout(&mut s, 24, &mut b);
    assert_eq!(&reply[..16], KEY_REP);
    // Same flags (S), no CRC asked by either side, rev 2; IRD raised to
    // the peer's ORD (16), ORD 4 (within the peer's IRD); no A, no RTR
    // bits.
    assert_eq!(&reply[16..], &[0x10, 2, 0, 4, 0x00, 0x10, 0x00, 0x04]);
    assert!(
        established(&b).is_some(),
        "no peer-to-peer: established at once"
    );

    // A Send from the raw peer lands in a posted receive.
    let rbuf = b.buf(16, 0, Access::LOCAL_WRITE);
    b.post_recv(1, &[rbuf.sge(0, 16)]);
    let hdr = DdpHeader::Untagged {
        last: true,
        opcode: Opcode::Send,
        inv_stag: 0,
        qn: QN_SEND,
        msn: 1,
        mo: 0,
    };
    let (h, n) = hdr.to_bytes();
    let mut out = Vec::new();
    fpdu::encode_fpdu(&mut out, &[&h[..n], b"raw hello"], false);
    s.write_all(&out).unwrap();
    let wc = wait_wc(&mut a, &mut b, 1, 1);
    assert_eq!(wc.byte_len, 9);
    assert_eq!(&rbuf.data[..9], b"raw hello");

    // And one from the engine arrives as a well-formed FPDU.
    let src = b.buf(5, b'z', Access::LOCAL_WRITE);
    b.post_send(2, SendOp::Send, &[src.sge(0, 5)], SendFlags::empty());
    let len = fpdu::fpdu_len(18 + 5);
    let got = read_exact_timeout(&mut s, len, &mut b);
    assert_eq!(fpdu::check_fpdu(&got, false), Ok(Some(23)));
    let (h, hl) = DdpHeader::decode(&got[2..]).unwrap();
    assert_eq!(hl, 18);
    assert!(matches!(
        h,
        DdpHeader::Untagged {
            opcode: Opcode::Send,
            qn: 0,
            msn: 1,
            mo: 0,
            last: true,
            ..
        }
    ));
    assert_eq!(&got[20..25], b"zzzzz");
}

#[test]
fn markers_are_refused() {
    let mut b = Node::new(device(&[]));
    let addr = listen(&mut b);
    let mut s = TcpStream::connect(addr).unwrap();
    let mut req = b"MPA ID Req Frame".to_vec();
    req.extend_from_slice(&[0x80, 1, 0, 0]);
    s.write_all(&req).unwrap();
    let reply = read_exact_timeout(&mut s, 20, &mut b);
    let (f, _) = MpaFrame::decode(&reply).unwrap().unwrap();
    assert!(f.reply && f.reject && !f.markers);
    assert_eq!(f.rev, 1);
    assert!(b.cm.is_empty());
}

#[test]
fn garbage_after_the_handshake() {
    for crc in ["y", "n"] {
        let mut b = Node::new(device(&[("MPA_CRC", crc)]));
        let (mut s, req, _) = siw_request(&mut b);
        let mut a = Node::new(device(&[]));
        b.ctx.accept(req, b.qp, &ConnParam::default()).unwrap();
        read_exact_timeout(&mut s, 24, &mut b);
        let rbuf = b.buf(64, 0, Access::LOCAL_WRITE);
        b.post_recv(1, &[rbuf.sge(0, 64)]);
        let junk: Vec<u8> = (0..4000u32)
            .map(|i| (i.wrapping_mul(2654435761) >> 13) as u8)
            .collect();
        let _ = s.write_all(&junk);
        drive(&mut a, &mut b, |_, b| {
            b.cm.iter()
                .any(|e| matches!(e, CmEvent::Disconnected { .. }))
        });
        assert_eq!(b.ctx.qp_state(b.qp), Some(QpState::Error));
        assert_eq!(wait_wc(&mut a, &mut b, 1, 1).status, WcStatus::WrFlushErr);
        // The Terminate (if any came before the close) parses.
        s.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
        let mut rest = Vec::new();
        let _ = s.read_to_end(&mut rest);
        if rest.len() >= 2 + 18 + 4 {
            let (h, hl) = DdpHeader::decode(&rest[2..]).unwrap();
            assert_eq!(h.opcode(), Opcode::Terminate);
            let ulpdu = usize::from(u16::from_be_bytes([rest[0], rest[1]]));
            Terminate::decode(&rest[2 + hl..2 + ulpdu]).unwrap();
        }
    }
}

/// A raw peer that sends more Read Requests at once than the IRD it was
/// granted gets a Terminate (RDMAP remote operation, catastrophic for the
/// stream, as siw sends) naming the request, and the queue pair fails.
#[test]
fn read_requests_beyond_the_ird_are_terminated() {
    use rucx_iwarp::wire::ddp::QN_READ_REQ;
    use rucx_iwarp::wire::rdmap::ReadRequest;
    use rucx_iwarp::wire::TermCause;
    let mut b = Node::new(device(&[]));
    let (mut s, req, _) = siw_request(&mut b);
    let mut a = Node::new(device(&[]));
    // IRD 2 granted: the reply's word says so.
    b.ctx.accept(req, b.qp, &param(b"", 1, 2)).unwrap();
    let reply = read_exact_timeout(&mut s, 24, &mut b);
    let (f, _) = MpaFrame::decode(&reply).unwrap().unwrap();
    let ird = u32::from(f.enhanced.unwrap().ird);
    // Zero-length READs (no region checked), all in one write, so the
    // engine queues them before it can answer any.
    let mut out = Vec::new();
    for msn in 1..=ird + 5 {
        let hdr = DdpHeader::Untagged {
            last: true,
            opcode: Opcode::ReadRequest,
            inv_stag: 0,
            qn: QN_READ_REQ,
            msn,
            mo: 0,
        };
        let rr = ReadRequest {
            sink_stag: 0x100,
            sink_to: 0,
            size: 0,
            src_stag: 0x200,
            src_to: 0,
        };
        let (h, n) = hdr.to_bytes();
        fpdu::encode_fpdu(&mut out, &[&h[..n], &rr.encode()], false);
    }
    s.write_all(&out).unwrap();
    drive(&mut a, &mut b, |_, b| {
        b.cm.iter()
            .any(|e| matches!(e, CmEvent::Disconnected { .. }))
    });
    assert_eq!(b.ctx.qp_state(b.qp), Some(QpState::Error));
    assert!(
        b.asyncs.iter().any(|e| e.detail.contains("Terminate")),
        "{:?}",
        b.asyncs
    );
    // Read Responses for the first requests, then the Terminate.
    s.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
    let mut rest = Vec::new();
    let _ = s.read_to_end(&mut rest);
    let mut at = 0;
    let mut term = None;
    while let Ok(Some(ulpdu)) = fpdu::check_fpdu(&rest[at..], false) {
        let (h, hl) = DdpHeader::decode(&rest[at + 2..]).unwrap();
        if h.opcode() == Opcode::Terminate {
            term = Some(Terminate::decode(&rest[at + 2 + hl..at + 2 + ulpdu]).unwrap());
        }
        at += fpdu::fpdu_len(ulpdu);
    }
    let term = term.expect("a Terminate");
    assert_eq!(term.cause, TermCause::RDMAP_CATASTROPHIC_STREAM);
    assert!(term.rdmap_hdr.is_some(), "the request is echoed");
}

/// More connections under way than are pruned on every progress call:
/// every one still times out, and a queue pair destroyed while connecting
/// leaves no timer that fails the next holder of its slot early.
#[test]
fn many_silent_responders_time_out_and_a_reused_id_keeps_its_own_timer() {
    const N: usize = 100;
    let mut a = Node::new(device(&[("MPA_TIMEOUT", "300ms")]));
    let mut b = Node::new(device(&[]));
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let to = l.local_addr().unwrap();
    let mut qps = vec![a.qp];
    for _ in 1..N {
        qps.push(a.ctx.create_qp(&qp_init(a.pd, a.cq)).unwrap());
    }
    // The first one is destroyed while connecting; its id goes to a queue
    // pair that starts connecting later.
    a.ctx.connect(qps[0], to, &ConnParam::default()).unwrap();
    let mut held = vec![l.accept().unwrap().0];
    let gone = qps[0];
    a.ctx.destroy_qp(gone).unwrap();
    std::thread::sleep(Duration::from_millis(200));
    let late = a.ctx.create_qp(&qp_init(a.pd, a.cq)).unwrap();
    // (Same slot, next generation.)
    assert_eq!(late.0 & 0xf_ffff, gone.0 & 0xf_ffff, "the slot is reused");
    qps[0] = late;
    let started = Instant::now();
    for &qp in &qps {
        a.ctx.connect(qp, to, &ConnParam::default()).unwrap();
        held.push(l.accept().unwrap().0);
    }
    let mut late_failed = None;
    drive(&mut a, &mut b, |a, _| {
        if late_failed.is_none()
            && a.cm
                .iter()
                .any(|e| matches!(e, CmEvent::ConnectError { qp, .. } if *qp == late))
        {
            late_failed = Some(started.elapsed());
        }
        a.cm.iter()
            .filter(|e| matches!(e, CmEvent::ConnectError { .. }))
            .count()
            == N
    });
    // Not before its own timeout: the destroyed holder's timer, due about
    // 100 ms after the late one started, fired for nothing.
    let t = late_failed.expect("the late queue pair failed");
    assert!(t >= Duration::from_millis(290), "failed after {t:?}");
    for e in &a.cm {
        let CmEvent::ConnectError { reason, .. } = e else {
            panic!("{:?}", a.cm)
        };
        assert!(reason.contains("timed out"), "{reason}");
    }
}
