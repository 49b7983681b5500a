//! The engine: one [`Context`] per worker, implementing [`Verbs`].
//!
//! Map:
//! * `mod.rs`: the context — its epoll set over the listener and every
//!   socket, the verbs calls, dispatch of readiness, timeouts;
//! * [`qp`]: a queue pair's queues, and how it fails (Terminate, flush);
//! * [`conn`]: a connection's phases (connect, MPA, ready-to-receive);
//! * [`cm`]: MPA negotiation as pure decisions, reading one MPA frame;
//! * [`tx`]: framing and writing FPDUs; [`rx`]: parsing and placing them;
//! * [`cq`]: completion queues and the event queues;
//! * [`srq`]: shared receive queues;
//! * [`table`]: 32-bit generational ids.
//!
//! Epoll tokens: the kind in the upper 32 bits ([`TOKEN_LISTENER`],
//! [`TOKEN_REQ`], [`TOKEN_QP`]), the id in the lower ones. Everything is
//! level-triggered; a socket is watched for writing only while its send
//! path is blocked.

mod cm;
mod conn;
mod cq;
mod qp;
mod rx;
mod srq;
mod table;
mod timer;
mod tx;

use std::net::SocketAddr;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::sync::Arc;
use std::time::{Duration, Instant};

use rucx_rdma::{
    AsyncEvent, CmEvent, ConnParam, ConnReqId, CqId, DeviceAttr, QpId, QpInit, QpState, RecvWr,
    SendFlags, SendOp, SendWr, SrqId, SrqInit, Verbs, Wc, WcOpcode, WcStatus,
};
use uct::ucs::progress::{EventSet, Interest, Readiness, TimerQueue};
use uct::ucs::sock::{self, Recv};
use uct::ucs::{Error, Result};
use uct::Armed;

use crate::shared::{Shared, MAX_CQE, MAX_INLINE, MAX_MSG, MAX_PRIVATE_DATA, MAX_QP_WR, MAX_SGE};
use crate::wire::mpa::MpaFrame;
use cm::FrameRead;
use cq::{Cq, Outputs};
use qp::{qp_token, Conn, Env, Failure, Phase, Qp, RecvReq, SendReq};
use srq::Srq;
use table::Table;

/// Token kind of the listening socket.
pub(crate) const TOKEN_LISTENER: u64 = 1;
/// Token kind of a connection request being read.
pub(crate) const TOKEN_REQ: u64 = 2;
/// Token kind of a queue pair's socket.
pub(crate) const TOKEN_QP: u64 = 3;
/// Token kind of the timer fd.
pub(crate) const TOKEN_TIMER: u64 = 4;

/// A receive request from a work request (at most [`MAX_SGE`] entries,
/// checked by the caller).
fn recv_req(wr: &RecvWr<'_>) -> RecvReq {
    let mut r = RecvReq {
        wr_id: wr.wr_id,
        sges: [Default::default(); MAX_SGE],
        nsge: wr.sges.len(),
        len: wr.sges.iter().map(|s| u64::from(s.len)).sum(),
    };
    r.sges[..wr.sges.len()].copy_from_slice(wr.sges);
    r
}

/// Up to this many timers are pruned on every progress call.
const PRUNE_ALWAYS: usize = 64;

/// A connection a peer opened to our listener.
#[derive(Debug)]
struct ConnReq {
    fd: OwnedFd,
    peer: SocketAddr,
    buf: Vec<u8>,
    /// The complete request, once read (then waiting for accept/reject).
    request: Option<MpaFrame>,
    mulpdu: usize,
}

/// One worker's queues and connections.
#[derive(Debug)]
pub(crate) struct Context {
    shared: Arc<Shared>,
    events: EventSet,
    ready: Vec<(u64, Readiness)>,
    listener: Option<OwnedFd>,
    qps: Table<Qp>,
    srqs: Table<Srq>,
    /// Send batches of idle queue pairs (see `tx`).
    batches: Vec<tx::Batch>,
    reqs: Table<ConnReq>,
    out: Outputs,
    /// Deadlines of MPA exchanges and lingering connections, carrying the
    /// epoll token of what they guard (timers of what no longer needs one
    /// are dropped at the next progress or arm).
    deadlines: TimerQueue,
    /// Tokens of the deadlines that passed, kept for their allocation.
    fired: Vec<u64>,
    /// Progress calls before the timers are pruned again.
    prune_skip: usize,
    /// Wakes a sleeping caller at the earliest deadline.
    timer: timer::TimerFd,
}

