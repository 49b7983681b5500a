//! Tests that need an RDMA device: soft-RoCE (`rdma_rxe`) inside a guest,
//! as DESIGN.md's "RDMA without a NIC" sets up, or a real NIC. Where no
//! device is found each test says `skipped: no RDMA device`, and fails
//! instead when `RUCX_REQUIRE_ALL=1`.
//!
//! Two contexts of one device connect to each other through the device's
//! own address, as two workers of one process would.

#![cfg(feature = "sys")]

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::{Duration, Instant};

use rucx_rdma::{
    Access, CmEvent, ConnParam, CqId, Device, Mr, PdId, Provider, QpId, QpInit, QpState, RecvWr,
    SendFlags, SendOp, SendWr, Sge, Verbs, Wc, WcOpcode, WcStatus,
};
use rucx_verbs::discover::{discover, GidKind, PortState};
use rucx_verbs::PROVIDER;
use uct::Armed;

const DEADLINE: Duration = Duration::from_secs(20);

fn skip_or_fail(why: &str) {
    if std::env::var("RUCX_REQUIRE_ALL").is_ok_and(|v| v == "1") {
        panic!("required but unavailable: {why}");
    }
    println!("skipped: {why}");
}

/// The first usable device, or `None` after saying why.
fn device() -> Option<Arc<dyn Device>> {
    let Some(info) = PROVIDER.devices().unwrap().into_iter().next() else {
        skip_or_fail("no RDMA device");
        return None;
    };
    Some(
        PROVIDER
            .open_device(&info.name)
            .expect("open the device found"),
    )
}

/// Registered memory of a test (kept alive until the test ends).
struct Buf {
    data: Vec<u8>,
    mr: Mr,
}

impl Buf {
    fn new(dev: &dyn Device, pd: PdId, len: usize, fill: u8) -> Buf {
        let mut data = vec![fill; len];
        let access = Access::LOCAL_WRITE
            | Access::REMOTE_READ
            | Access::REMOTE_WRITE
            | Access::REMOTE_ATOMIC;
        // SAFETY: the Vec lives in the Buf, dropped after the contexts.
        let mr = unsafe { dev.reg_mr(pd, data.as_mut_ptr(), len, access) }.unwrap();
        Buf { data, mr }
    }

    fn sge(&self, off: usize, len: usize) -> Sge {
        Sge {
            addr: self.data.as_ptr() as u64 + off as u64,
            len: len as u32,
            lkey: self.mr.lkey,
        }
    }
}

/// One side of a connection.
struct Side {
    ctx: Box<dyn Verbs>,
    cq: CqId,
    qp: QpId,
    /// Connection events polled while waiting for the other side's.
    cm_events: VecDeque<CmEvent>,
}

impl Side {
    fn new(dev: &dyn Device, pd: PdId) -> Side {
        let mut ctx = dev.open_context().unwrap();
        let cq = ctx.create_cq(256).unwrap();
        let qp = ctx
            .create_qp(&QpInit {
                pd,
                send_cq: cq,
                recv_cq: cq,
                max_send_wr: 64,
                max_recv_wr: 64,
                max_send_sge: 2,
                max_recv_sge: 2,
                max_inline: 64,
                sq_sig_all: true,
                srq: None,
            })
            .unwrap();
        assert_eq!(ctx.qp_state(qp), Some(QpState::Init));
        Side {
            ctx,
            cq,
            qp,
            cm_events: VecDeque::new(),
        }
    }

    fn wc(&mut self) -> Wc {
        let start = Instant::now();
        let mut out = [Wc::default(); 1];
        loop {
            if self.ctx.poll_cq(self.cq, &mut out) == 1 {
                return out[0];
            }
            assert!(start.elapsed() < DEADLINE, "no completion");
        }
    }

    fn send(&mut self, wr_id: u64, op: SendOp, sges: &[Sge]) {
        let wr = SendWr {
            wr_id,
            op,
            sges,
            flags: SendFlags::SIGNALED,
        };
        // SAFETY: the buffers live until the end of the test.
        unsafe { self.ctx.post_send(self.qp, &wr) }.unwrap();
    }
}

/// Waits for `side`'s next connection event, polling `other` meanwhile
/// (each side's connection manager moves only when polled: the initiator
/// resolves the address and route, and sends its request, in `poll_cm`).
/// Events of `other` found meanwhile are kept for it.
fn wait_cm(side: &mut Side, other: &mut Side) -> CmEvent {
    let start = Instant::now();
    loop {
        if let Some(e) = side.cm_events.pop_front() {
            return e;
        }
        if let Some(e) = side.ctx.poll_cm() {
            return e;
        }
        if let Some(e) = other.ctx.poll_cm() {
            other.cm_events.push_back(e);
        }
        assert!(
            start.elapsed() < DEADLINE,
            "no connection event (the other side got {:?})",
            other.cm_events
        );
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// A connected pair: `a` connected to `b`'s listener.
fn connect(dev: &dyn Device, pd: PdId) -> (Side, Side) {
    let (a, b) = (Side::new(dev, pd), Side::new(dev, pd));
    connect_sides(dev, a, b)
}

/// Connects `a` to `b`'s listener.
fn connect_sides(dev: &dyn Device, mut a: Side, mut b: Side) -> (Side, Side) {
    let at = b
        .ctx
        .listen(std::net::SocketAddr::new(dev.attr().addr, 0))
        .unwrap();
    let req = ConnParam {
        private_data: b"hello".to_vec(),
        ord: 1,
        ird: 1,
    };
    a.ctx.connect(a.qp, at, &req).unwrap();
    let CmEvent::ConnectRequest { req: id, param, .. } = wait_cm(&mut b, &mut a) else {
        panic!("expected a connection request");
    };
    assert_eq!(&param.private_data[..5], b"hello");
    let rep = ConnParam {
        private_data: b"welcome".to_vec(),
        ord: 1,
        ird: 1,
    };
    b.ctx.accept(id, b.qp, &rep).unwrap();
    let CmEvent::Established { param, .. } = wait_cm(&mut a, &mut b) else {
        panic!("expected the initiator to be established");
    };
    assert_eq!(&param.private_data[..7], b"welcome");
    assert!(matches!(
        wait_cm(&mut b, &mut a),
        CmEvent::Established { .. }
    ));
    assert_eq!(a.ctx.qp_state(a.qp), Some(QpState::Rts));
    assert_eq!(b.ctx.qp_state(b.qp), Some(QpState::Rts));
    (a, b)
}

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
