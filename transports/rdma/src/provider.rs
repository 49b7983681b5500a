//! The provider contract: what an RDMA provider (the userspace iWARP engine,
//! or libibverbs on a real NIC) implements.
//!
//! Three levels, as in verbs:
//! * [`Provider`] finds devices and opens them;
//! * [`Device`] (`ibv_context` plus its protection domains and memory
//!   regions) is shared by every worker of a process, so registration is
//!   `&self` and thread-safe;
//! * [`Verbs`] is one worker's set of completion queues, queue pairs and
//!   connection-manager state, driven by one thread at a time (`&mut`).
//!   [`Verbs::progress`] moves a software provider (reads and writes its
//!   sockets); a hardware provider has nothing to do there.

use crate::verbs::{
    AsyncEvent, CmEvent, ConnParam, ConnReqId, CqId, DeviceAttr, DeviceInfo, Mr, PdId, QpId,
    QpInit, QpState, RecvWr, SendWr, SrqId, SrqInit, Wc,
};
use std::net::SocketAddr;
use std::os::fd::RawFd;
use std::sync::Arc;
use uct::ucs::config::ConfigTable;
use uct::{Access, Armed, Result};

/// An RDMA provider.
pub trait Provider: Send + Sync + std::fmt::Debug {
    /// Provider name, e.g. `"iwarp"`; the RC transport over it is named
    /// `rc_<name>`.
    fn name(&self) -> &'static str;

    /// Devices present (none is not an error).
    fn devices(&self) -> Result<Vec<DeviceInfo>>;

    /// Opens a device found by [`Provider::devices`].
    fn open_device(&self, name: &str) -> Result<Arc<dyn Device>>;

    /// Configuration tables of the provider, for `rucx-info -c`.
    fn config_tables(&self) -> Vec<&'static ConfigTable> {
        Vec::new()
    }
}

/// An open device: its attributes, protection domains and memory regions.
pub trait Device: Send + Sync + std::fmt::Debug {
    /// What the device offers.
    fn attr(&self) -> &DeviceAttr;

    /// Allocates a protection domain.
    fn alloc_pd(&self) -> Result<PdId>;

    /// Frees a protection domain that has no regions and no queue pairs
    /// left.
    fn dealloc_pd(&self, pd: PdId) -> Result<()>;

    /// Registers `len` bytes at `addr` in `pd` with `access` (`ibv_reg_mr`).
    ///
    /// # Safety
    ///
    /// The memory must stay valid until [`Device::dereg_mr`] returns. While
    /// registered with remote rights, peers read or write it at any time
    /// the owning worker progresses: the caller must not hold Rust
    /// references to it that such accesses would race with.
    unsafe fn reg_mr(&self, pd: PdId, addr: *mut u8, len: usize, access: Access) -> Result<Mr>;

    /// Ends a registration: its keys are refused from now on, locally and
    /// remotely (`ibv_dereg_mr`).
    fn dereg_mr(&self, mr: &Mr) -> Result<()>;

    /// Opens a per-worker context for queues and connections.
    fn open_context(&self) -> Result<Box<dyn Verbs>>;

    /// Facts about the device beyond [`DeviceAttr`] (a NIC's port and GID
    /// table, ...), as label and value, for `rucx-info -d`.
    fn details(&self) -> Vec<(&'static str, String)> {
        Vec::new()
    }
}

/// One worker's completion queues, queue pairs and connections.
///
/// A software provider moves only when [`Verbs::progress`] (or `poll_cq`)
/// is called, unless it has a thread of its own (the iWARP engine with
/// `RUCX_IWARP_THREAD=y`); a peer's RDMA WRITE or READ into this
/// process's memory also waits for that, but no completion ever tells the
/// ULP of one (the target's CPU runs no code of the caller's for it).
pub trait Verbs: Send + std::fmt::Debug {
    /// The device's attributes.
    fn attr(&self) -> &DeviceAttr;

    /// Creates a completion queue with room for `depth` completions.
    fn create_cq(&mut self, depth: u32) -> Result<CqId>;

    /// Destroys a completion queue that no queue pair uses.
    fn destroy_cq(&mut self, cq: CqId) -> Result<()>;

    /// Creates an RC queue pair in [`QpState::Init`].
    fn create_qp(&mut self, init: &QpInit) -> Result<QpId>;

    /// Destroys a queue pair at once: its connection is closed and its
    /// outstanding requests are dropped without completions.
    fn destroy_qp(&mut self, qp: QpId) -> Result<()>;

