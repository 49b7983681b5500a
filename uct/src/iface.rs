//! Interfaces, endpoints and the operations on them.

use crate::ops::{AmOps, AmZcopyOps, AtomicOps, GetOps, PutOps};
use crate::perf::PerfModel;
use crate::{Error, Result};
use std::os::fd::RawFd;

/// Active message id. Ids `0..AM_ID_MAX` are the protocol layer's; a
/// transport may use ids above for its own control messages.
pub type AmId = u8;

/// Number of active message ids open to the layer above (like UCX's 32).
pub const AM_ID_MAX: AmId = 32;

/// An endpoint of an iface: an index into the iface's own endpoint table.
///
/// Only the iface that returned it gives it meaning; ids of destroyed
/// endpoints may be reused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct EpId(pub u32);

/// Where an incoming active message came from, as far as the iface knows:
/// one connection (TCP), one sending endpoint (self), one peer iface (shm).
///
/// Messages with the same `SrcId` arrive in the order they were sent. A
/// source id is reused only after [`AmSink::src_failed`] reported its end.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct SrcId(pub u32);

/// Caller's handle for an operation that completes later: handed back in
/// [`AmSink::completed`] or [`AmSink::pending_ready`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Token(pub u64);

/// Outcome of posting an operation.
#[must_use]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Posted {
    /// Finished: the caller's buffers may be reused.
    Done,
    /// Accepted; [`AmSink::completed`] reports the end with the token given.
    /// Buffers named by the call stay in use until then.
    InFlight,
    /// Refused for lack of resources; nothing was sent. Retry after
    /// [`Iface::pending_add`] reports the endpoint ready.
    NoResource,
}

impl Posted {
    /// What `am_bcopy` returns for a message of `len` bytes posted with
    /// this outcome: the length once done, 0 otherwise.
    pub fn with_len(self, len: usize) -> (Posted, usize) {
        match self {
            Posted::Done => (Posted::Done, len),
            other => (other, 0),
        }
    }
}

/// A memory range for zero-copy operations.
///
/// It is a raw pointer: the caller of an `unsafe` zero-copy operation
/// promises the range stays valid until the operation completes.
#[derive(Debug, Clone, Copy)]
pub struct Iov {
    /// Start of the range.
    pub ptr: *const u8,
    /// Length in bytes.
    pub len: usize,
}

impl Iov {
    /// A range covering `buf`.
    pub fn from_slice(buf: &[u8]) -> Iov {
        Iov {
            ptr: buf.as_ptr(),
            len: buf.len(),
        }
    }
}

// SAFETY: an Iov is a plain address range; whoever dereferences it does so
// under the zero-copy contract of the operation it was passed to.
unsafe impl Send for Iov {}

/// A memory range a zero-copy operation writes: the destination of
/// [`GetOps::get_zcopy`].
///
/// Like [`Iov`], a raw pointer under the operation's contract, but one
/// that may be written through.
#[derive(Debug, Clone, Copy)]
pub struct IovMut {
    /// Start of the range.
    pub ptr: *mut u8,
    /// Length in bytes.
    pub len: usize,
}

impl IovMut {
    /// A range covering `buf`.
    pub fn from_slice(buf: &mut [u8]) -> IovMut {
        IovMut {
            ptr: buf.as_mut_ptr(),
            len: buf.len(),
        }
    }

    /// The same range, for code that only walks or measures ranges (its
    /// pointer keeps the right to write).
    pub fn as_iov(self) -> Iov {
        Iov {
            ptr: self.ptr,
            len: self.len,
        }
    }
}

// SAFETY: as for `Iov`.
unsafe impl Send for IovMut {}

/// Runs `f` with the ranges of `iov` as [`Iov`]s, for a transport's own
/// walks over ranges (lengths, registrations); written through only where
/// the operation's contract allows it. Up to 16 ranges need no allocation.
pub fn with_iovs<R>(iov: &[IovMut], f: impl FnOnce(&[Iov]) -> R) -> R {
    const ON_STACK: usize = 16;
    if iov.len() <= ON_STACK {
        let mut a = [Iov {
            ptr: std::ptr::null(),
            len: 0,
        }; ON_STACK];
        for (d, s) in a.iter_mut().zip(iov) {
            *d = s.as_iov();
        }
        f(&a[..iov.len()])
    } else {
        let v: Vec<Iov> = iov.iter().map(|v| v.as_iov()).collect();
        f(&v)
    }
}

