//! The iface's shared receive pool: buffers posted on its one shared
//! receive queue, committed to connections as credit windows, grown in
//! registered chunks while connections need more.
//!
//! Invariant: `pool.committed <= pool.in_srq`, and `pool.in_srq` counts
//! every receive buffer the provider holds or that was filled and is
//! being reposted, so the receives a peer may consume are always posted
//! (see `credits`). The window of a connection that fails stays
//! committed until the receives it filled were polled: they are in the
//! completion queue when it fails (its queue pair, in error, takes no
//! more), so the window is released after the next progress has drained
//! that queue. Chunks are not given back while the iface lives: a
//! receive posted on a shared queue cannot be taken back without
//! destroying the queue. Pages of buffers never filled cost no memory
//! (see `bufs`), and the provider takes the receive posted last first.

use uct::ucs::{Error, Result};

use crate::verbs::{QpId, RecvWr};

use super::bufs::Owner;
use super::iface::RcIface;
use super::ops::RECV_BIT;

impl RcIface {
    /// Commits `n` receives of the pool, growing it by chunks if it must;
    /// an error when it is at its maximum (`RUCX_RC_RX_POOL_MAX`).
    pub(crate) fn commit_rx(&mut self, n: u32) -> Result<()> {
        while !self.pool.commit(n) {
            if !self.grow_rx() {
                return Err(Error::NoMemory(format!(
                    "{}: receive pool full: {} of {} receives committed \
                     (RUCX_RC_RX_POOL_MAX allows {})",
                    self.info.tl_name,
                    self.pool.committed,
                    self.pool.in_srq,
                    self.limits.rx_pool_bufs
                )));
            }
        }
        Ok(())
    }

    /// Commits up to `n` more receives to a connection's window without
    /// failing: what fits, growing the pool if it can. Returns how many.
    pub(crate) fn commit_rx_upto(&mut self, n: u32) -> u32 {
        if self.pool.room() < n {
            self.grow_rx();
        }
        let n = n.min(self.pool.room());
        if n > 0 && !self.pool.commit(n) {
            return 0;
        }
        n
    }

    /// Adds a registered chunk of buffers to the pool and posts them all
    /// on the shared receive queue. `false` when the pool is at its
    /// maximum, or memory or the provider refused.
    fn grow_rx(&mut self) -> bool {
        if !self.rx.can_grow() {
            return false;
        }
        if let Err(e) = self.rx.grow() {
            tracing::warn!(error = %e, "rc: receive pool not grown");
            return false;
        }
        // Every free buffer goes to the shared queue: the new chunk's, and
        // any an earlier refusal left free.
        let mut posted = false;
        while let Some(buf) = self.rx.take_free(Owner::Srq) {
            match self.post_srq_buf(buf) {
                Ok(()) => posted = true,
                Err(e) => {
                    self.rx.give(buf);
                    tracing::warn!(error = %e, "rc: receive not posted");
                    break;
                }
            }
        }
        posted
    }

    /// Posts receive buffer `buf` (owned for the shared queue), counted
    /// in `pool.in_srq` from now on.
    fn post_srq_buf(&mut self, buf: u32) -> Result<()> {
        let sge = [self.rx.sge(buf, self.rx.seg())];
        let wr = RecvWr {
            wr_id: RECV_BIT | u64::from(buf),
            sges: &sge,
        };
        // SAFETY: the buffer is the pool's; it stays posted (owned for the
        // shared queue) until its completion, or until the shared queue is
        // destroyed with the iface's context, before the pool's memory.
        unsafe { self.verbs.post_srq_recv(self.srq, &wr) }?;
        self.pool.in_srq += 1;
        Ok(())
    }

    /// Posts again a receive buffer whose completion was polled (it was
    /// counted in `pool.in_srq` all along). The shared queue is sized for
    /// the whole pool, so the provider has no reason to refuse; if it
    /// does, the buffer is freed and logged.
    pub(crate) fn repost(&mut self, buf: u32) {
        self.pool.in_srq = self.pool.in_srq.saturating_sub(1);
        if let Err(e) = self.post_srq_buf(buf) {
            tracing::warn!(error = %e, "rc: receive not reposted");
            self.rx.give(buf);
        }
    }

    /// Ends the commitment of failed connection `qp`'s window (once) at
    /// the next progress, after its completions.
    pub(crate) fn defer_release(&mut self, qp: QpId) {
        if let Some(c) = self.conn_mut(qp) {
            if std::mem::take(&mut c.in_pool) {
                let n = c.cr.committed();
                self.releasing += n;
            }
        }
    }

    /// Ends the commitment of connection `qp`'s window (once), at once:
    /// for a connection that never received.
    pub(crate) fn release_window(&mut self, qp: QpId) {
        if let Some(c) = self.conn_mut(qp) {
            if std::mem::take(&mut c.in_pool) {
                let n = c.cr.committed();
                self.pool.release(n);
            }
        }
    }
}