fn bad(what: &str) -> Error {
    Error::InvalidParam(format!("iwarp: {what}"))
}

/// Refuses an address of the other family than the device's: a device
/// works in one family (`RUCX_IWARP_AF_PRIO`), like its interface
/// address.
fn same_family(shared: &Shared, addr: SocketAddr) -> Result<SocketAddr> {
    if addr.is_ipv6() != shared.addr.is_ipv6() {
        return Err(Error::Unreachable(format!(
            "iwarp: {addr} is not of the family of device address {}",
            shared.addr
        )));
    }
    Ok(addr)
}

impl Context {
    pub(crate) fn new(shared: Arc<Shared>) -> Result<Context> {
        let events = EventSet::new()?;
        let timer = timer::TimerFd::new()?;
        events.add(timer.as_raw_fd(), TOKEN_TIMER << 32, Interest::READABLE)?;
        Ok(Context {
            shared,
            events,
            timer,
            ready: Vec::new(),
            listener: None,
            qps: Table::default(),
            srqs: Table::default(),
            batches: Vec::new(),
            reqs: Table::default(),
            out: Outputs::default(),
            deadlines: TimerQueue::new(),
            fired: Vec::new(),
            prune_skip: 0,
        })
    }

    /// Runs `f` on queue pair `id` with the context around it.
    fn with_qp<R>(&mut self, id: QpId, f: impl FnOnce(&mut Qp, &mut Env<'_>) -> R) -> Option<R> {
        let qp = self.qps.get_mut(id.0)?;
        let mut env = Env {
            shared: &self.shared,
            srqs: &mut self.srqs,
            batches: &mut self.batches,
            events: &self.events,
            out: &mut self.out,
            deadlines: &mut self.deadlines,
        };
        Some(f(qp, &mut env))
    }

    fn accept_all(&mut self) -> usize {
        let mut work = 0;
        loop {
            let Some(l) = self.listener.as_ref() else {
                return work;
            };
            let (fd, peer) = match sock::accept(l) {
                Ok(Some(c)) => c,
                Ok(None) => return work,
                Err(e) => {
                    tracing::warn!("iwarp: accept: {e}");
                    return work;
                }
            };
            work += 1;
            let Ok(mulpdu) = conn::setup_socket(&self.shared.settings, &fd) else {
                continue;
            };
            let raw = fd.as_raw_fd();
            let Some(id) = self.reqs.insert_with(|_| ConnReq {
                fd,
                peer,
                buf: Vec::new(),
                request: None,
                mulpdu,
            }) else {
                continue;
            };
            let token = (TOKEN_REQ << 32) | u64::from(id);
            if self.events.add(raw, token, Interest::READABLE).is_err() {
                self.reqs.remove(id);
                continue;
            }
            let until = Instant::now() + self.shared.settings.timeout;
            self.deadlines.add(until, token);
        }
    }

    /// Reads a connection request; raises `ConnectRequest` when complete.
    fn req_readable(&mut self, id: u32) -> usize {
        let settings = self.shared.settings.clone();
        let Some(req) = self.reqs.get_mut(id) else {
            return 0;
        };
        if req.request.is_some() {
            return 0;
        }
        let frame = match cm::read_frame(&req.fd, &mut req.buf) {
            FrameRead::Pending => return 0,
            FrameRead::Failed(why) => {
                tracing::debug!("iwarp: connection request from {}: {why}", req.peer);
                self.drop_req(id);
                return 1;
            }
            FrameRead::Done(f) => f,
        };
        let _ = self.events.remove(req.fd.as_raw_fd());
        if frame.reply {
            self.drop_req(id);
            return 1;
        }
        if let Some(why) = cm::refuse(&settings, &frame) {
            tracing::debug!("iwarp: refusing a connection from {}: {why}", req.peer);
            let reply = cm::reject_reply(&settings, &frame, &[]);
            let _ = sock::send(req.fd.as_raw_fd(), &reply.encode());
            sock::shutdown_write(&req.fd);
            self.reqs.remove(id);
            return 1;
        }
        if !matches!(sock::peek(req.fd.as_raw_fd()), Ok(Recv::WouldBlock)) {
            tracing::debug!(
                "iwarp: {} sent more than its MPA request, or closed",
                req.peer
            );
            self.reqs.remove(id);
            return 1;
        }
        let param = cm::peer_param(&settings, &frame);
        let peer = req.peer;
        req.request = Some(frame);
        self.out.cm(CmEvent::ConnectRequest {
            req: ConnReqId(id),
            peer,
            param,
        });
        1
    }

    fn drop_req(&mut self, id: u32) {
        if let Some(r) = self.reqs.remove(id) {
            let _ = self.events.remove(r.fd.as_raw_fd());
        }
    }

    fn dispatch(&mut self, token: u64, r: Readiness) -> usize {
        let id = token as u32;
        match token >> 32 {
            TOKEN_LISTENER => self.accept_all(),
            TOKEN_REQ => self.req_readable(id),
            TOKEN_QP => self
                .with_qp(QpId(id), |qp, env| qp.handle(env, r))
                .unwrap_or(0),
            TOKEN_TIMER => {
                self.timer.clear();
                0
            }
            _ => 0,
        }
    }

    /// Whether a deadline entry still guards something: a request being
    /// read, a connection being set up or lingering.
    fn deadline_live(&self, token: u64) -> bool {
        let id = token as u32;
        match token >> 32 {
            TOKEN_REQ => self.reqs.get(id).is_some_and(|r| r.request.is_none()),
            TOKEN_QP => self
                .qps
                .get(id)
                .and_then(|q| q.conn.as_ref())
                .is_some_and(|c| !matches!(c.phase, Phase::Rts)),
            _ => false,
        }
    }

    /// Drops the timers of connections that are up (or gone) and of
    /// requests read (or gone): they guard nothing. With many timers it
    /// looks at them once per as many calls as there are (thousands of
    /// connections being set up must not make each progress call cost
    /// thousands). A timer left in place fires for nothing: ids are
    /// generational, so it finds no later holder of its slot, and a
    /// connection past its MPA exchange or a request already read ignores
    /// it (`check_deadlines`).
    fn prune_deadlines(&mut self) {
        if self.deadlines.is_empty() {
            return;
        }
        if self.prune_skip > 0 {
            self.prune_skip -= 1;
            return;
        }
        self.prune_now();
        self.prune_skip = match self.deadlines.len() {
            n if n > PRUNE_ALWAYS => n,
            _ => 0,
        };
    }

    /// [`Context::prune_deadlines`] at once.
    fn prune_now(&mut self) {
        let mut deadlines = std::mem::take(&mut self.deadlines);
        deadlines.retain(|token| self.deadline_live(token));
        self.deadlines = deadlines;
    }

    fn check_deadlines(&mut self) -> usize {
        // Pruned first, so that a context in full operation never reads
        // the clock.
        self.prune_deadlines();
        if self.deadlines.is_empty() {
            return 0;
        }
        let now = Instant::now();
        let mut fired = std::mem::take(&mut self.fired);
        let work = self.deadlines.expire(now, &mut fired);
        for &token in &fired {
            let id = token as u32;
            match token >> 32 {
                TOKEN_REQ if self.reqs.get(id).is_some_and(|r| r.request.is_none()) => {
                    self.drop_req(id);
                }
                TOKEN_QP => {
                    self.with_qp(QpId(id), |qp, env| qp.timeout(env, now));
                }
                _ => {}
            }
        }
        self.fired = fired;
        work
    }

    /// Takes a connection request whose MPA request was read.
    fn take_req(&mut self, req: ConnReqId) -> Result<(ConnReq, MpaFrame)> {
        if self.reqs.get(req.0).is_none_or(|r| r.request.is_none()) {
            return Err(bad("no such connection request"));
        }
        let mut r = self.reqs.remove(req.0).expect("checked above");
        let request = r.request.take().expect("checked above");
        Ok((r, request))
    }

    fn complete_now(&mut self, qp: QpId, cq: CqId, wc: Wc) {
        self.out.complete(cq, Wc { qp: Some(qp), ..wc });
    }
}

impl Qp {
    /// A deadline of this queue pair passed.
    fn timeout(&mut self, env: &mut Env<'_>, now: Instant) {
        let Some(c) = self.conn.as_ref() else {
            return;
        };
        match c.phase {
            Phase::TcpConnect { .. } | Phase::AwaitReply { .. } | Phase::AwaitRtr => {
                let why = "the MPA exchange timed out".to_string();
                self.fail(env, Failure::ConnectFailed(why));
                self.sync_interest(env.events);
            }
            Phase::Closing { until } if until <= now => self.close_conn(env),
            _ => {}
        }
    }
}

impl Drop for Context {
    fn drop(&mut self) {
        let mut tables = self.shared.tables.write();
        for qp in self.qps.values() {
            tables.pd_use(qp.init.pd, false);
        }
        for srq in self.srqs.values() {
            tables.pd_use(srq.pd(), false);
        }
    }
}

impl Verbs for Context {
    fn attr(&self) -> &DeviceAttr {
        &self.shared.attr
    }

