//! Active messages of a [`SharedWorker`] received as futures
//! ([`AmReceiver`]), so that the application's code for a message runs in
//! its own task or thread, outside the worker's lock.
//!
//! A handler set with [`Worker::am_set_handler`] runs under the lock,
//! inside whichever thread progresses. A receiver sets a handler of its
//! own that only moves the message into the receiver's queue; the
//! progress call that ran it wakes the waiting futures once the lock is
//! released. A rendezvous message's data is then fetched with
//! [`SharedWorker::am_recv_data`], a future too.

use super::futures::OpFuture;
use super::SharedWorker;
use crate::request::IoBufMut;
use crate::worker::AmMsg;
use crate::{Op, Result};
use std::collections::VecDeque;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Weak};
use std::task::{Context as TaskContext, Poll, Waker as TaskWaker};

/// The messages a receiver's handler queued, oldest first.
pub(crate) type AmQueue = parking_lot::Mutex<VecDeque<AmMsg>>;

/// Replaces the handlers of `id` on `w` by one that queues each message
/// in the returned queue (or drops it, with a warning, once the queue's
/// receiver is gone).
pub(crate) fn queue_handler(w: &mut crate::Worker, id: u16) -> Arc<AmQueue> {
    let q = Arc::new(AmQueue::default());
    let to: Weak<AmQueue> = Arc::downgrade(&q);
    w.am_clear_handler(id);
    w.am_set_handler(id, move |_, msg| match to.upgrade() {
        Some(q) => q.lock().push_back(msg),
        None => tracing::warn!("active message {id}: its receiver is gone; dropped"),
    });
    q
}

/// The messages of one active message id, as futures
/// ([`SharedWorker::am_receiver`]). Shared by reference, it serves any
/// number of tasks: each message goes to one of them, in arrival order.
///
/// Messages queue here until taken, without a bound: a receiver that
/// stops taking messages keeps what its peers send. It holds a handle of
/// the worker (a tokio driver of the worker runs while it lives). A
/// message dropped without its rendezvous data fetched has that data
/// discarded by the worker's next progress. Dropping the receiver drops
/// the messages it holds (the data of a rendezvous message is discarded,
/// and its sender's send completes), and so are later messages of its id,
/// with a warning, until another handler is set for it.
pub struct AmReceiver {
    w: SharedWorker,
    id: u16,
    q: Arc<AmQueue>,
}

impl std::fmt::Debug for AmReceiver {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AmReceiver")
            .field("id", &self.id)
            .field("queued", &self.q.lock().len())
            .finish()
    }
}

impl SharedWorker {
    /// Receives the active messages of `id` as futures
    /// ([`AmReceiver::recv`]) instead of in a handler: replaces the
    /// handler of `id` (and an inline one).
    pub fn am_receiver(&self, id: u16) -> AmReceiver {
        let q = self.with(|w| queue_handler(w, id));
        AmReceiver {
            w: self.clone(),
            id,
            q,
        }
    }

    /// Receives the data of `msg` into `buf`: at once for an eager
    /// message (copied), from the sender for a rendezvous one (see
    /// [`Worker::am_recv_data`](crate::Worker::am_recv_data)). Dropping
    /// the future lets the receive finish; the worker keeps the buffer
    /// until then.
    pub fn am_recv_data<B: IoBufMut>(&self, msg: AmMsg, buf: B) -> Result<OpFuture<B>> {
        let mut g = self.lock();
        let p = g.worker().am_recv_data(msg, buf, Op::new());
        g.unlock(false);
        Ok(OpFuture::new(self, p?, false))
    }
}

impl AmReceiver {
    /// The active message id it receives.
    pub fn id(&self) -> u16 {
        self.id
    }

    /// The next message: a future that progresses the worker when it is
    /// polled and finds none queued.
    pub fn recv(&self) -> AmNext<'_> {
        AmNext { r: self }
    }

    /// The oldest queued message, without progressing the worker.
    pub fn try_recv(&self) -> Option<AmMsg> {
        self.q.lock().pop_front()
    }

    /// A queued message, or one that a progress call brings; else leaves
    /// `waker` to be woken after the next progress that did something.
    fn turn(&self, waker: Option<&TaskWaker>) -> Option<AmMsg> {
        if let Some(m) = self.try_recv() {
            return Some(m);
        }
        let mut g = self.w.lock();
        let n = g.worker().progress();
        // Looked at under the lock, after the progress: a message queued
        // later is queued by a progress that wakes `waker`.
        let m = self.try_recv();
        if m.is_none() {
            if let Some(wk) = waker {
                g.wait_any(wk);
            }
        }
        g.unlock(n > 0);
        m
    }
}

/// The future of [`AmReceiver::recv`] (or [`AmNext::wait`] to block).
#[must_use = "no message is taken unless it is polled or waited for"]
#[derive(Debug)]
pub struct AmNext<'a> {
    r: &'a AmReceiver,
}

impl AmNext<'_> {
    /// Blocks until a message arrives.
    pub fn wait(self) -> AmMsg {
        loop {
            if let Some(m) = self.r.turn(None) {
                return m;
            }
            std::thread::yield_now();
        }
    }
}

impl Future for AmNext<'_> {
    type Output = AmMsg;

    fn poll(self: Pin<&mut Self>, cx: &mut TaskContext<'_>) -> Poll<AmMsg> {
        match self.r.turn(Some(cx.waker())) {
            Some(m) => Poll::Ready(m),
            None => Poll::Pending,
        }
    }
}
