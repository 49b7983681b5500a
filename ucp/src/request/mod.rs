//! Requests: the state of operations that did not complete at once.
//!
//! Requests live in a slab of the worker and are named by [`ReqId`]s,
//! generational, so a stale id finds nothing. How a caller learns of
//! completion is chosen per operation with [`Op`]: by polling the id, from
//! the completion queue with its `user_data`, or by a callback run after
//! `progress`.

pub(crate) mod buf;
mod kinds;
mod owned;
mod owner;
mod recv;
pub(crate) mod staged;

pub(crate) use kinds::{AmSendInfo, StreamRecvState};
pub use owned::{IoBuf, IoBufMut};
pub(crate) use owner::Owner;

use crate::api::WorkerMut;
use crate::{Error, Result};
use buf::{RecvBuf, SendBuf};
pub(crate) use recv::{AtsTo, RecvPhase, RecvState, RndvRecv};
use ucs::slab::SlabId;

use crate::ucs;

/// Names an in-flight request of one worker.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ReqId(pub(crate) SlabId);

impl ReqId {
    /// The id as 64 bits (for C handles, logs and user tables).
    pub fn to_u64(self) -> u64 {
        self.0.to_u64()
    }
}

/// What a completed operation reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Info {
    /// Tag of the message (the sender's tag, for a receive).
    pub tag: u64,
    /// Length of the message in bytes.
    pub length: usize,
}

/// Outcome of posting an operation.
#[must_use = "an in-flight request must be waited for, tested or released"]
#[derive(Debug)]
pub enum Posted<B> {
    /// Completed at once; the buffer comes back.
    Done(Info, B),
    /// In flight; learn of completion through the id.
    InFlight(ReqId),
}

/// One entry of the worker's completion queue.
#[derive(Debug, Clone)]
pub struct Completion {
    /// The request.
    pub id: ReqId,
    /// The `user_data` given in [`Op`].
    pub user_data: u64,
    /// How it ended.
    pub result: Result<Info>,
}

/// A hook that sees the user data and result of each completion of an
/// [`Op::queue`] operation as the operation completes, inside `progress`,
/// and takes it (`true`: it is not queued) or leaves it to the queue.
/// A plain function: it can reach nothing of the worker, and it runs
/// while the worker is busy, so it must not call back into it.
pub type CompletionHook = fn(user_data: u64, result: &Result<Info>) -> bool;

/// A completion callback: runs after `progress`, with the worker free to
/// post more operations through the [`WorkerMut`] it gets (which cannot
/// be swapped for another worker or moved away).
pub type Callback = Box<dyn FnOnce(&mut WorkerMut<'_>, Completion) + Send>;

/// An endpoint's error handler (`EpParams::on_error`): runs once, after
/// `progress`, with the worker, the endpoint and why it failed.
pub type ErrHandler = Box<dyn FnOnce(&mut WorkerMut<'_>, crate::Ep, Error) + Send>;

/// An endpoint's error handlers as its state holds them: one per
/// `connect_with` or `accept` that gave one (an endpoint to a worker is
/// one however often it is connected), each run once, in that order.
#[derive(Default)]
pub(crate) struct OnError(pub(crate) Vec<ErrHandler>);

impl std::fmt::Debug for OnError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("OnError")
    }
}

/// How a caller wants to learn of an operation's completion.
#[derive(Default)]
pub struct Op {
    pub(crate) user_data: u64,
    pub(crate) notify: Notify,
    pub(crate) sync: bool,
    /// Complete while posted or fail with [`Error::NoResource`], posting
    /// nothing.
    pub(crate) immediate: bool,
}

impl std::fmt::Debug for Op {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Op")
            .field("user_data", &self.user_data)
            .field("notify", &self.notify)
            .field("sync", &self.sync)
            .field("immediate", &self.immediate)
            .finish()
    }
}

impl Op {
    /// Completion by polling the id (`request_test`, `request_wait`).
    #[inline]
    pub fn new() -> Op {
        Op::default()
    }

    /// Sets the `user_data` reported with the completion.
    #[inline]
    pub fn user_data(mut self, v: u64) -> Op {
        self.user_data = v;
        self
    }

    /// Makes a send synchronous: it completes only once a receive on the
    /// other side has matched the message (MPI's `MPI_Ssend`). No effect
    /// on receives.
    #[inline]
    pub fn sync(mut self) -> Op {
        self.sync = true;
        self
    }

