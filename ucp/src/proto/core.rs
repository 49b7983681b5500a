//! Protocol state of a worker: endpoints, requests, tag matching.
//!
//! [`Core`] is what an iface's `progress` reports to (it implements
//! [`AmSink`]). It never holds an iface: work that needs one (resuming a
//! send when its endpoint has room again, failing an endpoint, answering
//! a peer) is recorded as a [`Command`] during `progress` and carried out
//! right after by the executor (`exec.rs`).

use crate::proto::command::Command;
pub(crate) use crate::proto::ep::{EpConfig, EpState};
pub(crate) use crate::proto::peer::{AckTo, Offered, PutOffer, RemoteBuf};
use crate::proto::select::{SelectCache, SelectConfig};
use crate::proto::FragKey;
use crate::request::{Callback, Completion, Info, Kind, Notify, Request};
use crate::tag::TagMatcher;
use crate::ucs::hash::FxHashMap;
use crate::ucs::slab::{Slab, SlabId};
use crate::uct::{AmId, AmSink, EpId, SrcId, Token};
use crate::{ucs, Error, Result};
use std::collections::VecDeque;

/// A message that arrived before a matching receive was posted.
#[derive(Debug)]
pub(crate) struct Unexp {
    pub(crate) tag: u64,
    pub(crate) data: Vec<u8>,
    pub(crate) total: usize,
    pub(crate) received: usize,
    pub(crate) key: Option<FragKey>,
    /// Acknowledge to the sender when matched (synchronous send).
    pub(crate) ack: Option<AckTo>,
    /// A rendezvous request to send: no data yet; answer when matched.
    /// Boxed: rare, and large next to an eager message's fields, which
    /// move with every unexpected message.
    pub(crate) rts: Option<Box<(AckTo, Rts)>>,
}

/// What a matched rendezvous request to send asks of the receiver.
#[derive(Debug, Clone)]
pub(crate) enum Rts {
    /// Answer RTR; the data comes as active messages.
    Am,
    /// Register the buffer and answer with its key; the sender writes.
    Put,
    /// Read the sender's buffer.
    Get(RemoteBuf),
}

/// The reads of a rendezvous-by-get receive not all posted yet.
#[derive(Debug)]
pub(crate) struct GetPlan {
    /// The endpoint back to the sender, whose lanes read.
    pub(crate) ep: SlabId,
    pub(crate) rb: RemoteBuf,
    /// Per lane of `ep`: the key it reads with instead of `rb.rkey` (a
    /// lane on another device; see `Core::lane_keys`).
    pub(crate) keys: Vec<Option<crate::uct::RemoteKey>>,
    /// Per data lane: next offset to read and end of its share.
    pub(crate) segs: Vec<(usize, usize, usize)>,
}

/// Where a rendezvous by put writes, once the receiver answered.
#[derive(Debug)]
pub(crate) struct PutTarget {
    /// The receive request on the other side.
    pub(crate) rreq: u64,
    pub(crate) addr: u64,
    /// The unpacked key; `None` if it was refused (the ATP says so).
    pub(crate) rkey: Option<crate::uct::RemoteKey>,
    /// Per data lane (index into the endpoint's lanes): next offset to
    /// write and end of its share.
    pub(crate) segs: Vec<(usize, usize, usize)>,
    /// Offset in the send buffer of the first byte to write.
    pub(crate) base: usize,
    /// For the tail of a split rendezvous by get: whether the receiver's
    /// ATS (its reads are done) arrived. `None` for a rendezvous by put.
    pub(crate) tail: Option<bool>,
}

impl PutTarget {
    /// The tail of a split rendezvous, offered by receive `rreq`, before
    /// its writes are planned.
    pub(crate) fn noted_tail(rreq: u64) -> PutTarget {
        PutTarget {
            rreq,
            addr: 0,
            rkey: None,
            segs: Vec::new(),
            base: 0,
            tail: Some(false),
        }
    }
}

/// Where the later fragments of a message go.
#[derive(Debug, Clone, Copy)]
pub(crate) enum FragTarget {
    Req(SlabId),
    Unexp(crate::tag::UnexpId),
    /// A message removed by a probe, not yet received.
    Probed(SlabId),
}

/// A message removed from the unexpected queue by a probe, until
/// `msg_recv` takes it.
#[derive(Debug)]
pub(crate) struct ProbedMsg {
    /// The message; `None` once its sender failed.
    pub(crate) msg: Option<Unexp>,
    /// Why it will not complete.
    pub(crate) error: Option<Error>,
}