bitflags::bitflags! {
    /// What an iface offers. The operation bits ([`Caps::OPS`]) follow
    /// from the families the iface implements ([`crate::op_caps`]); the
    /// others describe properties and are set by the transport.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
    pub struct Caps: u32 {
        /// [`AmOps::am_short`] ([`Iface::am`], `max_short > 0`).
        const AM_SHORT = 1 << 0;
        /// [`AmOps::am_bcopy`] ([`Iface::am`], `max_bcopy > 0`).
        const AM_BCOPY = 1 << 1;
        /// [`AmZcopyOps::am_zcopy`] ([`Iface::zcopy`], `max_zcopy > 0`).
        const AM_ZCOPY = 1 << 2;
        /// [`Iface::pending_add`] and [`AmSink::pending_ready`]: always set.
        const PENDING = 1 << 3;
        /// Endpoints connect to a remote iface address.
        const CONNECT_TO_IFACE = 1 << 4;
        /// A peer's death fails its endpoints and sources (no hang).
        const PEER_FAILURE = 1 << 5;
        /// [`Iface::event_fd`] and [`Iface::arm`] work.
        const EVENT_FD = 1 << 6;
        /// [`PutOps::put_zcopy`]: write a peer's registered memory
        /// ([`Iface::put`], `max_put_zcopy > 0`).
        const PUT_ZCOPY = 1 << 7;
        /// [`GetOps::get_zcopy`]: read a peer's registered memory
        /// ([`Iface::get`], `max_get_zcopy > 0`).
        const GET_ZCOPY = 1 << 8;
        /// [`AtomicOps`]: the device executes atomic operations on a
        /// peer's registered memory ([`Iface::atomic`], which ones in
        /// [`AtomicOps::atomic_caps`](crate::AtomicOps::atomic_caps)).
        const ATOMIC_DEVICE = 1 << 9;
    }
}

/// How endpoints of an iface are created.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ConnectMode {
    /// From the remote device and iface address alone.
    ToIface,
}

/// What an iface offers, its limits and its performance.
#[derive(Debug, Clone)]
pub struct IfaceAttr {
    /// Operations offered.
    pub caps: Caps,
    /// Largest `payload` of `am_short` (the 8-byte header not counted).
    pub max_short: usize,
    /// Largest total length of `am_bcopy`'s parts.
    pub max_bcopy: usize,
    /// Largest total length of `am_zcopy`'s iov (header not counted).
    pub max_zcopy: usize,
    /// Largest `header` of `am_zcopy`.
    pub max_hdr: usize,
    /// Most entries in the iov of `am_zcopy`, `put_zcopy` and `get_zcopy`.
    pub max_iov: usize,
    /// Largest `put_zcopy`; 0 clears [`Caps::PUT_ZCOPY`].
    pub max_put_zcopy: usize,
    /// Largest `get_zcopy`; 0 clears [`Caps::GET_ZCOPY`].
    pub max_get_zcopy: usize,
    /// Latency, overhead and bandwidth estimate.
    pub model: PerfModel,
    /// Endpoint creation mode.
    pub connect: ConnectMode,
}

/// What an iface is, fixed once it is open: every iface keeps one and
/// returns it from [`Iface::info`], which the identity getters of
/// [`Iface`] read.
#[derive(Debug, Clone)]
pub struct IfaceInfo {
    /// Transport name, e.g. `"tcp"`.
    pub tl_name: String,
    /// Device name, e.g. `"lo"`.
    pub dev_name: String,
    /// Address of the device, as a peer needs it to judge reachability.
    pub device_addr: Vec<u8>,
    /// Address of the iface, as a peer needs it to connect.
    pub iface_addr: Vec<u8>,
    /// Capabilities, limits and performance model.
    pub attr: IfaceAttr,
}

/// Result of [`Iface::arm`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Armed {
    /// Nothing pending: the event fd will become readable on the next event.
    Sleep,
    /// Events are already pending: call `progress`, do not sleep.
    Busy,
}

/// Receiver of everything an iface reports during [`Iface::progress`].
///
/// The iface is borrowed while these run, so a sink cannot post on it; it
/// records what to do and does it after `progress` returns.
pub trait AmSink {
    /// An active message arrived. For `am_short` the data is the 8-byte
    /// header (little-endian) followed by the payload; for `am_bcopy` the
    /// parts concatenated; for `am_zcopy` the header then the iov. `data` is
    /// valid only during the call.
    fn am(&mut self, id: AmId, src: SrcId, data: &[u8]);

