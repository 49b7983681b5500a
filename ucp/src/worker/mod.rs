//! Workers: ifaces, progress, endpoints and requests of one thread.

mod am;
mod am_send;
mod atomic_lane;
mod close;
mod connect;
mod ep_errors;
mod exec;
mod flush;
mod heat;
mod hold;
mod ifaces;
mod keepalive;
mod listener;
mod send_paths;
mod stream;
mod wakeup;

use crate::context::Context;
use crate::proto::core::Core;
use crate::request::{Completion, Info, Kind, ReqId, Request};
use crate::uct::{Caps, Iface, IfaceParams, Posted, Token};
use crate::wireup::address::{IfaceEntry, WorkerAddress};
use crate::{Ep, Error, Result};
pub use am::{AmHandler, AmInlineHandler, AmMsg, AmParams};
pub(crate) use am_send::copy_eager;
pub use close::{CloseMode, Closing};
pub use ep_errors::{EpParams, ErrHandler, ErrMode};
pub use flush::Flushing;
pub use listener::{ConnHandler, ConnRequest, Connecting, Listener};
pub use send_paths::SendPaths;
use std::time::Duration;
pub use wakeup::{Armed, Waker, MAX_SLEEP};

/// A progress engine with its own ifaces, endpoints and requests.
///
/// One thread uses a worker at a time (`&mut self`); it is `Send`, so it
/// may move between threads. Nothing happens unless [`Worker::progress`]
/// runs (directly, or inside a waiting call).
pub struct Worker {
    // Ifaces drop before the protocol state, so that no transport can touch
    // a request's memory after the request is gone.
    pub(crate) ifaces: ifaces::Ifaces,
    pub(crate) core: Core,
    ctx: Context,
    uuid: u64,
    address: Vec<u8>,
    wake: wakeup::Wakeup,
    /// Active message handlers (`am.rs`).
    am_handlers: am::AmHandlers,
    /// Rendezvous active messages dropped unreceived.
    am_dropped: am::Dropped,
    /// The list of active messages whose handlers run (kept empty).
    am_batch: Vec<crate::proto::am_state::AmArrival>,
    /// When the next keepalive round is due.
    keepalive: keepalive::KeepaliveClock,
    /// Listeners (`listener.rs`), by [`Listener`] index.
    listeners: Vec<Option<listener::ListenerState>>,
    /// Poll the listeners on the next progress (set by `wait_event`).
    listen_now: bool,
    /// Per iface: whether progress may skip it.
    heat: Vec<heat::Heat>,
    /// The ifaces that progress calls other than sweeps poll: those not
    /// cold when last chosen (on a sweep, or when the lanes or the heat
    /// changed).
    hot: Vec<usize>,
    /// `hot` must be chosen again.
    hot_stale: bool,
    tick: heat::Tick,
    /// Whether an iface batches corked sends ([`crate::uct::Iface::corks`]).
    corking: bool,
    /// Whether the ifaces are corked ([`Worker::cork`]).
    corked: bool,
}

impl std::fmt::Debug for Worker {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Worker")
            .field("uuid", &format_args!("{:#x}", self.uuid))
            .field("ifaces", &self.ifaces)
            .field("core", &self.core)
            .finish_non_exhaustive()
    }
}

fn new_uuid() -> u64 {
    use std::sync::atomic::{AtomicU64, Ordering};
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let t = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0);
    let mut x = t
        ^ (u64::from(std::process::id()) << 32)
        ^ COUNTER
            .fetch_add(1, Ordering::Relaxed)
            .wrapping_mul(0x9e37_79b9_7f4a_7c15);
    // splitmix64 finaliser
    x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^ (x >> 31)
}

