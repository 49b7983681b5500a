//! Delivery to C after the Rust progress: completions, closes and
//! flushes that ended, requests that completed where no callback could
//! run, active messages and connection requests (`am.rs`, `listener.rs`),
//! client connects that ended, and endpoint failures with the status
//! UCX reports for them. C callbacks run only from here, with no borrow of
//! the worker alive.

use crate::ep::Endpoint;
use crate::request::{self, Header};
use crate::status;
use crate::types::*;
use crate::worker::{Polled, Worker};
use std::sync::atomic::Ordering;

/// Progresses `w` and delivers what completed; how many events.
#[inline(always)]
pub(crate) fn progress(w: &Worker) -> usize {
    let n = w.with(|rw| rw.progress());
    if has_news(w) {
        return n + deliver_news(w);
    }
    n
}

/// Whether [`deliver`] has anything to do (a few loads).
#[inline(always)]
fn has_news(w: &Worker) -> bool {
    w.with(|rw| rw.has_completions()) || w.slow.get() || w.bell.load(Ordering::Acquire)
}

/// Delivers to C what the Rust worker reported: completions, closes and
/// flushes that ended, endpoint failures. Runs C callbacks, so it is
/// called with no borrow of `w` alive. Returns how many it delivered.
#[inline]
pub(crate) fn deliver(w: &Worker) -> usize {
    if has_news(w) {
        return deliver_news(w);
    }
    0
}

/// [`deliver`] once there is something.
#[inline(never)]
fn deliver_news(w: &Worker) -> usize {
    let mut n = 0;
    if w.with(|rw| rw.has_completions()) {
        n += deliver_completions(w);
    }
    if w.slow.get() || w.bell.load(Ordering::Acquire) {
        n += deliver_others(w);
    }
    n
}

/// Completes the requests of the completion queue.
fn deliver_completions(w: &Worker) -> usize {
    let mut n = 0;
    while let Some(c) = w.with(|rw| rw.next_completion()) {
        let h = c.user_data as usize as *mut Header;
        if h.is_null() {
            // An operation posted without a request (see post::post).
            continue;
        }
        let (st, info) = match (report(&c.result), &c.result) {
            (Some(r), _) => r,
            (None, Err(e)) => (request_status(w, e), TagRecvInfo::default()),
            (None, Ok(_)) => continue,
        };
        // SAFETY: the user data of a queued operation is the header this
        // layer posted it with, live until completed; no borrow is alive.
        unsafe { request::complete(h, st, info) };
        n += 1;
    }
    n
}

/// What a request reports for `result`: success with its tag and length,
/// or a truncated receive with the bytes it got; `None` for the failures
/// whose status depends on the worker ([`request_status`]).
#[inline]
fn report(result: &rucx::Result<rucx::Info>) -> Option<(StatusCode, TagRecvInfo)> {
    match result {
        Ok(i) => Some((
            status::OK,
            TagRecvInfo {
                sender_tag: i.tag,
                length: i.length,
            },
        )),
        Err(e @ rucx::Error::Truncated { capacity, .. }) => Some((
            status::of(e),
            TagRecvInfo {
                sender_tag: 0,
                length: *capacity,
            },
        )),
        Err(_) => None,
    }
}

/// The Rust worker's completion hook ([`rucx::CompletionHook`]): marks a
/// request the application polls and still holds as done in its header
/// as the operation completes, as UCX's handlers do, so that it never
/// goes through the queue. Requests with callbacks, released ones, and
/// failures whose status depends on the worker ([`request_status`]) are
/// left to [`deliver_completions`].
pub(crate) fn mark_done(user_data: u64, result: &rucx::Result<rucx::Info>) -> bool {
    let h = user_data as usize as *mut Header;
    if h.is_null() {
        // Posted without a request, or completed inside its posting call
        // before the request got its user data: left in the queue, where
        // `Worker::request_set_user_data` finds it (see post::post).
        return false;
    }
    let Some((st, info)) = report(result) else {
        return false;
    };
    // SAFETY: the user data of a queued operation is the header this layer
    // posted it with, live until completed; marking runs no C code, so
    // running inside the Rust progress is fine.
    unsafe { request::mark_polled(h, st, info) }
}

