//! Runs with threads (`-T`) and the busy target (`--busy-target`), as
//! UCX's perftest runs `-T`: every thread runs the whole test (all `-n`
//! iterations) on its own buffers, between barriers that the main thread
//! takes over the bootstrap connection for all of them.
//!
//! Steps 1 and 2 of the session are those of one thread (the endpoint is
//! made on the worker before it is shared). Then the worker is shared
//! ([`ThreadedWorker::into_threads`]); for one-sided tests threads 1 and
//! up expose their buffers and both sides send one more [`Wireup`] frame
//! per such thread (only the key and the buffer's address), then a
//! status. Each run starts the threads together; the main thread prints
//! their report rows (`[thread N]`), watches the bootstrap connection, and
//! stops the threads if the peer aborts or one of them fails.
//!
//! With `--worker-per-thread`, as UCX's perftest runs `-T`, threads 1 and
//! up get workers of their own on the first worker's context: steps 1 and
//! 2 run once more for each, and each worker is shared with its thread
//! alone.

use super::{connect, peer_outcome, BARRIER_TIMEOUT, SETUP_TIMEOUT};
use crate::perf::bootstrap::{Bootstrap, FrameKind, Wireup};
use crate::perf::catalog::TestType;
use crate::perf::error::{PerfError, Result};
use crate::perf::measure::{Meter, PerfResult};
use crate::perf::params::TestParams;
use crate::perf::runner::{self, LoopState, Side, Watch};
use crate::perf::worker::{PerfWorker, ThreadedWorker};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{mpsc, Barrier};
use std::time::{Duration, Instant};

/// How often the main thread looks at the bootstrap while threads run.
const LOOK_EVERY: Duration = Duration::from_millis(100);
/// No thread has stopped the run.
const RUNNING: usize = usize::MAX;

/// Steps 1 to 3 with `params.threads` threads; `busy`: this side is the
/// busy target. `rows` gets each thread's report rows. Returns each
/// thread's final figures.
pub(super) fn run_session<W: ThreadedWorker>(
    boot: &mut Bootstrap,
    params: &TestParams,
    side: Side,
    busy: bool,
    report_interval: Option<Duration>,
    make_worker: impl FnOnce() -> Result<W>,
    rows: &mut dyn FnMut(usize, &PerfResult),
) -> Result<Vec<PerfResult>> {
    let (w, st) = connect::set_up(boot, params, side, "setup", make_worker)?;
    let shared = if params.worker_per_thread {
        drop(st);
        own_workers(boot, w, params, side, busy)
    } else {
        share(boot, w, st, params, busy)
    };
    let outcome = shared.and_then(|(mut ws, mut sts)| {
        runs(boot, &mut ws, &mut sts, params, side, report_interval, rows)
    });
    if let Err(e) = &outcome {
        if !matches!(e, PerfError::PeerAborted(_) | PerfError::PeerGone(_)) {
            boot.abort(&e.to_string());
        }
    }
    outcome
}

type Shared<T> = (Vec<T>, Vec<LoopState<<T as PerfWorker>::Req>>);

/// Shares the connected worker between the threads; for one-sided tests
/// exchanges the buffers of threads 1 and up.
fn share<W: ThreadedWorker>(
    boot: &mut Bootstrap,
    w: W,
    st: LoopState<W::Req>,
    params: &TestParams,
    busy: bool,
) -> Result<Shared<W::Thread>> {
    let n = params.threads as usize;
    let mut ws = w.into_threads(n, busy)?;
    let mut sts = Vec::with_capacity(n);
    // Thread 0's buffers are those of the setup (the same sizes).
    let exposed_len = st.exposed_len();
    drop(st);
    for _ in 0..n {
        sts.push(LoopState::new(params)?);
    }
    let Some(len) = exposed_len else {
        return Ok((ws, sts));
    };
    if n == 1 {
        return Ok((ws, sts));
    }
    for t in &mut ws[1..] {
        let e = t.expose(len)?;
        if e.addr == 0 || e.rkey.is_empty() {
            return Err(PerfError::Params(
                "the exposed buffer has no address or no key".into(),
            ));
        }
        let wireup = Wireup {
            rkey: e.rkey,
            recv_buffer: e.addr,
            ..Wireup::default()
        };
        boot.send(FrameKind::Wireup, &wireup.encode())?;
    }
    let (first, rest) = ws.split_at_mut(1);
    for t in rest {
        let remote = boot
            .recv(FrameKind::Wireup, SETUP_TIMEOUT, &mut || {
                first[0].progress();
                Ok(())
            })
            .and_then(|p| Wireup::decode(&p))?;
        if remote.rkey.is_empty() {
            return Err(PerfError::Protocol(
                "the peer exposed no buffer for a thread of a one-sided test".into(),
            ));
        }
        t.set_remote(remote.recv_buffer, &remote.rkey)?;
    }
    boot.send_outcome(FrameKind::Status, Ok(()))?;
    peer_outcome(boot, "the threads' buffers", &mut || {
        ws[0].progress();
        Ok(())
    })?;
    Ok((ws, sts))
}

