//! The keepalive clock: a round every `RUCX_KEEPALIVE_INTERVAL`, looked
//! at on the progress calls that sweep cold ifaces and bounding how long
//! `wait_event` sleeps (the rounds themselves are `proto/keepalive.rs`).

use super::Worker;
use crate::UcpConfig;
use std::time::{Duration, Instant};

/// When the next round is due, and its settings.
#[derive(Debug)]
pub(crate) struct KeepaliveClock {
    interval: Option<Duration>,
    max_eps: usize,
    misses: u32,
    next: Option<Instant>,
}

impl KeepaliveClock {
    /// The clock `cfg` asks for (none for an `inf` interval).
    pub(crate) fn new(cfg: &UcpConfig) -> KeepaliveClock {
        let interval = cfg.keepalive_interval.finite().filter(|d| !d.is_zero());
        KeepaliveClock {
            interval,
            max_eps: cfg.keepalive_num_eps.max(1),
            misses: u32::try_from(cfg.keepalive_misses.max(1)).unwrap_or(u32::MAX),
            next: interval.map(|i| Instant::now() + i),
        }
    }

    /// How long until the next round, if there is a keepalive.
    pub(crate) fn until_due(&self) -> Option<Duration> {
        self.next
            .map(|n| n.saturating_duration_since(Instant::now()))
    }
}

impl Worker {
    /// Runs a keepalive round if one is due; returns how many endpoints
    /// it pinged.
    pub(crate) fn keepalive_tick(&mut self) -> usize {
        let (Some(next), Some(interval)) = (self.keepalive.next, self.keepalive.interval) else {
            return 0;
        };
        let now = Instant::now();
        if now < next {
            return 0;
        }
        self.keepalive.next = Some(now + interval);
        let (max, misses) = (self.keepalive.max_eps, self.keepalive.misses);
        let n = self.core.keepalive_round(&mut self.ifaces, max, misses);
        if self.core.has_commands() {
            self.core.run_commands(&mut self.ifaces);
        }
        n
    }
}