/// What the Rust handlers queued and the polled operations.
#[cold]
fn deliver_others(w: &Worker) -> usize {
    // Cleared before the queues are looked at: a push from now on rings
    // it again.
    w.bell.store(false, Ordering::Release);
    let mut n = poll_ops(w);
    n += deliver_late(w);
    n += crate::am::deliver(w);
    n += crate::listener::deliver(w);
    n += poll_connects(w);
    n += run_err_handlers(w);
    // What is left (work under way, or entries a handler left queued) is
    // looked at again by the next call.
    w.slow.set(w.slow_work());
    if w.failures.has_news() || w.am_queue.has_news() || w.conn_queue.has_news() {
        w.bell.store(true, Ordering::Release);
    }
    n
}

/// Moves the polled operations on; completes those that ended.
fn poll_ops(w: &Worker) -> usize {
    if w.with_polled(|p| p.is_empty()) {
        return 0;
    }
    let mut ops = w.with_polled(std::mem::take);
    let mut done = Vec::new();
    let cm_free = w.with_cm(|s| s.is_empty());
    w.with(|rw| {
        ops.retain_mut(|(h, op)| {
            let r = match op {
                Polled::Close(c, lenient) => close_result(rw.ep_close_poll(c), *lenient),
                Polled::Flush(f) => rw.flush_poll(f),
            };
            match r {
                None => true,
                Some(Err(e)) if !matches!(e, rucx::Error::InvalidHandle) => {
                    done.push((*h, request_status_in(cm_free, &e)));
                    false
                }
                Some(r) => {
                    done.push((*h, close_status(r)));
                    false
                }
            }
        })
    });
    w.with_polled(|p| {
        ops.append(p);
        *p = ops;
    });
    let n = done.len();
    for (h, st) in done {
        // SAFETY: a header posted with a polled operation, live until
        // completed; no borrow is alive.
        unsafe { request::complete(h, st, TagRecvInfo::default()) };
    }
    n
}

/// The outcome of a close (`None`: still going): for an endpoint without
/// error handling (`lenient`), a failure of the endpoint counts as
/// closed, as UCX's reports no peer failure to such an endpoint.
pub(crate) fn close_result(r: Option<rucx::Result<()>>, lenient: bool) -> Option<rucx::Result<()>> {
    match r {
        Some(Err(rucx::Error::EndpointFailed { .. })) if lenient => Some(Ok(())),
        r => r,
    }
}

/// The status of a finished close or flush. An endpoint that is gone
/// already (closed by a failure) is closed all the same.
pub(crate) fn close_status(r: rucx::Result<()>) -> StatusCode {
    match r {
        Ok(()) | Err(rucx::Error::InvalidHandle) => status::OK,
        Err(e) => status::of(&e),
    }
}

/// The status UCX gives the error handlers of Rust endpoint `ep` (and the
/// operations after them) for a failure rucx reported as `st`. UCX's
/// transports fail an endpoint wired up from a worker address with
/// `UCS_ERR_ENDPOINT_TIMEOUT`, whether the peer's socket closed (tcp), its
/// process is gone (shared memory) or it stopped answering (keepalive);
/// `UCS_ERR_CONNECTION_RESET`, rucx's status for a connection that ended,
/// is what UCX's connection managers report for client-server endpoints.
fn failure_status(w: &Worker, ep: rucx::Ep, st: StatusCode) -> StatusCode {
    use rucx::ucp::ucs::Status;
    let client_server = w.with_cm(|s| s.contains(&ep.to_u64()));
    match !client_server && st == Status::ConnectionReset.code() {
        true => Status::EndpointTimeout.code(),
        false => st,
    }
}

/// The status of a request that failed with `e`: an endpoint's failure
/// as [`failure_status`] gives it, when the worker has no client-server
/// endpoint (a completion does not say which endpoint it was on; with
/// one, it keeps rucx's status).
fn request_status(w: &Worker, e: &rucx::Error) -> StatusCode {
    request_status_in(w.with_cm(|s| s.is_empty()), e)
}

/// [`request_status`], `cm_free` saying whether the worker has no
/// client-server endpoint.
fn request_status_in(cm_free: bool, e: &rucx::Error) -> StatusCode {
    use rucx::ucp::ucs::Status;
    let st = status::of(e);
    match e {
        rucx::Error::EndpointFailed { .. } if cm_free && st == Status::ConnectionReset.code() => {
            Status::EndpointTimeout.code()
        }
        _ => st,
    }
}

