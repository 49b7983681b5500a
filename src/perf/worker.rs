//! What the test loops need from a communication layer.
//!
//! The loops are generic over [`PerfWorker`], so they compile to direct
//! calls; `rucx-perftest` plugs in rucx's ucp worker, unit tests an
//! in-memory pair.
//!
//! Tag tests need the tag operations only. One-sided tests need the rest:
//! each side *exposes* a buffer ([`PerfWorker::expose`]) that the peer
//! reaches with put, get and atomics once it knows its address and key
//! ([`PerfWorker::set_remote`]). Those methods have default bodies that
//! fail with [`PerfError::Unsupported`], for layers without one-sided
//! operations.

use super::error::{PerfError, Result};
use std::net::{IpAddr, SocketAddr};

/// What the peer needs to reach an exposed buffer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Exposed {
    /// Address of the buffer, as the peer's operations name it.
    pub addr: u64,
    /// Packed remote key of the buffer (never empty).
    pub rkey: Vec<u8>,
}

/// An atomic operation of the one-sided tests.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AtomicKind {
    /// `*p += value`.
    Add,
    /// `*p = value`.
    Swap,
    /// `if *p == compare { *p = value }`.
    Cswap,
}

fn unsupported<T>(what: &str) -> Result<T> {
    Err(PerfError::Unsupported(format!(
        "{what}: this communication layer has no one-sided operations"
    )))
}

/// Outcome of posting an operation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Started<R> {
    /// Finished at once; for a receive, the number of bytes received.
    Done(usize),
    /// Accepted; [`PerfWorker::test`] reports its end.
    InFlight(R),
}

/// A worker with one endpoint to the peer.
///
/// Single-threaded; `&mut self` everywhere.
pub trait PerfWorker {
    /// Handle of an operation in flight.
    type Req: Copy;

    /// This worker's address, for the peer's [`PerfWorker::connect`].
    fn address(&mut self) -> Result<Vec<u8>>;

    /// Creates the endpoint to the worker with address `remote` (this
    /// worker's own address in loopback runs).
    fn connect(&mut self, remote: &[u8]) -> Result<()>;

    /// Listens for the peer's connection (`--sockaddr`) on `ip` and a free
    /// port, which it returns; [`PerfWorker::connect_poll`] accepts the
    /// peer's request.
    fn listen(&mut self, ip: IpAddr) -> Result<u16> {
        let _ = ip;
        Err(PerfError::Unsupported(
            "listeners (--sockaddr) in this communication layer".into(),
        ))
    }

    /// Starts connecting to the peer's listener at `addr` (`--sockaddr`);
    /// [`PerfWorker::connect_poll`] finishes it.
    fn connect_to(&mut self, addr: SocketAddr) -> Result<()> {
        let _ = addr;
        Err(PerfError::Unsupported(
            "listeners (--sockaddr) in this communication layer".into(),
        ))
    }

    /// Progresses what [`PerfWorker::listen`] and
    /// [`PerfWorker::connect_to`] started: `true` once the endpoint to the
    /// peer is there (for a worker that does both, loopback, once both
    /// ends are). Never blocks.
    fn connect_poll(&mut self) -> Result<bool> {
        Err(PerfError::Unsupported(
            "listeners (--sockaddr) in this communication layer".into(),
        ))
    }

    /// Makes progress; returns how much happened (0 when idle). Never
    /// blocks.
    fn progress(&mut self) -> usize;

    /// A counter that changes whenever an operation in flight completes,
    /// if the worker keeps one: while it stays the same, testing requests
    /// is pointless. `None` (the default): test every time.
    fn completed_count(&self) -> Option<u64> {
        None
    }

    /// Fails once the endpoint to the peer has failed.
    fn check_peer(&mut self) -> Result<()>;

    /// Creates the endpoints made from now on with error handling (`-e`):
    /// in peer error mode, with a handler that records the failure, which
    /// [`PerfWorker::check_peer`] then reports.
    fn enable_err_handling(&mut self) -> Result<()> {
        Err(PerfError::Unsupported(
            "endpoints with error handling (-e) in this communication layer".into(),
        ))
    }

    /// Lays messages out as iovecs (`-D iov`): sent ones (`send`) or
    /// received ones (`recv`) split into entries of the given sizes.
    fn set_iov(&mut self, send: Option<Vec<usize>>, recv: Option<Vec<usize>>) -> Result<()> {
        if send.is_none() && recv.is_none() {
            return Ok(());
        }
        Err(PerfError::Unsupported(
            "the iov datatype (-D iov) in this communication layer".into(),
        ))
    }

    /// Sends `len` bytes at `ptr` with `tag` on the endpoint.
    ///
    /// # Safety
    ///
    /// `ptr..ptr + len` must stay valid for reads and unchanged until the
    /// operation is reported finished ([`Started::Done`], or `test`
    /// returning `Some`).
    unsafe fn tag_send(
        &mut self,
        ptr: *const u8,
        len: usize,
        tag: u64,
        sync: bool,
    ) -> Result<Started<Self::Req>>;

