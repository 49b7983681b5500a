//! A shared receive queue in the engine: two queue pairs of one context
//! take the receives of their SENDs from it; a SEND that finds it empty
//! ends its own connection only.

mod common;

use common::*;
use rucx_rdma::{
    Access, CmEvent, ConnParam, QpId, QpInit, RecvWr, SendFlags, SendOp, SrqId, SrqInit, WcOpcode,
    WcStatus,
};

fn all() -> Access {
    Access::LOCAL_WRITE | Access::REMOTE_WRITE | Access::REMOTE_READ
}

/// Accepts the next connection request on `b` with queue pair `qp`.
fn accept_next(a: &mut Node, b: &mut Node, qp: QpId) {
    let mut req = None;
    drive(a, b, |_, b| {
        if let Some(i) =
            b.cm.iter()
                .position(|e| matches!(e, CmEvent::ConnectRequest { .. }))
        {
            req = Some(b.cm.remove(i));
        }
        req.is_some()
    });
    let Some(CmEvent::ConnectRequest { req, .. }) = req else {
        unreachable!()
    };
    b.ctx.accept(req, qp, &ConnParam::default()).unwrap();
    drive(a, b, |a, _| established(a).is_some());
}

fn post_srq(b: &mut Node, srq: SrqId, wr_id: u64, buf: &Buf) {
    let sge = [buf.sge(0, buf.data.len())];
    let wr = RecvWr { wr_id, sges: &sge };
    // SAFETY: the test keeps the buffer alive until the end.
    unsafe { b.ctx.post_srq_recv(srq, &wr) }.unwrap();
}

#[test]
fn two_queue_pairs_share_one_receive_queue() {
    const LEN: usize = 200_000;
    let mut b = Node::new(device(&[]));
    let srq = b
        .ctx
        .create_srq(&SrqInit {
            pd: b.pd,
            max_wr: 4,
            max_sge: 1,
        })
        .unwrap();
    assert!(b
        .ctx
        .create_srq(&SrqInit {
            pd: b.pd,
            max_wr: 4,
            max_sge: 2,
        })
        .is_err());
    let init = QpInit {
        srq: Some(srq),
        ..qp_init(b.pd, b.cq)
    };
    let q1 = b.ctx.create_qp(&init).unwrap();
    let q2 = b.ctx.create_qp(&init).unwrap();
    let mut a1 = Node::new(device(&[]));
    let mut a2 = Node::new(device(&[]));
    let addr = listen(&mut b);
    a1.ctx.connect(a1.qp, addr, &ConnParam::default()).unwrap();
    accept_next(&mut a1, &mut b, q1);
    a2.ctx.connect(a2.qp, addr, &ConnParam::default()).unwrap();
    accept_next(&mut a2, &mut b, q2);

    // Receives come from the shared queue only.
    let stray = b.buf(64, 0, all());
    let wr = RecvWr {
        wr_id: 99,
        sges: &[stray.sge(0, 64)],
    };
    // SAFETY: refused before the buffer is used.
    assert!(unsafe { b.ctx.post_recv(q1, &wr) }.is_err());
    assert!(b.ctx.destroy_srq(srq).is_err(), "in use by two queue pairs");

    let rx: Vec<Buf> = (0..4).map(|_| b.buf(LEN, 0xee, all())).collect();
    for (i, r) in rx.iter().enumerate().take(3) {
        post_srq(&mut b, srq, 10 + i as u64, r);
    }
    // Both SENDs span many FPDUs and arrive interleaved.
    let mut s1 = a1.buf(LEN, 0, all());
    s1.data.copy_from_slice(&pattern(LEN, 1));
    let mut s2 = a2.buf(LEN, 0, all());
    s2.data.copy_from_slice(&pattern(LEN, 2));
    a1.post_send(1, SendOp::Send, &[s1.sge(0, LEN)], SendFlags::empty());
    a2.post_send(2, SendOp::Send, &[s2.sge(0, LEN)], SendFlags::empty());
    let mut got = Vec::new();
    let start = std::time::Instant::now();
    while got.len() < 2 {
        a1.poll();
        a2.poll();
        b.poll();
        got.append(&mut b.wcs);
        assert!(start.elapsed() < DEADLINE, "timed out: {got:?}");
    }
    for wc in &got {
        ok(wc);
        assert_eq!(wc.opcode, WcOpcode::Recv);
        assert_eq!(wc.byte_len as usize, LEN);
        let buf = &rx[(wc.wr_id - 10) as usize];
        let seed = if wc.qp == Some(q1) { 1 } else { 2 };
        assert!(wc.qp == Some(q1) || wc.qp == Some(q2));
        assert_eq!(buf.data, pattern(LEN, seed), "wr {}", wc.wr_id);
    }
    // The receive posted last is taken first: 10 is still posted.
    let mut ids: Vec<u64> = got.iter().map(|w| w.wr_id).collect();
    ids.sort_unstable();
    assert_eq!(ids, [11, 12]);

    // One receive left: a1's first SEND takes it, its second finds none
    // and ends a1's connection; a2's goes on.
    a1.post_send(3, SendOp::Send, &[s1.sge(0, 8)], SendFlags::empty());
    a1.post_send(4, SendOp::Send, &[s1.sge(0, 8)], SendFlags::empty());
    let start = std::time::Instant::now();
    loop {
        a1.poll();
        b.poll();
        let failed =
            b.cm.iter()
                .any(|e| matches!(e, CmEvent::Disconnected { qp } if *qp == q1));
        if failed && b.wcs.iter().any(|w| w.wr_id == 10) {
            break;
        }
        assert!(
            start.elapsed() < DEADLINE,
            "timed out: {:?} {:?}",
            b.cm,
            b.wcs
        );
    }
    ok(b.take_wc(10).as_ref().unwrap());
    assert!(b.asyncs.iter().any(|e| e.qp == q1), "{:?}", b.asyncs);
    assert_eq!(b.ctx.qp_state(q2), Some(rucx_rdma::QpState::Rts));
    post_srq(&mut b, srq, 13, &rx[3]);
    a2.post_send(5, SendOp::Send, &[s2.sge(0, 16)], SendFlags::empty());
    let start = std::time::Instant::now();
    while b.take_wc(13).is_none() {
        a2.poll();
        b.poll();
        assert!(start.elapsed() < DEADLINE, "timed out");
    }
    assert_eq!(&rx[3].data[..16], &pattern(16, 2)[..16]);
    assert!(b
        .wcs
        .iter()
        .all(|w| w.status != WcStatus::Success || w.qp != Some(q1)));

    b.ctx.destroy_qp(q1).unwrap();
    b.ctx.destroy_qp(q2).unwrap();
    b.ctx.destroy_srq(srq).unwrap();
}