/// What completed requests report to the application, until it looks.
#[derive(Default)]
pub(crate) struct Reports {
    /// Requests that got their result so far (wrapping); see
    /// `Worker::completed_count`.
    pub(crate) completed: u64,
    /// Released polled requests that completed (wrapping); see
    /// `Worker::released_completed`.
    pub(crate) released_done: u64,
    /// The first failure of a released request not yet taken.
    pub(crate) released_error: Option<Error>,
    /// The completion queue (`Op::queue`).
    pub(crate) completions: VecDeque<Completion>,
    /// Sees each queued completion first and may take it
    /// (`Worker::set_completion_hook`).
    pub(crate) hook: Option<crate::request::CompletionHook>,
    /// Callbacks to run once progress returns (`Op::callback`).
    pub(crate) callbacks: Vec<(Callback, Completion)>,
    /// Endpoints in peer error mode that failed, with why and their
    /// handler, until it runs (`Worker::connect_with`).
    pub(crate) ep_failures: Vec<(SlabId, Error, Option<crate::request::OnError>)>,
    /// Active messages that arrived whole, until their handlers run.
    pub(crate) am_arrivals: Vec<crate::proto::am_state::AmArrival>,
}

impl Reports {
    /// Queues completion `c`, unless the hook takes it.
    #[inline]
    pub(crate) fn queue(&mut self, c: Completion) {
        if let Some(hook) = self.hook {
            if hook(c.user_data, &c.result) {
                return;
            }
        }
        self.completions.push_back(c);
    }
}

/// The protocol half of a worker.
pub(crate) struct Core {
    pub(crate) eps: Slab<EpState>,
    /// Per iface: the settings of the endpoints whose active message lane
    /// it is (the same for all of them, so not kept per endpoint).
    pub(crate) ep_cfgs: Vec<EpConfig>,
    pub(crate) reqs: Slab<Request>,
    pub(crate) matcher: TagMatcher<SlabId, Unexp>,
    pub(crate) frags: FxHashMap<FragKey, FragTarget>,
    /// Per iface, per transport endpoint index: the protocol endpoint.
    pub(crate) lane_eps: Vec<Vec<Option<SlabId>>>,
    /// Per iface: how many entries of `lane_eps` are set.
    pub(crate) lane_counts: Vec<u32>,
    /// A count of `lane_counts` changed since the worker last chose the
    /// ifaces it polls on every progress call.
    pub(crate) lanes_changed: bool,
    /// What completed requests report to the application.
    pub(crate) done: Reports,
    pub(crate) cur_iface: usize,
    /// Work for the executor, in the order recorded.
    pub(crate) commands: VecDeque<Command>,
    pub(crate) next_msg_id: u64,
    /// Spare buffers for unexpected messages.
    pub(crate) spare: Vec<Vec<u8>>,
    /// This worker's address, sent in wireup messages.
    pub(crate) address: Vec<u8>,
    /// This worker's uuid, from its address (0 if it has none).
    pub(crate) uuid: u64,
    /// Which endpoint answers a transport source (learned from wireup).
    pub(crate) src_eps: FxHashMap<(usize, SrcId), SlabId>,
    /// Endpoints by remote worker uuid, oldest first (`ep.rs`).
    pub(crate) uuid_eps: FxHashMap<u64, super::ep::UuidEps>,
    /// Local and remote socket addresses of the connection manager's
    /// handshake, for the endpoints made by a client's connect or a
    /// listener's accept (kept apart: few endpoints have them).
    pub(crate) ep_sockaddrs: FxHashMap<SlabId, (std::net::SocketAddr, std::net::SocketAddr)>,
    /// Remote memory domain names, interned (`Core::intern_md`).
    pub(crate) md_names: Vec<std::sync::Arc<str>>,
    /// Bytes the unexpected tag messages hold, their limit, and the eager
    /// credit granted against it (`credit.rs`).
    pub(crate) unexp: super::credit::UnexpBudget,
    /// Selection tables by lane configuration.
    pub(crate) select: SelectCache,
    /// Print each new endpoint's tables.
    pub(crate) proto_info: bool,
    /// Endpoints' own send paths, once a shared worker asked for them
    /// (`send_gate.rs`).
    pub(crate) gates: Option<std::sync::Arc<super::send_gate::GateTable>>,
    /// The context (memory domains) and each iface's memory domain.
    pub(crate) ctx: crate::Context,
    pub(crate) iface_md: Vec<usize>,
    /// Kind of device of each iface.
    pub(crate) iface_dev: Vec<crate::uct::DeviceType>,
    /// Rendezvous-by-put sends writing, by request.
    pub(crate) puts: FxHashMap<SlabId, PutTarget>,
    /// Messages removed by probes.
    pub(crate) probed: Slab<ProbedMsg>,
    /// Rendezvous-by-get receives with reads still to post.
    pub(crate) get_plans: FxHashMap<SlabId, GetPlan>,
    /// One-sided operations waiting for room on a lane.
    pub(crate) rma_parked: usize,
    /// Active messages whose fragments are still arriving.
    pub(crate) am_frags: FxHashMap<FragKey, crate::proto::am_state::AmPartial>,
    /// Stream bytes from sources whose endpoint back is not known yet.
    pub(crate) stream_early: FxHashMap<(usize, SrcId), crate::proto::stream_rx::StreamRx>,
    /// Endpoints that may have stream bytes kept (`stream_poll`).
    pub(crate) stream_ready: Vec<SlabId>,
    /// Stream receives completed by one fragment (reused).
    pub(crate) stream_done: Vec<SlabId>,
    /// Fetches of rendezvous stream sends' data, by request
    /// (`stream_rndv.rs`): their completion goes to the stream.
    pub(crate) stream_fetches: FxHashMap<SlabId, crate::proto::stream_rndv::StreamFetch>,
    /// Buffers that held fetched stream data, for the next fetches.
    pub(crate) stream_spare: Vec<Vec<u8>>,
    /// Inline active message handlers by id (`Worker::am_set_inline_handler`).
    pub(crate) am_inline: Vec<(u16, crate::proto::am_state::AmInlineHandler)>,
    /// Where the next keepalive round starts among the watched endpoints.
    pub(crate) ka_cursor: usize,
    /// Endpoints put in peer error mode, for keepalive rounds: a round
    /// walks this list, not every endpoint. Entries of endpoints gone,
    /// failed or back in error mode none are dropped as rounds meet them.
    pub(crate) ka_watched: Vec<SlabId>,
    /// A rendezvous active message's announcement while its wrapped
    /// request is decoded (`am_rndv.rs`).
    pub(crate) am_rts: Option<crate::proto::am_state::AmRtsIn>,
}

