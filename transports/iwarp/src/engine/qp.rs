//! A queue pair: its work queues, its connection, and how it fails.
//!
//! Invariants:
//! * Every send work request is in exactly one of `sq` (not fully framed),
//!   `tx.marks` (framed, its completion waits for the bytes to reach the
//!   socket) or `orq` (an RDMA READ waiting for its response); `sq_used`
//!   counts them all.
//! * Once the state is [`QpState::Error`] nothing new is framed but a
//!   Terminate, no received byte is acted upon, and every outstanding
//!   request has been (or, while the send batch still points at its
//!   memory, will be) completed with [`WcStatus::WrFlushErr`].

use std::collections::VecDeque;
use std::net::SocketAddr;
use std::os::fd::{AsRawFd, OwnedFd};
use std::time::Instant;

use rucx_rdma::{
    AsyncEventKind, CmEvent, ConnParam, QpId, QpInit, QpState, SendOp, Sge, Wc, WcOpcode, WcStatus,
};
use uct::ucs::progress::{EventSet, Interest, TimerQueue};
use uct::ucs::sock;

use super::cq::Outputs;
use super::rx::Rx;
use super::tx::Tx;
use crate::shared::{Shared, MAX_INLINE, MAX_SGE};
use crate::wire::mpa::MpaFrame;
use crate::wire::{TermCause, Terminate};

/// How long a connection that sent a Terminate or was disconnected waits
/// for the peer to close before closing itself.
const LINGER: std::time::Duration = std::time::Duration::from_secs(2);

/// A ready-to-receive message of peer-to-peer mode (RFC 6581).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Rtr {
    /// A zero-length RDMA WRITE (STag 1).
    Write,
    /// A zero-length RDMA READ (STag 1), answered by a zero-length Read
    /// Response.
    Read,
}

/// A posted send.
#[derive(Debug, Clone)]
pub(crate) struct SendReq {
    pub(crate) seq: u64,
    pub(crate) wr_id: u64,
    pub(crate) op: SendOp,
    pub(crate) sges: [Sge; MAX_SGE],
    pub(crate) nsge: usize,
    pub(crate) len: u64,
    pub(crate) signaled: bool,
    pub(crate) fence: bool,
    pub(crate) solicited: bool,
    /// The data, copied at post time, for an INLINE send.
    pub(crate) inline: Option<([u8; MAX_INLINE], usize)>,
}

impl SendReq {
    pub(crate) fn sges(&self) -> &[Sge] {
        &self.sges[..self.nsge]
    }

    pub(crate) fn wc_opcode(&self) -> WcOpcode {
        match self.op {
            SendOp::Write { .. } => WcOpcode::RdmaWrite,
            SendOp::Read { .. } => WcOpcode::RdmaRead,
            SendOp::FetchAdd { .. } => WcOpcode::FetchAdd,
            SendOp::CmpSwap { .. } => WcOpcode::CmpSwap,
            SendOp::Send | SendOp::SendInv { .. } => WcOpcode::Send,
        }
    }
}

/// A posted receive.
#[derive(Debug, Clone)]
pub(crate) struct RecvReq {
    pub(crate) wr_id: u64,
    pub(crate) sges: [Sge; MAX_SGE],
    pub(crate) nsge: usize,
    pub(crate) len: u64,
}

/// An RDMA READ whose request was framed, waiting for its response.
#[derive(Debug, Clone)]
pub(crate) struct ReadOut {
    pub(crate) seq: u64,
    /// `None` for the ready-to-receive READ (no completion).
    pub(crate) wr_id: Option<u64>,
    pub(crate) signaled: bool,
    pub(crate) sink_stag: u32,
    pub(crate) sink_to: u64,
    pub(crate) size: u32,
}

/// A peer's RDMA READ being answered.
#[derive(Debug, Clone)]
pub(crate) struct ReadResp {
    pub(crate) sink_stag: u32,
    pub(crate) sink_to: u64,
    pub(crate) src_stag: u32,
    pub(crate) src_to: u64,
    pub(crate) size: u32,
}

/// Where a connection is.
#[derive(Debug)]
pub(crate) enum Phase {
    /// TCP connecting (initiator); the request is sent on connection.
    TcpConnect { request: MpaFrame },
    /// Request sent, reading the reply (initiator).
    AwaitReply { request: MpaFrame, buf: Vec<u8> },
    /// Reply sent, waiting for the peer's ready-to-receive message
    /// (responder in peer-to-peer mode).
    AwaitRtr,
    /// Full operation.
    Rts,
    /// Our side is shut down; reading (and dropping) until the peer closes.
    Closing { until: Instant },
}