/// Polls the client connects in progress: an answered one becomes ready
/// ([`poll_connect`]), a failed one calls its C error handler after its
/// deferred operations failed; how many ended.
fn poll_connects(w: &Worker) -> usize {
    if w.with_connecting(|v| v.is_empty()) {
        return 0;
    }
    let list = w.with_connecting(|v| v.clone());
    let mut failed = Vec::new();
    let mut n = 0;
    for p in list {
        if p == w.waiting.get() {
            continue;
        }
        match poll_connect(w, p) {
            None => {}
            Some(Ok(_)) => n += 1,
            Some(Err(st)) => {
                n += 1;
                w.with_connecting(|v| v.retain(|&q| q != p));
                failed.push((p, st));
            }
        }
    }
    for (p, st) in failed {
        // Closed in flush mode while connecting: no handler runs.
        if let Some(k) = crate::deferred::close_failed(p, st) {
            n += k;
            continue;
        }
        // SAFETY: the endpoint is live until the application closes it,
        // which it may do only from here on.
        n += crate::deferred::fail(unsafe { &*p }, st);
        // SAFETY: as above; a request's callback may not close it (UCX
        // asks for the error handler to be the one that does).
        let (cb, arg) = unsafe { ((*p).err.cb, (*p).err.arg) };
        if let Some(cb) = cb {
            // SAFETY: a C handler, called with no borrow of the worker alive.
            unsafe { cb(arg, p.cast(), st) };
        }
    }
    n
}

/// Polls client endpoint `p`'s connect once, running no C code: once
/// answered, the endpoint is ready, in the worker's tables, and its
/// deferred operations are posted (the completions of those done at once
/// wait for delivery; an endpoint the application closed in flush mode
/// meanwhile is closed and freed then); a failed one is marked failed and left in the
/// list for [`poll_connects`] to report. `None` while under way.
pub(crate) fn poll_connect(w: &Worker, p: *mut Endpoint) -> Option<Result<rucx::Ep, StatusCode>> {
    // SAFETY: endpoints leave the list before they are freed.
    let e = unsafe { &*p };
    let r = match &mut *e.conn.borrow_mut() {
        crate::ep::Conn::Connecting(c) => w
            .with(|rw| rw.connect_poll(c))
            .map(|r| r.map_err(|e| status::of(&e)))?,
        // A connect that failed in ucp_ep_create or earlier.
        crate::ep::Conn::Failed(st) => return Some(Err(*st)),
        crate::ep::Conn::Ready(ep) | crate::ep::Conn::Broken(ep, _) => return Some(Ok(*ep)),
    };
    match r {
        Ok(ep) => {
            e.set_conn(crate::ep::Conn::Ready(ep));
            w.with_connecting(|v| v.retain(|&q| q != p));
            w.with_cm(|s| s.insert(ep.to_u64()));
            w.with_eps(|m| m.entry(ep.to_u64()).or_default().push(p));
            crate::deferred::run(w, p, ep);
        }
        Err(st) => e.set_conn(crate::ep::Conn::Failed(st)),
    }
    Some(r)
}

/// Completes the requests that ended outside progress and wait for it
/// (see [`Worker::with_late`]).
fn deliver_late(w: &Worker) -> usize {
    let late = w.with_late(std::mem::take);
    let n = late.len();
    for (h, st, info) in late {
        // SAFETY: live headers not completed yet; no borrow is alive.
        unsafe { request::complete(h, st, info) };
    }
    n
}

/// Calls the C error handlers of the endpoints that failed.
fn run_err_handlers(w: &Worker) -> usize {
    let mut failed = w.failures.take_all();
    // An endpoint connected more than once (in peer mode) has a Rust
    // handler per connect, each reporting the same failure: the C
    // handlers run once.
    let mut seen = Vec::with_capacity(failed.len());
    failed.retain(|(ep, _)| {
        let first = !seen.contains(&ep.to_u64());
        seen.push(ep.to_u64());
        first
    });
    let n = failed.len();
    for (ep, st) in failed {
        let st = failure_status(w, ep, st);
        let list = w.with_eps(|m| m.get(&ep.to_u64()).cloned().unwrap_or_default());
        for p in list {
            // A handler may have closed the other endpoints of the list.
            let live = w.with_eps(|m| m.get(&ep.to_u64()).is_some_and(|v| v.contains(&p)));
            if !live {
                continue;
            }
            // SAFETY: a live endpoint of this worker (in its table); the
            // reference ends before the handler runs (it may close it).
            let (cb, arg) = unsafe {
                let e = &*p;
                e.set_conn(crate::ep::Conn::Broken(ep, st));
                (e.err.cb, e.err.arg)
            };
            if let Some(cb) = cb {
                // SAFETY: the application's handler with UCX's arguments;
                // no borrow is alive.
                unsafe { cb(arg, p.cast(), st) };
            }
        }
    }
    n
}
