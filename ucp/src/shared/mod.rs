//! Workers shared by threads, requests as futures, and the progress
//! thread.
//!
//! UCX's three thread modes map onto two types:
//!
//! | UCX | rucx |
//! |---|---|
//! | `UCS_THREAD_MODE_SINGLE` | [`Worker`], used by the thread that made it; [`LocalWorker`](crate::LocalWorker) for futures on that thread |
//! | `UCS_THREAD_MODE_SERIALIZED` | [`Worker`]: `Send`, one thread at a time (`&mut self`) |
//! | `UCS_THREAD_MODE_MULTI` | [`SharedWorker`]: `Clone + Send + Sync`, any thread at any time |
//!
//! A [`Worker`] takes no lock and pays nothing for threads. A
//! [`SharedWorker`] wraps one: the protocol state sits behind a lock held
//! for one post or one progress call, never while user code runs:
//!
//! * completions reach their owners outside the lock: a request is a
//!   future ([`OpFuture`]) whose waker is woken after the lock is
//!   released, or a blocking [`OpFuture::wait`]; active messages queue
//!   for an [`AmReceiver`] whose futures give them to tasks (a handler
//!   set with [`Worker::am_set_handler`] runs under the lock);
//! * [`SharedWorker::progress`] only tries the lock: while one thread
//!   drives the transports, the others go on instead of queueing behind
//!   it, and a thread that waits for its request looks at the worker only
//!   once the count of completed requests (an atomic read outside the lock)
//!   moved;
//! * an optional progress thread ([`SharedWorker::start_progress_thread`],
//!   or `RUCX_ASYNC_PROGRESS=y`) drives the transports while the
//!   application does not, so that one-sided operations, rendezvous
//!   answers and keepalives are served while the application computes. It
//!   sleeps on the worker's event fd when nothing happens.
//!
//! Several [`Worker`]s of one context, one per thread, share nothing on
//! their paths but the context's registration caches.
//!
//! * on a worker with tcp, a post made while another thread holds the
//!   lock is handed to the holder, which runs it before it lets go, with
//!   tcp's sends corked into one system call per connection
//!   (`handoff.rs`, [`SharedWorker::post_with`]);
//! * a future polled while it is the only one waiting progresses the
//!   worker for a moment before it returns `Pending`
//!   ([`SharedWorker::set_poll_spin`]).
//!
//! * a short tag send, or a short active message without a user header,
//!   on an endpoint whose transport offers a send path of its own (shared
//!   memory) takes none of the worker's lock: it goes by
//!   the endpoint's gate (`proto/send_gate.rs`,
//!   [`SharedWorker::try_tag_send_short`]).
//!
//! Not done here: a matcher split by tag, and send paths of their own for
//! tcp and rc_iwarp endpoints and for larger messages, so that receives
//! and those sends of different threads run in parallel instead of under
//! the same lock.

pub(crate) mod am_recv;
mod futures;
mod gate;
pub(crate) mod handoff;
mod locked;
pub(crate) mod ops;
pub(crate) mod polling;
mod thread;
#[cfg(feature = "tokio")]
pub mod tokio;

pub use am_recv::{AmNext, AmReceiver};
pub use futures::{OpFuture, OpResult};
pub use handoff::{Handed, Queued};
pub use ops::Fetched;
pub use polling::{Accepting, Polling, SharedListener};

use crate::request::ReqId;
use crate::Worker;
use locked::Locked;
use parking_lot::Mutex;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::task::Waker as TaskWaker;

/// Tries of the lock before a post is handed to its holder.
const HANDOFF_SPIN: u32 = 64;

/// A worker that many threads use at once (UCX's
/// `UCS_THREAD_MODE_MULTI`); clones are handles to the same worker.
///
/// ```
/// # fn main() -> rucx_ucp::Result<()> {
/// use rucx_ucp::uct::{self_tl, Registry};
/// let ctx = rucx_ucp::Context::from_env(&Registry::new().with(&self_tl::COMPONENT))?;
/// let w = ctx.create_worker()?.into_shared();
/// let ep = w.connect(&w.address())?;
/// let recv = {
///     let w = w.clone();
///     std::thread::spawn(move || w.tag_recv(vec![0u8; 5], 9, u64::MAX)?.wait().map_err(|e| e.error))
/// };
/// w.tag_send(ep, b"hello".to_vec(), 9)?.wait().map_err(|e| e.error)?;
/// let (info, buf) = recv.join().unwrap()?;
/// assert_eq!((info.length, &buf[..]), (5, &b"hello"[..]));
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct SharedWorker {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for SharedWorker {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SharedWorker")
            .field("completed", &self.inner.completed.load(Ordering::Relaxed))
            .finish_non_exhaustive()
    }
}