    /// Receives a message whose tag matches `tag` under `mask` into up to
    /// `len` bytes at `ptr`.
    ///
    /// # Safety
    ///
    /// `ptr..ptr + len` must stay valid for writes, and not be read or
    /// written by anyone else, until the operation is reported finished.
    unsafe fn tag_recv(
        &mut self,
        ptr: *mut u8,
        len: usize,
        tag: u64,
        mask: u64,
    ) -> Result<Started<Self::Req>>;

    /// `None` while `req` is in flight; once finished, its outcome (bytes
    /// received for a receive) exactly once.
    fn test(&mut self, req: Self::Req) -> Option<Result<usize>>;

    /// Gives up testing `req`: from now on its finishing is only counted
    /// ([`PerfWorker::released_finished`]), and it counts as reported
    /// finished once counted. `false` if the worker cannot do that (the
    /// caller goes on testing it).
    fn release(&mut self, _req: Self::Req) -> bool {
        false
    }

    /// How many released operations have finished (wrapping).
    fn released_finished(&self) -> u64 {
        0
    }

    /// The first failure of a released operation since the last call.
    fn released_error(&mut self) -> Option<PerfError> {
        None
    }

    /// Completes every operation posted so far on the endpoint, progressing
    /// as needed.
    fn flush(&mut self) -> Result<()> {
        Ok(())
    }

    /// Sends `len` bytes at `ptr` on the endpoint's stream.
    ///
    /// # Safety
    ///
    /// As for [`PerfWorker::tag_send`].
    unsafe fn stream_send(&mut self, ptr: *const u8, len: usize) -> Result<Started<Self::Req>> {
        let _ = (ptr, len);
        Err(PerfError::Unsupported("stream send".into()))
    }

    /// Receives exactly `len` bytes of the endpoint's stream into `ptr`.
    ///
    /// # Safety
    ///
    /// As for [`PerfWorker::tag_recv`].
    unsafe fn stream_recv(&mut self, ptr: *mut u8, len: usize) -> Result<Started<Self::Req>> {
        let _ = (ptr, len);
        Err(PerfError::Unsupported("stream receive".into()))
    }

    /// Sends `len` bytes at `ptr` as an active message to the peer's
    /// perftest handler.
    ///
    /// # Safety
    ///
    /// As for [`PerfWorker::tag_send`].
    unsafe fn am_send(&mut self, ptr: *const u8, len: usize) -> Result<Started<Self::Req>> {
        let _ = (ptr, len);
        Err(PerfError::Unsupported("active message send".into()))
    }

    /// The length of the oldest active message the handler took, if one
    /// arrived, copying up to `out.len()` of its bytes into `out` (an
    /// empty `out` copies nothing, as a handler that consumes the data
    /// in place).
    fn am_take(&mut self, out: &mut [u8]) -> Result<Option<usize>> {
        let _ = out;
        Err(PerfError::Unsupported("active message receive".into()))
    }

    /// Tells the active message handler the length of the test's
    /// messages and whether the loop will want their bytes (`-V`); a
    /// handler that is not told keeps every message.
    fn am_expect(&mut self, len: usize, keep: bool) -> Result<()> {
        let _ = (len, keep);
        Ok(())
    }

    /// Allocates `len` zeroed bytes, 8-byte aligned, that the peer may
    /// read, write and update with atomics, replacing any buffer exposed
    /// before. `len` is a multiple of 8.
    fn expose(&mut self, len: usize) -> Result<Exposed> {
        let _ = len;
        unsupported("expose a buffer")
    }

    /// The byte at `offset` of the exposed buffer, read with acquire
    /// ordering (the peer may be writing it).
    fn exposed_byte(&mut self, offset: usize) -> Result<u8> {
        let _ = offset;
        unsupported("read the exposed buffer")
    }

    /// Copies `out.len()` bytes at `offset` of the exposed buffer into
    /// `out`.
    fn exposed_read(&mut self, offset: usize, out: &mut [u8]) -> Result<()> {
        let _ = (offset, out);
        unsupported("read the exposed buffer")
    }

    /// Copies `data` to `offset` of the exposed buffer. Only while no
    /// operation of the peer is in flight on it.
    fn exposed_write(&mut self, offset: usize, data: &[u8]) -> Result<()> {
        let _ = (offset, data);
        unsupported("write the exposed buffer")
    }

    /// Takes the peer's exposed buffer (its [`Exposed`]) as the target of
    /// later one-sided operations. Needs [`PerfWorker::connect`] first.
    fn set_remote(&mut self, addr: u64, rkey: &[u8]) -> Result<()> {
        let _ = (addr, rkey);
        unsupported("reach the peer's buffer")
    }

    /// Writes `len` bytes at `ptr` to `offset` of the peer's exposed
    /// buffer; finished once the data is there.
    ///
    /// # Safety
    ///
    /// As for [`PerfWorker::tag_send`]: the bytes stay valid and unchanged
    /// until the operation is reported finished.
    unsafe fn put(
        &mut self,
        ptr: *const u8,
        len: usize,
        offset: u64,
    ) -> Result<Started<Self::Req>> {
        let _ = (ptr, len, offset);
        unsupported("put")
    }