/// `--worker-per-thread`: steps 1 and 2 again for threads 1 and up, each
/// with a worker of its own on the first one's context, then every worker
/// shared with its thread.
fn own_workers<W: ThreadedWorker>(
    boot: &mut Bootstrap,
    first: W,
    params: &TestParams,
    side: Side,
    busy: bool,
) -> Result<Shared<W::Thread>> {
    let n = params.threads as usize;
    let mut own = Vec::with_capacity(n);
    own.push(first);
    for _ in 1..n {
        let (w, _) = connect::set_up(boot, params, side, "a thread's worker", || own[0].sibling())?;
        own.push(w);
    }
    let ws = W::into_own_threads(own, busy)?;
    let sts = (0..n)
        .map(|_| LoopState::new(params))
        .collect::<Result<Vec<_>>>()?;
    Ok((ws, sts))
}

/// A barrier with the peer, progressing every thread's worker meanwhile:
/// a peer thread may still wait for one of them (a one-sided operation
/// over a transport that needs the target's progress).
fn barrier<T: PerfWorker>(boot: &mut Bootstrap, ws: &mut [T]) -> Result<()> {
    boot.barrier(BARRIER_TIMEOUT, &mut || {
        for w in ws.iter_mut() {
            w.progress();
        }
        Ok(())
    })
}

/// Step 3 with threads: the warm-up and the measured run between the
/// barriers of `run_session`'s step 3.
fn runs<T: PerfWorker<Req: Send> + Send>(
    boot: &mut Bootstrap,
    ws: &mut [T],
    sts: &mut [LoopState<T::Req>],
    params: &TestParams,
    side: Side,
    report_interval: Option<Duration>,
    rows: &mut dyn FnMut(usize, &PerfResult),
) -> Result<Vec<PerfResult>> {
    let prepare = |ws: &mut [T], sts: &mut [LoopState<T::Req>]| {
        ws.iter_mut()
            .zip(sts.iter_mut())
            .try_for_each(|(w, st)| runner::prepare(w, st))
    };
    let each = Each {
        side,
        ping_pong: params.test.info().test_type == TestType::PingPong,
        percentile: params.percentile,
        linger: params.worker_per_thread,
    };
    prepare(ws, sts)?;
    barrier(boot, ws)?;
    let warmup = params.warmup_iters();
    if warmup > 0 {
        each.run(boot, ws, sts, warmup, None, &mut |_, _| {})?;
        prepare(ws, sts)?;
        barrier(boot, ws)?;
    }
    let results = each.run(boot, ws, sts, params.iters, report_interval, rows)?;
    barrier(boot, ws)?;
    barrier(boot, ws)?;
    Ok(results)
}

/// What every thread's run has in common.
struct Each {
    side: Side,
    ping_pong: bool,
    percentile: f64,
    /// Each thread has a worker of its own: one that finished its run
    /// progresses it until every thread of this side finished, since the
    /// peer's thread may still need it (a put over rc_iwarp completes only
    /// once the target progressed after the data landed).
    linger: bool,
}

