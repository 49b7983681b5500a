//! What the device tests share: the device, registered buffers, and
//! contexts with one queue pair that connect to each other.

#![allow(dead_code, unreachable_pub)] // each test binary uses a part

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::{Duration, Instant};

use rucx_rdma::{
    Access, CmEvent, ConnParam, CqId, Device, Mr, PdId, Provider, QpId, QpInit, QpState, SendFlags,
    SendOp, SendWr, Sge, SrqId, Verbs, Wc,
};
use rucx_verbs::PROVIDER;

/// How long a test waits for an event.
pub const DEADLINE: Duration = Duration::from_secs(20);

/// Says `skipped: <why>`, or fails when `RUCX_REQUIRE_ALL=1`.
pub fn skip_or_fail(why: &str) {
    if std::env::var("RUCX_REQUIRE_ALL").is_ok_and(|v| v == "1") {
        panic!("required but unavailable: {why}");
    }
    println!("skipped: {why}");
}

/// The first usable device, or `None` after saying why.
pub fn device() -> Option<Arc<dyn Device>> {
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
pub struct Buf {
    /// The memory.
    pub data: Vec<u8>,
    /// Its registration.
    pub mr: Mr,
}

impl Buf {
    /// `len` bytes of `fill`, registered in `pd` with every right.
    pub fn new(dev: &dyn Device, pd: PdId, len: usize, fill: u8) -> Buf {
        let mut data = vec![fill; len];
        let access = Access::LOCAL_WRITE
            | Access::REMOTE_READ
            | Access::REMOTE_WRITE
            | Access::REMOTE_ATOMIC;
        // SAFETY: the Vec lives in the Buf, dropped after the contexts.
        let mr = unsafe { dev.reg_mr(pd, data.as_mut_ptr(), len, access) }.unwrap();
        Buf { data, mr }
    }

    /// An entry for `len` bytes at `off`.
    pub fn sge(&self, off: usize, len: usize) -> Sge {
        Sge {
            addr: self.data.as_ptr() as u64 + off as u64,
            len: len as u32,
            lkey: self.mr.lkey,
        }
    }
}

/// One side of a connection.
pub struct Side {
    /// Its context.
    pub ctx: Box<dyn Verbs>,
    /// Its one completion queue.
    pub cq: CqId,
    /// Its queue pair.
    pub qp: QpId,
    /// Connection events polled while waiting for the other side's.
    pub cm_events: VecDeque<CmEvent>,
}

impl Side {
    /// A context with a queue pair in INIT.
    pub fn new(dev: &dyn Device, pd: PdId) -> Side {
        Side::with(dev, pd, |_| None)
    }

    /// A context with a queue pair in INIT on the shared receive queue
    /// `srq` makes in it (none if it makes none).
    pub fn with(
        dev: &dyn Device,
        pd: PdId,
        srq: impl FnOnce(&mut dyn Verbs) -> Option<SrqId>,
    ) -> Side {
        let mut ctx = dev.open_context().unwrap();
        let cq = ctx.create_cq(256).unwrap();
        let srq = srq(&mut *ctx);
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
                srq,
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

    /// The next completion (failing after [`DEADLINE`]).
    pub fn wc(&mut self) -> Wc {
        let start = Instant::now();
        let mut out = [Wc::default(); 1];
        loop {
            if self.ctx.poll_cq(self.cq, &mut out) == 1 {
                return out[0];
            }
            assert!(start.elapsed() < DEADLINE, "no completion");
        }
    }

    /// Posts a signaled send.
    pub fn send(&mut self, wr_id: u64, op: SendOp, sges: &[Sge]) {
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
pub fn wait_cm(side: &mut Side, other: &mut Side) -> CmEvent {
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
pub fn connect(dev: &dyn Device, pd: PdId) -> (Side, Side) {
    let (a, b) = (Side::new(dev, pd), Side::new(dev, pd));
    connect_sides(dev, a, b)
}

/// Connects `a` to `b`'s listener.
pub fn connect_sides(dev: &dyn Device, mut a: Side, mut b: Side) -> (Side, Side) {
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
    finish_connect(&mut a, &mut b);
    (a, b)
}

/// After `a` asked to connect to `b`'s listener (with private data
/// "hello"): `b` accepts, and both are established.
pub fn finish_connect(a: &mut Side, b: &mut Side) {
    let CmEvent::ConnectRequest { req: id, param, .. } = wait_cm(b, a) else {
        panic!("expected a connection request");
    };
    assert_eq!(&param.private_data[..5], b"hello");
    let rep = ConnParam {
        private_data: b"welcome".to_vec(),
        ord: 1,
        ird: 1,
    };
    b.ctx.accept(id, b.qp, &rep).unwrap();
    let CmEvent::Established { param, .. } = wait_cm(a, b) else {
        panic!("expected the initiator to be established");
    };
    assert_eq!(&param.private_data[..7], b"welcome");
    assert!(matches!(wait_cm(b, a), CmEvent::Established { .. }));
    assert_eq!(a.ctx.qp_state(a.qp), Some(QpState::Rts));
    assert_eq!(b.ctx.qp_state(b.qp), Some(QpState::Rts));
}
