//! One test run: the server, client and loopback flows.
//!
//! Between two processes the steps are, after the client's parameter block
//! was accepted:
//!
//! 1. each side sets up (worker, buffers, and for one-sided tests the
//!    buffer it exposes to the peer) and sends its status;
//! 2. both send their [`Wireup`] (worker address, or with `--sockaddr`
//!    the server's listener port; exposed buffer's address and packed
//!    key) and connect to the peer's address or listener (and unpack its
//!    key), then exchange the status of the connection (`session_connect.rs`);
//! 3. barrier; warm-up run; barrier; measured run; barrier; the client
//!    prints the final row; a last barrier before the endpoints go away.
//!    Before each barrier that precedes a run, [`runner::prepare`] sets the
//!    one-sided tests' markers.
//!
//! A side that fails after step 1 sends an abort frame with the reason, so
//! that the other side stops at once with that message.
//!
//! Runs with threads (`-T`) and the server of `--busy-target` share the
//! worker once step 2 made the endpoint, and run step 3 in threads
//! (`session_threads.rs`).
//!
//! [`Wireup`]: super::bootstrap::Wireup

use super::bootstrap::{BootWatch, Bootstrap, FrameKind, Listener};
use super::catalog::TestType;
use super::error::{PerfError, Result};
use super::measure::{aggregate, Meter, PerfResult};
use super::params::TestParams;
use super::report::{
    format_row, format_thread_row, format_threads_final, table_header, test_box, OutputFlags,
};
use super::runner::{self, LoopState, NoWatch, Side};
use super::worker::{PerfWorker, ThreadedWorker};
use std::io::Write;
use std::time::Duration;

/// How long a client retries a refused connection.
pub const CONNECT_RETRY: Duration = Duration::from_secs(10);
/// Deadline of the parameter block and its answer.
const PARAMS_TIMEOUT: Duration = Duration::from_secs(10);
/// Deadline of the setup steps (worker creation, wireup).
const SETUP_TIMEOUT: Duration = Duration::from_secs(60);
/// Deadline of a barrier.
const BARRIER_TIMEOUT: Duration = Duration::from_secs(60);
/// Interval of the report rows.
const REPORT_INTERVAL: Duration = Duration::from_secs(1);

fn no_progress() -> Result<()> {
    Ok(())
}

/// Runs the client: connects to `host:port`, sends `params`, prints the
/// results to `out` (with the server's test box first when `print_box`).
/// With threads (`-T`), the rows are each thread's and the final row and
/// the result are theirs together ([`aggregate`]).
pub fn client<W: ThreadedWorker>(
    host: &str,
    port: u16,
    params: &TestParams,
    flags: OutputFlags,
    print_box: bool,
    make_worker: impl FnOnce() -> Result<W>,
    out: &mut dyn Write,
) -> Result<PerfResult> {
    params.check()?;
    let mut boot = Bootstrap::connect(host, port, CONNECT_RETRY)?;
    boot.send(FrameKind::Params, &params.encode())?;
    if let Err(reason) = boot.recv_outcome(FrameKind::Accept, PARAMS_TIMEOUT, &mut no_progress)? {
        return Err(PerfError::Params(format!(
            "the server rejected the test: {reason}"
        )));
    }
    let info = params.test.info();
    let mut text = String::new();
    if print_box {
        text.push_str(&test_box(info, params, false));
    }
    text.push_str(&table_header(flags, info, params.percentile));
    let _ = out.write_all(text.as_bytes());
    let _ = out.flush();
    if params.threads > 1 {
        let results = {
            let mut rows = |i: usize, r: &PerfResult| {
                if !flags.final_only {
                    let _ = writeln!(out, "{}", format_thread_row(i, r, flags));
                    let _ = out.flush();
                }
            };
            let interval = Some(REPORT_INTERVAL);
            threads::run_session(
                &mut boot,
                params,
                Side::Client,
                false,
                interval,
                make_worker,
                &mut rows,
            )?
        };
        let result = aggregate(&results);
        let _ = writeln!(out, "{}", format_threads_final(&result, flags));
        let _ = out.flush();
        return Ok(result);
    }
    // Reports happen with -f too (only unprinted), so that the final
    // row's "average" columns cover the last interval, as in UCX.
    let result = {
        let mut rows = |r: &PerfResult| {
            if !flags.final_only {
                let _ = writeln!(out, "{}", format_row(r, flags, false));
                let _ = out.flush();
            }
        };
        let interval = Some(REPORT_INTERVAL);
        run_session(
            &mut boot,
            params,
            Side::Client,
            interval,
            make_worker,
            &mut rows,
        )?
    };
    let _ = writeln!(out, "{}", format_row(&result, flags, true));
    let _ = out.flush();
    Ok(result)
}