impl Each {
    /// One run of `iters` iterations in every thread at once.
    fn run<T: PerfWorker<Req: Send> + Send>(
        &self,
        boot: &mut Bootstrap,
        ws: &mut [T],
        sts: &mut [LoopState<T::Req>],
        iters: u64,
        interval: Option<Duration>,
        rows: &mut dyn FnMut(usize, &PerfResult),
    ) -> Result<Vec<PerfResult>> {
        let n = ws.len();
        // The thread that stopped the run (`n`: the main thread).
        let stopper = AtomicUsize::new(RUNNING);
        let finished = AtomicUsize::new(0);
        let start = Barrier::new(n);
        let (tx, rx) = mpsc::channel::<(usize, PerfResult)>();
        std::thread::scope(|s| {
            let handles: Vec<_> = ws
                .iter_mut()
                .zip(sts.iter_mut())
                .enumerate()
                .map(|(i, (w, st))| {
                    let (tx, stopper, start) = (tx.clone(), &stopper, &start);
                    let finished = &finished;
                    s.spawn(move || {
                        let mut meter =
                            Meter::new(iters, self.ping_pong, self.percentile, interval);
                        let mut watch = Stopped(stopper);
                        start.wait();
                        let mut report = |r: &PerfResult| {
                            let _ = tx.send((i, *r));
                        };
                        let done = Finished {
                            count: finished,
                            stopper,
                            i,
                        };
                        let r = runner::run(w, &mut watch, st, self.side, &mut meter, &mut report);
                        if r.is_err() {
                            stop(stopper, i);
                        }
                        let r = r.map(|()| meter.result());
                        drop(done);
                        if self.linger {
                            while finished.load(Ordering::SeqCst) < n
                                && stopper.load(Ordering::Relaxed) == RUNNING
                            {
                                w.progress();
                            }
                        }
                        r
                    })
                })
                .collect();
            drop(tx);
            let mut boot_error = None;
            let mut looked = Instant::now();
            loop {
                match rx.recv_timeout(Duration::from_millis(10)) {
                    Ok((i, r)) => rows(i, &r),
                    Err(mpsc::RecvTimeoutError::Disconnected) => break,
                    Err(mpsc::RecvTimeoutError::Timeout) => {}
                }
                if boot_error.is_none() && looked.elapsed() >= LOOK_EVERY {
                    looked = Instant::now();
                    if let Err(e) = boot.check_alive() {
                        stop(&stopper, n);
                        boot_error = Some(e);
                    }
                }
            }
            let mut results = Vec::with_capacity(n);
            let mut errors = Vec::new();
            for (i, h) in handles.into_iter().enumerate() {
                match h.join() {
                    Ok(Ok(r)) => results.push(r),
                    Ok(Err(e)) => errors.push((i, e)),
                    Err(_) => errors.push((i, PerfError::Params("a thread panicked".into()))),
                }
            }
            let who = stopper.load(Ordering::SeqCst);
            if let Some(e) = boot_error.filter(|_| who == n) {
                return Err(e);
            }
            // The error of the thread that stopped the others.
            let first = errors.iter().position(|(i, _)| *i == who).unwrap_or(0);
            match errors.into_iter().nth(first) {
                None => Ok(results),
                Some((_, e)) => Err(e),
            }
        })
    }
}

/// Marks thread `i` as the one that stopped the run, unless one did.
fn stop(stopper: &AtomicUsize, i: usize) {
    let _ = stopper.compare_exchange(RUNNING, i, Ordering::SeqCst, Ordering::SeqCst);
}

/// Counts thread `i` as finished once its run ended, also by a panic
/// (which stops the run, as an error does), so that no thread lingers
/// for it.
struct Finished<'a> {
    count: &'a AtomicUsize,
    stopper: &'a AtomicUsize,
    i: usize,
}

impl Drop for Finished<'_> {
    fn drop(&mut self) {
        if std::thread::panicking() {
            stop(self.stopper, self.i);
        }
        self.count.fetch_add(1, Ordering::SeqCst);
    }
}

/// A thread's [`Watch`]: fails once the run was stopped.
struct Stopped<'a>(&'a AtomicUsize);

impl Watch for Stopped<'_> {
    #[inline]
    fn check(&mut self, _now: bool) -> Result<()> {
        match self.0.load(Ordering::Relaxed) {
            RUNNING => Ok(()),
            _ => Err(PerfError::PeerAborted(
                "stopped: the run failed in another thread or on the peer".into(),
            )),
        }
    }
}
