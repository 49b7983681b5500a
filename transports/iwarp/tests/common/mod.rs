//! Two iWARP contexts over loopback, progressed in turn by one thread,
//! with a deadline so that a bug fails a test instead of hanging it.

#![allow(dead_code)]

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use rucx_iwarp::{IwarpConfig, PROVIDER};
use rucx_rdma::{
    Access, AsyncEvent, CmEvent, ConnParam, CqId, Device, Mr, PdId, QpId, QpInit, RecvWr,
    SendFlags, SendOp, SendWr, Sge, Verbs, Wc, WcStatus,
};

/// How long any single wait may take.
pub(crate) const DEADLINE: Duration = Duration::from_secs(20);

/// A device on `lo` with `RUCX_IWARP_*` settings from `vars`.
pub(crate) fn device(vars: &[(&str, &str)]) -> Box<dyn Device> {
    let owned: Vec<(String, String)> = vars
        .iter()
        .map(|(k, v)| (format!("RUCX_IWARP_{k}"), v.to_string()))
        .collect();
    let cfg = IwarpConfig::from_lookup(|name| {
        owned
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.clone())
    })
    .expect("config");
    Box::new(PROVIDER.open_with("iwarp_lo", &cfg).expect("iwarp_lo"))
}

/// A memory buffer registered with a device.
pub(crate) struct Buf {
    pub(crate) data: Vec<u8>,
    pub(crate) mr: Mr,
}

impl Buf {
    pub(crate) fn sge(&self, off: usize, len: usize) -> Sge {
        assert!(off + len <= self.data.len());
        Sge {
            addr: self.data.as_ptr() as u64 + off as u64,
            len: len as u32,
            lkey: self.mr.lkey,
        }
    }

    pub(crate) fn addr(&self) -> u64 {
        self.data.as_ptr() as u64
    }
}

/// One side: a device, a context, a PD, a CQ and a QP.
pub(crate) struct Node {
    pub(crate) dev: Box<dyn Device>,
    pub(crate) ctx: Box<dyn Verbs>,
    pub(crate) pd: PdId,
    pub(crate) cq: CqId,
    pub(crate) qp: QpId,
    pub(crate) cm: Vec<CmEvent>,
    pub(crate) asyncs: Vec<AsyncEvent>,
    pub(crate) wcs: Vec<Wc>,
}

impl Node {
    pub(crate) fn new(dev: Box<dyn Device>) -> Node {
        let mut ctx = dev.open_context().unwrap();
        let pd = dev.alloc_pd().unwrap();
        let cq = ctx.create_cq(8192).unwrap();
        let qp = ctx.create_qp(&qp_init(pd, cq)).unwrap();
        Node {
            dev,
            ctx,
            pd,
            cq,
            qp,
            cm: Vec::new(),
            asyncs: Vec::new(),
            wcs: Vec::new(),
        }
    }

    /// A buffer of `len` bytes filled with `fill`, registered in `pd`.
    pub(crate) fn buf_in(&self, pd: PdId, len: usize, fill: u8, access: Access) -> Buf {
        let mut data = vec![fill; len.max(1)];
        data.truncate(len.max(1));
        // SAFETY: the buffer lives in the returned Buf, which the tests
        // keep until after the context is done with it.
        let mr = unsafe {
            self.dev
                .reg_mr(pd, data.as_mut_ptr(), data.len(), access)
                .unwrap()
        };
        Buf { data, mr }
    }

    pub(crate) fn buf(&self, len: usize, fill: u8, access: Access) -> Buf {
        self.buf_in(self.pd, len, fill, access)
    }

    /// Moves events and completions into the node's lists.
    pub(crate) fn poll(&mut self) {
        self.ctx.progress();
        while let Some(e) = self.ctx.poll_cm() {
            self.cm.push(e);
        }
        while let Some(e) = self.ctx.poll_async() {
            self.asyncs.push(e);
        }
        let mut wcs = [Wc::default(); 64];
        loop {
            let n = self.ctx.poll_cq(self.cq, &mut wcs);
            self.wcs.extend_from_slice(&wcs[..n]);
            if n < wcs.len() {
                break;
            }
        }
    }

    pub(crate) fn post_send(&mut self, wr_id: u64, op: SendOp, sges: &[Sge], flags: SendFlags) {
        let wr = SendWr {
            wr_id,
            op,
            sges,
            flags: flags | SendFlags::SIGNALED,
        };
        // SAFETY: the tests keep every buffer alive until the end.
        unsafe { self.ctx.post_send(self.qp, &wr) }.unwrap();
    }

    pub(crate) fn post_read(&mut self, wr_id: u64, remote_addr: u64, rkey: u32, sink: &[Sge]) {
        let op = SendOp::Read { remote_addr, rkey };
        self.post_send(wr_id, op, sink, SendFlags::empty());
    }

