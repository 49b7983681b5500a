//! Which ifaces a progress call may skip.
//!
//! An iface with no endpoint that found nothing in [`COLD_AFTER`] progress
//! calls in a row is polled only every [`COLD_POLL_EVERY`] calls: a TCP
//! iface that only listens must not cost a system call on every progress
//! of a worker whose traffic goes through shared memory. Anything it finds
//! makes it hot again; an endpoint on it keeps it hot, unless the iface is
//! passive (no active messages: CMA), whose quiet progress only delays the
//! report of a failure or a pending token by at most `COLD_POLL_EVERY`
//! calls.

const COLD_AFTER: u32 = 256;
const COLD_POLL_EVERY: u32 = 256;

/// One iface's recent history, as far as polling cares.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Heat {
    /// Progress calls in a row that found nothing (at most `COLD_AFTER`).
    quiet: u32,
    /// The iface has no active messages, so nothing arrives on it by
    /// itself (its operations complete as they are posted); its progress
    /// only hands back pending tokens and failures.
    passive: bool,
}

impl Heat {
    /// The heat of a newly opened iface.
    pub(crate) fn new(passive: bool) -> Heat {
        Heat { quiet: 0, passive }
    }

    /// Whether a progress call that is not a sweep skips the iface, which
    /// has `lanes` endpoint lanes.
    #[inline]
    pub(crate) fn cold(&self, lanes: u32) -> bool {
        self.quiet >= COLD_AFTER && (lanes == 0 || self.passive)
    }

    /// Polled again from the next progress call on.
    pub(crate) fn warm(&mut self) {
        self.quiet = 0;
    }

    /// A progress call of the iface found `events`.
    #[inline]
    pub(crate) fn polled(&mut self, events: usize) {
        if events > 0 {
            self.quiet = 0;
        } else if self.quiet < COLD_AFTER {
            self.quiet += 1;
        }
    }
}

/// Progress calls so far, for the sweep that polls cold ifaces too.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Tick(u32);

impl Tick {
    /// Counts a progress call; returns whether it sweeps.
    #[inline]
    pub(crate) fn next(&mut self) -> bool {
        self.0 = self.0.wrapping_add(1);
        self.0 % COLD_POLL_EVERY == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn quiet_calls(h: &mut Heat, n: u32) {
        for _ in 0..n {
            h.polled(0);
        }
    }

    #[test]
    fn ifaces_go_cold_only_without_lanes_or_when_passive() {
        let mut idle = Heat::new(false);
        quiet_calls(&mut idle, COLD_AFTER - 1);
        assert!(!idle.cold(0), "not yet");
        quiet_calls(&mut idle, 1);
        assert!(idle.cold(0), "quiet long enough, no lanes");
        assert!(!idle.cold(1), "a lane keeps an iface with messages hot");
        let mut passive = Heat::new(true);
        quiet_calls(&mut passive, COLD_AFTER);
        assert!(
            passive.cold(3),
            "a passive iface cools down despite its lanes"
        );
        passive.polled(1);
        assert!(!passive.cold(3) && passive.quiet == 0, "events warm it up");
        quiet_calls(&mut passive, COLD_AFTER);
        passive.warm();
        assert!(!passive.cold(0), "warmed up");
    }

    #[test]
    fn every_poll_every_th_call_sweeps() {
        let mut t = Tick::default();
        let sweeps = (0..3 * COLD_POLL_EVERY).filter(|_| t.next()).count();
        assert_eq!(sweeps, 3);
    }
}
