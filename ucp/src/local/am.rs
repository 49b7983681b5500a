//! Active messages of a [`LocalWorker`] as futures: sending
//! ([`LocalWorker::am_send`]), receiving ([`LocalWorker::am_receiver`],
//! as a [`SharedWorker`](crate::SharedWorker)'s `AmReceiver` does) and
//! fetching a rendezvous message's data ([`LocalWorker::am_recv_data`]).

use super::{LocalFuture, LocalWorker};
use crate::request::{IoBuf, IoBufMut};
use crate::shared::am_recv::{queue_handler, AmQueue};
use crate::shared::ops::am_send_post;
use crate::worker::AmMsg;
use crate::{AmParams, Ep, Op, Result};
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context as TaskContext, Poll};

impl LocalWorker {
    /// Sends active message `id` with `header` and the data `buf` on `ep`
    /// (see [`Worker::am_send_owned`](crate::Worker::am_send_owned)).
    pub fn am_send<B: IoBuf>(
        &self,
        ep: Ep,
        id: u16,
        header: &[u8],
        buf: B,
        params: AmParams,
    ) -> Result<LocalFuture<B>> {
        self.post_raw(false, |w| am_send_post(w, ep, id, header, buf, params))
    }

    /// Receives the active messages of `id` as futures
    /// ([`LocalAmReceiver::recv`]) instead of in a handler: replaces the
    /// handler of `id` (and an inline one).
    ///
    /// # Panics
    /// When called from inside [`LocalWorker::with`].
    pub fn am_receiver(&self, id: u16) -> LocalAmReceiver {
        let q = self.with(|w| queue_handler(w, id));
        LocalAmReceiver {
            w: self.clone(),
            id,
            q,
        }
    }

    /// Receives the data of `msg` into `buf` (see
    /// [`Worker::am_recv_data`](crate::Worker::am_recv_data)); dropping the
    /// future lets the receive finish.
    pub fn am_recv_data<B: IoBufMut>(&self, msg: AmMsg, buf: B) -> Result<LocalFuture<B>> {
        self.post(false, |w| w.am_recv_data(msg, buf, Op::new()))
    }
}

/// The messages of one active message id of a [`LocalWorker`], as
/// futures; as [`AmReceiver`](crate::AmReceiver), for one thread.
pub struct LocalAmReceiver {
    w: LocalWorker,
    id: u16,
    q: Arc<AmQueue>,
}

impl std::fmt::Debug for LocalAmReceiver {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LocalAmReceiver")
            .field("id", &self.id)
            .field("queued", &self.q.lock().len())
            .finish()
    }
}

impl LocalAmReceiver {
    /// The active message id it receives.
    pub fn id(&self) -> u16 {
        self.id
    }

    /// The next message: a future that progresses the worker when it is
    /// polled and finds none queued.
    pub fn recv(&self) -> LocalAmNext<'_> {
        LocalAmNext { r: self }
    }

    /// The oldest queued message, without progressing the worker.
    pub fn try_recv(&self) -> Option<AmMsg> {
        self.q.lock().pop_front()
    }
}

/// The future of [`LocalAmReceiver::recv`].
#[must_use = "no message is taken unless it is polled"]
#[derive(Debug)]
pub struct LocalAmNext<'a> {
    r: &'a LocalAmReceiver,
}

impl Future for LocalAmNext<'_> {
    type Output = AmMsg;

    fn poll(self: Pin<&mut Self>, cx: &mut TaskContext<'_>) -> Poll<AmMsg> {
        let r = self.r;
        if let Some(m) = r.try_recv() {
            return Poll::Ready(m);
        }
        r.w.poll_step(cx, |_| r.try_recv())
    }
}
