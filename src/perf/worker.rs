//! What the test loops need from a communication layer.
//!
//! The loops are generic over [`PerfWorker`], so they compile to direct
//! calls; `rucx-perftest` plugs in rucx's ucp worker, unit tests an
//! in-memory pair.

use super::error::Result;

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

    /// Makes progress; returns how much happened (0 when idle). Never
    /// blocks.
    fn progress(&mut self) -> usize;

    /// Fails once the endpoint to the peer has failed.
    fn check_peer(&mut self) -> Result<()>;

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

    /// Completes every operation posted so far on the endpoint, progressing
    /// as needed.
    fn flush(&mut self) -> Result<()> {
        Ok(())
    }
}