/// A queue pair's TCP connection.
#[derive(Debug)]
pub(crate) struct Conn {
    pub(crate) fd: OwnedFd,
    pub(crate) peer: SocketAddr,
    pub(crate) phase: Phase,
    /// FPDUs carry CRCs.
    pub(crate) crc: bool,
    /// Largest ULPDU sent.
    pub(crate) mulpdu: usize,
    /// Epoll interest registered now.
    pub(crate) interest: u32,
}

/// Why a queue pair fails.
#[derive(Debug)]
pub(crate) enum Failure {
    /// We found the peer at fault and send it a Terminate with this body.
    Terminate(Terminate),
    /// The peer sent a Terminate.
    Terminated(TermCause),
    /// The connection ended (EOF, reset, I/O error); `abrupt` when not
    /// at a message boundary or by an error.
    Lost { abrupt: bool, why: String },
    /// Our side disconnected.
    Disconnect,
    /// Connecting failed.
    ConnectFailed(String),
    /// The peer rejected our request.
    Rejected(Vec<u8>),
}

/// A queue pair.
#[derive(Debug)]
pub(crate) struct Qp {
    pub(crate) id: QpId,
    pub(crate) init: QpInit,
    pub(crate) state: QpState,
    /// An Established event was raised.
    pub(crate) established: bool,
    pub(crate) next_seq: u64,
    pub(crate) sq: VecDeque<SendReq>,
    pub(crate) sq_used: u32,
    /// Posted receives; with a shared receive queue, the one taken for
    /// the SEND being received.
    pub(crate) rq: VecDeque<RecvReq>,
    pub(crate) orq: VecDeque<ReadOut>,
    pub(crate) irq: VecDeque<ReadResp>,
    /// Negotiated READ depths.
    pub(crate) ord: u32,
    pub(crate) ird: u32,
    /// Outstanding requests are to be flushed once the send batch no
    /// longer points at their memory.
    pub(crate) flush_pending: bool,
    pub(crate) conn: Option<Conn>,
    pub(crate) tx: Tx,
    pub(crate) rx: Rx,
    /// Parameters of the MPA exchange (ours, then the outcome).
    pub(crate) param: ConnParam,
}

/// What a queue pair method needs of its context.
#[derive(Debug)]
pub(crate) struct Env<'a> {
    pub(crate) shared: &'a Shared,
    /// The context's shared receive queues.
    pub(crate) srqs: &'a mut super::table::Table<super::srq::Srq>,
    /// Send batches no queue pair holds, for the next one to write.
    pub(crate) batches: &'a mut Vec<super::tx::Batch>,
    pub(crate) events: &'a EventSet,
    pub(crate) out: &'a mut Outputs,
    pub(crate) deadlines: &'a mut TimerQueue,
}

/// The epoll token of a queue pair.
pub(crate) fn qp_token(id: QpId) -> u64 {
    (super::TOKEN_QP << 32) | u64::from(id.0)
}

impl Qp {
    pub(crate) fn new(id: QpId, init: QpInit) -> Qp {
        Qp {
            id,
            init,
            state: QpState::Init,
            established: false,
            next_seq: 0,
            sq: VecDeque::new(),
            sq_used: 0,
            rq: VecDeque::new(),
            orq: VecDeque::new(),
            irq: VecDeque::new(),
            ord: 0,
            ird: 0,
            flush_pending: false,
            conn: None,
            tx: Tx::new(),
            rx: Rx::new(),
            param: ConnParam::default(),
        }
    }

    /// Whether a successful send completion is reported.
    pub(crate) fn signals(&self, signaled: bool) -> bool {
        signaled || self.init.sq_sig_all
    }

    pub(crate) fn wc(&self, wr_id: u64, status: WcStatus, opcode: WcOpcode, byte_len: u32) -> Wc {
        Wc {
            wr_id,
            status,
            opcode,
            byte_len,
            qp: Some(self.id),
            invalidated_rkey: None,
            solicited: false,
        }
    }