impl Worker {
    pub(crate) fn new(ctx: Context) -> Result<Worker> {
        let uuid = new_uuid();
        let params = IfaceParams { worker_uuid: uuid };
        let mut ifaces = Vec::new();
        let mut iface_md = Vec::new();
        let mut iface_dev = Vec::new();
        let mut md_names = Vec::new();
        for (mdi, md, res) in ctx.resource_list() {
            match md.iface_open(res, &params) {
                Ok(i) => {
                    ifaces.push(i);
                    iface_md.push(mdi);
                    iface_dev.push(res.dev_type);
                    md_names.push(md.name().to_string());
                }
                Err(e) => {
                    tracing::warn!("cannot open {}/{}: {e}", res.tl_name, res.dev_name)
                }
            }
        }
        if ifaces.is_empty() {
            return Err(Error::Unsupported("no iface could be opened".into()));
        }
        let entries = ifaces
            .iter()
            .zip(md_names)
            .map(|(i, md_name)| IfaceEntry {
                tl_name: i.tl_name().to_string(),
                md_name,
                dev_addr: i.device_addr().to_vec(),
                iface_addr: i.iface_addr().to_vec(),
                model: i.attr().model,
                caps: i.attr().caps,
            })
            .collect();
        let address = WorkerAddress {
            uuid,
            ifaces: entries,
        }
        .encode()?;
        let cfg = ctx.config();
        let core = Core::new(
            ifaces.len(),
            address.clone(),
            cfg.select_config(),
            cfg.proto_info,
            (ctx.clone(), iface_md, iface_dev),
        );
        let keepalive = keepalive::KeepaliveClock::new(cfg);
        let am = Caps::AM_SHORT | Caps::AM_BCOPY | Caps::AM_ZCOPY;
        let heat = ifaces
            .iter()
            .map(|i| heat::Heat::new(!i.attr().caps.intersects(am)))
            .collect();
        let corking = ifaces.iter().any(|i| i.corks());
        Ok(Worker {
            ifaces: ifaces::Ifaces(ifaces),
            core,
            ctx,
            uuid,
            address,
            wake: wakeup::Wakeup::default(),
            am_handlers: Default::default(),
            am_dropped: Default::default(),
            am_batch: Vec::new(),
            keepalive,
            listeners: Vec::new(),
            listen_now: false,
            heat,
            hot: Vec::new(),
            hot_stale: true,
            tick: heat::Tick::default(),
            corking,
            corked: false,
        })
    }

    /// The context this worker belongs to.
    pub fn context(&self) -> &Context {
        &self.ctx
    }

    /// This worker's address: give it to peers so they can connect.
    pub fn address(&self) -> Vec<u8> {
        self.address.clone()
    }

    /// The ifaces of this worker (for introspection).
    pub fn ifaces(&self) -> impl Iterator<Item = &dyn Iface> {
        self.ifaces.iter().map(|i| i.as_ref())
    }

    /// Creates an endpoint to the worker whose address is `remote`, or
    /// returns the working endpoint this worker already has to it (one it
    /// made, or one made when that worker connected here first).
    pub fn connect(&mut self, remote: &[u8]) -> Result<Ep> {
        let addr = WorkerAddress::decode(remote)?;
        self.core.wireup_peer(&mut self.ifaces, &addr).map(Ep)
    }

    /// `Ok` while the endpoint works; the error once it failed.
    pub fn ep_status(&self, ep: Ep) -> Result<()> {
        match self.core.eps.get(ep.0) {
            None => Err(Error::InvalidHandle),
            Some(s) => match &s.failed {
                None => Ok(()),
                Some(e) => Err(Error::clone(e)),
            },
        }
    }

    /// The protocol selection tables of `ep`: tag send, then synchronous
    /// tag send (what `RUCX_PROTO_INFO=y` prints).
    pub fn ep_protocols(
        &self,
        ep: Ep,
    ) -> Result<Vec<std::sync::Arc<crate::proto::select::SelectionTable>>> {
        self.core
            .eps
            .get(ep.0)
            .map(|s| s.tables.to_vec())
            .ok_or(Error::InvalidHandle)
    }

    /// The smallest message whose rendezvous by get this worker, as the
    /// receiver on `ep`, splits with the sender (`RUCX_RNDV_SPLIT_THRESH`:
    /// it reads one half, the sender writes the other; the worker with the
    /// smaller uuid copies the first half, whichever way the message goes);
    /// `None`
    /// where it never does (network lanes, or `inf`).
    pub fn ep_rndv_split(&self, ep: Ep) -> Result<Option<usize>> {
        if self.core.eps.get(ep.0).is_none() {
            return Err(Error::InvalidHandle);
        }
        Ok(self.core.split_from(&self.ifaces, ep.0))
    }

