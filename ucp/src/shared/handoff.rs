//! Posts handed to the thread that holds a [`SharedWorker`]'s lock.
//!
//! Only on a worker with an iface that batches corked sends (tcp): there
//! the lock's holder may spend microseconds in a system call, and a batch
//! saves system calls. On the others (shared memory, self, iWARP) a post
//! waits for the lock: handing it over would cost more than the wait.
//!
//! A thread that posts while another holds the lock does not queue behind
//! it: it pushes the post (a closure) onto the worker's handoff queue and
//! goes on; the holder runs it before it lets go of the lock. The holder
//! runs what it finds in one batch with the ifaces corked
//! ([`Worker::cork`]): on tcp, the frames of a batch leave in one system
//! call per connection instead of one each. Under contention, threads
//! that post add messages to the batch instead of waiting their turn at
//! the lock (flat combining).
//!
//! The rule that nothing waits forever: a poster pushes, then tries the
//! lock (and drains if it got it); a holder releases the lock, then looks
//! at the queue (and drains if it is not empty and it gets the lock back).
//! With a sequentially consistent fence between the two steps on both
//! sides, either the poster's try sees the lock free or the holder's look
//! sees the post (the loom model below checks this). Posts of one thread
//! run in the order it made them: each taker of the lock drains the queue,
//! in order, before its own post.

use super::Locked;
use crate::Worker;
use std::collections::VecDeque;
use std::sync::Arc;
use std::task::Waker as TaskWaker;

#[cfg(all(loom, test))]
use loom::sync::atomic::{fence, AtomicUsize, Ordering};
#[cfg(all(loom, test))]
use loom::sync::Mutex;
#[cfg(not(all(loom, test)))]
use std::sync::atomic::{fence, AtomicUsize, Ordering};
#[cfg(not(all(loom, test)))]
use std::sync::Mutex;

/// What posting an owned operation gives: what it posted, or the error
/// with the buffer.
pub(crate) type PostResult<B> = std::result::Result<crate::request::Posted<B>, crate::OpError<B>>;

/// A post run by the lock's holder; it gives the waker of whoever waits
/// for its result, woken once the lock is released.
pub(crate) type Job = Box<dyn FnOnce(&mut Worker) -> Option<TaskWaker> + Send>;

/// The queue of posts waiting for the lock's holder. Every release of
/// the lock reads its length: it has cache lines of its own, away from the
/// counters that releases write.
#[repr(align(128))]
pub(crate) struct Handoffs<T = Job> {
    q: Mutex<VecDeque<T>>,
    /// `q`'s length, read without its lock.
    len: AtomicUsize,
    /// Posts queued and not yet run to their end (popped ones included).
    unfinished: AtomicUsize,
}

impl<T> Default for Handoffs<T> {
    fn default() -> Self {
        Handoffs {
            q: Mutex::new(VecDeque::new()),
            len: AtomicUsize::new(0),
            unfinished: AtomicUsize::new(0),
        }
    }
}

impl<T> Handoffs<T> {
    fn queue(&self) -> impl std::ops::DerefMut<Target = VecDeque<T>> + '_ {
        // A job never runs under this lock, so no panic poisons it.
        self.q.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Queues `job`; then the caller must try the worker's lock.
    pub(crate) fn push(&self, job: T) {
        self.unfinished.fetch_add(1, Ordering::SeqCst);
        let mut q = self.queue();
        q.push_back(job);
        self.len.store(q.len(), Ordering::SeqCst);
        drop(q);
        fence(Ordering::SeqCst);
    }

    /// Whether nothing waits, as seen after the caller released the
    /// worker's lock.
    pub(crate) fn is_idle(&self) -> bool {
        fence(Ordering::SeqCst);
        self.len.load(Ordering::SeqCst) == 0
    }

    /// A post [`Handoffs::pop`] gave ran to its end.
    pub(crate) fn finished(&self) {
        self.unfinished.fetch_sub(1, Ordering::SeqCst);
    }

    /// Whether every post queued so far ran to its end: a post the caller
    /// handed earlier did what it does before the caller's next one, which
    /// may then pass the worker's lock (`send_gate.rs`).
    pub(crate) fn settled(&self) -> bool {
        self.unfinished.load(Ordering::SeqCst) == 0
    }

