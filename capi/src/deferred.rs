//! Operations posted on a client endpoint whose connect is not answered
//! yet: as UCX does, the call returns a request at once, and the
//! operation goes out, in posting order, once the connection is there
//! (or its request fails with the connect's status, or with
//! `UCS_ERR_CANCELED` if the endpoint is closed first).
//!
//! Tag, stream and active message sends and stream receives are deferred
//! this way (`post::post_ep`); the other calls that need the Rust
//! endpoint wait for the connect inside the call (`Endpoint::rep`).

use crate::ep::Endpoint;
use crate::request::{self, Header};
use crate::status;
use crate::types::*;
use crate::worker::Worker;
use rucx::{Op, Posted};

/// An operation that posts itself on the Rust endpoint it is given.
pub(crate) type Deferred =
    Box<dyn FnOnce(&mut rucx::Worker, rucx::Ep, Op) -> rucx::Result<Posted<()>>>;

/// Posts the operations deferred on `e`, which just connected as `ep`,
/// in order. Runs no C code: the requests of those that end at once are
/// completed by the next `ucp_worker_progress` ([`Worker::with_late`]).
pub(crate) fn run(w: &Worker, e: &Endpoint, ep: rucx::Ep) {
    let list = std::mem::take(&mut *e.deferred.borrow_mut()).0;
    if list.is_empty() {
        return;
    }
    let mut done = Vec::new();
    for (h, f) in list {
        let op = Op::new().queue().user_data(h as usize as u64);
        match w.with(|rw| f(rw, ep, op)) {
            // SAFETY: the header of a request in flight now.
            Ok(Posted::InFlight(id)) => unsafe { (*h).id = Some(id) },
            Ok(Posted::Done(info, ())) => done.push((
                h,
                status::OK,
                TagRecvInfo {
                    sender_tag: info.tag,
                    length: info.length,
                },
            )),
            Err(err) => done.push((h, status::of(&err), TagRecvInfo::default())),
        }
    }
    w.with_late(|v| v.extend(done));
}

/// Completes the operations deferred on `e` with `st` (its connect
/// failed, or it is closed); returns how many.
pub(crate) fn fail(e: &Endpoint, st: StatusCode) -> usize {
    let list = std::mem::take(&mut *e.deferred.borrow_mut()).0;
    let n = list.len();
    for (h, _) in list {
        // SAFETY: a live header not completed yet; no borrow is alive.
        unsafe { request::complete(h, st, TagRecvInfo::default()) };
    }
    n
}

/// The deferred operations of an endpoint, with their requests, in
/// posting order.
#[derive(Default)]
pub(crate) struct List(Vec<(*mut Header, Deferred)>);

impl List {
    /// Appends operation `f`, whose request is `h`.
    pub(crate) fn push(&mut self, h: *mut Header, f: Deferred) {
        self.0.push((h, f));
    }
}

impl std::fmt::Debug for List {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} deferred operations", self.0.len())
    }
}
