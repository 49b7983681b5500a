//! Owned verbs objects below the device context: protection domains,
//! memory regions, completion channels, completion queues, shared receive
//! queues and queue pairs.
//!
//! Each frees its object in `Drop` and holds its parents in `Arc`s, so
//! that teardown runs children first whatever order the owners drop in:
//! a region or queue pair before its protection domain, a queue pair
//! before its completion queues and shared receive queue, a completion
//! queue before its channel, everything before the context.

use std::mem::MaybeUninit;
use std::ptr::NonNull;
use std::sync::Arc;

use rdma_sys as sys;
use uct::ucs::Result;

use crate::ffi::{os_err, set_nonblocking, Ctx};

/// Plain C structs whose all-zero bit pattern is a valid value (integers
/// and raw pointers, NULL for the latter).
///
/// # Safety
///
/// Implement only for such structs.
pub(crate) unsafe trait Zeroable: Sized {}

/// A zero-initialized `T`.
pub(crate) fn zeroed<T: Zeroable>() -> T {
    // SAFETY: `T: Zeroable` promises that all zeroes is a valid `T`.
    unsafe { MaybeUninit::zeroed().assume_init() }
}

// SAFETY: each is a C struct of integers, enums with a zero value
// (constified: plain integers), raw pointers and unions of those.
unsafe impl Zeroable for sys::ibv_qp_init_attr {}
// SAFETY: as above.
unsafe impl Zeroable for sys::ibv_srq_init_attr {}
// SAFETY: as above.
unsafe impl Zeroable for sys::ibv_qp_attr {}
// SAFETY: as above.
unsafe impl Zeroable for sys::ibv_send_wr {}
// SAFETY: as above.
unsafe impl Zeroable for sys::ibv_recv_wr {}
// SAFETY: as above.
unsafe impl Zeroable for sys::rdma_conn_param {}