    /// The uuid of the worker at the other end of `ep`.
    pub fn ep_remote_uuid(&self, ep: Ep) -> Result<u64> {
        self.core
            .eps
            .get(ep.0)
            .map(|s| s.remote_uuid)
            .ok_or(Error::InvalidHandle)
    }

    /// Closes an endpoint at once: queued sends fail with
    /// [`Error::Canceled`]; sends already with the transport complete
    /// during later progress.
    pub fn ep_close(&mut self, ep: Ep) -> Result<()> {
        let Some(state) = self.core.eps.get(ep.0) else {
            return Err(Error::InvalidHandle);
        };
        let lanes = state.lanes.clone();
        self.forget_err_handler(ep);
        self.core.fail_ep(ep.0, Error::Canceled);
        self.core.remove_ep(ep.0);
        for (iface, uct_ep) in lanes {
            if uct_ep != crate::proto::lazy_lanes::LAZY {
                self.core.set_lane_ep(iface, uct_ep, None);
                self.ifaces[iface].ep_destroy(uct_ep);
            }
        }
        Ok(())
    }

    /// Waits until every send posted on `ep` has left this process (its
    /// buffers may be reused and the transport holds nothing of it). A
    /// rendezvous send leaves once its receiver took the data, so this
    /// waits for the receiving side to progress too.
    pub fn ep_flush(&mut self, ep: Ep) -> Result<()> {
        let f = self.ep_flush_start(ep)?;
        self.flush_wait(f)
    }

    /// Asks the transport to flush transport endpoint `uct_ep` of
    /// `iface`: `Ok(None)` if it held nothing, `Ok(Some(id))` while it
    /// flushes (a request to wait for), `Err(None)` if it has no room for
    /// the request now, `Err(Some(e))` if it failed.
    pub(crate) fn flush_lane(
        &mut self,
        (iface, uct_ep): (usize, crate::uct::EpId),
    ) -> std::result::Result<Option<ReqId>, Option<Error>> {
        let id = self
            .core
            .reqs
            .insert(Request::new(Kind::Flush, crate::Op::new()));
        let r = self.ifaces[iface].flush(Some(uct_ep), Token(id.to_u64()));
        if !matches!(r, Ok(Posted::InFlight)) {
            self.core.reqs.remove(id);
        }
        match r {
            Ok(Posted::InFlight) => Ok(Some(ReqId(id))),
            Ok(Posted::Done) => Ok(None),
            Ok(Posted::NoResource) => Err(None),
            Err(e) => Err(Some(Error::endpoint(e))),
        }
    }

    /// [`Worker::ep_flush`] on every endpoint; the first error, if any,
    /// after trying them all.
    pub fn flush(&mut self) -> Result<()> {
        let f = self.flush_start();
        self.flush_wait(f)
    }

    /// This worker's unique id.
    pub fn uuid(&self) -> u64 {
        self.uuid
    }

    /// The unique id of the worker whose address is `address` (as
    /// [`Worker::address`] gives it); an error if it is no address.
    pub fn address_uuid(address: &[u8]) -> Result<u64> {
        WorkerAddress::decode(address).map(|a| a.uuid)
    }

    /// Makes progress on every iface and runs completion callbacks.
    /// Returns how many events it handled; never blocks.
    pub fn progress(&mut self) -> usize {
        // Commands that posts queued since the last call (above all: wait
        // for room on a lane) run before the ifaces are polled, so that a
        // send a transport held back to batch it is handed back
        // and resumed by this call, not the next.
        let mut n = 0;
        if self.core.has_commands() {
            n = self.core.run_commands(&mut self.ifaces);
        }
        let sweep = self.tick.next();
        n += if sweep || self.hot_stale || self.core.lanes_changed {
            self.progress_all(sweep)
        } else {
            self.progress_hot()
        };
        if sweep
            || (self.listen_now && !self.listeners.is_empty())
            || self.core.has_commands()
            || self.has_deliveries()
        {
            return n + self.progress_rest(sweep);
        }
        n
    }

    /// Whether progress has something to hand to the program or to
    /// finish without the transports: callbacks, active message arrivals,
    /// endpoint failures, or rendezvous active messages dropped unfetched.
    #[inline(always)]
    pub(crate) fn has_deliveries(&self) -> bool {
        let d = &self.core.done;
        !d.callbacks.is_empty()
            || !d.am_arrivals.is_empty()
            || !d.ep_failures.is_empty()
            || self
                .am_dropped
                .any
                .load(std::sync::atomic::Ordering::Relaxed)
    }