    /// An operation that returned [`Posted::InFlight`] finished.
    fn completed(&mut self, token: Token, result: Result<()>);

    /// An endpoint that refused work can take more; `token` is one given to
    /// [`Iface::pending_add`], handed back once, in the order added.
    fn pending_ready(&mut self, ep: EpId, token: Token);

    /// An endpoint failed: every later operation on it fails, in-flight ones
    /// were (or will be) completed with an error, and its pending tokens are
    /// handed back through `pending_ready` so that the caller can fail them.
    fn ep_failed(&mut self, ep: EpId, error: Error);

    /// A source of incoming messages is gone: it failed, or closed (even
    /// cleanly, between messages). A message it was sending in pieces will
    /// not finish. Reported once per source that delivered anything.
    fn src_failed(&mut self, src: SrcId, error: Error);

    /// The start of a large active message arrived and the rest is still
    /// on its way: `head` is what is here (at least its first
    /// [`AM_HEAD_MIN`] bytes, or all of it if shorter), `total` the
    /// message's whole length. A sink that knows where the data goes (a
    /// receive buffer already posted) answers with an [`AmDest`]: the
    /// iface then takes the first `hdr` bytes of the message as consumed
    /// and writes bytes `hdr..total` straight into the destination (those
    /// beyond its length are dropped), saving a copy; [`AmSink::am_end`]
    /// reports when they are all there. `None` (the default) has the
    /// message delivered whole through [`AmSink::am`].
    ///
    /// Only transports that receive into a buffer of their own before
    /// delivering call this, and never for a message `am` was given.
    fn am_begin(&mut self, id: AmId, src: SrcId, head: &[u8], total: usize) -> Option<AmDest> {
        let _ = (id, src, head, total);
        None
    }

    /// The rest of a message that [`AmSink::am_begin`] placed is all in
    /// its destination (`Ok`), or will never be (`Err`: its source
    /// failed; reported before [`AmSink::src_failed`]). After this the
    /// iface no longer touches the destination.
    fn am_end(&mut self, token: Token, result: Result<()>) {
        let _ = (token, result);
    }
}

/// The least of a message that [`AmSink::am_begin`] sees (unless the
/// message is shorter): enough for every protocol header.
pub const AM_HEAD_MIN: usize = 64;

/// Where the rest of an active message goes, from [`AmSink::am_begin`].
#[derive(Debug)]
pub struct AmDest {
    hdr: usize,
    ptr: *mut u8,
    len: usize,
    token: Token,
}

// SAFETY: a destination is plain data naming memory the sink vouches for
// (see `AmDest::new`); the iface writes it from the worker's thread.
unsafe impl Send for AmDest {}

impl AmDest {
    /// The message's bytes from `hdr` on go to the `len` bytes at `ptr`;
    /// `token` comes back with [`AmSink::am_end`].
    ///
    /// # Safety
    ///
    /// `[ptr, ptr + len)` must stay valid for writes, and untouched by
    /// anyone else, until `am_end(token, ..)` is reported (or the iface is
    /// dropped).
    pub unsafe fn new(hdr: usize, ptr: *mut u8, len: usize, token: Token) -> AmDest {
        AmDest {
            hdr,
            ptr,
            len,
            token,
        }
    }

    /// Bytes of the message the sink took from `head` (its header).
    pub fn hdr(&self) -> usize {
        self.hdr
    }

    /// Start of the destination.
    pub fn ptr(&self) -> *mut u8 {
        self.ptr
    }

    /// Length of the destination.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the destination is empty (every byte is dropped).
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The sink's token.
    pub fn token(&self) -> Token {
        self.token
    }
}

/// A transport interface opened for one worker.
///
/// Single-threaded: one caller at a time (`&mut self`). `Send`, so a worker
/// may move between threads.
pub trait Iface: Send + std::fmt::Debug {
    /// What the iface is: names, addresses, capabilities, limits and
    /// performance model, fixed once it is open.
    fn info(&self) -> &IfaceInfo;

    /// Transport name, e.g. `"tcp"` (from [`Iface::info`]).
    fn tl_name(&self) -> &str {
        &self.info().tl_name
    }

    /// Device name, e.g. `"lo"` (from [`Iface::info`]).
    fn dev_name(&self) -> &str {
        &self.info().dev_name
    }

    /// Capabilities, limits and performance model (from [`Iface::info`]).
    fn attr(&self) -> &IfaceAttr {
        &self.info().attr
    }

    /// Address of the device, as a peer needs it to judge reachability
    /// (from [`Iface::info`]).
    fn device_addr(&self) -> &[u8] {
        &self.info().device_addr
    }

