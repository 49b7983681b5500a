//! The clock of a perftest run: the CPU's time-stamp counter where it runs
//! at a constant rate, as UCX's `ucs_get_time` reads it, or `Instant`
//! elsewhere.
//!
//! A perftest reads the clock once per iteration, so its cost is part of
//! every figure: on the hosts this runs on, `Instant::now` (a vDSO
//! `clock_gettime`) takes about 28 ns and `rdtsc` about 11 ns. Ticks are
//! turned into seconds with a rate measured against `Instant` when the
//! clock is made and refined over the run.

use std::time::{Duration, Instant};

/// Ticks since an arbitrary origin.
pub type Ticks = u64;

/// A monotonic tick source with its rate.
#[derive(Debug, Clone, Copy)]
pub struct Clock {
    tsc: bool,
    origin: Instant,
    origin_ticks: Ticks,
    /// Seconds per tick.
    secs_per_tick: f64,
}

/// Whether the time-stamp counter ticks at a constant rate, also across
/// sleep states (Linux's `constant_tsc` and `nonstop_tsc` flags).
#[cfg(target_arch = "x86_64")]
fn tsc_usable() -> bool {
    std::fs::read_to_string("/proc/cpuinfo").is_ok_and(|info| {
        info.lines()
            .find(|l| l.starts_with("flags"))
            .is_some_and(|l| l.contains(" constant_tsc") && l.contains(" nonstop_tsc"))
    })
}

#[cfg(not(target_arch = "x86_64"))]
fn tsc_usable() -> bool {
    false
}

#[inline]
fn read_tsc() -> Ticks {
    #[cfg(target_arch = "x86_64")]
    {
        // SAFETY: `rdtsc` has no preconditions; it is used only where the
        // CPU reports a constant-rate counter.
        unsafe { core::arch::x86_64::_rdtsc() }
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        0
    }
}

impl Clock {
    /// The time-stamp counter if usable (rate calibrated for ~2 ms), else
    /// nanoseconds from `Instant`.
    pub fn new() -> Clock {
        if tsc_usable() {
            Clock::tsc()
        } else {
            Clock::instant()
        }
    }

    /// Nanoseconds from `Instant`.
    pub fn instant() -> Clock {
        Clock {
            tsc: false,
            origin: Instant::now(),
            origin_ticks: 0,
            secs_per_tick: 1e-9,
        }
    }

    fn tsc() -> Clock {
        let origin = Instant::now();
        let origin_ticks = read_tsc();
        while origin.elapsed() < Duration::from_millis(2) {
            std::hint::spin_loop();
        }
        let mut c = Clock {
            tsc: true,
            origin,
            origin_ticks,
            secs_per_tick: 0.0,
        };
        c.refine();
        c
    }

    /// Now, in ticks.
    #[inline]
    pub fn now(&self) -> Ticks {
        if self.tsc {
            read_tsc()
        } else {
            self.origin.elapsed().as_nanos().min(u128::from(u64::MAX)) as u64
        }
    }

    /// Measures the tick rate again over everything since the clock was
    /// made (more precise the longer it ran).
    pub fn refine(&mut self) {
        if !self.tsc {
            return;
        }
        let secs = self.origin.elapsed().as_secs_f64();
        let ticks = read_tsc().wrapping_sub(self.origin_ticks);
        if secs > 0.0 && ticks > 0 {
            self.secs_per_tick = secs / ticks as f64;
        } else if self.secs_per_tick == 0.0 {
            // A counter that does not move: fall back to nanoseconds.
            *self = Clock::instant();
        }
    }

    /// Seconds in `ticks`.
    pub fn secs(&self, ticks: Ticks) -> f64 {
        ticks as f64 * self.secs_per_tick
    }

    /// Ticks in `d` (rounded down).
    pub fn ticks(&self, d: Duration) -> Ticks {
        (d.as_secs_f64() / self.secs_per_tick) as u64
    }
}

impl Default for Clock {
    fn default() -> Clock {
        Clock::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ticks_follow_real_time() {
        for mut c in [Clock::new(), Clock::instant()] {
            let a = c.now();
            std::thread::sleep(Duration::from_millis(20));
            let b = c.now();
            c.refine();
            let secs = c.secs(b - a);
            assert!((0.019..1.0).contains(&secs), "{secs} s for a 20 ms sleep");
            let t = c.ticks(Duration::from_millis(10));
            assert!((c.secs(t) - 0.01).abs() < 1e-4);
        }
    }
}