    /// Completes a send request (successes only if signaled).
    pub(crate) fn complete_send(
        &mut self,
        out: &mut Outputs,
        wr_id: u64,
        signaled: bool,
        status: WcStatus,
        opcode: WcOpcode,
        byte_len: u32,
    ) {
        self.sq_used = self.sq_used.saturating_sub(1);
        if status != WcStatus::Success || self.signals(signaled) {
            out.complete(self.init.send_cq, self.wc(wr_id, status, opcode, byte_len));
        }
    }

    /// Watches the socket for what the connection waits for now.
    pub(crate) fn sync_interest(&mut self, events: &EventSet) {
        let id = self.id;
        let want_write = self.tx.wants_write();
        let Some(c) = self.conn.as_mut() else {
            return;
        };
        let want = match c.phase {
            Phase::TcpConnect { .. } => Interest::WRITABLE.bits(),
            _ if want_write => Interest::READABLE.bits() | Interest::WRITABLE.bits(),
            _ => Interest::READABLE.bits(),
        };
        if want != c.interest {
            let interest = if want & Interest::WRITABLE.bits() != 0 {
                if want & Interest::READABLE.bits() != 0 {
                    Interest::READABLE | Interest::WRITABLE
                } else {
                    Interest::WRITABLE
                }
            } else {
                Interest::READABLE
            };
            if let Err(e) = events.modify(c.fd.as_raw_fd(), qp_token(id), interest) {
                tracing::warn!("iwarp: {e}");
            }
            c.interest = want;
        }
    }

    /// Drops the connection (closing the socket).
    pub(crate) fn close_conn(&mut self, env: &mut Env<'_>) {
        if let Some(c) = self.conn.take() {
            let _ = env.events.remove(c.fd.as_raw_fd());
        }
        self.tx.drop_batch();
        if self.flush_pending {
            self.flush(env);
        }
    }

    /// Starts lingering: our side shut down, reading until the peer closes.
    pub(crate) fn linger(&mut self, env: &mut Env<'_>) {
        let id = self.id;
        if let Some(c) = self.conn.as_mut() {
            sock::shutdown_write(&c.fd);
            let until = Instant::now() + LINGER;
            c.phase = Phase::Closing { until };
            env.deadlines.add(until, qp_token(id));
        }
    }

    /// Fails the queue pair (once): state, events, flushes, connection.
    pub(crate) fn fail(&mut self, env: &mut Env<'_>, why: Failure) {
        if self.state == QpState::Error {
            // Already failed; a connection still open goes now unless it
            // is sending its Terminate or lingering.
            if matches!(why, Failure::Lost { .. }) {
                self.close_conn(env);
            }
            return;
        }
        self.state = QpState::Error;
        let id = self.id;
        match &why {
            Failure::Terminate(t) => {
                let kind = access_kind(&t.cause);
                let text = format!("sent Terminate: {}", t.cause.describe());
                env.out
                    .event_with(id, kind, text, Some(t.cause.to_verbs(false)));
            }
            Failure::Terminated(cause) => {
                let kind = access_kind(cause);
                env.out.event_with(
                    id,
                    kind,
                    format!("peer sent Terminate: {}", cause.describe()),
                    Some(cause.to_verbs(true)),
                );
                if cause.is_access_error() {
                    self.fail_oldest_read(env.out, WcStatus::RemAccessErr);
                }
            }
            Failure::Lost { abrupt: true, why } => {
                env.out.event(
                    id,
                    AsyncEventKind::QpFatal,
                    format!("connection lost: {why}"),
                );
                self.fail_oldest_read(env.out, WcStatus::FatalErr);
            }
            _ => {}
        }
        let ev = match &why {
            Failure::Rejected(private_data) => CmEvent::Rejected {
                qp: id,
                private_data: private_data.clone(),
            },
            Failure::ConnectFailed(reason) => CmEvent::ConnectError {
                qp: id,
                reason: reason.clone(),
            },
            _ if self.established => CmEvent::Disconnected { qp: id },
            Failure::Lost { why, .. } => CmEvent::ConnectError {
                qp: id,
                reason: why.clone(),
            },
            Failure::Terminate(t) => CmEvent::ConnectError {
                qp: id,
                reason: format!("sent Terminate: {}", t.cause.describe()),
            },
            Failure::Terminated(c) => CmEvent::ConnectError {
                qp: id,
                reason: format!("peer sent Terminate: {}", c.describe()),
            },
            Failure::Disconnect => CmEvent::ConnectError {
                qp: id,
                reason: "disconnected before the connection was established".into(),
            },
        };
        env.out.cm(ev);
        self.flush_pending = true;
        match why {
            Failure::Terminate(t) if self.conn.is_some() => {
                let crc = self.conn.as_ref().is_some_and(|c| c.crc);
                self.tx.queue_terminate(&t, crc);
            }
            Failure::Disconnect if self.conn.is_some() => {
                self.tx.drop_batch();
                self.linger(env);
            }
            _ => self.close_conn(env),
        }
        if self.tx.batch_is_empty() {
            self.flush(env);
        }
    }