    /// The operation completes while it is posted (it returns
    /// `Posted::Done`), or fails with [`Error::NoResource`] having posted
    /// nothing: a send that would queue or go by rendezvous, a receive
    /// whose message is not all here, a put or get that the transport
    /// would carry later. UCX's `UCP_OP_ATTR_FLAG_FORCE_IMM_CMPL`; for an
    /// operation on memory that lives only for the call (a stack buffer).
    /// Honoured by tag sends and receives, active message sends, stream
    /// sends and receives, puts and gets.
    #[inline]
    pub fn immediate(mut self) -> Op {
        self.immediate = true;
        self
    }

    /// Reports completion through [`Worker::next_completion`](crate::Worker::next_completion) instead of
    /// by polling. Applies only if the operation goes in flight.
    #[inline]
    pub fn queue(mut self) -> Op {
        self.notify = Notify::Queue;
        self
    }

    /// Runs `f` on completion, after the `progress` call that saw it.
    /// Applies only if the operation goes in flight.
    pub fn callback(
        mut self,
        f: impl FnOnce(&mut WorkerMut<'_>, Completion) + Send + 'static,
    ) -> Op {
        self.notify = Notify::Callback(Box::new(f));
        self
    }
}

#[derive(Default)]
pub(crate) enum Notify {
    #[default]
    Poll,
    Queue,
    Callback(Callback),
    /// Owned by a scope; the scope's token polls it.
    Scope,
}

impl std::fmt::Debug for Notify {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Notify::Poll => "Poll",
            Notify::Queue => "Queue",
            Notify::Callback(_) => "Callback",
            Notify::Scope => "Scope",
        })
    }
}

/// State of a tag send.
#[derive(Debug)]
pub(crate) struct SendState {
    pub(crate) ep: SlabId,
    pub(crate) tag: u64,
    pub(crate) buf: SendBuf,
    /// Bytes handed to the transport so far.
    pub(crate) offset: usize,
    /// Message id of a multi-fragment send (0 until the first fragment).
    pub(crate) msg_id: u64,
    /// Zero-copy fragments not yet completed by the transport.
    pub(crate) zcopy_inflight: u32,
    /// First error seen; the request completes with it once nothing is in
    /// flight.
    pub(crate) error: Option<Error>,
    /// Whether it is a synchronous send, and whether the receiver has
    /// matched it yet.
    pub(crate) sync: SyncState,
    /// Sent with zero-copy operations (else copied into the transport).
    pub(crate) zcopy: bool,
    /// Rendezvous progress, if this send uses rendezvous.
    pub(crate) rndv: RndvPhase,
    /// Registration of the buffer for a rendezvous by get: (memory domain,
    /// handle), released when the request completes.
    pub(crate) memh: Option<Box<crate::reg::BufReg>>,
    /// A stream send: `tag` is the stream offset of its first byte, and
    /// it goes as `STREAM` fragments (`proto/stream.rs`).
    pub(crate) stream: bool,
    /// A rendezvous active message: what wraps its request to send
    /// (`proto/am_rndv.rs`).
    pub(crate) am: Option<Box<AmSendInfo>>,
}

/// A send's synchronisation with its receiver (`MPI_Ssend`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum SyncState {
    /// A standard send: completes once its data left.
    No,
    /// A synchronous send whose receiver has not matched it yet.
    AwaitAck,
    /// A synchronous send that the receiver matched (or that failed, and
    /// waits for no answer).
    Acked,
}

impl SyncState {
    /// The state of a new send.
    pub(crate) fn new(sync: bool) -> SyncState {
        if sync {
            SyncState::AwaitAck
        } else {
            SyncState::No
        }
    }

    /// Whether the send is synchronous.
    pub(crate) fn is_sync(self) -> bool {
        self != SyncState::No
    }

    /// The receiver matched the message (or the send needs no answer any
    /// more).
    pub(crate) fn ack(&mut self) {
        if *self == SyncState::AwaitAck {
            *self = SyncState::Acked;
        }
    }
}

/// Where a send stands in its rendezvous, by scheme.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum RndvPhase {
    /// Not a rendezvous send.
    No,
    /// The data goes as active messages once the receiver asks.
    Am(AmPhase),
    /// The receiver reads the registered buffer (and may ask this side to
    /// write a part of it, its "tail" below, though it may be the head: a
    /// split rendezvous).
    Get(GetPhase),
    /// This side writes into the receiver's registered buffer.
    Put(PutPhase),
}

