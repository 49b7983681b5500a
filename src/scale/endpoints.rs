//! The endpoint benchmark: one worker, N endpoints to N workers spread
//! over child processes, one round trip on each.
//!
//! Creation is timed per `connect` call; the first round trip on each
//! endpoint (which may include finishing its connection) and a second,
//! warm one are timed per endpoint. Memory and descriptors are the
//! growth of the driver from before the first endpoint to after the
//! last round trip, and of the children from when their workers were
//! ready to the same point, divided by N.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::children::ChildProc;
use super::{hex, sys, Report, ANSWER, ECHO};
use crate::ucp::{AmParams, Ep, Posted};
use crate::{Context, Worker};

/// How long one round trip may take before the run fails.
const RTT_LIMIT: Duration = Duration::from_secs(60);

/// Runs the benchmark with `n` endpoints over `procs` children.
pub(crate) fn run(n: usize, procs: usize) -> Result<Report, String> {
    if n == 0 || procs == 0 {
        return Err("need at least one endpoint and one process".into());
    }
    sys::raise_nofile();
    let procs = procs.min(n);
    let mut kids = Vec::with_capacity(procs);
    for p in 0..procs {
        let count = n / procs + usize::from(p < n % procs);
        kids.push(ChildProc::spawn(&["--serve".into(), count.to_string()])?);
    }
    let mut addrs = Vec::with_capacity(n);
    let mut remote_base = (0u64, 0u64);
    for (p, k) in kids.iter_mut().enumerate() {
        let count = n / procs + usize::from(p < n % procs);
        for _ in 0..count {
            let l = k.line()?;
            match (l.first().map(String::as_str), l.get(1)) {
                (Some("addr"), Some(h)) => {
                    addrs.push(hex::decode(h).ok_or("a child sent a bad address")?)
                }
                _ => return Err(format!("a child said {l:?}, expected an address")),
            }
        }
        let r = k.numbers("ready")?;
        remote_base.0 += r.first().copied().unwrap_or(0);
        remote_base.1 += r.get(1).copied().unwrap_or(0);
    }

    let ctx = Context::new().map_err(|e| format!("context: {e}"))?;
    let mut w = ctx.create_worker().map_err(|e| format!("worker: {e}"))?;
    let answers = Arc::new(AtomicU64::new(0));
    let seen = Arc::clone(&answers);
    w.am_set_inline_handler(ANSWER, move |_, _| {
        seen.fetch_add(1, Ordering::Relaxed);
        true
    });
    w.progress();
    let (rss0, fds0) = (sys::rss_kb(), sys::fds());

    let mut create = Vec::with_capacity(n);
    let mut eps = Vec::with_capacity(n);
    for (i, a) in addrs.iter().enumerate() {
        let t = Instant::now();
        let ep = w
            .connect(a)
            .map_err(|e| format!("endpoint {i} of {n}: {e}"))?;
        create.push(t.elapsed());
        eps.push(ep);
    }
    let first = round_trips(&mut w, &eps, &answers)?;
    let warm = round_trips(&mut w, &eps, &answers)?;
    let (rss1, fds1) = (sys::rss_kb(), sys::fds());

    let mut remote = (0u64, 0u64);
    for k in &mut kids {
        k.say("report")?;
        let r = k.numbers("report")?;
        remote.0 += r.first().copied().unwrap_or(0);
        remote.1 += r.get(1).copied().unwrap_or(0);
    }
    drop(eps);
    drop(w);
    for k in kids {
        k.finish()?;
    }
    let tenth = (n / 10).max(1);
    let nf = n as f64;
    Ok(Report {
        n,
        procs,
        create_us: mean_us(&create),
        create_first_us: mean_us(&create[..tenth]),
        create_last_us: mean_us(&create[n - tenth..]),
        rtt_first_us: median_us(first),
        rtt_warm_us: median_us(warm),
        kb_per_ep: rss1.saturating_sub(rss0) as f64 / nf,
        fds_per_ep: fds1.saturating_sub(fds0) as f64 / nf,
        remote_kb_per_ep: remote.0.saturating_sub(remote_base.0) as f64 / nf,
        remote_fds_per_ep: remote.1.saturating_sub(remote_base.1) as f64 / nf,
    })
}

/// One echo round trip on each endpoint in turn; their times.
fn round_trips(w: &mut Worker, eps: &[Ep], answers: &AtomicU64) -> Result<Vec<Duration>, String> {
    let mut out = Vec::with_capacity(eps.len());
    let payload = [0u8; 8];
    for (i, &ep) in eps.iter().enumerate() {
        let before = answers.load(Ordering::Relaxed);
        let t = Instant::now();
        match w.am_send(ep, ECHO, &[], &payload, AmParams::new().reply()) {
            Ok(Posted::InFlight(id)) => w.request_release(id),
            Ok(Posted::Done(..)) => {}
            Err(e) => return Err(format!("sending on endpoint {i}: {e}")),
        }
        let mut spins = 0u32;
        while answers.load(Ordering::Relaxed) == before {
            w.progress();
            spins = spins.wrapping_add(1);
            if spins % 1024 == 0 {
                if t.elapsed() > RTT_LIMIT {
                    return Err(format!("no answer on endpoint {i} in {RTT_LIMIT:?}"));
                }
                if let Err(e) = w.ep_status(ep) {
                    return Err(format!("endpoint {i} failed: {e}"));
                }
            }
        }
        out.push(t.elapsed());
    }
    Ok(out)
}

fn mean_us(d: &[Duration]) -> f64 {
    if d.is_empty() {
        return 0.0;
    }
    d.iter().map(Duration::as_secs_f64).sum::<f64>() * 1e6 / d.len() as f64
}

fn median_us(mut d: Vec<Duration>) -> f64 {
    if d.is_empty() {
        return 0.0;
    }
    d.sort_unstable();
    d[d.len() / 2].as_secs_f64() * 1e6
}
