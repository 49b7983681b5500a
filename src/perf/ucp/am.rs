//! The perftest's active message handler and what it leaves for the
//! message loop.
//!
//! As UCX's perftest, the handler consumes an eager message in place: an
//! inline handler, run where the message arrived, only counts it. It keeps the data only where the loop asks for it
//! (`-V`, which checks every byte) or where the length is not the one the
//! test sends (so that the loop reports it). A rendezvous message's data
//! is received, as UCX's perftest does, into one scratch buffer that every
//! message overwrites (nothing reads it), or with `-V` into a buffer of
//! its own, reused once the loop has checked it. The count is written by
//! the handler and read by the loop on
//! the same thread (the handler runs inside `progress`), so it needs no
//! read-modify-write; the queue of kept messages is looked at only when
//! its length says it holds something.

use rucx_ucp::{AmMsg, Op, Posted, ReqId, Worker, WorkerMut};
use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

/// What taking a message gives: its length, or none yet, or the error of
/// its receive.
type Taken = Result<Option<usize>, rucx_ucp::Error>;

/// Active message id of the perftest messages.
pub(super) const PERF_AM_ID: u16 = 0x1337;

/// An active message the handler kept.
#[derive(Debug)]
pub(super) enum AmGot {
    Data(Vec<u8>),
    /// A rendezvous message whose data is being received into a buffer
    /// of its own.
    Fetching(ReqId),
    /// A rendezvous message whose data is being received into the
    /// scratch buffer.
    Scratching(ReqId),
    Failed(rucx_ucp::Error),
}

/// What the handler shares with the loop.
#[derive(Debug, Default)]
struct Shared {
    /// Eager messages of the expected length, consumed in place.
    consumed: AtomicU64,
    /// The length the test sends.
    expect: AtomicUsize,
    /// Whether to keep the data of every message (`-V`).
    keep: AtomicBool,
    /// How many entries `kept.got` holds.
    queued: AtomicUsize,
    kept: Mutex<Kept>,
}

/// Kept messages, and buffers for rendezvous data, reused (as UCX's
/// perftest reuses its one buffer).
#[derive(Debug, Default)]
struct Kept {
    got: VecDeque<AmGot>,
    spare: Vec<Vec<u8>>,
    /// The scratch buffer, as long as the test's messages; earlier ones
    /// (of a shorter length) are kept too, since receives may still be
    /// writing into them, until the handler goes.
    scratch: Vec<Box<[u8]>>,
}

/// The loop's side of the handler.
#[derive(Debug, Default)]
pub(super) struct AmInbox {
    shared: Arc<Shared>,
    /// How many of `shared.consumed` the loop has taken.
    taken: u64,
}

impl AmInbox {
    /// Registers the perftest handler on `worker`.
    pub(super) fn install(&self, worker: &mut Worker) {
        // Eager messages of the test's length are counted where they
        // arrive, as UCX's perftest handler does; the rest (rendezvous
        // messages, `-V`, wrong lengths) go to the regular handler.
        let s = Arc::clone(&self.shared);
        worker.am_set_inline_handler(PERF_AM_ID, move |_, data| {
            if s.keep.load(Ordering::Relaxed) || data.len() != s.expect.load(Ordering::Relaxed) {
                return false;
            }
            s.count();
            true
        });
        let s = Arc::clone(&self.shared);
        worker.am_set_handler(PERF_AM_ID, move |w, m| {
            if !m.is_rndv()
                && !s.keep.load(Ordering::Relaxed)
                && m.data_len() == s.expect.load(Ordering::Relaxed)
            {
                s.count();
                return;
            }
            let got = if m.is_rndv() {
                match s.fetch(w, m) {
                    Some(got) => got,
                    None => return,
                }
            } else {
                AmGot::Data(AmMsg::into_data(m))
            };
            s.push_back(got);
        });
    }

    /// Sets the length of the test's messages and whether the loop wants
    /// their bytes.
    pub(super) fn expect(&self, len: usize, keep: bool) {
        self.shared.expect.store(len, Ordering::Relaxed);
        self.shared.keep.store(keep, Ordering::Relaxed);
        let mut k = self.shared.lock();
        if !keep && k.scratch.last().is_none_or(|b| b.len() < len) {
            k.scratch.push(vec![0u8; len].into_boxed_slice());
        }
    }