/// A rendezvous over active messages.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum AmPhase {
    /// The request to send is still to go out.
    Rts,
    /// Waiting for the receiver's ready-to-receive.
    AwaitRtr,
    /// Sending data into receive `rreq` of the other side.
    Data { rreq: u64 },
}

/// A rendezvous by get.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum GetPhase {
    /// The buffer is to be registered and offered (`RNDV_RTS_GET`).
    Rts,
    /// Waiting for the receiver to have read it (`RNDV_ATS`).
    AwaitAts,
    /// The receiver's ATS still to come after this side wrote the tail of
    /// a split rendezvous and sent its ATP: no second offer is taken.
    TailWritten,
    /// The receiver asked this side to write its part (`RNDV_RTR_SPLIT`
    /// for the last bytes, `RNDV_RTR_SPLIT_HEAD` for the first);
    /// `Core::puts` holds where, and whether its ATS came already.
    Tail(WritePhase),
}

/// A rendezvous by put.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum PutPhase {
    /// The request to send is still to go out (`RNDV_RTS_PUT`).
    Rts,
    /// Waiting for the receiver's offer of its buffer (`RNDV_RTR_PUT`), or
    /// a plain ready-to-receive (it could not register): then the data
    /// goes as active messages.
    AwaitOffer,
    /// Writing the receiver's buffer.
    Write(WritePhase),
}

/// Writes into a receiver's buffer (all of it, or a split tail).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum WritePhase {
    /// Writes are being posted or are in flight; `Core::puts` holds where.
    Writing,
    /// Every write completed: the ATP is to go out.
    Atp,
}

impl RndvPhase {
    /// Whether the send is writing into its receiver's buffer.
    pub(crate) fn writing(self) -> bool {
        matches!(
            self,
            RndvPhase::Put(PutPhase::Write(WritePhase::Writing))
                | RndvPhase::Get(GetPhase::Tail(WritePhase::Writing))
        )
    }

    /// Whether every write is done and the ATP is due.
    pub(crate) fn atp_due(self) -> bool {
        matches!(
            self,
            RndvPhase::Put(PutPhase::Write(WritePhase::Atp))
                | RndvPhase::Get(GetPhase::Tail(WritePhase::Atp))
        )
    }

    /// The same scheme with its writes done.
    pub(crate) fn writes_done(self) -> RndvPhase {
        match self {
            RndvPhase::Put(PutPhase::Write(_)) => RndvPhase::Put(PutPhase::Write(WritePhase::Atp)),
            RndvPhase::Get(GetPhase::Tail(_)) => RndvPhase::Get(GetPhase::Tail(WritePhase::Atp)),
            other => other,
        }
    }

    /// Whether nothing of the send has left yet (the request to send is
    /// still queued).
    pub(crate) fn not_started(self) -> bool {
        matches!(
            self,
            RndvPhase::No
                | RndvPhase::Am(AmPhase::Rts)
                | RndvPhase::Get(GetPhase::Rts)
                | RndvPhase::Put(PutPhase::Rts)
        )
    }

    /// Whether the send waits for a message from the receiver (which a
    /// failed endpoint will never deliver).
    pub(crate) fn awaits_peer(self) -> bool {
        matches!(
            self,
            RndvPhase::Am(AmPhase::AwaitRtr)
                | RndvPhase::Put(PutPhase::AwaitOffer)
                | RndvPhase::Get(GetPhase::AwaitAts)
                | RndvPhase::Get(GetPhase::TailWritten)
        ) || self.writing()
    }
}

/// A protocol message of the worker itself (wireup, acknowledgements).
#[derive(Debug)]
pub(crate) struct CtrlState {
    pub(crate) ep: SlabId,
    pub(crate) am_id: crate::uct::AmId,
    pub(crate) data: Vec<u8>,
    /// For the last fragment of an application's active message that
    /// waits for room: the length its completion reports.
    pub(crate) report_len: usize,
    /// The application's message (an active message's last fragment),
    /// whose completion is reported even once the application released
    /// the request; otherwise the core's own, dropped silently.
    pub(crate) app: bool,
}

#[derive(Debug)]
pub(crate) enum Kind {
    Send(SendState),
    Recv(RecvState),
    /// A transport flush; completes when the transport reports it.
    Flush,
    /// A protocol message queued on an endpoint.
    Ctrl(CtrlState),
    /// A one-sided operation (put, get, atomic).
    Rma(crate::rma::RmaState),
    /// A stream receive.
    StreamRecv(StreamRecvState),
}