    /// What a progress call does past polling the ifaces, when there is
    /// any: commands, callbacks, active message and error handlers, the
    /// keepalive and listeners on a sweep. What it sends (protocol replies,
    /// sends resumed, sends of callbacks and handlers) leaves in one batch
    /// per connection before it returns, also when a callback panics.
    #[inline(never)]
    fn progress_rest(&mut self, sweep: bool) -> usize {
        if !self.corking || self.corked {
            return self.progress_rest_corked(sweep);
        }
        self.cork();
        let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            self.progress_rest_corked(sweep)
        }));
        let n = self.uncork();
        match r {
            Ok(m) => m + n,
            Err(p) => std::panic::resume_unwind(p),
        }
    }

    /// [`Worker::progress_rest`] with the ifaces corked (or none corking).
    fn progress_rest_corked(&mut self, sweep: bool) -> usize {
        let mut n = 0;
        if self.core.has_commands() {
            n += self.core.run_commands(&mut self.ifaces);
        }
        if !self.core.done.callbacks.is_empty() {
            let cbs = std::mem::take(&mut self.core.done.callbacks);
            n += cbs.len();
            let mut w = crate::api::WorkerMut::new(self);
            for (cb, c) in cbs {
                cb(&mut w, c);
            }
        }
        if !self.core.done.am_arrivals.is_empty() {
            n += self.run_am_handlers();
        }
        if !self.core.done.ep_failures.is_empty() {
            n += self.run_err_handlers();
        }
        // Rendezvous active messages dropped unreceived outside a handler
        // (an `AmReceiver`'s, or kept ones): their senders wait for this.
        self.discard_dropped_am();
        if sweep {
            n += self.keepalive_tick();
        }
        if (sweep || self.listen_now) && !self.listeners.is_empty() {
            self.listen_now = false;
            n += self.poll_listeners();
        }
        n
    }

    /// Whether an iface batches corked sends ([`crate::uct::Iface::corks`]).
    pub(crate) fn corks(&self) -> bool {
        self.corking
    }

    /// Corks every iface ([`crate::uct::Iface::cork`]): small sends wait
    /// for [`Worker::uncork`] (or the next progress) and leave together.
    pub(crate) fn cork(&mut self) {
        self.corked = true;
        for i in self.ifaces.0.iter_mut() {
            i.cork();
        }
    }

    /// Uncorks every iface, writing what waited; the number of events
    /// reported.
    pub(crate) fn uncork(&mut self) -> usize {
        self.corked = false;
        let mut n = 0;
        for (i, iface) in self.ifaces.0.iter_mut().enumerate() {
            self.core.cur_iface = i;
            n += iface.uncork(&mut self.core);
        }
        n
    }

    /// Polls the ifaces of `hot`: the progress calls between sweeps.
    #[inline]
    fn progress_hot(&mut self) -> usize {
        let mut n = 0;
        for &i in &self.hot {
            let (Some(iface), Some(heat)) = (self.ifaces.0.get_mut(i), self.heat.get_mut(i)) else {
                continue;
            };
            self.core.cur_iface = i;
            let got = iface.progress(&mut self.core);
            heat.polled(got);
            n += got;
        }
        n
    }

    /// Polls every iface not cold (all of them on a `sweep`), and chooses
    /// `hot` again.
    #[cold]
    fn progress_all(&mut self, sweep: bool) -> usize {
        let mut n = 0;
        self.hot.clear();
        for ((i, iface), heat) in self.ifaces.0.iter_mut().enumerate().zip(&mut self.heat) {
            let lanes = self.core.lane_counts.get(i).copied().unwrap_or(0);
            if !sweep && heat.cold(lanes) {
                continue;
            }
            self.core.cur_iface = i;
            let got = iface.progress(&mut self.core);
            heat.polled(got);
            n += got;
            if !heat.cold(lanes) {
                self.hot.push(i);
            }
        }
        self.hot_stale = false;
        self.core.lanes_changed = false;
        n
    }

    /// Whether the completion queue holds an entry.
    #[inline]
    pub fn has_completions(&self) -> bool {
        !self.core.done.completions.is_empty()
    }

    /// Sets the hook that sees every completion of an [`crate::Op::queue`]
    /// operation before the completion queue does and may take it (see
    /// [`crate::CompletionHook`]); `None` removes it. The C API marks its
    /// requests done this way, as UCX's handlers do, without a trip
    /// through the queue.
    pub fn set_completion_hook(&mut self, hook: Option<crate::CompletionHook>) {
        self.core.done.hook = hook;
    }

    /// The next entry of the completion queue (operations posted with
    /// [`crate::Op::queue`]).
    pub fn next_completion(&mut self) -> Option<Completion> {
        self.core.done.completions.pop_front()
    }

    /// How many requests have completed since the worker was made (a
    /// wrapping counter; operations that finished at posting are not
    /// requests and do not count). While it is unchanged, no
    /// [`Worker::request_test`] of a request in flight can succeed, so a
    /// caller tracking many requests can look at this instead of testing
    /// each after every `progress`.
    #[inline]
    pub fn completed_count(&self) -> u64 {
        self.core.done.completed
    }

    /// The result of request `id` if it completed; the request is then
    /// released (an owned buffer with it: use [`Worker::take`] for those).
    /// `None` while in flight; `Some(Err(InvalidHandle))` if `id` is not a
    /// request of this worker (any more).
    #[inline(always)]
    pub fn request_test(&mut self, id: ReqId) -> Option<Result<Info>> {
        let mut found = false;
        let out = self.core.reqs.take_map_forget(
            id.0,
            |r| {
                found = true;
                r.result.take()
            },
            Request::owns_nothing,
        );
        if !found {
            return Some(Err(Error::InvalidHandle));
        }
        out
    }

    /// Whether request `id` is still in flight.
    pub fn request_is_active(&self, id: ReqId) -> bool {
        self.core.reqs.get(id.0).is_some_and(|r| r.result.is_none())
    }

    /// Progresses until request `id` completes, then releases it.
    pub fn request_wait(&mut self, id: ReqId) -> Result<Info> {
        loop {
            if let Some(r) = self.request_test(id) {
                return r;
            }
            self.progress();
        }
    }

    /// Sets the `user_data` that request `id` reports with its completion
    /// (see [`crate::Op::user_data`]), or that its completion reports if
    /// it completed into the queue already. A caller that needs memory of
    /// its own per request only while one is in flight can thus post
    /// first and set the user data once it knows the request went in
    /// flight. `false` if neither is found.
    pub fn request_set_user_data(&mut self, id: ReqId, v: u64) -> bool {
        if let Some(r) = self.core.reqs.get_mut(id.0) {
            r.user_data = v;
            return true;
        }
        match self
            .core
            .done
            .completions
            .iter_mut()
            .rev()
            .find(|c| c.id == id)
        {
            Some(c) => {
                c.user_data = v;
                true
            }
            None => false,
        }
    }

    /// Lets request `id` finish on its own: nobody will collect it. An
    /// owned buffer it holds is dropped at completion. A polled request
    /// released this way is still counted when it completes
    /// ([`Worker::released_completed`]), and a failure of it kept
    /// ([`Worker::take_released_error`]).
    #[inline(always)]
    pub fn request_release(&mut self, id: ReqId) {
        if let Some(r) = self.core.reqs.get_mut(id.0) {
            if r.result.is_some() {
                self.release_completed(id);
            } else {
                r.detached = true;
            }
        }
    }

    /// [`Worker::request_release`] of a request that has its result.
    #[cold]
    fn release_completed(&mut self, id: ReqId) {
        let result = self.core.reqs.remove(id.0).and_then(|r| r.result);
        if let Some(result) = result {
            self.core.released(result);
        }
    }

    /// How many polled requests released with [`Worker::request_release`]
    /// have completed, before or after their release (a wrapping
    /// counter). A caller that releases what it posts at once can tell
    /// from it when all of it is done, for example before it frees the
    /// buffers.
    #[inline]
    pub fn released_completed(&self) -> u64 {
        self.core.done.released_done
    }

    /// The first failure of a released polled request since the last
    /// call, if any: released requests report their results nowhere else.
    #[inline]
    pub fn take_released_error(&mut self) -> Option<Error> {
        self.core.done.released_error.take()
    }

    /// Cancels a receive that has not matched a message yet, or a send
    /// none of which has left yet (it waits for transport resources); it
    /// completes with [`Error::Canceled`]. Returns whether it was canceled.
    /// Sends under way and matched receives run to completion.
    pub fn request_cancel(&mut self, id: ReqId) -> bool {
        self.core.recv_cancel(id.0)
            || self.core.send_cancel(id.0)
            || self.core.stream_recv_cancel(id.0)
    }

    /// Information on the oldest unexpected message matching `(tag, mask)`,
    /// without receiving it.
    pub fn tag_probe(&mut self, tag: u64, mask: u64) -> Option<Info> {
        self.core.probe(tag, mask)
    }

    /// Bytes the unexpected tag messages hold now, and the most they held
    /// so far, each counted as its length plus its queue entry (bounded by
    /// `RUCX_UNEXPECTED_MAX` plus 128 KiB per sending endpoint: senders
    /// have only that much eager credit).
    pub fn unexpected_bytes(&self) -> (usize, usize) {
        (self.core.unexp.held(), self.core.unexp.peak())
    }

    /// How many of endpoint `ep`'s lanes have a transport endpoint: data
    /// lanes connect when a rendezvous first uses them.
    #[doc(hidden)]
    pub fn ep_lanes_connected(&self, ep: Ep) -> Result<usize> {
        let st = self.core.eps.get(ep.0).ok_or(Error::InvalidHandle)?;
        let lazy = crate::proto::lazy_lanes::LAZY;
        Ok(st.lanes.iter().filter(|&&(_, e)| e != lazy).count())
    }

    /// How many endpoints this worker has (made by `connect`, or back to
    /// peers whose endpoints announced themselves).
    #[doc(hidden)]
    pub fn endpoint_count(&self) -> usize {
        self.core.eps.len()
    }

    /// Connections or peers the transports' progress has looked at so far,
    /// summed over this worker's ifaces ([`crate::uct::Iface::visits`]):
    /// with idle endpoints, empty progress calls add nothing to it.
    #[doc(hidden)]
    pub fn transport_visits(&self) -> u64 {
        self.ifaces.iter().map(|i| i.visits()).sum()
    }

    /// Number of requests in flight or waiting to be collected.
    pub fn requests_outstanding(&self) -> usize {
        self.core.reqs.len()
    }
}