    fn create_cq(&mut self, depth: u32) -> Result<CqId> {
        if depth == 0 || depth > MAX_CQE {
            return Err(bad("completion queue depth out of range"));
        }
        let id = self
            .out
            .cqs
            .insert_with(|_| Cq {
                depth: depth as usize,
                wcs: Default::default(),
                users: 0,
            })
            .ok_or_else(|| Error::NoMemory("iwarp: too many completion queues".into()))?;
        Ok(CqId(id))
    }

    fn destroy_cq(&mut self, cq: CqId) -> Result<()> {
        match self.out.cqs.get(cq.0) {
            None => Err(bad("unknown completion queue")),
            Some(q) if q.users > 0 => Err(bad("completion queue in use")),
            Some(_) => {
                self.out.cqs.remove(cq.0);
                Ok(())
            }
        }
    }

    fn create_qp(&mut self, init: &QpInit) -> Result<QpId> {
        if self.out.cqs.get(init.send_cq.0).is_none() || self.out.cqs.get(init.recv_cq.0).is_none()
        {
            return Err(bad("create_qp: unknown completion queue"));
        }
        if init.max_send_wr == 0
            || init.max_send_wr > MAX_QP_WR
            || init.max_recv_wr > MAX_QP_WR
            || init.max_send_sge as usize > MAX_SGE
            || init.max_recv_sge as usize > MAX_SGE
            || init.max_inline as usize > MAX_INLINE
        {
            return Err(bad("create_qp: limits beyond the device's"));
        }
        if let Some(srq) = init.srq {
            if self.srqs.get(srq.0).is_none() {
                return Err(bad("create_qp: unknown shared receive queue"));
            }
        }
        if !self.shared.tables.write().pd_use(init.pd, true) {
            return Err(bad("create_qp: unknown protection domain"));
        }
        let id = self
            .qps
            .insert_with(|id| Qp::new(QpId(id), *init))
            .ok_or_else(|| Error::NoMemory("iwarp: too many queue pairs".into()))?;
        for cq in [init.send_cq, init.recv_cq] {
            if let Some(q) = self.out.cqs.get_mut(cq.0) {
                q.users += 1;
            }
        }
        if let Some(s) = init.srq.and_then(|s| self.srqs.get_mut(s.0)) {
            s.users += 1;
        }
        Ok(QpId(id))
    }

