//! Two ifaces, their sinks, and loops that drive them with a deadline.

use super::{Fixture, TestSink};
use crate::{AmId, EpId, Iface, Iov, Posted, Result, Token};
use std::time::{Duration, Instant};

/// How long a drive loop waits before failing the check. A guard against
/// hangs, not a timing assertion.
pub const TIMEOUT: Duration = Duration::from_secs(30);

/// Two ifaces `a` and `b` that reach each other, each with a [`TestSink`].
///
/// Buffers of zero-copy sends are kept alive until the pair is dropped,
/// after both ifaces.
#[derive(Debug)]
pub struct Pair {
    a: Option<Box<dyn Iface>>,
    b: Option<Box<dyn Iface>>,
    /// What `a` reported.
    pub sink_a: TestSink,
    /// What `b` reported.
    pub sink_b: TestSink,
    name: String,
    keep: Vec<Vec<u8>>,
}

impl Drop for Pair {
    fn drop(&mut self) {
        // The ifaces go first: they may still hold zero-copy buffers.
        self.a.take();
        self.b.take();
    }
}

impl Pair {
    /// Opens a pair from a fixture.
    pub fn open(f: &dyn Fixture) -> Pair {
        let (a, b) = f.open_pair();
        Pair {
            a: Some(a),
            b: Some(b),
            sink_a: TestSink::new(),
            sink_b: TestSink::new(),
            name: f.name().to_owned(),
            keep: Vec::new(),
        }
    }

    /// The fixture's name, for messages.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Iface `a`.
    pub fn a(&mut self) -> &mut dyn Iface {
        self.a.as_deref_mut().expect("iface a is open")
    }

    /// Iface `b`; panics after [`Pair::drop_b`].
    pub fn b(&mut self) -> &mut dyn Iface {
        self.b.as_deref_mut().expect("iface b was dropped")
    }

    /// Drops iface `b`, as a peer that dies.
    pub fn drop_b(&mut self) {
        self.b.take();
    }

    /// Creates an endpoint from `a` to `b`; panics on failure.
    pub fn ep_ab(&mut self) -> EpId {
        let b = self.b.as_deref().expect("iface b was dropped");
        let (dev, iface) = (b.device_addr().to_vec(), b.iface_addr().to_vec());
        let name = self.name.clone();
        self.a()
            .ep_create(&dev, &iface)
            .unwrap_or_else(|e| panic!("{name}: ep_create a->b failed: {e}"))
    }

    /// Progresses `a` once.
    pub fn progress_a(&mut self) -> usize {
        match self.a.as_deref_mut() {
            Some(a) => a.progress(&mut self.sink_a),
            None => 0,
        }
    }

    /// Progresses `b` once (if it is open).
    pub fn progress_b(&mut self) -> usize {
        match self.b.as_deref_mut() {
            Some(b) => b.progress(&mut self.sink_b),
            None => 0,
        }
    }

    /// Progresses both once.
    pub fn progress(&mut self) -> usize {
        self.progress_a() + self.progress_b()
    }

    /// Progresses both until `done` holds; fails the check after
    /// [`TIMEOUT`].
    pub fn drive_until(&mut self, what: &str, mut done: impl FnMut(&mut Pair) -> bool) {
        let start = Instant::now();
        let mut idle = 0u32;
        loop {
            if done(self) {
                return;
            }
            if self.progress() == 0 {
                idle = idle.saturating_add(1);
            } else {
                idle = 0;
            }
            check_deadline(&self.name, start, what);
            backoff(idle);
        }
    }

    /// Runs `op` until it gives something other than `NoResource`
    /// (`no_resource` tells which), progressing both in between.
    pub fn retry<T>(
        &mut self,
        what: &str,
        mut op: impl FnMut(&mut dyn Iface) -> Result<T>,
        no_resource: impl Fn(&T) -> bool,
    ) -> Result<T> {
        let start = Instant::now();
        let mut idle = 0u32;
        loop {
            let r = op(self.a())?;
            if !no_resource(&r) {
                return Ok(r);
            }
            if self.progress() == 0 {
                idle = idle.saturating_add(1);
            } else {
                idle = 0;
            }
            check_deadline(&self.name, start, what);
            backoff(idle);
        }
    }

    /// `am_short` on `a`, retried past `NoResource`; panics on error.
    pub fn short(&mut self, ep: EpId, id: AmId, header: u64, payload: &[u8]) -> Posted {
        let name = self.name.clone();
        self.retry(
            "am_short",
            |a| a.am().unwrap().am_short(ep, id, header, payload),
            |p| *p == Posted::NoResource,
        )
        .unwrap_or_else(|e| panic!("{name}: am_short of {} bytes failed: {e}", payload.len()))
    }

    /// `am_bcopy` on `a`, retried past `NoResource`; panics on error.
    pub fn bcopy(&mut self, ep: EpId, id: AmId, parts: &[&[u8]]) -> (Posted, usize) {
        let name = self.name.clone();
        self.retry(
            "am_bcopy",
            |a| a.am().unwrap().am_bcopy(ep, id, parts),
            |p| p.0 == Posted::NoResource,
        )
        .unwrap_or_else(|e| panic!("{name}: am_bcopy failed: {e}"))
    }

    /// `am_zcopy` of `header` and `parts` on `a`, retried past
    /// `NoResource`. The parts are kept alive until the pair is dropped.
    pub fn zcopy(
        &mut self,
        ep: EpId,
        id: AmId,
        header: &[u8],
        parts: Vec<Vec<u8>>,
        token: Token,
    ) -> Result<Posted> {
        let iov: Vec<Iov> = parts.iter().map(|p| Iov::from_slice(p)).collect();
        self.keep.extend(parts);
        self.retry(
            "am_zcopy",
            // SAFETY: the ranges point into vectors now owned by
            // `self.keep`, whose heap buffers neither move nor change until
            // the pair drops, and the pair drops its ifaces first.
            |a| unsafe { a.zcopy().unwrap().am_zcopy(ep, id, header, &iov, token) },
            |p| *p == Posted::NoResource,
        )
    }

    /// One `am_zcopy` attempt on `a` (no retry), buffers kept as in
    /// [`Pair::zcopy`].
    pub fn zcopy_once(
        &mut self,
        ep: EpId,
        id: AmId,
        header: &[u8],
        parts: Vec<Vec<u8>>,
        token: Token,
    ) -> Result<Posted> {
        let iov: Vec<Iov> = parts.iter().map(|p| Iov::from_slice(p)).collect();
        self.keep.extend(parts);
        // SAFETY: as in `zcopy`: the buffers live in `self.keep` until the
        // ifaces are gone.
        unsafe {
            self.a()
                .zcopy()
                .unwrap()
                .am_zcopy(ep, id, header, &iov, token)
        }
    }
}

fn check_deadline(name: &str, start: Instant, what: &str) {
    if start.elapsed() > TIMEOUT {
        panic!("{name}: timed out after {TIMEOUT:?} waiting for {what}");
    }
}

/// Yields while idle, sleeping briefly once idle for long, so that a busy
/// loop does not starve the peer's threads on a small machine.
fn backoff(idle: u32) {
    if idle > 1000 {
        std::thread::sleep(Duration::from_micros(100));
    } else if idle > 10 {
        std::thread::yield_now();
    }
}