/// Declares an owned handle type for a verbs object.
macro_rules! handle {
    ($(#[$doc:meta])* $name:ident, $raw:ty) => {
        $(#[$doc])*
        #[derive(Debug)]
        pub(crate) struct $name {
            raw: NonNull<$raw>,
        }

        // SAFETY: verbs objects may be used and freed from any thread;
        // libibverbs and the providers lock what needs locking. Posting
        // and polling through `&mut` of one owner keeps single-threaded
        // use where the provider asks for it.
        unsafe impl Send for $name {}
        // SAFETY: as above.
        unsafe impl Sync for $name {}

        impl $name {
            /// The raw object, for verbs that take it.
            pub(crate) fn as_raw(&self) -> *mut $raw {
                self.raw.as_ptr()
            }
        }
    };
}

handle!(
    /// A protection domain (`ibv_pd`).
    PdRaw,
    sys::ibv_pd
);

/// A protection domain and the context it belongs to.
#[derive(Debug)]
pub(crate) struct Pd {
    raw: PdRaw,
    _ctx: Arc<Ctx>,
}

impl Pd {
    /// Allocates a protection domain (`ibv_alloc_pd`).
    pub(crate) fn alloc(ctx: &Arc<Ctx>) -> Result<Arc<Pd>> {
        // SAFETY: the context is open.
        let raw = unsafe { sys::ibv_alloc_pd(ctx.as_raw()) };
        let raw = NonNull::new(raw).ok_or_else(|| os_err(format!("ibv_alloc_pd {}", ctx.name)))?;
        Ok(Arc::new(Pd {
            raw: PdRaw { raw },
            _ctx: ctx.clone(),
        }))
    }

    /// The raw protection domain.
    pub(crate) fn as_raw(&self) -> *mut sys::ibv_pd {
        self.raw.as_raw()
    }
}

impl Drop for Pd {
    fn drop(&mut self) {
        // SAFETY: allocated by ibv_alloc_pd, freed once; regions and queue
        // pairs hold an Arc of this, so none is left.
        let rc = unsafe { sys::ibv_dealloc_pd(self.as_raw()) };
        if rc != 0 {
            tracing::debug!(rc, "verbs: ibv_dealloc_pd failed");
        }
    }
}

handle!(
    /// A memory region (`ibv_mr`).
    MrRaw,
    sys::ibv_mr
);

/// A registered memory region, deregistered on drop.
#[derive(Debug)]
pub(crate) struct MrReg {
    raw: MrRaw,
    _pd: Arc<Pd>,
}

impl MrReg {
    /// Registers `len` bytes at `addr` with IBV_ACCESS_* bits `access`.
    ///
    /// # Safety
    ///
    /// The memory must stay mapped until the region is dropped.
    pub(crate) unsafe fn register(
        pd: &Arc<Pd>,
        addr: *mut u8,
        len: usize,
        access: u32,
    ) -> Result<MrReg> {
        // SAFETY: the protection domain is live; the caller keeps the range
        // mapped for the region's life; the kernel pins it.
        let raw = unsafe { sys::ibv_reg_mr(pd.as_raw(), addr.cast(), len, access as i32) };
        let raw = NonNull::new(raw).ok_or_else(|| os_err(format!("ibv_reg_mr {len} bytes")))?;
        Ok(MrReg {
            raw: MrRaw { raw },
            _pd: pd.clone(),
        })
    }

    /// Its local and remote keys.
    pub(crate) fn keys(&self) -> (u32, u32) {
        // SAFETY: the region is live; the keys are plain fields.
        unsafe { ((*self.raw.as_raw()).lkey, (*self.raw.as_raw()).rkey) }
    }
}

impl Drop for MrReg {
    fn drop(&mut self) {
        // SAFETY: registered by ibv_reg_mr, deregistered once.
        let rc = unsafe { sys::ibv_dereg_mr(self.raw.as_raw()) };
        if rc != 0 {
            tracing::debug!(rc, "verbs: ibv_dereg_mr failed");
        }
    }
}

handle!(
    /// A completion channel (`ibv_comp_channel`).
    ChannelRaw,
    sys::ibv_comp_channel
);

/// A completion channel: its fd becomes readable when an armed completion
/// queue of it gets a completion.
#[derive(Debug)]
pub(crate) struct Channel {
    raw: ChannelRaw,
    _ctx: Arc<Ctx>,
}

impl Channel {
    /// Creates a channel with a non-blocking fd.
    pub(crate) fn create(ctx: &Arc<Ctx>) -> Result<Arc<Channel>> {
        // SAFETY: the context is open.
        let raw = unsafe { sys::ibv_create_comp_channel(ctx.as_raw()) };
        let raw = NonNull::new(raw).ok_or_else(|| os_err("ibv_create_comp_channel"))?;
        let ch = Channel {
            raw: ChannelRaw { raw },
            _ctx: ctx.clone(),
        };
        set_nonblocking(ch.fd(), "completion channel")?;
        Ok(Arc::new(ch))
    }

    /// Its file descriptor.
    pub(crate) fn fd(&self) -> libc::c_int {
        // SAFETY: the channel is live; `fd` is a plain field.
        unsafe { (*self.raw.as_raw()).fd }
    }

    /// The raw channel.
    pub(crate) fn as_raw(&self) -> *mut sys::ibv_comp_channel {
        self.raw.as_raw()
    }
}

impl Drop for Channel {
    fn drop(&mut self) {
        // SAFETY: created once, destroyed once; its completion queues hold
        // an Arc of it, so none is left.
        let rc = unsafe { sys::ibv_destroy_comp_channel(self.raw.as_raw()) };
        if rc != 0 {
            tracing::debug!(rc, "verbs: ibv_destroy_comp_channel failed");
        }
    }
}

handle!(
    /// A completion queue (`ibv_cq`).
    CqRaw,
    sys::ibv_cq
);

/// A completion queue on a channel.
#[derive(Debug)]
pub(crate) struct Cq {
    raw: CqRaw,
    _channel: Arc<Channel>,
    _ctx: Arc<Ctx>,
}

impl Cq {
    /// Creates a completion queue of at least `depth` entries.
    pub(crate) fn create(ctx: &Arc<Ctx>, channel: &Arc<Channel>, depth: u32) -> Result<Arc<Cq>> {
        // SAFETY: context and channel are live; no cq_context is used.
        let raw = unsafe {
            sys::ibv_create_cq(
                ctx.as_raw(),
                depth.min(i32::MAX as u32) as i32,
                std::ptr::null_mut(),
                channel.as_raw(),
                0,
            )
        };
        let raw = NonNull::new(raw).ok_or_else(|| os_err(format!("ibv_create_cq {depth}")))?;
        Ok(Arc::new(Cq {
            raw: CqRaw { raw },
            _channel: channel.clone(),
            _ctx: ctx.clone(),
        }))
    }

    /// The raw completion queue.
    pub(crate) fn as_raw(&self) -> *mut sys::ibv_cq {
        self.raw.as_raw()
    }
}

impl Drop for Cq {
    fn drop(&mut self) {
        // SAFETY: created once, destroyed once; its queue pairs hold an Arc
        // of it. Every event read from the channel was acknowledged when
        // read, as ibv_destroy_cq requires.
        let rc = unsafe { sys::ibv_destroy_cq(self.raw.as_raw()) };
        if rc != 0 {
            tracing::debug!(rc, "verbs: ibv_destroy_cq failed");
        }
    }
}

handle!(
    /// A shared receive queue (`ibv_srq`).
    SrqRaw,
    sys::ibv_srq
);

/// A shared receive queue.
#[derive(Debug)]
pub(crate) struct Srq {
    raw: SrqRaw,
    _pd: Arc<Pd>,
}

impl Srq {
    /// Creates a shared receive queue in `pd`.
    pub(crate) fn create(pd: &Arc<Pd>, max_wr: u32, max_sge: u32) -> Result<Arc<Srq>> {
        let mut init: sys::ibv_srq_init_attr = zeroed();
        init.attr.max_wr = max_wr;
        init.attr.max_sge = max_sge;
        // SAFETY: the protection domain is live; `init` is initialized.
        let raw = unsafe { sys::ibv_create_srq(pd.as_raw(), &mut init) };
        let raw = NonNull::new(raw).ok_or_else(|| os_err(format!("ibv_create_srq {max_wr}")))?;
        Ok(Arc::new(Srq {
            raw: SrqRaw { raw },
            _pd: pd.clone(),
        }))
    }

    /// The raw shared receive queue.
    pub(crate) fn as_raw(&self) -> *mut sys::ibv_srq {
        self.raw.as_raw()
    }
}

impl Drop for Srq {
    fn drop(&mut self) {
        // SAFETY: created once, destroyed once; its queue pairs hold an
        // Arc of it.
        let rc = unsafe { sys::ibv_destroy_srq(self.raw.as_raw()) };
        if rc != 0 {
            tracing::debug!(rc, "verbs: ibv_destroy_srq failed");
        }
    }
}

handle!(
    /// A queue pair (`ibv_qp`).
    QpRaw,
    sys::ibv_qp
);

/// An RC queue pair with the objects it uses.
#[derive(Debug)]
pub(crate) struct Qp {
    raw: QpRaw,
    /// Its capabilities as created (what the device granted).
    pub(crate) cap: QpCap,
    _pd: Arc<Pd>,
    _cqs: (Arc<Cq>, Arc<Cq>),
    _srq: Option<Arc<Srq>>,
}

/// What a queue pair is created with.
#[derive(Debug)]
pub(crate) struct QpSpec<'a> {
    pub(crate) pd: &'a Arc<Pd>,
    pub(crate) send_cq: &'a Arc<Cq>,
    pub(crate) recv_cq: &'a Arc<Cq>,
    pub(crate) srq: Option<&'a Arc<Srq>>,
    pub(crate) cap: QpCap,
    pub(crate) sq_sig_all: bool,
}

/// Sizes of a queue pair's queues (`ibv_qp_cap`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct QpCap {
    pub(crate) max_send_wr: u32,
    pub(crate) max_recv_wr: u32,
    pub(crate) max_send_sge: u32,
    pub(crate) max_recv_sge: u32,
    pub(crate) max_inline: u32,
}

