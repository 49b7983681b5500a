//! How often a progressing context reads a channel that rarely has
//! anything: its connection manager channel or the device's async fd.

use std::time::{Duration, Instant};

/// Calls between two reads while the calls come fast: each read is a
/// system call, which would otherwise come with every progress call (and
/// cost a small message's latency a fraction of a microsecond each). On a
/// host this is tens of microseconds of a busy loop; in the soft-RoCE
/// guest, one read in 32 calls still showed under strace as about one
/// failed read per message.
const EVERY: u32 = 1024;

/// The longest a channel goes unread while its context is progressed,
/// however slowly: where progress calls are slow (a debug build, an
/// emulated machine) or rare (an iface without traffic, which the worker
/// polls only on its sweeps), 1024 calls can take seconds, and a
/// connection request waits that long at the listener.
const AT_MOST: Duration = Duration::from_millis(1);

/// The clock is read on one call in this many.
const CLOCK_EVERY: u32 = 16;

/// When a context next reads one channel.
#[derive(Debug)]
pub(super) struct Look {
    calls: u32,
    last: Instant,
}

impl Look {
    pub(super) fn new(now: Instant) -> Look {
        Look {
            calls: 0,
            last: now,
        }
    }

    /// Whether this call reads the channel: on every [`EVERY`]th call,
    /// and on a call that finds [`AT_MOST`] gone since the last read.
    /// `now` is called on one call in [`CLOCK_EVERY`] (and on reads).
    pub(super) fn due(&mut self, now: impl FnOnce() -> Instant) -> bool {
        self.calls = self.calls.wrapping_add(1);
        if self.calls % CLOCK_EVERY != 0 {
            return false;
        }
        let t = now();
        if self.calls % EVERY == 0 || t.saturating_duration_since(self.last) >= AT_MOST {
            self.last = t;
            return true;
        }
        false
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// How many calls until `due`, with the clock advancing `step` per
    /// clock read.
    fn calls_until_due(look: &mut Look, t: &mut Instant, step: Duration) -> u32 {
        for n in 1..=EVERY {
            if look.due(|| {
                *t += step;
                *t
            }) {
                return n;
            }
        }
        panic!("not due within {EVERY} calls");
    }

    #[test]
    fn fast_calls_read_once_in_every() {
        let mut t = Instant::now();
        let mut look = Look::new(t);
        for _ in 0..3 {
            assert_eq!(calls_until_due(&mut look, &mut t, Duration::ZERO), EVERY);
        }
    }

    #[test]
    fn slow_calls_read_once_the_time_is_up() {
        let mut t = Instant::now();
        let mut look = Look::new(t);
        // 0.3 ms per clock read: the fourth read finds 1.2 ms gone.
        let step = Duration::from_micros(300);
        for _ in 0..3 {
            assert_eq!(calls_until_due(&mut look, &mut t, step), 4 * CLOCK_EVERY);
        }
        // A long pause: the next clock read is due.
        let mut look = Look::new(t);
        assert_eq!(
            calls_until_due(&mut look, &mut t, Duration::from_secs(1)),
            CLOCK_EVERY
        );
    }

    #[test]
    fn the_clock_is_read_on_one_call_in_clock_every() {
        let mut look = Look::new(Instant::now());
        let mut reads = 0;
        for _ in 0..EVERY * 2 {
            look.due(|| {
                reads += 1;
                Instant::now()
            });
        }
        assert_eq!(reads, EVERY * 2 / CLOCK_EVERY);
    }
}