/// Runs the server: waits on `listener` for one client (until
/// `accept_timeout`, if given), takes its parameters and runs the test;
/// with error handling also when `err_handling` (the server's own `-e`,
/// as UCX's perftest keeps it), and as a busy target also when
/// `busy_target` (its own `--busy-target`). With threads (`-T`) or as a
/// busy target it shares its worker between threads.
pub fn server<W: ThreadedWorker>(
    listener: &Listener,
    accept_timeout: Option<Duration>,
    err_handling: bool,
    busy_target: bool,
    make_worker: impl FnOnce() -> Result<W>,
    out: &mut dyn Write,
) -> Result<()> {
    let _ = writeln!(out, "Waiting for connection...");
    let _ = out.flush();
    let mut boot = listener.accept(accept_timeout)?;
    let _ = writeln!(out, "Accepted connection from {}", boot.peer());
    let block = boot.recv(FrameKind::Params, PARAMS_TIMEOUT, &mut no_progress)?;
    let params = match TestParams::decode(&block).and_then(|mut p| {
        p.err_handling |= err_handling;
        p.busy_target |= busy_target;
        p.check().map(|()| p)
    }) {
        Ok(p) => p,
        Err(e) => {
            let _ = boot.send_outcome(FrameKind::Accept, Err(e.to_string()));
            return Err(e);
        }
    };
    boot.send_outcome(FrameKind::Accept, Ok(()))?;
    let _ = out.write_all(test_box(params.test.info(), &params, true).as_bytes());
    if params.busy_target {
        let _ = writeln!(
            out,
            "Busy target: computing without progressing the worker; its progress thread serves the client"
        );
    }
    let _ = out.flush();
    if params.threads > 1 || params.busy_target {
        threads::run_session(
            &mut boot,
            &params,
            Side::Server,
            params.busy_target,
            None,
            make_worker,
            &mut |_, _| {},
        )?;
        return Ok(());
    }
    run_session(
        &mut boot,
        &params,
        Side::Server,
        None,
        make_worker,
        &mut |_| {},
    )?;
    Ok(())
}

/// Runs the test in this process against its own worker (`-l`), printing
/// the test box and the results.
pub fn loopback<W: PerfWorker>(
    params: &TestParams,
    flags: OutputFlags,
    make_worker: impl FnOnce() -> Result<W>,
    out: &mut dyn Write,
) -> Result<PerfResult> {
    params.check()?;
    let mut w = make_worker()?;
    let mut st = LoopState::new(params)?;
    connect::loopback_connect(&mut w, &st, params)?;
    let info = params.test.info();
    let mut text = test_box(info, params, false);
    text.push_str(&table_header(flags, info, params.percentile));
    let _ = out.write_all(text.as_bytes());
    let _ = out.flush();
    let ping_pong = info.test_type == TestType::PingPong;
    let warmup = params.warmup_iters();
    if warmup > 0 {
        runner::prepare(&mut w, &mut st)?;
        let mut meter = Meter::new(warmup, ping_pong, params.percentile, None);
        runner::run(
            &mut w,
            &mut NoWatch,
            &mut st,
            Side::Loopback,
            &mut meter,
            &mut |_| {},
        )?;
    }
    runner::prepare(&mut w, &mut st)?;
    let interval = Some(REPORT_INTERVAL);
    let mut meter = Meter::new(params.iters, ping_pong, params.percentile, interval);
    {
        let mut rows = |r: &PerfResult| {
            if !flags.final_only {
                let _ = writeln!(out, "{}", format_row(r, flags, false));
                let _ = out.flush();
            }
        };
        runner::run(
            &mut w,
            &mut NoWatch,
            &mut st,
            Side::Loopback,
            &mut meter,
            &mut rows,
        )?;
    }
    let result = meter.result();
    let _ = writeln!(out, "{}", format_row(&result, flags, true));
    let _ = out.flush();
    Ok(result)
}