/// Longest a dropped worker waits for peers that write into buffers of its
/// raw-tier receives without its progress (see [`Worker`]'s `Drop`).
pub const DROP_WRITES_TIMEOUT: Duration = Duration::from_secs(10);

/// Dropping a worker closes its ifaces and frees its requests, with one
/// exception that memory safety demands.
///
/// A receive by rendezvous put (and the tail of a split rendezvous by get)
/// hands the sender a key to the receive buffer. Over cross-memory attach
/// (`cma`) the sender then writes with `process_vm_writev`, without this
/// worker taking part: closing the ifaces and ending the registration do
/// not stop it. So while such a receive is open:
/// * an owned-tier buffer ([`Worker::tag_recv`]) is not freed but leaked,
///   so that late writes land in memory nobody uses;
/// * for a raw-tier buffer ([`Worker::tag_recv_raw`]) the worker keeps
///   progressing until the receive ends (the sender finished or failed),
///   for at most [`DROP_WRITES_TIMEOUT`]; if one is still open then, the
///   process aborts rather than hand back memory a peer may still write.
///
/// Scoped receives cannot be open here: a scope drains before it returns.
impl Drop for Worker {
    fn drop(&mut self) {
        // Handles of the send paths may outlive the worker: their table
        // empties (once sends through it are over).
        self.core.gates_clear();
        if !self.core.has_exposed_recvs() {
            return;
        }
        let start = std::time::Instant::now();
        while self.core.has_exposed_recvs() {
            self.core.leak_exposed_owned();
            if !self.core.has_exposed_recvs() {
                break;
            }
            if start.elapsed() >= DROP_WRITES_TIMEOUT {
                eprintln!(
                    "rucx: a worker dropped while a peer may still write into a raw receive \
                     buffer; aborting"
                );
                std::process::abort();
            }
            if self.progress() == 0 {
                let _ = self.wait_event(Some(Duration::from_millis(1)));
            }
        }
    }
}