    /// Creates a shared receive queue (`ibv_create_srq`): queue pairs
    /// created with it in [`QpInit::srq`] take the receive of each
    /// incoming SEND from it, in no promised order, instead of from
    /// receives posted on them.
    fn create_srq(&mut self, init: &SrqInit) -> Result<SrqId>;

    /// Destroys a shared receive queue no queue pair uses
    /// (`ibv_destroy_srq`); its posted receives are dropped without
    /// completions.
    fn destroy_srq(&mut self, srq: SrqId) -> Result<()>;

    /// Posts a receive on a shared receive queue (`ibv_post_srq_recv`).
    /// Its completion names the queue pair whose SEND filled it. A queue
    /// pair takes a receive when a SEND starts arriving; one that fails
    /// or is destroyed before the SEND is complete gives that receive
    /// back to the shared queue, without a completion (a provider whose
    /// hardware flushes it instead completes it with
    /// [`WcStatus::WrFlushErr`](crate::WcStatus::WrFlushErr), which the
    /// caller must treat the same). Once a queue pair is in
    /// [`QpState::Error`] it takes none.
    ///
    /// # Safety
    ///
    /// As [`Verbs::post_recv`], until the receive's completion is polled
    /// or the shared receive queue is destroyed.
    unsafe fn post_srq_recv(&mut self, srq: SrqId, wr: &RecvWr<'_>) -> Result<()>;

    /// State of a queue pair (`None` if it does not exist).
    fn qp_state(&self, qp: QpId) -> Option<QpState>;

    /// Starts listening for connections on `addr` (port 0 picks one);
    /// returns the bound address. One listener per context.
    fn listen(&mut self, addr: SocketAddr) -> Result<SocketAddr>;

    /// Connects `qp` to a listener at `dest` with `param`
    /// (`rdma_connect`); the outcome arrives as a [`CmEvent`].
    fn connect(&mut self, qp: QpId, dest: SocketAddr, param: &ConnParam) -> Result<()>;

    /// Accepts a connection request on `qp` (`rdma_accept`).
    fn accept(&mut self, req: ConnReqId, qp: QpId, param: &ConnParam) -> Result<()>;

    /// Rejects a connection request (`rdma_reject`).
    fn reject(&mut self, req: ConnReqId, private_data: &[u8]) -> Result<()>;

    /// Closes a connection (`rdma_disconnect`): the queue pair goes to
    /// error, outstanding requests are flushed.
    fn disconnect(&mut self, qp: QpId) -> Result<()>;

    /// Next connection-manager event, if any. Called on every progress;
    /// a provider whose events cost a system call to look for may look
    /// only every few calls while no connection is being set up, as long
    /// as `arm` looks before it says that the context may sleep.
    fn poll_cm(&mut self) -> Option<CmEvent>;

    /// Next asynchronous event, if any. Called on every progress, so, as
    /// with [`Verbs::poll_cm`], a provider may look for new ones only every
    /// few calls.
    fn poll_async(&mut self) -> Option<AsyncEvent>;

    /// Next asynchronous event, looking for new ones now: called when an
    /// error completion or a disconnection needs the event that says why.
    fn poll_async_now(&mut self) -> Option<AsyncEvent> {
        self.poll_async()
    }

    /// Posts a send work request (`ibv_post_send`). Errors are immediate
    /// refusals (queue full, bad request); everything else completes
    /// through the send completion queue.
    ///
    /// # Safety
    ///
    /// Unless [`SendFlags::INLINE`](crate::SendFlags::INLINE) is set, the
    /// memory of `wr.sges` must stay valid (and, for READ and atomics, not
    /// be accessed by anyone else) until the request's completion is
    /// polled, or the queue pair is destroyed.
    unsafe fn post_send(&mut self, qp: QpId, wr: &SendWr<'_>) -> Result<()>;

    /// Posts a receive work request (`ibv_post_recv`).
    ///
    /// # Safety
    ///
    /// The memory of `wr.sges` must stay valid for writes, and untouched by
    /// anyone else, until the receive's completion is polled or the queue
    /// pair is destroyed.
    unsafe fn post_recv(&mut self, qp: QpId, wr: &RecvWr<'_>) -> Result<()>;

    /// Moves up to `out.len()` completions of `cq` into `out`; returns how
    /// many. Progresses the provider first.
    fn poll_cq(&mut self, cq: CqId, out: &mut [Wc]) -> usize;

    /// Drives a software provider (sockets, timers); returns how much work
    /// it did. Never blocks.
    fn progress(&mut self) -> usize;

    /// A file descriptor that becomes readable when `progress` has work.
    fn event_fd(&self) -> Option<RawFd>;

    /// Prepares to sleep on [`Verbs::event_fd`].
    fn arm(&mut self) -> Result<Armed>;
}