pub(crate) struct Inner {
    state: Mutex<State>,
    /// The worker's completed-request count as the last locked section
    /// left it: waiters read it without the lock.
    completed: AtomicU64,
    /// The progress thread sleeps on the event fd (or is about to): a
    /// post must wake it, since what it posted may need progress.
    sleeping: gate::SleepGate,
    /// Wakes the progress thread's sleep (none if the worker could not
    /// make one: then there is no progress thread).
    signal: Option<crate::worker::Waker>,
    /// Tells the progress thread to end.
    stop: AtomicBool,
    /// A tokio driver drives the worker (there is one sleep mark).
    #[cfg_attr(not(feature = "tokio"), allow(dead_code))]
    driven: AtomicBool,
    /// How long (ns) a polled future keeps progressing before it returns
    /// `Pending`, while no other future waits ([`SharedWorker::set_poll_spin`]).
    poll_spin: AtomicU64,
    /// Posts made while another thread held the lock (`handoff.rs`).
    handoffs: handoff::Handoffs,
    /// The endpoints' own send paths (`proto/send_gate.rs`).
    gates: crate::SendPaths,
    /// Posts are handed over at all: some iface batches corked sends.
    /// Without one, a post waits for the lock (handing it over would cost
    /// more than the wait), and nothing checks the handoff queue.
    hands: bool,
    thread: Mutex<Option<std::thread::JoinHandle<()>>>,
}

/// What the lock guards.
struct State {
    worker: Worker,
    /// Futures of requests in flight, by request.
    waiters: Vec<(ReqId, TaskWaker)>,
    /// Futures of operations that are not requests (connecting, flushing,
    /// closing): woken after every progress that did something.
    others: Vec<TaskWaker>,
}

impl Worker {
    /// This worker, to be used by many threads at once.
    pub fn into_shared(self) -> SharedWorker {
        SharedWorker::new(self)
    }
}

impl SharedWorker {
    /// Shares `worker`; starts the progress thread if the context's
    /// `RUCX_ASYNC_PROGRESS` says so (failing that, logs and goes on
    /// without it).
    pub fn new(mut worker: Worker) -> SharedWorker {
        let signal = worker.waker();
        let start = worker.context().config().async_progress;
        let completed = worker.completed_count();
        let hands = worker.corks();
        let gates = worker.send_paths();
        let signal = signal
            .map_err(|e| tracing::warn!("no waker for a shared worker: {e}"))
            .ok();
        let w = SharedWorker {
            inner: Arc::new(Inner {
                state: Mutex::new(State {
                    worker,
                    waiters: Vec::new(),
                    others: Vec::new(),
                }),
                completed: AtomicU64::new(completed),
                sleeping: gate::SleepGate::default(),
                signal,
                stop: AtomicBool::new(false),
                driven: AtomicBool::new(false),
                poll_spin: AtomicU64::new(0),
                handoffs: handoff::Handoffs::default(),
                hands,
                gates,
                thread: Mutex::new(None),
            }),
        };
        if start {
            if let Err(e) = w.start_progress_thread() {
                tracing::warn!("RUCX_ASYNC_PROGRESS: no progress thread: {e}");
            }
        }
        w
    }

    /// Runs `f` on the worker, with the lock held: the way to everything
    /// of [`Worker`] that has no method here (memory mapping, rkeys, active
    /// message handlers, queries). `f` must not use this shared worker
    /// (that would deadlock); callbacks it registers run under the lock.
    pub fn with<R>(&self, f: impl FnOnce(&mut Worker) -> R) -> R {
        let mut g = self.lock();
        let r = f(&mut g.state().worker);
        g.unlock(false);
        r
    }

    /// [`SharedWorker::with`] if no other thread holds the lock; `None`
    /// at once if one does.
    pub fn try_with<R>(&self, f: impl FnOnce(&mut Worker) -> R) -> Option<R> {
        let mut g = self.try_lock()?;
        let r = f(&mut g.state().worker);
        g.unlock(false);
        Some(r)
    }

    /// Drives the transports once, unless another thread does so now:
    /// then it yields the processor (that thread may be waiting for one,
    /// where threads outnumber cores) and returns 0. Wakes the futures
    /// whose requests completed.
    pub fn progress(&self) -> usize {
        let Some(mut g) = self.try_lock() else {
            std::thread::yield_now();
            return 0;
        };
        let n = g.state().worker.progress();
        g.unlock(n > 0);
        n
    }