    fn destroy_qp(&mut self, qp: QpId) -> Result<()> {
        let mut q = self
            .qps
            .remove(qp.0)
            .ok_or_else(|| bad("unknown queue pair"))?;
        if let Some(c) = &q.conn {
            let _ = self.events.remove(c.fd.as_raw_fd());
        }
        if let Some(s) = q.init.srq.and_then(|s| self.srqs.get_mut(s.0)) {
            s.users = s.users.saturating_sub(1);
            // A receive taken for a SEND that never completed goes back.
            for r in q.rq.drain(..) {
                s.give_back(r);
            }
        }
        self.shared.tables.write().pd_use(q.init.pd, false);
        for cq in [q.init.send_cq, q.init.recv_cq] {
            if let Some(c) = self.out.cqs.get_mut(cq.0) {
                c.users = c.users.saturating_sub(1);
            }
        }
        Ok(())
    }

    fn create_srq(&mut self, init: &SrqInit) -> Result<SrqId> {
        self.srq_create(init)
    }

    fn destroy_srq(&mut self, srq: SrqId) -> Result<()> {
        self.srq_destroy(srq)
    }

    unsafe fn post_srq_recv(&mut self, srq: SrqId, wr: &RecvWr<'_>) -> Result<()> {
        // SAFETY: forwarded under the caller's contract.
        unsafe { self.srq_post(srq, wr) }
    }