    pub(crate) fn post_write(&mut self, wr_id: u64, remote_addr: u64, rkey: u32, src: &[Sge]) {
        let op = SendOp::Write { remote_addr, rkey };
        self.post_send(wr_id, op, src, SendFlags::empty());
    }

    pub(crate) fn post_recv(&mut self, wr_id: u64, sges: &[Sge]) {
        let wr = RecvWr { wr_id, sges };
        // SAFETY: the tests keep every buffer alive until the end.
        unsafe { self.ctx.post_recv(self.qp, &wr) }.unwrap();
    }

    /// Takes the completion of `wr_id`, if it arrived.
    pub(crate) fn take_wc(&mut self, wr_id: u64) -> Option<Wc> {
        let i = self.wcs.iter().position(|w| w.wr_id == wr_id)?;
        Some(self.wcs.remove(i))
    }
}

pub(crate) fn qp_init(pd: PdId, cq: CqId) -> QpInit {
    QpInit {
        pd,
        send_cq: cq,
        recv_cq: cq,
        max_send_wr: 1024,
        max_recv_wr: 1024,
        max_send_sge: 4,
        max_recv_sge: 4,
        max_inline: 64,
        sq_sig_all: false,
        srq: None,
    }
}

/// Progresses both nodes until `done` holds; panics after [`DEADLINE`].
pub(crate) fn drive(
    a: &mut Node,
    b: &mut Node,
    mut done: impl FnMut(&mut Node, &mut Node) -> bool,
) {
    let start = Instant::now();
    loop {
        a.poll();
        b.poll();
        if done(a, b) {
            return;
        }
        assert!(
            start.elapsed() < DEADLINE,
            "timed out; a: cm {:?} async {:?} wcs {:?}; b: cm {:?} async {:?} wcs {:?}",
            a.cm,
            a.asyncs,
            a.wcs,
            b.cm,
            b.asyncs,
            b.wcs
        );
    }
}

/// Waits for the completion of `wr_id` on `which` (0 = a, 1 = b).
pub(crate) fn wait_wc(a: &mut Node, b: &mut Node, which: usize, wr_id: u64) -> Wc {
    let mut got = None;
    drive(a, b, |a, b| {
        let n = if which == 0 { a } else { b };
        got = n.take_wc(wr_id);
        got.is_some()
    });
    got.unwrap()
}

/// Starts `n` listening on its device's address (on `lo`: 127.0.0.1, or
/// ::1 with `AF_PRIO=inet6`); returns the address.
pub(crate) fn listen(n: &mut Node) -> SocketAddr {
    let ip = n.dev.attr().addr;
    n.ctx.listen(SocketAddr::new(ip, 0)).unwrap()
}

/// Listens on `b`, connects `a` to it; returns the request's parameters
/// as `b` saw them. Both sides end Established.
pub(crate) fn connect(a: &mut Node, b: &mut Node, pa: &ConnParam, pb: &ConnParam) -> ConnParam {
    let addr = listen(b);
    a.ctx.connect(a.qp, addr, pa).unwrap();
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
    let Some(CmEvent::ConnectRequest { req, param, .. }) = req else {
        unreachable!()
    };
    b.ctx.accept(req, b.qp, pb).unwrap();
    drive(a, b, |a, b| {
        established(a).is_some() && established(b).is_some()
    });
    param
}

/// The parameters of the node's Established event, if it came.
pub(crate) fn established(n: &Node) -> Option<ConnParam> {
    n.cm.iter().find_map(|e| match e {
        CmEvent::Established { param, .. } => Some(param.clone()),
        _ => None,
    })
}

/// A connected pair with default settings.
pub(crate) fn pair() -> (Node, Node) {
    pair_with(&[], &[])
}

/// A connected pair with settings for each side.
pub(crate) fn pair_with(va: &[(&str, &str)], vb: &[(&str, &str)]) -> (Node, Node) {
    let mut a = Node::new(device(va));
    let mut b = Node::new(device(vb));
    connect(&mut a, &mut b, &ConnParam::default(), &ConnParam::default());
    (a, b)
}

/// Waits until `n` (0 = a, 1 = b) has an asynchronous event and a
/// Disconnected event; returns the async event.
pub(crate) fn wait_failed(a: &mut Node, b: &mut Node, which: usize) -> AsyncEvent {
    drive(a, b, |a, b| {
        let n = if which == 0 { a } else { b };
        !n.asyncs.is_empty()
            && n.cm
                .iter()
                .any(|e| matches!(e, CmEvent::Disconnected { .. }))
    });
    let n = if which == 0 { a } else { b };
    n.asyncs[0].clone()
}

/// A pattern for checking contents.
pub(crate) fn pattern(len: usize, seed: u8) -> Vec<u8> {
    (0..len)
        .map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed) ^ (i >> 8) as u8)
        .collect()
}

pub(crate) fn ok(wc: &Wc) {
    assert_eq!(wc.status, WcStatus::Success, "{wc:?}");
}