    /// The oldest waiting post.
    pub(crate) fn pop(&self) -> Option<T> {
        if self.len.load(Ordering::SeqCst) == 0 {
            return None;
        }
        let mut q = self.queue();
        let j = q.pop_front();
        self.len.store(q.len(), Ordering::SeqCst);
        j
    }
}

/// Where a handed post leaves its result for the thread that made it.
pub(crate) struct Slot<R> {
    st: parking_lot::Mutex<SlotSt<R>>,
}

enum SlotSt<R> {
    /// Not run yet; the waker of a future that waits.
    Waiting(Option<TaskWaker>),
    Filled(R),
    /// The post panicked in the holder's thread: the panic, to go on in
    /// the thread that takes the result.
    Panicked(Box<dyn std::any::Any + Send>),
    /// Its owner is gone: the result goes to the post's disposer.
    Abandoned,
    Taken,
}

impl<R> Slot<R> {
    pub(crate) fn new() -> Arc<Slot<R>> {
        Arc::new(Slot {
            st: parking_lot::Mutex::new(SlotSt::Waiting(None)),
        })
    }

    /// Leaves `r`; the waker to wake, or `Err(r)` if the owner is gone.
    fn fill(&self, r: R) -> Result<Option<TaskWaker>, R> {
        let mut st = self.st.lock();
        match std::mem::replace(&mut *st, SlotSt::Taken) {
            SlotSt::Waiting(w) => {
                *st = SlotSt::Filled(r);
                Ok(w)
            }
            _ => Err(r),
        }
    }

    /// Leaves the panic of the post; the waker to wake (none if the owner
    /// is gone: the panic is dropped with the post).
    fn fill_panic(&self, p: Box<dyn std::any::Any + Send>) -> Option<TaskWaker> {
        let mut st = self.st.lock();
        match std::mem::replace(&mut *st, SlotSt::Taken) {
            SlotSt::Waiting(w) => {
                *st = SlotSt::Panicked(p);
                w
            }
            _ => None,
        }
    }

    /// The result, once the post ran (then `Some` once). A post that
    /// panicked resumes its panic here, in the caller's thread.
    pub(crate) fn take(&self) -> Option<R> {
        let mut st = self.st.lock();
        match std::mem::replace(&mut *st, SlotSt::Taken) {
            SlotSt::Filled(r) => Some(r),
            SlotSt::Panicked(p) => {
                drop(st);
                std::panic::resume_unwind(p)
            }
            other => {
                *st = other;
                None
            }
        }
    }

    /// Like [`Slot::take`]; if the post has not run, leaves `waker` to be
    /// woken when it has.
    pub(crate) fn take_or_wait(&self, waker: &TaskWaker) -> Option<R> {
        let mut st = self.st.lock();
        match &mut *st {
            SlotSt::Filled(_) | SlotSt::Panicked(_) => {
                match std::mem::replace(&mut *st, SlotSt::Taken) {
                    SlotSt::Filled(r) => Some(r),
                    SlotSt::Panicked(p) => {
                        drop(st);
                        std::panic::resume_unwind(p)
                    }
                    _ => None,
                }
            }
            SlotSt::Waiting(w) => {
                match w {
                    Some(w) => w.clone_from(waker),
                    None => *w = Some(waker.clone()),
                }
                None
            }
            _ => None,
        }
    }

    /// The owner goes: the result, if the post ran; else the post's
    /// disposer will get it.
    pub(crate) fn abandon(&self) -> Option<R> {
        let mut st = self.st.lock();
        match std::mem::replace(&mut *st, SlotSt::Abandoned) {
            SlotSt::Filled(r) => {
                *st = SlotSt::Taken;
                Some(r)
            }
            SlotSt::Taken => {
                *st = SlotSt::Taken;
                None
            }
            _ => None,
        }
    }
}