    /// Address of this iface, as a peer needs it to connect (from
    /// [`Iface::info`]).
    fn iface_addr(&self) -> &[u8] {
        &self.info().iface_addr
    }

    /// Whether an endpoint from this iface can reach the given remote
    /// device and iface. Malformed addresses are unreachable.
    fn is_reachable(&self, dev_addr: &[u8], iface_addr: &[u8]) -> bool;

    /// Whether traffic from this iface to the remote device `dev_addr`
    /// stays inside this host, on the kernel's loopback path whichever
    /// device names it (a network transport to a peer in the same host and
    /// network namespace). More lanes to such a peer over that path add no
    /// bandwidth: they share one path and the same cores. `false` unless
    /// the transport knows (the default).
    fn loops_back(&self, dev_addr: &[u8]) -> bool {
        let _ = dev_addr;
        false
    }

    /// Creates an endpoint to a remote iface.
    fn ep_create(&mut self, dev_addr: &[u8], iface_addr: &[u8]) -> Result<EpId>;

    /// Destroys an endpoint at once. In-flight operations on it complete
    /// with [`Error::Canceled`] during the next `progress`; its pending
    /// tokens are dropped.
    fn ep_destroy(&mut self, ep: EpId);

    /// Copied active messages (`am_short`, `am_bcopy`), or `None` if the
    /// iface has none.
    fn am(&mut self) -> Option<&mut dyn AmOps> {
        None
    }

    /// Zero-copy active messages (`am_zcopy`), or `None` if the iface has
    /// none.
    fn zcopy(&mut self) -> Option<&mut dyn AmZcopyOps> {
        None
    }

    /// Writes to a peer's registered memory (`put_zcopy`), or `None` if
    /// the iface cannot.
    fn put(&mut self) -> Option<&mut dyn PutOps> {
        None
    }

    /// Reads from a peer's registered memory (`get_zcopy`), or `None` if
    /// the iface cannot.
    fn get(&mut self) -> Option<&mut dyn GetOps> {
        None
    }

    /// Atomic operations the device executes on a peer's memory, or
    /// `None` if it executes none.
    fn atomic(&mut self) -> Option<&mut dyn AtomicOps> {
        None
    }

    /// Asks to be told, through [`AmSink::pending_ready`] with `token`, when
    /// `ep` can take more work. Tokens come back in the order added. A token
    /// added while the endpoint has resources comes back on the next
    /// `progress`. Every iface has it ([`Caps::PENDING`] is always set), for
    /// the refusals of every operation family.
    fn pending_add(&mut self, ep: EpId, token: Token) -> Result<()>;

    /// Completes when every operation posted before on `ep` (or on every
    /// endpoint, with `None`) has left this process: `Done` at once, or
    /// `InFlight` with `completed(token, ..)` later.
    fn flush(&mut self, ep: Option<EpId>, token: Token) -> Result<Posted>;

    /// Makes progress: reads, writes, completes; reports to `sink`. Returns
    /// the number of events reported (0 when idle). Never blocks.
    fn progress(&mut self, sink: &mut dyn AmSink) -> usize;

    /// Whether [`Iface::cork`] batches anything here: whether posts of
    /// several threads gain from running together (false: the default).
    fn corks(&self) -> bool {
        false
    }

    /// Lets small copy sends wait in this process until [`Iface::uncork`]
    /// (or the next `progress`), so that a batch of posts leaves together:
    /// on tcp, one system call per connection instead of one per frame.
    /// Order is kept, and a send held back is still reported done. An
    /// iface that sends nothing this way ignores it (the default).
    fn cork(&mut self) {}

    /// Ends [`Iface::cork`]: writes what it held back, reporting to `sink`
    /// as `progress` does; the number of events reported.
    fn uncork(&mut self, sink: &mut dyn AmSink) -> usize {
        let _ = sink;
        0
    }

    /// Connections or peers `progress` has looked at beyond its wait for
    /// events, since the iface was created: what progress costs per
    /// endpoint, counted (for tests). A transport that does no
    /// per-connection work in `progress` keeps the default, 0.
    fn visits(&self) -> u64 {
        0
    }

    /// A file descriptor that becomes readable when `progress` has work, for
    /// a worker's epoll set; `None` if the iface has no such fd.
    fn event_fd(&self) -> Option<RawFd>;

    /// Prepares to sleep on [`Iface::event_fd`].
    fn arm(&mut self) -> Result<Armed>;
}
