//! Tests that need an RDMA device: soft-RoCE (`rdma_rxe`) inside a guest,
//! as DESIGN.md's "RDMA without a NIC" sets up, or a real NIC. Where no
//! device is found each test says `skipped: no RDMA device`, and fails
//! instead when `RUCX_REQUIRE_ALL=1`.
//!
//! Two contexts of one device connect to each other through the device's
//! own address, as two workers of one process would.

#![cfg(feature = "sys")]

mod common;

use common::{connect, device, wait_cm, Buf, Side, DEADLINE};
use rucx_rdma::{CmEvent, ConnParam, QpState, RecvWr, SendOp, WcOpcode, WcStatus};
use rucx_verbs::discover::{discover, GidKind, PortState};
use std::time::Instant;
use uct::Armed;

#[test]
fn discovery_reads_ports_and_gids() {
    if device().is_none() {
        return;
    }
    let devs = discover();
    let port = devs
        .iter()
        .flat_map(|d| &d.ports)
        .find(|p| p.state == PortState::Active)
        .expect("an active port");
    assert!(port.active_mtu >= 256);
    assert!(!port.gids.is_empty());
    if devs[0].name.starts_with("rxe") {
        assert!(port.gids.iter().any(|g| g.kind == GidKind::RoceV2));
    }
}

#[test]
fn regions_hold_their_protection_domain() {
    let Some(dev) = device() else {
        return;
    };
    let pd = dev.alloc_pd().unwrap();
    let buf = Buf::new(&*dev, pd, 4096, 0);
    assert!(dev.dealloc_pd(pd).is_err(), "a region is in it");
    dev.dereg_mr(&buf.mr).unwrap();
    assert!(dev.dereg_mr(&buf.mr).is_err());
    dev.dealloc_pd(pd).unwrap();
}

#[test]
fn send_write_read_and_atomics_over_a_connection() {
    let Some(dev) = device() else {
        return;
    };
    let pd = dev.alloc_pd().unwrap();
    let (mut a, mut b) = connect(&*dev, pd);
    let src = Buf::new(&*dev, pd, 4096, 0xab);
    let dst = Buf::new(&*dev, pd, 4096, 0);
    // SEND into a posted receive.
    let rwr = RecvWr {
        wr_id: 9,
        sges: &[dst.sge(0, 4096)],
    };
    // SAFETY: `dst` lives until the end of the test.
    unsafe { b.ctx.post_recv(b.qp, &rwr) }.unwrap();
    a.send(1, SendOp::Send, &[src.sge(0, 100)]);
    assert_eq!(a.wc().status, WcStatus::Success);
    let wc = b.wc();
    assert_eq!(
        (wc.wr_id, wc.status, wc.opcode),
        (9, WcStatus::Success, WcOpcode::Recv)
    );
    assert_eq!(wc.byte_len, 100);
    // WRITE, then READ it back.
    let remote = dst.mr.addr + 1024;
    let rkey = dst.mr.rkey;
    a.send(
        2,
        SendOp::Write {
            remote_addr: remote,
            rkey,
        },
        &[src.sge(0, 2048)],
    );
    assert_eq!(a.wc().status, WcStatus::Success);
    let back = Buf::new(&*dev, pd, 2048, 0);
    a.send(
        3,
        SendOp::Read {
            remote_addr: remote,
            rkey,
        },
        &[back.sge(0, 2048)],
    );
    let wc = a.wc();
    assert_eq!(
        (wc.status, wc.opcode),
        (WcStatus::Success, WcOpcode::RdmaRead)
    );
    assert!(back.data.iter().all(|&x| x == 0xab));
    // Atomics on an aligned word.
    if dev.attr().atomics {
        let word = dst.mr.addr;
        let result = Buf::new(&*dev, pd, 8, 0);
        let op = SendOp::FetchAdd {
            remote_addr: word,
            rkey,
            add: 5,
        };
        a.send(4, op, &[result.sge(0, 8)]);
        assert_eq!(a.wc().status, WcStatus::Success);
        let op = SendOp::CmpSwap {
            remote_addr: word,
            rkey,
            compare: 0,
            swap: 1,
        };
        a.send(5, op, &[result.sge(0, 8)]);
        assert_eq!(a.wc().status, WcStatus::Success);
    }
    // A forged key: a remote access error, and the queue pair fails.
    a.send(
        6,
        SendOp::Write {
            remote_addr: remote,
            rkey: rkey ^ 0xff00,
        },
        &[src.sge(0, 8)],
    );
    assert_eq!(a.wc().status, WcStatus::RemAccessErr);
    drop((a, b));
    drop((src, dst, back));
}

#[test]
fn arm_is_busy_while_completions_wait() {
    let Some(dev) = device() else {
        return;
    };
    let pd = dev.alloc_pd().unwrap();
    let (mut a, _b) = connect(&*dev, pd);
    assert_eq!(a.ctx.arm().unwrap(), Armed::Sleep);
    let src = Buf::new(&*dev, pd, 64, 1);
    let dst = Buf::new(&*dev, pd, 64, 0);
    let op = SendOp::Write {
        remote_addr: dst.mr.addr,
        rkey: dst.mr.rkey,
    };
    a.send(1, op, &[src.sge(0, 64)]);
    let start = Instant::now();
    while a.ctx.arm().unwrap() != Armed::Busy {
        assert!(start.elapsed() < DEADLINE, "never busy");
    }
    assert_eq!(a.wc().status, WcStatus::Success, "kept for poll_cq");
}

#[test]
fn reject_and_disconnect_are_reported() {
    let Some(dev) = device() else {
        return;
    };
    let pd = dev.alloc_pd().unwrap();
    let (mut a, mut b) = (Side::new(&*dev, pd), Side::new(&*dev, pd));
    let at = b
        .ctx
        .listen(std::net::SocketAddr::new(dev.attr().addr, 0))
        .unwrap();
    a.ctx.connect(a.qp, at, &ConnParam::default()).unwrap();
    let CmEvent::ConnectRequest { req, .. } = wait_cm(&mut b, &mut a) else {
        panic!("expected a connection request");
    };
    b.ctx.reject(req, b"no").unwrap();
    match wait_cm(&mut a, &mut b) {
        CmEvent::Rejected { private_data, .. } => assert_eq!(&private_data[..2], b"no"),
        other => panic!("expected a reject, got {other:?}"),
    }
    let (mut a, mut b) = connect(&*dev, pd);
    a.ctx.disconnect(a.qp).unwrap();
    assert!(matches!(
        wait_cm(&mut b, &mut a),
        CmEvent::Disconnected { .. }
    ));
    assert_eq!(b.ctx.qp_state(b.qp), Some(QpState::Error));
}
