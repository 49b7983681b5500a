//! Counting and timing of a run, the way UCX's libperf does it.
//!
//! Every iteration calls [`Meter::update`], which reads the clock once,
//! adds to the counters, stores the time since the previous iteration in a
//! ring of the last [`TIMING_QUEUE_SIZE`] iterations (the percentile column
//! comes from there), and every report interval hands a [`PerfResult`] for
//! that interval to the caller. Ping-pong iterations are round trips, so
//! their times are halved and their rates doubled.

use std::time::Duration;

use super::clock::{Clock, Ticks};

/// Iterations whose times the percentile is taken from.
pub const TIMING_QUEUE_SIZE: usize = 2048;

/// Figures of a run or of one report interval. Times in seconds, bandwidth
/// in bytes per second, message rate in messages per second.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct PerfResult {
    /// Iterations so far.
    pub iters: u64,
    /// Bytes so far.
    pub bytes: u64,
    /// Seconds since the start.
    pub elapsed: f64,
    /// Latency at the chosen percentile over the last iterations.
    pub lat_percentile: f64,
    /// Average latency since the previous report.
    pub lat_moment_avg: f64,
    /// Average latency since the start.
    pub lat_total_avg: f64,
    /// Bandwidth since the previous report.
    pub bw_moment_avg: f64,
    /// Bandwidth since the start.
    pub bw_total_avg: f64,
    /// Message rate since the previous report.
    pub msgrate_moment_avg: f64,
    /// Message rate since the start.
    pub msgrate_total_avg: f64,
}

#[derive(Debug, Clone, Copy)]
struct Counters {
    iters: u64,
    bytes: u64,
    msgs: u64,
    time: Ticks,
}

/// Counters, clock and timing ring of one run.
#[derive(Debug)]
pub struct Meter {
    max_iter: u64,
    factor: f64,
    percentile: f64,
    /// The report interval in ticks (`None`: never).
    report_interval: Option<Ticks>,
    clock: Clock,
    start: Ticks,
    last_iter: Ticks,
    cur: Counters,
    prev: Counters,
    queue: Box<[u64]>,
    head: usize,
    filled: usize,
    scratch: Vec<u64>,
}

impl Meter {
    /// A meter for `max_iter` iterations (0: no limit). `ping_pong` halves
    /// times; `report_interval` of `None` never reports before the end.
    pub fn new(
        max_iter: u64,
        ping_pong: bool,
        percentile: f64,
        report_interval: Option<Duration>,
    ) -> Meter {
        Meter::with_clock(
            Clock::new(),
            max_iter,
            ping_pong,
            percentile,
            report_interval,
        )
    }

    /// As [`Meter::new`], with the given clock.
    pub fn with_clock(
        clock: Clock,
        max_iter: u64,
        ping_pong: bool,
        percentile: f64,
        report_interval: Option<Duration>,
    ) -> Meter {
        let now = clock.now();
        let zero = Counters {
            iters: 0,
            bytes: 0,
            msgs: 0,
            time: now,
        };
        Meter {
            max_iter: if max_iter == 0 { u64::MAX } else { max_iter },
            factor: if ping_pong { 2.0 } else { 1.0 },
            percentile: percentile.clamp(0.0, 100.0),
            report_interval: report_interval.map(|d| clock.ticks(d)),
            clock,
            start: now,
            last_iter: now,
            cur: zero,
            prev: zero,
            queue: vec![0; TIMING_QUEUE_SIZE].into_boxed_slice(),
            head: 0,
            filled: 0,
            scratch: Vec::with_capacity(TIMING_QUEUE_SIZE),
        }
    }

    /// Resets the counters and starts the clock.
    pub fn start_clock(&mut self) {
        let now = self.clock.now();
        self.start = now;
        self.last_iter = now;
        self.cur = Counters {
            iters: 0,
            bytes: 0,
            msgs: 0,
            time: now,
        };
        self.prev = self.cur;
        self.head = 0;
        self.filled = 0;
    }

    /// Whether every iteration has been done.
    #[inline]
    pub fn done(&self) -> bool {
        self.cur.iters >= self.max_iter
    }

    /// Whether the iteration under way is the last one.
    #[inline]
    pub fn last_iteration(&self) -> bool {
        self.cur.iters.saturating_add(1) >= self.max_iter
    }