    fn qp_state(&self, qp: QpId) -> Option<QpState> {
        self.qps.get(qp.0).map(|q| q.state)
    }

    fn listen(&mut self, addr: SocketAddr) -> Result<SocketAddr> {
        if self.listener.is_some() {
            return Err(bad("already listening"));
        }
        let addr = same_family(&self.shared, addr)?;
        let fd = sock::tcp_socket(addr.ip())?;
        sock::set_opt(
            &fd,
            libc::SOL_SOCKET,
            libc::SO_REUSEADDR,
            1,
            "setsockopt(SO_REUSEADDR)",
        )?;
        conn::preset_socket(&self.shared.settings, &fd)?;
        sock::bind(&fd, addr).map_err(|e| Error::io(format!("bind {addr}"), e))?;
        sock::listen(&fd, 128)?;
        let bound = sock::local_addr(&fd)?;
        self.events
            .add(fd.as_raw_fd(), TOKEN_LISTENER << 32, Interest::READABLE)?;
        self.listener = Some(fd);
        Ok(bound)
    }

    fn connect(&mut self, qp: QpId, dest: SocketAddr, param: &ConnParam) -> Result<()> {
        let dest = same_family(&self.shared, dest)?;
        if param.private_data.len() > MAX_PRIVATE_DATA {
            return Err(bad("connect: private data too long"));
        }
        let q = self
            .qps
            .get(qp.0)
            .ok_or_else(|| bad("unknown queue pair"))?;
        if q.state != QpState::Init || q.conn.is_some() {
            return Err(bad("connect: the queue pair is not in Init"));
        }
        let fd = sock::tcp_socket(dest.ip())?;
        conn::preset_socket(&self.shared.settings, &fd)?;
        let local = SocketAddr::new(self.shared.addr, 0);
        // The port is picked at connect time, for the whole 4-tuple: a
        // port for a bare bind is searched among every bound socket, which
        // grows with the connections of the host. Best effort (Linux 4.2).
        let _ = sock::set_opt(
            &fd,
            libc::IPPROTO_IP,
            libc::IP_BIND_ADDRESS_NO_PORT,
            1,
            "setsockopt(IP_BIND_ADDRESS_NO_PORT)",
        );
        sock::bind(&fd, local).map_err(|e| Error::io(format!("bind {local}"), e))?;
        sock::connect(&fd, dest).map_err(|e| Error::io(format!("connect {dest}"), e))?;
        self.events
            .add(fd.as_raw_fd(), qp_token(qp), Interest::WRITABLE)?;
        let request = cm::request(&self.shared.settings, param);
        let until = Instant::now() + self.shared.settings.timeout;
        self.deadlines.add(until, qp_token(qp));
        let q = self.qps.get_mut(qp.0).expect("checked above");
        q.param = param.clone();
        q.state = QpState::Connecting;
        q.conn = Some(Conn {
            fd,
            peer: dest,
            phase: Phase::TcpConnect { request },
            crc: false,
            mulpdu: crate::wire::fpdu::mulpdu(0),
            interest: Interest::WRITABLE.bits(),
        });
        Ok(())
    }