impl std::fmt::Debug for Core {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Core")
            .field("eps", &self.eps.len())
            .field("reqs", &self.reqs.len())
            .field("frags", &self.frags.len())
            .finish_non_exhaustive()
    }
}

/// Unexpected buffers kept for reuse, and the largest kept.
const SPARE_MAX: usize = 64;
const SPARE_MAX_CAP: usize = 256 * 1024;

/// Keeps `v` among the spare buffers if there is room and it is not too
/// large (a free function, for callers that hold a request borrowed).
fn keep_spare(spare: &mut Vec<Vec<u8>>, v: Vec<u8>) {
    if spare.len() < SPARE_MAX && v.capacity() <= SPARE_MAX_CAP {
        spare.push(v);
    }
}

impl Core {
    pub(crate) fn new(
        n_ifaces: usize,
        address: Vec<u8>,
        select: SelectConfig,
        proto_info: bool,
        (ctx, iface_md, iface_dev): (crate::Context, Vec<usize>, Vec<crate::uct::DeviceType>),
    ) -> Core {
        let uuid = crate::wireup::address::WorkerAddress::decode(&address).map_or(0, |a| a.uuid);
        Core {
            uuid,
            eps: Slab::new(),
            ep_cfgs: Vec::new(),
            reqs: Slab::new(),
            matcher: TagMatcher::new(),
            frags: FxHashMap::default(),
            lane_eps: vec![Vec::new(); n_ifaces],
            lane_counts: vec![0; n_ifaces],
            lanes_changed: true,
            done: Reports::default(),
            cur_iface: 0,
            commands: VecDeque::new(),
            next_msg_id: 1,
            spare: Vec::new(),
            address,
            src_eps: FxHashMap::default(),
            uuid_eps: FxHashMap::default(),
            ep_sockaddrs: FxHashMap::default(),
            md_names: Vec::new(),
            unexp: super::credit::UnexpBudget::new(
                ctx.config().unexpected_max.usize_or(usize::MAX),
            ),
            select: SelectCache::new(select),
            proto_info,
            gates: None,
            ctx,
            iface_md,
            iface_dev,
            puts: FxHashMap::default(),
            probed: Slab::new(),
            get_plans: FxHashMap::default(),
            rma_parked: 0,
            am_frags: FxHashMap::default(),
            stream_early: FxHashMap::default(),
            stream_ready: Vec::new(),
            stream_done: Vec::new(),
            stream_fetches: FxHashMap::default(),
            stream_spare: Vec::new(),
            am_inline: Vec::new(),
            ka_cursor: 0,
            ka_watched: Vec::new(),
            am_rts: None,
        }
    }