impl Qp {
    /// Creates an RC queue pair (in RESET; the connection moves it on).
    pub(crate) fn create(spec: &QpSpec<'_>) -> Result<Qp> {
        let mut init: sys::ibv_qp_init_attr = zeroed();
        init.send_cq = spec.send_cq.as_raw();
        init.recv_cq = spec.recv_cq.as_raw();
        init.srq = spec.srq.map_or(std::ptr::null_mut(), |s| s.as_raw());
        init.cap = sys::ibv_qp_cap {
            max_send_wr: spec.cap.max_send_wr,
            max_recv_wr: spec.cap.max_recv_wr,
            max_send_sge: spec.cap.max_send_sge,
            max_recv_sge: spec.cap.max_recv_sge,
            max_inline_data: spec.cap.max_inline,
        };
        init.qp_type = sys::ibv_qp_type::IBV_QPT_RC;
        init.sq_sig_all = i32::from(spec.sq_sig_all);
        // SAFETY: every object named in `init` is live (the Qp keeps them
        // so); the call writes the granted capabilities back into `init`.
        let raw = unsafe { sys::ibv_create_qp(spec.pd.as_raw(), &mut init) };
        let raw = NonNull::new(raw).ok_or_else(|| os_err("ibv_create_qp"))?;
        Ok(Qp {
            raw: QpRaw { raw },
            cap: QpCap {
                max_send_wr: init.cap.max_send_wr,
                max_recv_wr: init.cap.max_recv_wr,
                max_send_sge: init.cap.max_send_sge,
                max_recv_sge: init.cap.max_recv_sge,
                max_inline: init.cap.max_inline_data,
            },
            _pd: spec.pd.clone(),
            _cqs: (spec.send_cq.clone(), spec.recv_cq.clone()),
            _srq: spec.srq.cloned(),
        })
    }

    /// The raw queue pair.
    pub(crate) fn as_raw(&self) -> *mut sys::ibv_qp {
        self.raw.as_raw()
    }

    /// Its number.
    pub(crate) fn num(&self) -> u32 {
        // SAFETY: the queue pair is live; `qp_num` is a plain field.
        unsafe { (*self.raw.as_raw()).qp_num }
    }
}

impl Drop for Qp {
    fn drop(&mut self) {
        // SAFETY: created once, destroyed once, before the objects it
        // holds Arcs of.
        let rc = unsafe { sys::ibv_destroy_qp(self.raw.as_raw()) };
        if rc != 0 {
            tracing::debug!(rc, "verbs: ibv_destroy_qp failed");
        }
    }
}