    /// This worker's address (see [`Worker::address`]).
    pub fn address(&self) -> Vec<u8> {
        self.with(|w| w.address())
    }

    /// The count of completed requests as last seen (see
    /// [`Worker::completed_count`]), read without the lock.
    pub fn completed_count(&self) -> u64 {
        self.inner.completed.load(Ordering::Acquire)
    }

    /// Takes the lock, and runs the posts handed to its holder.
    #[inline]
    pub(crate) fn lock(&self) -> Locked<'_> {
        Locked::new(&self.inner, self.inner.state.lock())
    }

    /// [`SharedWorker::lock`] unless another thread holds it.
    #[inline]
    pub(crate) fn try_lock(&self) -> Option<Locked<'_>> {
        let st = self.inner.state.try_lock()?;
        Some(Locked::new(&self.inner, st))
    }

    /// [`SharedWorker::try_lock`], retried for a moment: a holder that
    /// only posts lets go within it, and a post is cheaper to run than to
    /// hand over; one that writes to a socket does not. Waits for the lock
    /// if posts are not handed over on this worker.
    #[inline]
    pub(crate) fn try_lock_briefly(&self) -> Option<Locked<'_>> {
        if !self.inner.hands {
            return Some(self.lock());
        }
        for _ in 0..HANDOFF_SPIN {
            if let Some(g) = self.try_lock() {
                return Some(g);
            }
            std::hint::spin_loop();
        }
        self.try_lock()
    }

    /// Runs `f` on the worker now if the lock is free; else hands it to
    /// the thread that holds the lock, which runs it before it lets go
    /// (see the handoff rules in the module documentation). Posts of one
    /// thread run in the order it made them, handed or not.
    ///
    /// This is how the futures' operations post. Use it for posts of the
    /// raw tier, whose result (a request id) the caller then keeps: the
    /// result of a [`Queued`] post dropped before it was taken is dropped
    /// with it.
    ///
    /// A handed `f` runs in the holder's thread. If it panics, the panic
    /// does not unwind there: it is kept and goes on in the thread that
    /// takes the result ([`Queued::take`]); a panic of a post whose
    /// [`Queued`] was dropped is dropped with it. Either way the worker
    /// is left as `f` left it, as after a panic under [`SharedWorker::with`].
    pub fn post_with<R: Send + 'static>(
        &self,
        f: impl FnOnce(&mut Worker) -> R + Send + 'static,
    ) -> Handed<R> {
        if let Some(mut g) = self.try_lock_briefly() {
            let r = f(g.worker());
            g.unlock(false);
            return Handed::Done(r);
        }
        let slot = handoff::Slot::new();
        self.hand(handoff::job(slot.clone(), f, |_, r| drop(r)));
        Handed::Queued(Queued { slot })
    }

    /// Queues `job` for the lock's holder; runs it (and what else waits)
    /// if the lock became free meanwhile.
    pub(crate) fn hand(&self, job: handoff::Job) {
        self.inner.handoffs.push(job);
        if let Some(g) = self.try_lock() {
            g.unlock(false);
        }
    }

    /// How long a polled future of this worker keeps progressing it before
    /// it returns `Pending`, when it is the only future that waits (zero,
    /// the default: one progress call per poll). A reply that arrives
    /// within it completes the future in the same poll, without a wake-up
    /// and a turn of the executor; meanwhile the polling thread runs
    /// nothing else, so it is meant for microseconds. A tokio
    /// [`Driver`](crate::tokio::Driver) sets it (`Driver::poll_spin`).
    pub fn set_poll_spin(&self, spin: std::time::Duration) {
        let ns = u64::try_from(spin.as_nanos()).unwrap_or(u64::MAX);
        self.inner.poll_spin.store(ns, Ordering::Relaxed);
    }

    /// How many tag messages went by their endpoint's own send path,
    /// past the worker's lock, on the endpoints that are still open: short
    /// messages over a transport that offers such a path (shared memory),
    /// sent while nothing else was queued on the endpoint.
    pub fn endpoint_path_sends(&self) -> u64 {
        self.inner.gates.sends()
    }

    /// Whether two handles name the same worker.
    pub fn same(&self, other: &SharedWorker) -> bool {
        Arc::ptr_eq(&self.inner, &other.inner)
    }
}

impl Drop for Inner {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(s) = &self.signal {
            let _ = s.wake();
        }
        if let Some(h) = self.thread.get_mut().take() {
            // The progress thread holds only a weak handle; if it made the
            // last strong one and drops it, it cannot join itself.
            if h.thread().id() != std::thread::current().id() {
                let _ = h.join();
            }
        }
    }
}