    /// The length of the oldest message, copying up to `out.len()` of its
    /// bytes into `out` (none for one received into the scratch buffer);
    /// `None` while a rendezvous message's data is still on its way to
    /// `worker`.
    #[inline]
    pub(super) fn take(&mut self, out: &mut [u8], worker: &mut Worker) -> Taken {
        if self.shared.consumed.load(Ordering::Acquire) > self.taken {
            self.taken += 1;
            return Ok(Some(self.shared.expect.load(Ordering::Relaxed)));
        }
        if self.shared.queued.load(Ordering::Acquire) == 0 {
            return Ok(None);
        }
        self.take_kept(out, worker)
    }

    #[cold]
    fn take_kept(&mut self, out: &mut [u8], worker: &mut Worker) -> Taken {
        let Some(got) = self.shared.pop_front() else {
            return Ok(None);
        };
        let data = match got {
            AmGot::Data(d) => d,
            AmGot::Failed(e) => return Err(e),
            AmGot::Fetching(id) => match worker.take::<Vec<u8>>(id) {
                None => {
                    self.shared.push_front(AmGot::Fetching(id));
                    return Ok(None);
                }
                Some(Ok((_, d))) => d,
                Some(Err(e)) => return Err(e.error),
            },
            AmGot::Scratching(id) => {
                return match worker.request_test(id) {
                    None => {
                        self.shared.push_front(AmGot::Scratching(id));
                        Ok(None)
                    }
                    Some(r) => r.map(|info| Some(info.length)),
                };
            }
        };
        let n = out.len().min(data.len());
        out[..n].copy_from_slice(&data[..n]);
        let len = data.len();
        let mut k = self.shared.lock();
        if k.spare.len() < 64 {
            k.spare.push(data);
        }
        Ok(Some(len))
    }
}

impl Shared {
    /// Receives the data of rendezvous message `m`: into the scratch
    /// buffer when nothing reads it (`None`: received and counted at
    /// once), else into a buffer of its own.
    fn fetch(&self, w: &mut WorkerMut<'_>, m: AmMsg) -> Option<AmGot> {
        let len = m.data_len();
        let scratch =
            !self.keep.load(Ordering::Relaxed) && len == self.expect.load(Ordering::Relaxed);
        let mut k = self.lock();
        if let Some(b) = k.scratch.last_mut().filter(|b| scratch && b.len() >= len) {
            let ptr = b.as_mut_ptr();
            drop(k);
            // SAFETY: the scratch buffers live in `self` until the handler
            // (which holds it) goes with the worker, and are never resized;
            // the only writers are this worker's receives, and nothing
            // reads them.
            #[allow(unsafe_code)]
            return match unsafe { w.am_recv_data_raw(m, ptr, len, Op::new()) } {
                Ok(Posted::Done(..)) => {
                    // Counted as an eager message of the expected length.
                    self.count();
                    None
                }
                Ok(Posted::InFlight(id)) => Some(AmGot::Scratching(id)),
                Err(e) => Some(AmGot::Failed(e)),
            };
        }
        let mut buf = k.spare.pop().unwrap_or_default();
        drop(k);
        buf.resize(len, 0);
        Some(match w.am_recv_data(m, buf, Op::new()) {
            Ok(Posted::Done(_, buf)) => AmGot::Data(buf),
            Ok(Posted::InFlight(id)) => AmGot::Fetching(id),
            Err(e) => AmGot::Failed(e),
        })
    }

    /// Counts one message consumed; the handler is the only writer, so no
    /// read-modify-write is needed.
    #[inline]
    fn count(&self) {
        let n = self.consumed.load(Ordering::Relaxed);
        self.consumed.store(n + 1, Ordering::Release);
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Kept> {
        // A handler that panicked poisons nothing that matters here.
        self.kept.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn push_back(&self, got: AmGot) {
        self.lock().got.push_back(got);
        self.queued.fetch_add(1, Ordering::Release);
    }

    fn push_front(&self, got: AmGot) {
        self.lock().got.push_front(got);
        self.queued.fetch_add(1, Ordering::Release);
    }

    fn pop_front(&self) -> Option<AmGot> {
        let got = self.lock().got.pop_front()?;
        self.queued.fetch_sub(1, Ordering::Release);
        Some(got)
    }
}
