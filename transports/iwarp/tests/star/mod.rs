//! A hub RC iface and many peer ifaces of one fixture, all in this
//! process and progressed in turn by one thread: one connection between
//! the hub and each peer. Each test binary names its fixture (rucx-verbs'
//! `tests/rc_star.rs` includes this file for rc_verbs).

#![allow(dead_code)]

use std::time::{Duration, Instant};

use uct::testing::{ComponentFixture, Event, TestSink};
use uct::{EpId, Iface, Posted};

/// How long any single wait may take.
pub(crate) const DEADLINE: Duration = Duration::from_secs(60);

/// The hub and its peers.
pub(crate) struct Star {
    pub(crate) hub: Box<dyn Iface>,
    pub(crate) hub_sink: TestSink,
    pub(crate) peers: Vec<Box<dyn Iface>>,
    pub(crate) sinks: Vec<TestSink>,
}

impl Star {
    /// A hub and `n` peers (not connected).
    pub(crate) fn open(f: &ComponentFixture, n: usize) -> Star {
        Star {
            hub: f.open(1),
            hub_sink: TestSink::new(),
            peers: (0..n).map(|i| f.open(100 + i as u64)).collect(),
            sinks: (0..n).map(|_| TestSink::new()).collect(),
        }
    }

    /// Progresses every iface once; returns the work done.
    pub(crate) fn progress(&mut self) -> usize {
        let mut n = self.hub.progress(&mut self.hub_sink);
        for (p, s) in self.peers.iter_mut().zip(&mut self.sinks) {
            n += p.progress(s);
        }
        n
    }

    /// Progresses until `done`; panics after [`DEADLINE`].
    pub(crate) fn drive_until(&mut self, what: &str, mut done: impl FnMut(&Star) -> bool) {
        let start = Instant::now();
        while !done(self) {
            if self.progress() == 0 {
                std::thread::sleep(Duration::from_micros(50));
            }
            assert!(start.elapsed() < DEADLINE, "timed out: {what}");
        }
    }

    /// An endpoint from peer `i` to the hub.
    pub(crate) fn peer_ep(&mut self, i: usize) -> uct::Result<EpId> {
        let (dev, iface) = (
            self.hub.device_addr().to_vec(),
            self.hub.iface_addr().to_vec(),
        );
        self.peers[i].ep_create(&dev, &iface)
    }

    /// An endpoint from the hub to peer `i`.
    pub(crate) fn hub_ep(&mut self, i: usize) -> uct::Result<EpId> {
        let p = &self.peers[i];
        let (dev, iface) = (p.device_addr().to_vec(), p.iface_addr().to_vec());
        self.hub.ep_create(&dev, &iface)
    }

    /// `am_short` from peer `i` (or the hub, with `None`) on `ep`,
    /// progressing everything while it finds no resources.
    pub(crate) fn short(&mut self, from: Option<usize>, ep: EpId, id: u8, header: u64) {
        let start = Instant::now();
        loop {
            let iface = match from {
                Some(i) => &mut self.peers[i],
                None => &mut self.hub,
            };
            let r = iface.am().expect("am").am_short(ep, id, header, b"x");
            match r {
                Ok(Posted::NoResource) => {
                    self.progress();
                }
                Ok(_) => return,
                Err(e) => panic!("am_short from {from:?}: {e}"),
            }
            assert!(start.elapsed() < DEADLINE, "timed out sending");
        }
    }

    /// Endpoint failures reported by peer `i` (or the hub).
    pub(crate) fn failures(&self, at: Option<usize>) -> usize {
        let sink = match at {
            Some(i) => &self.sinks[i],
            None => &self.hub_sink,
        };
        sink.events
            .iter()
            .filter(|e| matches!(e, Event::EpFailed { .. } | Event::SrcFailed { .. }))
            .count()
    }

    /// Every peer sends `k` messages to the hub without waiting (headers
    /// `i << 32 | j`), and the hub answers each peer once; returns the
    /// peers' endpoints.
    pub(crate) fn exchange(&mut self, k: usize) -> Vec<EpId> {
        let n = self.peers.len();
        let eps: Vec<EpId> = (0..n)
            .map(|i| self.peer_ep(i).expect("peer ep_create"))
            .collect();
        for j in 0..k {
            for (i, &ep) in eps.iter().enumerate() {
                self.short(Some(i), ep, 1, ((i as u64) << 32) | j as u64);
            }
        }
        let want = n * k;
        self.drive_until("messages at the hub", |s| s.hub_sink.ams.len() >= want);
        let back: Vec<EpId> = (0..n)
            .map(|i| self.hub_ep(i).expect("hub ep_create"))
            .collect();
        for (i, &ep) in back.iter().enumerate() {
            self.short(None, ep, 2, i as u64);
        }
        self.drive_until("answers at the peers", |s| {
            s.sinks.iter().all(|k| k.ams.iter().any(|a| a.id == 2))
        });
        eps
    }
}

/// This process's resident memory in KiB (`VmRSS`).
pub(crate) fn rss_kib() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").expect("/proc/self/status");
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .expect("VmRSS")
}