    /// A buffer for `want` bytes: a spare one if the last kept is at
    /// least that large and not much larger (unexpected messages are
    /// counted by their length, so they should not hold far more), else a
    /// new one.
    pub(crate) fn take_spare(&mut self, want: usize) -> Vec<u8> {
        match self.spare.last() {
            Some(v) if v.capacity() >= want && v.capacity() <= want.max(128) * 2 => {
                let mut v = self.spare.pop().unwrap_or_default();
                v.clear();
                v
            }
            _ => Vec::with_capacity(want),
        }
    }

    pub(crate) fn give_spare(&mut self, v: Vec<u8>) {
        keep_spare(&mut self.spare, v);
    }

    pub(crate) fn set_lane_ep(&mut self, iface: usize, uct_ep: EpId, ep: Option<SlabId>) {
        let v = &mut self.lane_eps[iface];
        let i = uct_ep.0 as usize;
        if v.len() <= i {
            v.resize(i + 1, None);
        }
        let n = &mut self.lane_counts[iface];
        match (v[i].is_some(), ep.is_some()) {
            (false, true) => {
                *n += 1;
                self.lanes_changed = true;
            }
            (true, false) => {
                *n = n.saturating_sub(1);
                self.lanes_changed = true;
            }
            _ => {}
        }
        v[i] = ep;
    }

    pub(crate) fn lane_ep(&self, iface: usize, uct_ep: EpId) -> Option<SlabId> {
        self.lane_eps
            .get(iface)
            .and_then(|v| v.get(uct_ep.0 as usize))
            .copied()
            .flatten()
    }

    /// Finishes request `id` with `result`, notifying as it asked.
    pub(crate) fn complete(&mut self, id: SlabId, result: Result<Info>) {
        let Some(req) = self.reqs.get_mut(id) else {
            return;
        };
        if req.result.is_some() {
            // Finished already (a failure that came first): the first
            // result stands.
            return;
        }
        // A transport may hold a lent range of the buffer only until the
        // request completes (`request::buf::Lent`).
        debug_assert!(
            match &req.kind {
                Kind::Send(s) => s.zcopy_inflight == 0,
                Kind::Recv(r) => r.reads() == 0 && r.direct.is_none(),
                Kind::Rma(s) => s.zcopy_inflight == 0,
                _ => true,
            },
            "a request completes while a transport holds its buffer"
        );
        self.done.completed = self.done.completed.wrapping_add(1);
        let result = match req.staged.take() {
            Some(st) => {
                let (result, bounce) =
                    st.finish(req.owner.as_mut().map(|o| o.as_any_mut()), result);
                keep_spare(&mut self.spare, bounce);
                result
            }
            None => result,
        };
        let memh = match &mut req.kind {
            Kind::Send(s) => s.memh.take(),
            Kind::Recv(r) => r.memh.take(),
            _ => None,
        };
        if let Some(r) = memh {
            self.ctx.release_buffer(*r);
        }
        if !self.puts.is_empty() {
            self.puts.remove(&id);
        }
        if !self.get_plans.is_empty() {
            self.get_plans.remove(&id);
        }
        if !self.stream_fetches.is_empty() {
            if let Some(f) = self.stream_fetches.remove(&id) {
                // The core's own receive: the stream takes the result.
                let data = req.owner.take().and_then(|o| o.take::<Vec<u8>>().ok());
                self.reqs.remove(id);
                let _ = self.stream_fetch_over(f, Some(id), result, data);
                return;
            }
        }
        let user_data = req.user_data;
        match std::mem::replace(&mut req.notify, Notify::Poll) {
            Notify::Poll | Notify::Scope => {
                if req.detached {
                    // Dropped in its slot: moving a whole request out
                    // to drop it costs a polled loop a large copy.
                    self.reqs
                        .take_map_forget(id, |_| Some(()), Request::owns_nothing);
                    self.released(result);
                } else {
                    req.result = Some(result);
                }
            }
            notify @ (Notify::Queue | Notify::Callback(_)) => {
                // Queue and callback hand the result out; keep the slot
                // only for an owned buffer still to be taken.
                if req.owner.is_some() && !req.detached {
                    req.result = Some(result.clone());
                } else {
                    // Dropped in its slot when it holds nothing (a receive,
                    // a send done): moving it out to drop it costs a copy
                    // of the whole request on the message path.
                    self.reqs
                        .take_map_forget(id, |_| Some(()), Request::owns_nothing);
                }
                let c = Completion {
                    id: crate::ReqId(id),
                    user_data,
                    result,
                };
                match notify {
                    Notify::Callback(cb) => self.done.callbacks.push((cb, c)),
                    _ => self.done.queue(c),
                }
            }
        }
    }