    /// Iterations done so far.
    #[inline]
    pub fn iters(&self) -> u64 {
        self.cur.iters
    }

    /// Counts one iteration of `bytes` bytes. Calls `report` with the
    /// interval's figures when a report interval has passed.
    #[inline]
    pub fn update(&mut self, bytes: usize, report: &mut dyn FnMut(&PerfResult)) {
        let now = self.clock.now();
        self.cur.iters += 1;
        self.cur.bytes += bytes as u64;
        self.cur.msgs += 1;
        self.cur.time = now;
        self.queue[self.head] = now.wrapping_sub(self.last_iter);
        self.head = (self.head + 1) % TIMING_QUEUE_SIZE;
        self.filled = (self.filled + 1).min(TIMING_QUEUE_SIZE);
        self.last_iter = now;
        if let Some(interval) = self.report_interval {
            if now.wrapping_sub(self.prev.time) >= interval {
                self.report(report);
            }
        }
    }

    #[cold]
    fn report(&mut self, report: &mut dyn FnMut(&PerfResult)) {
        let r = self.result();
        report(&r);
        self.prev = self.cur;
    }

    /// Stops the clock at the end of the run (after the last completion).
    pub fn mark_end(&mut self) {
        self.cur.time = self.clock.now();
    }

    /// The figures so far: totals since the start, moments since the
    /// previous report.
    pub fn result(&mut self) -> PerfResult {
        self.clock.refine();
        let total = self.clock.secs(self.cur.time.wrapping_sub(self.start));
        let moment = self.clock.secs(self.cur.time.wrapping_sub(self.prev.time));
        let f = self.factor;
        let d_iters = (self.cur.iters - self.prev.iters) as f64;
        let d_bytes = (self.cur.bytes - self.prev.bytes) as f64;
        let d_msgs = (self.cur.msgs - self.prev.msgs) as f64;
        PerfResult {
            iters: self.cur.iters,
            bytes: self.cur.bytes,
            elapsed: total,
            lat_percentile: self.percentile_secs() / f,
            lat_moment_avg: ratio(moment, d_iters) / f,
            lat_total_avg: ratio(total, self.cur.iters as f64) / f,
            bw_moment_avg: ratio(d_bytes, moment) * f,
            bw_total_avg: ratio(self.cur.bytes as f64, total) * f,
            msgrate_moment_avg: ratio(d_msgs, moment) * f,
            msgrate_total_avg: ratio(self.cur.msgs as f64, total) * f,
        }
    }

    /// The chosen percentile of the iteration times in the ring, seconds;
    /// only the iterations done so far count while the ring is not full.
    fn percentile_secs(&mut self) -> f64 {
        if self.filled == 0 {
            return 0.0;
        }
        self.scratch.clear();
        self.scratch.extend_from_slice(&self.queue[..self.filled]);
        let last = self.scratch.len() - 1;
        let idx = ((self.percentile / 100.0) * last as f64).round() as usize;
        let (_, nth, _) = self.scratch.select_nth_unstable(idx.min(last));
        self.clock.secs(*nth)
    }
}

/// The figures of the threads of a run together, as UCX reports them:
/// iterations, bytes and time of the first thread (each thread runs every
/// iteration), bandwidth and message rate summed over the threads, the
/// average of their overall latencies; the other figures are 0 (UCX
/// leaves them undefined).
pub fn aggregate(results: &[PerfResult]) -> PerfResult {
    let Some(first) = results.first() else {
        return PerfResult::default();
    };
    let n = results.len() as f64;
    PerfResult {
        iters: first.iters,
        bytes: first.bytes,
        elapsed: first.elapsed,
        lat_total_avg: results.iter().map(|r| r.lat_total_avg).sum::<f64>() / n,
        bw_total_avg: results.iter().map(|r| r.bw_total_avg).sum(),
        msgrate_total_avg: results.iter().map(|r| r.msgrate_total_avg).sum(),
        ..PerfResult::default()
    }
}