    /// Completes the oldest outstanding READ with `status` (not the
    /// ready-to-receive READ, which has no completion).
    fn fail_oldest_read(&mut self, out: &mut Outputs, status: WcStatus) {
        if let Some(r) = self.orq.pop_front() {
            match r.wr_id {
                Some(wr_id) => self.complete_send(out, wr_id, true, status, WcOpcode::RdmaRead, 0),
                None => self.fail_oldest_read(out, status),
            }
        }
    }

    /// Completes every outstanding request with [`WcStatus::WrFlushErr`],
    /// sends in posting order, then receives; a receive taken from a
    /// shared receive queue for a SEND not received completely goes back
    /// to it instead (unfilled, it belongs to no SEND).
    pub(crate) fn flush(&mut self, env: &mut Env<'_>) {
        let out = &mut *env.out;
        self.flush_pending = false;
        let mut done: Vec<(u64, u64, WcOpcode)> = Vec::new();
        for m in self.tx.take_marks() {
            done.push((m.seq, m.wr_id, m.opcode));
        }
        for r in self.orq.drain(..) {
            if let Some(wr_id) = r.wr_id {
                done.push((r.seq, wr_id, WcOpcode::RdmaRead));
            }
        }
        for s in self.sq.drain(..) {
            done.push((s.seq, s.wr_id, s.wc_opcode()));
        }
        done.sort_by_key(|d| d.0);
        for (_, wr_id, opcode) in done {
            self.complete_send(out, wr_id, true, WcStatus::WrFlushErr, opcode, 0);
        }
        self.sq_used = 0;
        self.irq.clear();
        if let Some(srq) = self.init.srq.and_then(|s| env.srqs.get_mut(s.0)) {
            for r in self.rq.drain(..) {
                srq.give_back(r);
            }
        }
        for r in std::mem::take(&mut self.rq) {
            let wc = self.wc(r.wr_id, WcStatus::WrFlushErr, WcOpcode::Recv, 0);
            env.out.complete(self.init.recv_cq, wc);
        }
    }
}

/// The ranges of `len` bytes at offset `off` of a scatter/gather list
/// (at most `out.len()` of them); returns how many.
pub(crate) fn sge_ranges(
    sges: &[rucx_rdma::Sge],
    mut off: u64,
    mut len: usize,
    out: &mut [libc::iovec],
) -> usize {
    let mut n = 0;
    for s in sges {
        let l = u64::from(s.len);
        if off >= l {
            off -= l;
            continue;
        }
        if len == 0 || n == out.len() {
            break;
        }
        let take = ((l - off) as usize).min(len);
        out[n] = libc::iovec {
            iov_base: (s.addr + off) as *mut libc::c_void,
            iov_len: take,
        };
        n += 1;
        len -= take;
        off = 0;
    }
    n
}

fn access_kind(cause: &TermCause) -> AsyncEventKind {
    if cause.is_access_error() {
        AsyncEventKind::QpAccessErr
    } else {
        AsyncEventKind::QpFatal
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges_span_entries() {
        let sges = [
            Sge {
                addr: 1000,
                len: 4,
                lkey: 1,
            },
            Sge {
                addr: 2000,
                len: 0,
                lkey: 1,
            },
            Sge {
                addr: 3000,
                len: 4,
                lkey: 1,
            },
        ];
        let mut out = [sock::iovec(&[]); MAX_SGE];
        let n = sge_ranges(&sges, 2, 5, &mut out);
        assert_eq!(n, 2);
        assert_eq!((out[0].iov_base as usize, out[0].iov_len), (1002, 2));
        assert_eq!((out[1].iov_base as usize, out[1].iov_len), (3000, 3));
        assert_eq!(sge_ranges(&sges, 8, 0, &mut out), 0);
    }
}
