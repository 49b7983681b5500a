//! The scoped tier: borrowed buffers, drained when the scope ends.
//!
//! [`Worker::scope`] works like `std::thread::scope`: operations posted on
//! the [`Scope`] may borrow buffers for `'env`, which outlives the scope,
//! and the scope does not return before every one of them has completed
//! (unmatched receives are canceled, everything else is waited for). So a
//! [`Pending`] token that is dropped or leaked cannot free or reuse memory
//! a transfer still uses: the borrow it consumed lasts until the scope
//! has drained.
#![allow(unsafe_code)]

use super::WorkerMut;
use crate::proto::eager_rx::RecvStarted;
use crate::proto::eager_tx::Started;
use crate::request::buf::{into_mut_slice, RecvBuf, SendBuf};
use crate::request::{Info, Notify, Op, ReqId};
use crate::ucs::slab::SlabId;
use crate::{Ep, Error, Result, Worker};
use std::cell::{Cell, RefCell};
use std::marker::PhantomData;

/// Operations whose buffers are borrowed until the scope ends.
///
/// Handed out as `&Scope` by [`Worker::scope`]; not `Sync`, not `Send`.
pub struct Scope<'s, 'env: 's> {
    worker: RefCell<&'s mut Worker>,
    reqs: RefCell<Vec<SlabId>>,
    serial: u64,
    _scope: PhantomData<&'s mut &'s ()>,
    _env: PhantomData<&'env mut &'env ()>,
    _not_sync: PhantomData<Cell<()>>,
}

impl std::fmt::Debug for Scope<'_, '_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Scope")
            .field("serial", &self.serial)
            .field("requests", &self.reqs.borrow().len())
            .finish()
    }
}

/// A scoped operation in flight; [`Scope::wait`] gives its buffer back.
///
/// Dropping or leaking it is harmless: the scope still drains the
/// operation, and the buffer stays borrowed until the scope ends.
#[must_use = "wait for the operation to get the buffer back"]
pub struct Pending<'s, B> {
    id: Option<SlabId>,
    done: Option<Result<Info>>,
    ptr: *mut u8,
    len: usize,
    serial: u64,
    _p: PhantomData<(&'s (), B)>,
}

impl<B> std::fmt::Debug for Pending<'_, B> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Pending")
            .field("id", &self.id)
            .field("done", &self.done)
            .finish()
    }
}

/// Buffers a scope can lend: `&[u8]` for sends, `&mut [u8]` for receives.
pub trait ScopeBuf<'env>: sealed::Sealed {
    #[doc(hidden)]
    fn rebuild(ptr: *mut u8, len: usize) -> Self;
}

mod sealed {
    pub trait Sealed {}
    impl Sealed for &[u8] {}
    impl Sealed for &mut [u8] {}
}

impl<'env> ScopeBuf<'env> for &'env [u8] {
    fn rebuild(ptr: *mut u8, len: usize) -> Self {
        if len == 0 {
            return &[];
        }
        // SAFETY: ptr/len came from a `&'env [u8]` given to Scope::tag_send;
        // shared borrows may coexist, and the request is complete.
        unsafe { std::slice::from_raw_parts(ptr, len) }
    }
}

impl<'env> ScopeBuf<'env> for &'env mut [u8] {
    fn rebuild(ptr: *mut u8, len: usize) -> Self {
        // SAFETY: ptr/len came from the `&'env mut [u8]` moved into
        // Scope::tag_recv, and the request is complete, so this is the only
        // access path again.
        unsafe { into_mut_slice(RecvBuf::new(ptr, len)) }
    }
}

static SERIAL: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);

impl Worker {
    /// Runs `f` with a [`Scope`] on which operations may borrow buffers;
    /// returns once every operation posted on it has completed.
    ///
    /// At the end, receives that matched nothing are canceled and all other
    /// operations are waited for (a dead peer fails them). If `f` panics,
    /// the scope drains before the panic goes on. If draining itself
    /// panics, the process aborts: returning would hand back memory that a
    /// transfer may still use.
    pub fn scope<'env, F, T>(&mut self, f: F) -> T
    where
        F: for<'s> FnOnce(&'s Scope<'s, 'env>) -> T,
    {
        let scope = Scope {
            worker: RefCell::new(self),
            reqs: RefCell::new(Vec::new()),
            serial: SERIAL.fetch_add(1, std::sync::atomic::Ordering::Relaxed),
            _scope: PhantomData,
            _env: PhantomData,
            _not_sync: PhantomData,
        };
        struct Drain<'a, 's, 'env>(&'a Scope<'s, 'env>);
        impl Drop for Drain<'_, '_, '_> {
            fn drop(&mut self) {
                let s = self.0;
                if std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| s.drain())).is_err() {
                    eprintln!("rucx: panic while draining a scope; aborting");
                    std::process::abort();
                }
            }
        }
        let guard = Drain(&scope);
        let r = f(&scope);
        drop(guard);
        r
    }
}

