//! A peer that speaks arbitrary bytes to the iWARP engine during connection
//! setup and after it: as the initiator against the engine's listener (an
//! MPA request, then whatever follows), or as the responder to a
//! connection the engine opened (an MPA reply, then whatever follows).
//!
//! Whatever the bytes, the engine must not panic or hang: each play ends
//! with the connection refused, failed, closed or established, and the
//! context keeps working — a well-behaved connection is set up and used
//! after every play. Shared by the proptest beside it and the
//! `iwarp_handshake` fuzz target.

#![allow(dead_code)]

use std::io::{ErrorKind, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::time::{Duration, Instant};

use rucx_iwarp::{IwarpConfig, PROVIDER};
use rucx_rdma::{
    Access, CmEvent, ConnParam, CqId, Device, Mr, PdId, QpId, QpInit, QpState, RecvWr, Verbs, Wc,
};

/// Longest a play may take before it counts as a hang.
const PLAY_LIMIT: Duration = Duration::from_secs(15);

fn qp_init(pd: PdId, cq: CqId) -> QpInit {
    QpInit {
        pd,
        send_cq: cq,
        recv_cq: cq,
        max_send_wr: 16,
        max_recv_wr: 16,
        max_send_sge: 2,
        max_recv_sge: 1,
        max_inline: 64,
        sq_sig_all: true,
        srq: None,
    }
}

/// An engine context listening on loopback, with receives to post.
pub(crate) struct Target {
    dev: Box<dyn Device>,
    ctx: Box<dyn Verbs>,
    pd: PdId,
    cq: CqId,
    listen: SocketAddr,
    rx: Vec<u8>,
    rx_mr: Mr,
    wcs: Vec<Wc>,
}

impl Target {
    /// A context on `iwarp_lo` with short MPA timeouts.
    pub(crate) fn open() -> Target {
        let cfg = IwarpConfig::from_lookup(|v| {
            (v == "RUCX_IWARP_MPA_TIMEOUT").then(|| "300ms".to_string())
        })
        .expect("config");
        let dev: Box<dyn Device> = Box::new(PROVIDER.open_with("iwarp_lo", &cfg).expect("lo"));
        let mut ctx = dev.open_context().expect("context");
        let pd = dev.alloc_pd().expect("pd");
        let cq = ctx.create_cq(4096).expect("cq");
        let listen = ctx.listen("127.0.0.1:0".parse().unwrap()).expect("listen");
        let mut rx = vec![0u8; 64 * 1024];
        // SAFETY: `rx` lives in the target, which deregisters it in Drop
        // before freeing it, and is only reached through the engine.
        let rx_mr = unsafe { dev.reg_mr(pd, rx.as_mut_ptr(), rx.len(), Access::LOCAL_WRITE) }
            .expect("reg_mr");
        Target {
            dev,
            ctx,
            pd,
            cq,
            listen,
            rx,
            rx_mr,
            wcs: vec![Wc::default(); 64],
        }
    }

    fn new_qp(&mut self) -> QpId {
        let qp = self.ctx.create_qp(&qp_init(self.pd, self.cq)).expect("qp");
        for i in 0..4u64 {
            let sge = [rucx_rdma::Sge {
                addr: self.rx.as_ptr() as u64 + i * 16384,
                len: 16384,
                lkey: self.rx_mr.lkey,
            }];
            let wr = RecvWr {
                wr_id: i,
                sges: &sge,
            };
            // SAFETY: the buffer is the target's, registered, and outlives
            // the queue pair (destroyed at the end of each play).
            unsafe { self.ctx.post_recv(qp, &wr) }.expect("post_recv");
        }
        qp
    }

    fn step(&mut self, qps: &mut Vec<QpId>, accept: bool) {
        self.ctx.progress();
        while let Some(ev) = self.ctx.poll_cm() {
            if let CmEvent::ConnectRequest { req, .. } = ev {
                if accept {
                    let qp = self.new_qp();
                    let param = ConnParam {
                        private_data: b"ok".to_vec(),
                        ord: 4,
                        ird: 4,
                    };
                    if self.ctx.accept(req, qp, &param).is_err() {
                        let _ = self.ctx.destroy_qp(qp);
                    } else {
                        qps.push(qp);
                    }
                } else {
                    let _ = self.ctx.reject(req, b"no");
                }
            }
        }
        while self.ctx.poll_async().is_some() {}
        let mut wcs = std::mem::take(&mut self.wcs);
        while self.ctx.poll_cq(self.cq, &mut wcs) > 0 {}
        self.wcs = wcs;
    }

    /// Plays `bytes` as the initiator: connects to the listener, writes
    /// them in pieces of `piece` bytes (0: at once), half-closes, reads
    /// until the engine closes or the connection is quiet.
    pub(crate) fn play_initiator(&mut self, bytes: &[u8], piece: usize, accept: bool) {
        let mut qps = Vec::new();
        let mut raw = TcpStream::connect(self.listen).expect("connect");
        raw.set_nonblocking(true).expect("nonblocking");
        let piece = if piece == 0 {
            bytes.len().max(1)
        } else {
            piece
        };
        let start = Instant::now();
        let mut sent = 0;
        let mut quiet = 0;
        let mut buf = [0u8; 4096];
        loop {
            assert!(start.elapsed() < PLAY_LIMIT, "the engine hung");
            if sent < bytes.len() {
                let end = (sent + piece).min(bytes.len());
                match raw.write(&bytes[sent..end]) {
                    Ok(n) => sent += n,
                    Err(e) if e.kind() == ErrorKind::WouldBlock => {}
                    Err(_) => sent = bytes.len(),
                }
                if sent == bytes.len() {
                    let _ = raw.shutdown(Shutdown::Write);
                }
            }
            self.step(&mut qps, accept);
            match raw.read(&mut buf) {
                Ok(0) => break,
                Ok(_) => quiet = 0,
                Err(e) if e.kind() == ErrorKind::WouldBlock => quiet += 1,
                Err(_) => break,
            }
            if sent == bytes.len() && quiet > 2000 {
                break;
            }
        }
        drop(raw);
        self.finish(qps);
    }

    /// Plays `bytes` as the responder to a connection the engine opens:
    /// reads its request, writes the bytes (an MPA reply and more), and
    /// waits until the queue pair is connected, failed or quiet.
    pub(crate) fn play_responder(&mut self, bytes: &[u8]) {
        let lst = TcpListener::bind("127.0.0.1:0").expect("bind");
        let qp = self.ctx.create_qp(&qp_init(self.pd, self.cq)).expect("qp");
        let param = ConnParam {
            private_data: b"fuzz".to_vec(),
            ord: 2,
            ird: 2,
        };
        self.ctx
            .connect(qp, lst.local_addr().unwrap(), &param)
            .expect("connect");
        lst.set_nonblocking(true).expect("nonblocking");
        let start = Instant::now();
        let mut raw = loop {
            assert!(start.elapsed() < PLAY_LIMIT, "the engine never connected");
            self.step(&mut Vec::new(), false);
            if let Ok((s, _)) = lst.accept() {
                break s;
            }
        };
        raw.set_nonblocking(true).expect("nonblocking");
        let mut written = false;
        let mut quiet = 0;
        let mut buf = [0u8; 4096];
        loop {
            assert!(start.elapsed() < PLAY_LIMIT, "the engine hung");
            self.step(&mut Vec::new(), false);
            match raw.read(&mut buf) {
                Ok(0) => break,
                Ok(_) if !written => {
                    let _ = raw.write_all(bytes);
                    let _ = raw.shutdown(Shutdown::Write);
                    written = true;
                }
                Ok(_) => quiet = 0,
                Err(e) if e.kind() == ErrorKind::WouldBlock => quiet += 1,
                Err(_) => break,
            }
            let state = self.ctx.qp_state(qp);
            if written && (quiet > 2000 || state == Some(QpState::Error)) {
                break;
            }
        }
        drop(raw);
        self.finish(vec![qp]);
    }

    fn finish(&mut self, qps: Vec<QpId>) {
        for qp in qps {
            let _ = self.ctx.destroy_qp(qp);
        }
        let mut wcs = std::mem::take(&mut self.wcs);
        while self.ctx.poll_cq(self.cq, &mut wcs) > 0 {}
        self.wcs = wcs;
        while self.ctx.poll_cm().is_some() {}
        while self.ctx.poll_async().is_some() {}
    }

    /// A well-behaved connection to the listener still works.
    pub(crate) fn still_serves(&mut self) {
        let mut peer = self.dev.open_context().expect("context");
        let pcq = peer.create_cq(64).expect("cq");
        let pqp = peer.create_qp(&qp_init(self.pd, pcq)).expect("qp");
        let param = ConnParam {
            private_data: b"hello".to_vec(),
            ord: 1,
            ird: 1,
        };
        peer.connect(pqp, self.listen, &param).expect("connect");
        let start = Instant::now();
        let mut qps = Vec::new();
        loop {
            assert!(start.elapsed() < PLAY_LIMIT, "no connection after a play");
            self.step(&mut qps, true);
            peer.progress();
            if peer.qp_state(pqp) == Some(QpState::Rts) {
                break;
            }
        }
        let _ = peer.destroy_qp(pqp);
        self.finish(qps);
    }
}

impl Drop for Target {
    fn drop(&mut self) {
        let _ = self.dev.dereg_mr(&self.rx_mr);
    }
}