#[derive(Debug)]
pub(crate) struct Request {
    pub(crate) kind: Kind,
    pub(crate) notify: Notify,
    pub(crate) user_data: u64,
    /// Result once complete; the slot stays until someone collects it.
    pub(crate) result: Option<Result<Info>>,
    /// Buffer of the owned tier, returned by `take`.
    pub(crate) owner: Option<Owner>,
    /// Nobody will collect the result: free the slot at completion.
    pub(crate) detached: bool,
    /// Bounce buffer of a datatype that is not contiguous.
    pub(crate) staged: Option<Box<staged::Staged>>,
}

// `Request::owns_nothing` relies on these holding nothing to drop.
const _: () = assert!(
    !std::mem::needs_drop::<RecvBuf>()
        && !std::mem::needs_drop::<RecvPhase>()
        && !std::mem::needs_drop::<Info>()
        && !std::mem::needs_drop::<Option<u32>>()
);

impl Request {
    pub(crate) fn new(kind: Kind, op: Op) -> Request {
        Request::with_notify(kind, op.notify, op.user_data)
    }

    /// Whether dropping this request would run no drop code: a polled
    /// receive (tag or stream) whose result was taken and that holds no
    /// registration.
    /// Every field is named, so that a new one must be considered here.
    #[inline]
    pub(crate) fn owns_nothing(&self) -> bool {
        let Request {
            kind,
            notify,
            user_data: _,
            result,
            owner,
            detached: _,
            staged,
        } = self;
        let holds = match kind {
            Kind::Recv(RecvState {
                buf: _,
                phase: _,
                tag: _,
                total: _,
                received: _,
                memh,
                read_error,
                direct: _,
            }) => memh.is_some() || read_error.is_some(),
            Kind::StreamRecv(StreamRecvState {
                ep: _,
                buf: _,
                filled: _,
                unit: _,
                fetching: _,
            }) => false,
            _ => return false,
        };
        !holds
            && owner.is_none()
            && staged.is_none()
            && result.is_none()
            && matches!(notify, Notify::Poll | Notify::Scope)
    }

    /// A request notifying as `notify`, with the caller's `user_data`.
    #[inline]
    pub(crate) fn with_notify(kind: Kind, notify: Notify, user_data: u64) -> Request {
        Request {
            kind,
            notify,
            user_data,
            result: None,
            owner: None,
            detached: false,
            staged: None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{AmPhase, GetPhase, PutPhase, RndvPhase, SyncState, WritePhase};

    #[test]
    fn rendezvous_phases_say_what_each_scheme_waits_for() {
        use RndvPhase as R;
        let put_writing = R::Put(PutPhase::Write(WritePhase::Writing));
        let tail_writing = R::Get(GetPhase::Tail(WritePhase::Writing));
        for p in [put_writing, tail_writing] {
            assert!(p.writing() && !p.atp_due() && p.awaits_peer());
            assert!(p.writes_done().atp_due() && !p.writes_done().writing());
        }
        assert_eq!(
            tail_writing.writes_done(),
            R::Get(GetPhase::Tail(WritePhase::Atp)),
            "a split tail stays a rendezvous by get"
        );
        for p in [
            R::No,
            R::Am(AmPhase::Rts),
            R::Get(GetPhase::Rts),
            R::Put(PutPhase::Rts),
        ] {
            assert!(p.not_started() && !p.awaits_peer() && !p.writing());
            assert_eq!(p.writes_done(), p, "nothing to finish");
        }
        for p in [
            R::Am(AmPhase::AwaitRtr),
            R::Put(PutPhase::AwaitOffer),
            R::Get(GetPhase::AwaitAts),
            R::Get(GetPhase::TailWritten),
        ] {
            assert!(p.awaits_peer() && !p.not_started());
        }
        // Sending data, or with the ATP to go out, nothing is awaited.
        assert!(!R::Am(AmPhase::Data { rreq: 1 }).awaits_peer());
        assert!(!R::Put(PutPhase::Write(WritePhase::Atp)).awaits_peer());
    }

    #[test]
    fn only_a_synchronous_send_waits_for_the_match() {
        let mut std = SyncState::new(false);
        assert!(!std.is_sync());
        std.ack();
        assert_eq!(std, SyncState::No, "a standard send stays standard");
        let mut s = SyncState::new(true);
        assert_eq!(s, SyncState::AwaitAck);
        s.ack();
        assert_eq!(s, SyncState::Acked);
        s.ack();
        assert_eq!(s, SyncState::Acked, "a second answer changes nothing");
        assert!(s.is_sync());
    }
}