impl<'s, 'env> Scope<'s, 'env> {
    /// Sends `buf` with `tag` on `ep`; `buf` stays borrowed until
    /// [`Scope::wait`] or the end of the scope.
    pub fn tag_send(&self, ep: Ep, buf: &'env [u8], tag: u64) -> Pending<'s, &'env [u8]> {
        self.send(ep, buf, tag, scoped_op())
    }

    /// As [`Scope::tag_send`], but completes only once a receive on the
    /// other side has matched the message.
    pub fn tag_send_sync(&self, ep: Ep, buf: &'env [u8], tag: u64) -> Pending<'s, &'env [u8]> {
        self.send(ep, buf, tag, scoped_op().sync())
    }

    fn send(&self, ep: Ep, buf: &'env [u8], tag: u64, op: Op) -> Pending<'s, &'env [u8]> {
        // SAFETY: `buf` is borrowed for 'env, which outlives the scope, and
        // the scope drains this request before it returns.
        let sb = unsafe { SendBuf::new(buf.as_ptr(), buf.len()) };
        let r = {
            let mut w = self.worker.borrow_mut();
            let w = &mut **w;
            w.core.send_start(&mut w.ifaces, ep.0, sb, tag, op)
        };
        self.pending(
            r.map(|s| match s {
                Started::Done(i) => Ok(i),
                Started::InFlight(id) => Err(id),
            }),
            buf.as_ptr() as *mut u8,
            buf.len(),
        )
    }

    /// Receives a message matching `(tag, mask)` into `buf`, which stays
    /// borrowed until [`Scope::wait`] or the end of the scope.
    pub fn tag_recv(
        &self,
        buf: &'env mut [u8],
        tag: u64,
        mask: u64,
    ) -> Pending<'s, &'env mut [u8]> {
        let (ptr, len) = (buf.as_mut_ptr(), buf.len());
        // SAFETY: the exclusive borrow of `buf` moved into this call and
        // lasts for 'env; the scope drains the request before returning.
        let rb = unsafe { RecvBuf::new(ptr, len) };
        let r = self
            .worker
            .borrow_mut()
            .core
            .recv_start(rb, tag, mask, scoped_op());
        self.pending(
            r.map(|s| match s {
                RecvStarted::Done(i) => Ok(i),
                RecvStarted::InFlight(id) => Err(id),
            }),
            ptr,
            len,
        )
    }

    fn pending<B>(
        &self,
        r: Result<std::result::Result<Info, SlabId>>,
        ptr: *mut u8,
        len: usize,
    ) -> Pending<'s, B> {
        let (id, done) = match r {
            Ok(Ok(info)) => (None, Some(Ok(info))),
            Ok(Err(id)) => {
                self.reqs.borrow_mut().push(id);
                (Some(id), None)
            }
            Err(e) => (None, Some(Err(e))),
        };
        Pending {
            id,
            done,
            ptr,
            len,
            serial: self.serial,
            _p: PhantomData,
        }
    }

    /// Progresses the worker.
    pub fn progress(&self) -> usize {
        self.worker.borrow_mut().progress()
    }

    /// Whether `p` has completed.
    pub fn test<B>(&self, p: &Pending<'s, B>) -> bool {
        match p.id {
            None => true,
            Some(id) => !self.worker.borrow().request_is_active(ReqId(id)),
        }
    }

    /// Cancels `p` if it is a receive that matched nothing yet.
    pub fn cancel<B>(&self, p: &Pending<'s, B>) -> bool {
        match p.id {
            None => false,
            Some(id) => self.worker.borrow_mut().request_cancel(ReqId(id)),
        }
    }

    /// Waits for `p` and gives back its result and buffer.
    pub fn wait<B: ScopeBuf<'env>>(&self, p: Pending<'s, B>) -> (Result<Info>, B) {
        assert_eq!(p.serial, self.serial, "Pending waited on another scope");
        let result = match (p.done, p.id) {
            (Some(r), _) => r,
            (None, Some(id)) => {
                let r = self.worker.borrow_mut().request_wait(ReqId(id));
                self.reqs.borrow_mut().retain(|&x| x != id);
                r
            }
            (None, None) => Err(Error::InvalidHandle),
        };
        (result, B::rebuild(p.ptr, p.len))
    }

    /// Runs `f` with the worker, e.g. to connect or to post owned-tier
    /// operations while the scope is open. `f` gets a [`WorkerMut`]: every
    /// operation of the worker, but not the worker itself, which stays the
    /// one this scope drains.
    pub fn with_worker<R>(&self, f: impl FnOnce(&mut WorkerMut<'_>) -> R) -> R {
        let mut w = self.worker.borrow_mut();
        f(&mut WorkerMut::new(&mut w))
    }

    fn drain(&self) {
        let ids = std::mem::take(&mut *self.reqs.borrow_mut());
        let mut w = self.worker.borrow_mut();
        for &id in &ids {
            w.request_cancel(ReqId(id));
        }
        for id in ids {
            // Errors are the operation's own; the scope only needs it done.
            let _ = w.request_wait(ReqId(id));
        }
    }
}

fn scoped_op() -> Op {
    Op {
        notify: Notify::Scope,
        ..Op::default()
    }
}