    /// A released polled request completed with `result`: counted, and a
    /// failure kept if it is the first since the last look.
    pub(crate) fn released(&mut self, result: Result<Info>) {
        self.done.released_done = self.done.released_done.wrapping_add(1);
        if let (Err(e), None) = (result, &self.done.released_error) {
            self.done.released_error = Some(e);
        }
    }

    /// Records a send's failure; completes it unless zero-copy fragments
    /// are still with the transport (their completions finish it).
    pub(crate) fn fail_send(&mut self, id: SlabId, err: Error) {
        let Some(req) = self.reqs.get_mut(id) else {
            return;
        };
        if matches!(&req.kind, Kind::Ctrl(c) if !c.app) {
            // The core's own message (an acknowledgement, a rendezvous
            // answer) that cannot go: no application request, nothing to
            // report.
            self.reqs.remove(id);
            return;
        }
        if let Kind::Send(s) = &mut req.kind {
            if s.error.is_none() {
                s.error = Some(err.clone());
            }
            s.offset = s.buf.len();
            if s.zcopy_inflight > 0 {
                return;
            }
        }
        self.complete(id, Err(err));
    }

    /// Whether a receive is open whose buffer a peer may write without this
    /// worker's progress: it holds a registration for remote writes
    /// (rendezvous by put, or a split tail) and has not completed.
    pub(crate) fn has_exposed_recvs(&self) -> bool {
        self.reqs.iter().any(|(_, r)| Self::exposed_recv(r))
    }

    fn exposed_recv(r: &Request) -> bool {
        r.result.is_none() && matches!(&r.kind, Kind::Recv(s) if s.memh.is_some())
    }

    /// Leaks the owned buffers of the receives [`Core::has_exposed_recvs`]
    /// finds and drops those requests: a peer's late writes then land in
    /// memory nobody uses. Raw-tier receives (no owned buffer) stay.
    pub(crate) fn leak_exposed_owned(&mut self) {
        let ids: Vec<SlabId> = self
            .reqs
            .iter()
            .filter(|(_, r)| Self::exposed_recv(r) && (r.owner.is_some() || r.staged.is_some()))
            .map(|(id, _)| id)
            .collect();
        for id in ids {
            if let Some(mut r) = self.reqs.remove(id) {
                tracing::warn!(
                    "worker dropped while a peer may write into a receive buffer: leaking it"
                );
                std::mem::forget(r.owner.take());
                std::mem::forget(r.staged.take());
            }
        }
    }
}

impl AmSink for Core {
    #[inline]
    fn am(&mut self, id: AmId, src: SrcId, data: &[u8]) {
        // The most frequent message, a whole eager one, skips the general
        // dispatch (and its error handling, which it needs only when too
        // short).
        if id == crate::proto::wire::AM_EAGER_ONLY {
            if let Some((hdr, payload)) =
                data.split_first_chunk::<{ crate::proto::wire::ONLY_HDR }>()
            {
                self.rx_whole(u64::from_le_bytes(*hdr), payload, None);
                return;
            }
        }
        self.eager_arrived(id, src, data);
    }

    fn completed(&mut self, token: Token, result: ucs::Result<()>) {
        self.zcopy_completed(SlabId::from_u64(token.0), result);
    }

    fn pending_ready(&mut self, ep: EpId, _token: Token) {
        let iface = self.cur_iface;
        self.commands
            .push_back(Command::Resume { iface, uct_ep: ep });
    }

    fn ep_failed(&mut self, ep: EpId, error: ucs::Error) {
        let iface = self.cur_iface;
        self.commands.push_back(Command::FailLane {
            iface,
            uct_ep: ep,
            error,
        });
    }

    fn am_begin(
        &mut self,
        id: AmId,
        src: SrcId,
        head: &[u8],
        total: usize,
    ) -> Option<crate::uct::AmDest> {
        self.direct_begin(id, src, head, total)
    }

    fn am_end(&mut self, token: Token, result: ucs::Result<()>) {
        self.direct_end(token, result);
    }

    fn src_failed(&mut self, src: SrcId, error: ucs::Error) {
        self.src_eps.remove(&(self.cur_iface, src));
        self.stream_source_failed(src);
        self.rndv_source_failed(src, &error);
        self.source_failed(src, error);
    }
}