    fn accept(&mut self, req: ConnReqId, qp: QpId, param: &ConnParam) -> Result<()> {
        if param.private_data.len() > MAX_PRIVATE_DATA {
            return Err(bad("accept: private data too long"));
        }
        match self.qps.get(qp.0) {
            None => return Err(bad("unknown queue pair")),
            Some(q) if q.state != QpState::Init || q.conn.is_some() => {
                return Err(bad("accept: the queue pair is not in Init"))
            }
            Some(_) => {}
        }
        let (r, request) = self.take_req(req)?;
        let raw = r.fd.as_raw_fd();
        if !matches!(sock::peek(raw), Ok(Recv::WouldBlock)) {
            // Bytes after the request (or a close) before our reply: the
            // initiator broke the exchange; the socket closes here.
            self.with_qp(qp, |q, env| {
                q.state = QpState::Connecting;
                let why = "the peer sent more than its MPA request, or closed".to_string();
                q.fail(env, Failure::ConnectFailed(why));
            });
            return Ok(());
        }
        self.events.add(raw, qp_token(qp), Interest::READABLE)?;
        let until = Instant::now() + self.shared.settings.timeout;
        self.deadlines.add(until, qp_token(qp));
        self.with_qp(qp, |q, env| {
            q.start_accepted(env, r.fd, r.peer, r.mulpdu, &request, param);
            if let Some(c) = q.conn.as_mut() {
                c.interest = Interest::READABLE.bits();
            }
            q.pump(env);
        });
        Ok(())
    }

    fn reject(&mut self, req: ConnReqId, private_data: &[u8]) -> Result<()> {
        if private_data.len() > MAX_PRIVATE_DATA {
            return Err(bad("reject: private data too long"));
        }
        let (r, request) = self.take_req(req)?;
        let reply = cm::reject_reply(&self.shared.settings, &request, private_data);
        // The socket's buffer is empty: the small reply goes at once.
        let _ = sock::send(r.fd.as_raw_fd(), &reply.encode());
        sock::shutdown_write(&r.fd);
        Ok(())
    }

    fn disconnect(&mut self, qp: QpId) -> Result<()> {
        self.with_qp(qp, |q, env| {
            if q.state != QpState::Error {
                q.fail(env, Failure::Disconnect);
                q.sync_interest(env.events);
            }
        })
        .ok_or_else(|| bad("unknown queue pair"))
    }

    fn poll_cm(&mut self) -> Option<CmEvent> {
        self.out.cm.pop_front()
    }

    fn poll_async(&mut self) -> Option<AsyncEvent> {
        self.out.asyncs.pop_front()
    }

    unsafe fn post_send(&mut self, qp: QpId, wr: &SendWr<'_>) -> Result<()> {
        let q = self
            .qps
            .get(qp.0)
            .ok_or_else(|| bad("unknown queue pair"))?;
        let (send_cq, pd) = (q.init.send_cq, q.init.pd);
        if matches!(wr.op, SendOp::FetchAdd { .. } | SendOp::CmpSwap { .. }) {
            return Err(Error::op_unsupported("iwarp", "atomics"));
        }
        let is_read = matches!(wr.op, SendOp::Read { .. });
        if wr.sges.len() > q.init.max_send_sge.max(1) as usize
            || wr.sges.len() > MAX_SGE
            || (is_read && wr.sges.len() > 1)
        {
            return Err(bad("post_send: too many scatter/gather entries"));
        }
        let len: u64 = wr.sges.iter().map(|s| u64::from(s.len)).sum();
        if len > MAX_MSG {
            return Err(bad("post_send: message too long"));
        }
        let inline = wr.flags.contains(SendFlags::INLINE) && !is_read;
        if inline && len > u64::from(q.init.max_inline) {
            return Err(bad("post_send: inline data too long"));
        }
        let mut req = SendReq {
            seq: q.next_seq,
            wr_id: wr.wr_id,
            op: wr.op,
            sges: [Default::default(); MAX_SGE],
            nsge: wr.sges.len(),
            len,
            signaled: wr.flags.contains(SendFlags::SIGNALED),
            fence: wr.flags.contains(SendFlags::FENCE),
            solicited: wr.flags.contains(SendFlags::SOLICITED),
            inline: None,
        };
        req.sges[..wr.sges.len()].copy_from_slice(wr.sges);
        let wc = Wc {
            wr_id: wr.wr_id,
            opcode: req.wc_opcode(),
            ..Wc::default()
        };
        if q.state == QpState::Error {
            self.complete_now(
                qp,
                send_cq,
                Wc {
                    status: WcStatus::WrFlushErr,
                    ..wc
                },
            );
            return Ok(());
        }
        if q.sq_used >= q.init.max_send_wr {
            return Err(Error::NoMemory("iwarp: send queue full".into()));
        }
        if inline {
            let mut data = [0u8; MAX_INLINE];
            let mut at = 0;
            for s in wr.sges {
                // SAFETY: the caller's sges describe readable memory for
                // the call (the contract of an inline send).
                let src =
                    unsafe { std::slice::from_raw_parts(s.addr as *const u8, s.len as usize) };
                data[at..at + src.len()].copy_from_slice(src);
                at += src.len();
            }
            req.inline = Some((data, at));
        } else {
            let tables = self.shared.tables.read();
            if !wr.sges.iter().all(|s| tables.check_local(s, pd, is_read)) {
                drop(tables);
                self.complete_now(
                    qp,
                    send_cq,
                    Wc {
                        status: WcStatus::LocProtErr,
                        ..wc
                    },
                );
                return Ok(());
            }
        }
        self.with_qp(qp, |q, env| {
            q.next_seq += 1;
            q.sq_used += 1;
            q.sq.push_back(req);
            if q.state == QpState::Rts {
                q.pump(env);
            }
        });
        Ok(())
    }