/// Steps 1 to 3 of the module doc, for either side.
fn run_session<W: PerfWorker>(
    boot: &mut Bootstrap,
    params: &TestParams,
    side: Side,
    report_interval: Option<Duration>,
    make_worker: impl FnOnce() -> Result<W>,
    report: &mut dyn FnMut(&PerfResult),
) -> Result<PerfResult> {
    // 1. Local setup, and its outcome to the peer; 2. addresses and
    // endpoints.
    let (mut w, mut st) = connect::set_up(boot, params, side, "setup", make_worker)?;

    // 3. The runs.
    let outcome = runs(boot, &mut w, &mut st, params, side, report_interval, report);
    if let Err(e) = &outcome {
        if !matches!(e, PerfError::PeerAborted(_) | PerfError::PeerGone(_)) {
            boot.abort(&e.to_string());
        }
    }
    outcome
}

/// Reads the peer's status frame; its failure becomes an error here.
fn peer_outcome(
    boot: &mut Bootstrap,
    step: &str,
    progress: &mut dyn FnMut() -> Result<()>,
) -> Result<()> {
    match boot.recv_outcome(FrameKind::Status, SETUP_TIMEOUT, progress)? {
        Ok(()) => Ok(()),
        Err(reason) => Err(PerfError::PeerAborted(format!(
            "{step} failed on the peer: {reason}"
        ))),
    }
}

fn runs<W: PerfWorker>(
    boot: &mut Bootstrap,
    w: &mut W,
    st: &mut LoopState<W::Req>,
    params: &TestParams,
    side: Side,
    report_interval: Option<Duration>,
    report: &mut dyn FnMut(&PerfResult),
) -> Result<PerfResult> {
    let ping_pong = params.test.info().test_type == TestType::PingPong;
    let barrier = |boot: &mut Bootstrap, w: &mut W| {
        boot.barrier(BARRIER_TIMEOUT, &mut || {
            w.progress();
            Ok(())
        })
    };
    // The peer may write into this side's buffer once past a barrier:
    // markers are set before.
    runner::prepare(w, st)?;
    barrier(boot, w)?;
    let warmup = params.warmup_iters();
    if warmup > 0 {
        let mut meter = Meter::new(warmup, ping_pong, params.percentile, None);
        runner::run(
            w,
            &mut BootWatch::new(boot),
            st,
            side,
            &mut meter,
            &mut |_| {},
        )?;
        runner::prepare(w, st)?;
        barrier(boot, w)?;
    }
    let mut meter = Meter::new(params.iters, ping_pong, params.percentile, report_interval);
    runner::run(w, &mut BootWatch::new(boot), st, side, &mut meter, report)?;
    barrier(boot, w)?;
    let result = meter.result();
    // Nobody tears down an endpoint the peer still uses.
    barrier(boot, w)?;
    Ok(result)
}

#[path = "session_connect.rs"]
mod connect;

#[path = "session_threads.rs"]
mod threads;

#[cfg(test)]
#[path = "session_tests.rs"]
mod tests;