    /// Reads `len` bytes at `offset` of the peer's exposed buffer into
    /// `ptr`.
    ///
    /// # Safety
    ///
    /// As for [`PerfWorker::tag_recv`]: the bytes stay valid for writes,
    /// and untouched by anyone else, until the operation is reported
    /// finished.
    unsafe fn get(&mut self, ptr: *mut u8, len: usize, offset: u64) -> Result<Started<Self::Req>> {
        let _ = (ptr, len, offset);
        unsupported("get")
    }

    /// Performs `op` with `value` on the `width`-byte word (4 or 8) at
    /// `offset` of the peer's exposed buffer, without fetching its old
    /// value (`Cswap` is fetching only).
    fn atomic_post(
        &mut self,
        op: AtomicKind,
        width: usize,
        value: u64,
        offset: u64,
    ) -> Result<Started<Self::Req>> {
        let _ = (op, width, value, offset);
        unsupported("atomic operation")
    }

    /// Performs `op` with `value` (and `compare`, for `Cswap`) on the
    /// `width`-byte word at `offset` of the peer's exposed buffer and
    /// writes its old value, widened to 64 bits, to the 8 bytes at
    /// `result` (no alignment needed).
    ///
    /// # Safety
    ///
    /// The 8 bytes at `result` stay valid for writes, and untouched by
    /// anyone else, until the operation is reported finished.
    unsafe fn atomic_fetch(
        &mut self,
        op: AtomicKind,
        width: usize,
        value: u64,
        compare: u64,
        result: *mut u8,
        offset: u64,
    ) -> Result<Started<Self::Req>> {
        let _ = (op, width, value, compare, result, offset);
        unsupported("fetching atomic operation")
    }
}

/// A [`PerfWorker`] whose worker threads can share once it is connected
/// (`-T`, `--busy-target`).
pub trait ThreadedWorker: PerfWorker + Sized {
    /// One thread's share.
    type Thread: PerfWorker<Req: Send> + Send;

    /// Shares the connected worker between `n` threads. Thread 0 takes
    /// over the exposed buffer and the peer's; the others expose their
    /// own. Thread `i` adds `i` to every tag. With `busy`, a progress
    /// thread drives the worker and the threads never progress it: their
    /// [`PerfWorker::progress`] computes instead.
    fn into_threads(self, n: usize, busy: bool) -> Result<Vec<Self::Thread>>;

    /// A new worker on this one's context, not connected, for a thread of
    /// its own (`--worker-per-thread`).
    fn sibling(&self) -> Result<Self>;

    /// Each connected worker shared with one thread of its own, as UCX's
    /// perftest runs `-T`: thread `i` runs on `ws[i]` and its endpoint.
    fn into_own_threads(ws: Vec<Self>, busy: bool) -> Result<Vec<Self::Thread>> {
        let mut threads = Vec::with_capacity(ws.len());
        for w in ws {
            threads.extend(w.into_threads(1, busy)?);
        }
        Ok(threads)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A layer with tag operations only.
    struct TagOnly;

    impl PerfWorker for TagOnly {
        type Req = ();
        fn address(&mut self) -> Result<Vec<u8>> {
            Ok(vec![1])
        }
        fn connect(&mut self, _: &[u8]) -> Result<()> {
            Ok(())
        }
        fn progress(&mut self) -> usize {
            0
        }
        fn check_peer(&mut self) -> Result<()> {
            Ok(())
        }
        unsafe fn tag_send(
            &mut self,
            _: *const u8,
            n: usize,
            _: u64,
            _: bool,
        ) -> Result<Started<()>> {
            Ok(Started::Done(n))
        }
        unsafe fn tag_recv(&mut self, _: *mut u8, n: usize, _: u64, _: u64) -> Result<Started<()>> {
            Ok(Started::Done(n))
        }
        fn test(&mut self, _: ()) -> Option<Result<usize>> {
            Some(Ok(0))
        }
    }

    #[test]
    fn one_sided_operations_are_unsupported_by_default() {
        let mut w = TagOnly;
        let unsupported = |r: Result<()>| matches!(r, Err(PerfError::Unsupported(_)));
        assert!(unsupported(w.expose(8).map(drop)));
        assert!(unsupported(w.exposed_byte(0).map(drop)));
        assert!(unsupported(w.exposed_read(0, &mut [0; 1])));
        assert!(unsupported(w.exposed_write(0, &[0])));
        assert!(unsupported(w.set_remote(8, b"k")));
        let mut b = [0u8; 8];
        // SAFETY: nothing is posted; the defaults fail at once.
        unsafe {
            assert!(unsupported(w.put(b.as_ptr(), 8, 0).map(drop)));
            assert!(unsupported(w.get(b.as_mut_ptr(), 8, 0).map(drop)));
            let p = b.as_mut_ptr();
            assert!(unsupported(
                w.atomic_fetch(AtomicKind::Add, 8, 0, 0, p, 0).map(drop)
            ));
        }
        assert!(unsupported(
            w.atomic_post(AtomicKind::Add, 8, 1, 0).map(drop)
        ));
        let e = w.expose(8).unwrap_err().to_string();
        assert!(e.contains("no one-sided operations"), "{e}");
    }
}