/// `num / den`, or 0 when `den` is 0 (an empty interval).
fn ratio(num: f64, den: f64) -> f64 {
    if den > 0.0 {
        num / den
    } else {
        0.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn no_report(_: &PerfResult) {}

    #[test]
    fn counts_and_stops() {
        let mut m = Meter::new(3, false, 50.0, None);
        m.start_clock();
        let mut n = 0;
        while !m.done() {
            m.update(100, &mut no_report);
            n += 1;
        }
        m.mark_end();
        assert_eq!(n, 3);
        let r = m.result();
        assert_eq!((r.iters, r.bytes), (3, 300));
        assert!(r.elapsed >= 0.0);
        assert!(r.lat_total_avg >= 0.0 && r.lat_total_avg.is_finite());
        assert!(r.bw_total_avg.is_finite());
    }

    #[test]
    fn aggregate_sums_rates_and_averages_latency() {
        let a = PerfResult {
            iters: 10,
            bytes: 80,
            elapsed: 1.0,
            lat_percentile: 5.0,
            lat_total_avg: 2.0,
            bw_total_avg: 100.0,
            msgrate_total_avg: 10.0,
            bw_moment_avg: 7.0,
            ..PerfResult::default()
        };
        let b = PerfResult {
            iters: 10,
            lat_total_avg: 4.0,
            bw_total_avg: 50.0,
            msgrate_total_avg: 5.0,
            ..a
        };
        let r = aggregate(&[a, b]);
        assert_eq!((r.iters, r.bytes, r.elapsed), (10, 80, 1.0));
        assert_eq!(r.lat_total_avg, 3.0);
        assert_eq!((r.bw_total_avg, r.msgrate_total_avg), (150.0, 15.0));
        assert_eq!((r.lat_percentile, r.bw_moment_avg), (0.0, 0.0));
        assert_eq!(aggregate(&[]), PerfResult::default());
        assert_eq!(aggregate(&[a]).bw_total_avg, a.bw_total_avg);
    }

    #[test]
    fn zero_means_no_limit() {
        let mut m = Meter::new(0, false, 50.0, None);
        for _ in 0..10_000 {
            m.update(1, &mut no_report);
        }
        assert!(!m.done());
    }

    #[test]
    fn percentile_picks_from_sorted_times() {
        let mut m = Meter::with_clock(Clock::instant(), 0, false, 50.0, None);
        let times = [5u64, 1, 4, 2, 3];
        m.queue[..5].copy_from_slice(&times);
        m.filled = 5;
        let close = |a: f64, b: f64| (a - b).abs() < 1e-15;
        assert!(close(m.percentile_secs(), 3e-9));
        m.percentile = 0.0;
        assert!(close(m.percentile_secs(), 1e-9));
        m.percentile = 100.0;
        assert!(close(m.percentile_secs(), 5e-9));
        m.filled = 0;
        assert_eq!(m.percentile_secs(), 0.0);
    }

    #[test]
    fn ping_pong_halves_latency_and_doubles_rates() {
        let mut a = Meter::with_clock(Clock::instant(), 0, false, 50.0, None);
        let mut b = Meter::with_clock(Clock::instant(), 0, true, 50.0, None);
        for m in [&mut a, &mut b] {
            m.cur.time = 2_000_000_000;
            m.start = 0;
            m.prev.time = m.start;
            m.cur.iters = 1000;
            m.cur.msgs = 1000;
            m.cur.bytes = 8000;
        }
        let (ra, rb) = (a.result(), b.result());
        assert!((ra.lat_total_avg - 2e-3).abs() < 1e-9);
        assert!((rb.lat_total_avg - 1e-3).abs() < 1e-9);
        assert!((ra.msgrate_total_avg - 500.0).abs() < 1e-6);
        assert!((rb.msgrate_total_avg - 1000.0).abs() < 1e-6);
        assert!((rb.bw_total_avg - 8000.0).abs() < 1e-6);
    }

    #[test]
    fn reports_every_interval_and_empty_interval_is_zero() {
        let mut m = Meter::new(0, false, 50.0, Some(Duration::ZERO));
        let mut seen = Vec::new();
        let mut rec = |r: &PerfResult| seen.push(r.iters);
        m.update(8, &mut rec);
        m.update(8, &mut rec);
        assert_eq!(seen, vec![1, 2]);
        // Right after a report the interval is empty: no division by zero.
        let r = m.result();
        assert_eq!(r.lat_moment_avg, 0.0);
        assert!(r.msgrate_moment_avg.is_finite());
    }
}