    unsafe fn post_recv(&mut self, qp: QpId, wr: &RecvWr<'_>) -> Result<()> {
        let q = self
            .qps
            .get(qp.0)
            .ok_or_else(|| bad("unknown queue pair"))?;
        let (recv_cq, pd) = (q.init.recv_cq, q.init.pd);
        if wr.sges.len() > q.init.max_recv_sge.max(1) as usize || wr.sges.len() > MAX_SGE {
            return Err(bad("post_recv: too many scatter entries"));
        }
        let wc = Wc {
            wr_id: wr.wr_id,
            opcode: WcOpcode::Recv,
            ..Wc::default()
        };
        if q.state == QpState::Error {
            self.complete_now(
                qp,
                recv_cq,
                Wc {
                    status: WcStatus::WrFlushErr,
                    ..wc
                },
            );
            return Ok(());
        }
        if q.init.srq.is_some() {
            return Err(bad(
                "post_recv: the queue pair receives from a shared receive queue",
            ));
        }
        if q.rq.len() >= q.init.max_recv_wr as usize {
            return Err(Error::NoMemory("iwarp: receive queue full".into()));
        }
        let ok = {
            let tables = self.shared.tables.read();
            wr.sges.iter().all(|s| tables.check_local(s, pd, true))
        };
        if !ok {
            self.complete_now(
                qp,
                recv_cq,
                Wc {
                    status: WcStatus::LocProtErr,
                    ..wc
                },
            );
            return Ok(());
        }
        let r = recv_req(wr);
        self.qps
            .get_mut(qp.0)
            .expect("checked above")
            .rq
            .push_back(r);
        Ok(())
    }

    fn poll_cq(&mut self, cq: CqId, out: &mut [Wc]) -> usize {
        self.progress();
        let Some(q) = self.out.cqs.get_mut(cq.0) else {
            return 0;
        };
        let n = out.len().min(q.wcs.len());
        for (slot, wc) in out.iter_mut().zip(q.wcs.drain(..n)) {
            *slot = wc;
        }
        n
    }

    fn progress(&mut self) -> usize {
        let mut ready = std::mem::take(&mut self.ready);
        if let Err(e) = self.events.wait(Some(Duration::ZERO), &mut ready) {
            tracing::warn!("iwarp: {e}");
        }
        let mut work = 0;
        for &(token, r) in &ready {
            work += self.dispatch(token, r);
        }
        self.ready = ready;
        work + self.check_deadlines()
    }

    fn event_fd(&self) -> Option<RawFd> {
        Some(self.events.as_raw_fd())
    }

    fn arm(&mut self) -> Result<Armed> {
        if self.out.pending() {
            return Ok(Armed::Busy);
        }
        self.arm_deadlines()
    }
}

impl Context {
    /// Whether completions or events wait for the caller.
    pub(crate) fn has_outputs(&self) -> bool {
        self.out.pending()
    }

    /// Sets the timer to the earliest deadline, so that the event fd
    /// becomes readable then; `Busy` if one passed already.
    pub(crate) fn arm_deadlines(&mut self) -> Result<Armed> {
        self.prune_now();
        if let Some(first) = self.deadlines.next_deadline() {
            let now = Instant::now();
            if first <= now {
                return Ok(Armed::Busy);
            }
            self.timer.set(first - now)?;
        }
        Ok(Armed::Sleep)
    }
}