/// The job that runs `f` and leaves its result in `slot`, or gives it to
/// `dispose` if the slot's owner is gone by then. A panic of `f` does not
/// unwind in the holder's thread: it is caught and left in the slot, and
/// goes on in the thread that takes the result.
pub(crate) fn job<R: Send + 'static>(
    slot: Arc<Slot<R>>,
    f: impl FnOnce(&mut Worker) -> R + Send + 'static,
    dispose: fn(&mut Worker, R),
) -> Job {
    Box::new(move |w| {
        let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| f(w)));
        match r {
            Err(p) => slot.fill_panic(p),
            Ok(r) => match slot.fill(r) {
                Ok(waker) => waker,
                Err(r) => {
                    dispose(w, r);
                    None
                }
            },
        }
    })
}

impl Locked<'_> {
    /// Runs the handed posts, oldest first, with the ifaces corked (the
    /// release uncorks them).
    pub(crate) fn drain(&mut self) {
        if !self.inner.hands {
            return;
        }
        while let Some(j) = self.inner.handoffs.pop() {
            if !self.corked {
                self.corked = true;
                self.worker().cork();
            }
            if let Some(w) = j(self.worker()) {
                self.late.push(w);
            }
            self.inner.handoffs.finished();
        }
    }
}

/// What [`crate::SharedWorker::post_with`] gives: the result of a post
/// that ran at once, or the handle of one handed to the lock's holder.
#[must_use = "a handed post's result is only learnt through its handle"]
pub enum Handed<R> {
    /// It ran in the calling thread.
    Done(R),
    /// Another thread holds the lock and runs it (soon: before it lets go).
    Queued(Queued<R>),
}

impl<R> std::fmt::Debug for Handed<R> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Handed::Done(_) => f.write_str("Handed::Done"),
            Handed::Queued(_) => f.write_str("Handed::Queued"),
        }
    }
}

/// A post handed to the thread that holds a worker's lock.
pub struct Queued<R> {
    pub(crate) slot: Arc<Slot<R>>,
}

impl<R> std::fmt::Debug for Queued<R> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Queued").finish_non_exhaustive()
    }
}

impl<R> Queued<R> {
    /// The post's result once it ran (`Some` once); `None` before.
    pub fn take(&self) -> Option<R> {
        self.slot.take()
    }
}

#[cfg(all(loom, test))]
mod loom_model {
    use super::*;
    use loom::sync::atomic::AtomicBool;
    use loom::sync::MutexGuard;

    /// Runs every queued post (each sets `ran`).
    fn drain(q: &Handoffs<()>, ran: &AtomicBool) {
        while q.pop().is_some() {
            ran.store(true, Ordering::SeqCst);
            q.finished();
        }
    }

    /// What a holder of the lock does (`Locked::new`, then its release):
    /// drains, lets go, and takes the lock back while handed posts wait.
    fn hold<'a>(
        mut g: MutexGuard<'a, ()>,
        lock: &'a Mutex<()>,
        q: &Handoffs<()>,
        ran: &AtomicBool,
    ) {
        loop {
            drain(q, ran);
            drop(g);
            if q.is_idle() {
                return;
            }
            match lock.try_lock() {
                Ok(next) => g = next,
                Err(_) => return,
            }
        }
    }

    /// A post handed while another thread holds the lock runs before both
    /// threads are done, and the queue is settled only after it ran, in
    /// every interleaving: the protocol of the module
    /// documentation with the real queue (its jobs are units: loom cannot
    /// hold a `Worker`).
    #[test]
    fn loom_no_handed_post_is_stranded() {
        loom::model(|| {
            let lock = Arc::new(Mutex::new(()));
            let q = Arc::new(Handoffs::<()>::default());
            let ran = Arc::new(AtomicBool::new(false));
            let holder = {
                let (lock, q, ran) = (lock.clone(), q.clone(), ran.clone());
                loom::thread::spawn(move || {
                    let g = lock.lock().unwrap();
                    hold(g, &lock, &q, &ran);
                })
            };
            q.push(());
            if let Ok(g) = lock.try_lock() {
                hold(g, &lock, &q, &ran);
            }
            // A later post of this thread may pass the lock only once the
            // handed one did what it does.
            if q.settled() {
                assert!(ran.load(Ordering::SeqCst), "settled before the post ran");
            }
            holder.join().unwrap();
            assert!(q.settled());
            assert!(ran.load(Ordering::SeqCst), "a handed post was stranded");
        });
    }
}
