//! Giving connection buffers back when connections are quiet.
//!
//! A connection allocates its receive buffer and backlog only when data
//! needs them (`rx.rs`, `tx.rs`). The connections that hold any are listed
//! in [`TcpIface::holders`]; about every [`SWEEP_PERIOD`], `progress` sweeps
//! that list (and only it): a connection that neither received nor sent
//! since the previous sweep and has nothing buffered gives its buffers
//! back and leaves the list; a busy one keeps them, except a receive
//! buffer grown past its segment for a large frame, which goes once it is
//! empty. So a busy connection reuses its buffers from message to message,
//! a quiet one costs no buffer after one to two periods, and `progress`
//! with many quiet connections does no work per connection. A young
//! connection does not wait for the sweep: the first [`YOUNG_DRAINS`]
//! times a buffer of it empties, it goes back at once, so the handshake and
//! a few round trips leave no buffer behind.

use std::time::{Duration, Instant};

use crate::iface::TcpIface;

/// A connection gives its receive buffer and backlog back as soon as they
/// drain the first this many times: the frames of its handshake and first
/// messages cost no buffer after them, while a busy connection, past them,
/// keeps its buffers from message to message (until a quiet sweep).
pub(crate) const YOUNG_DRAINS: u8 = 16;
/// How often the connections holding buffers are swept.
pub(crate) const SWEEP_PERIOD: Duration = Duration::from_millis(100);
/// `progress` calls between two looks at the clock for a sweep.
const SWEEP_EVERY: u32 = 64;

/// The generation in a connection's epoll data (see
/// [`crate::iface::conn_tag`]): with its slot, what tells it from the
/// connections that had the slot before.
pub(crate) fn gen_of(tag: u64) -> u32 {
    (tag >> 32) as u32
}

impl TcpIface {
    /// Connection `ci` was used: marks it active and lists it if it now
    /// holds buffers.
    pub(crate) fn touch(&mut self, ci: u32) {
        if let Some(c) = self.conns.get_mut(ci) {
            c.active = true;
            if !c.listed && c.held() > 0 {
                c.listed = true;
                self.holders.push((ci, gen_of(c.tag)));
            }
        }
    }

    /// Counts a `progress` call and sweeps when the period has passed.
    pub(crate) fn tick_sweep(&mut self) {
        self.sweep_tick += 1;
        if self.sweep_tick < SWEEP_EVERY {
            return;
        }
        self.sweep_tick = 0;
        let now = Instant::now();
        if now >= self.next_sweep {
            self.next_sweep = now + SWEEP_PERIOD;
            self.sweep();
        }
    }

    /// Frees the buffers of the listed connections that were quiet since
    /// the last sweep, and the grown receive buffers of the others.
    pub(crate) fn sweep(&mut self) {
        let conns = &mut self.conns;
        let visits = &mut self.visits;
        self.holders.retain(|&(ci, gen)| {
            *visits += 1;
            let Some(c) = conns.get_mut(ci).filter(|c| gen_of(c.tag) == gen) else {
                return false;
            };
            if std::mem::replace(&mut c.active, false) {
                if c.rx.grown() {
                    c.rx.release();
                }
                return true;
            }
            let keep = !c.release();
            c.listed = keep;
            keep
        });
    }
}
