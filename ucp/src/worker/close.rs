//! Closing endpoints in UCX's two modes (`ucp_ep_close_nbx`): force
//! ([`Worker::ep_close`]: local resources go at once) and flush (what was
//! posted leaves first, then the peer is told and its endpoint fails with
//! a reset), as a request to poll or a blocking call.

use super::Worker;
use crate::{Ep, Error, ReqId, Result};
use std::time::Duration;

/// How an endpoint is closed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CloseMode {
    /// Release everything at once; queued sends fail with
    /// [`Error::Canceled`] and the peer learns of it from its transport or
    /// keepalive (`UCP_EP_CLOSE_FLAG_FORCE`).
    Force,
    /// Let every send and one-sided operation posted so far leave, tell
    /// the peer, then release (the default of `ucp_ep_close_nbx`).
    Flush,
}

/// A flush-mode close in progress ([`Worker::ep_close_start`]).
#[derive(Debug)]
#[must_use = "a close in progress must be polled to its end"]
pub struct Closing {
    ep: Ep,
    phase: Phase,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    /// Sends posted before the close are leaving.
    Drain,
    /// The announcement is queued behind them.
    Announced,
    /// The transport flushes what it holds.
    Flushing(ReqId),
    /// Closed by force at the start: the first poll reports `Ok`.
    Forced,
    Done,
}

impl Worker {
    /// Starts closing `ep` in `mode`. A force close is over when this
    /// returns; poll a flush close with [`Worker::ep_close_poll`] while
    /// progressing.
    pub fn ep_close_start(&mut self, ep: Ep, mode: CloseMode) -> Result<Closing> {
        if self.core.eps.get(ep.0).is_none() {
            return Err(Error::InvalidHandle);
        }
        let phase = match mode {
            CloseMode::Force => {
                self.ep_close(ep)?;
                Phase::Forced
            }
            CloseMode::Flush => Phase::Drain,
        };
        Ok(Closing { ep, phase })
    }

    /// Moves close `c` on (it does not progress the worker); `Some` once
    /// it is over: the endpoint is gone either way, with the error that
    /// ended the flush if one did (its operations then failed with it).
    pub fn ep_close_poll(&mut self, c: &mut Closing) -> Option<Result<()>> {
        if matches!(c.phase, Phase::Forced) {
            c.phase = Phase::Done;
            return Some(Ok(()));
        }
        loop {
            let st = match (c.phase, self.core.eps.get(c.ep.0)) {
                (Phase::Done, _) | (_, None) => return Some(Err(Error::InvalidHandle)),
                (_, Some(st)) => st,
            };
            if let Some(e) = st.failed.clone() {
                return Some(self.finish_close(c, Err(*e)));
            }
            match c.phase {
                Phase::Drain if self.core.ep_busy(c.ep.0) => return None,
                Phase::Drain => {
                    self.core.announce_close(&mut self.ifaces, c.ep.0);
                    c.phase = Phase::Announced;
                }
                Phase::Announced if self.core.ep_busy(c.ep.0) => return None,
                Phase::Announced => {
                    let lane = (st.iface, st.uct_ep);
                    match self.flush_lane(lane) {
                        Ok(Some(id)) => c.phase = Phase::Flushing(id),
                        Ok(None) => return Some(self.finish_close(c, Ok(()))),
                        Err(None) => return None,
                        Err(Some(e)) => return Some(self.finish_close(c, Err(e))),
                    }
                }
                Phase::Flushing(id) => {
                    let r = self.request_test(id)?;
                    return Some(self.finish_close(c, r.map(|_| ())));
                }
                Phase::Done | Phase::Forced => return Some(Err(Error::InvalidHandle)),
            }
        }
    }

    /// Closes `ep` in `mode` and waits for the end of a flush close (at
    /// most `timeout`, then it is forced and fails with
    /// [`Error::TimedOut`]).
    pub fn ep_close_with(&mut self, ep: Ep, mode: CloseMode, timeout: Duration) -> Result<()> {
        let mut c = self.ep_close_start(ep, mode)?;
        if c.phase == Phase::Done {
            return Ok(());
        }
        let deadline = std::time::Instant::now() + timeout;
        loop {
            if let Some(r) = self.ep_close_poll(&mut c) {
                return r;
            }
            if std::time::Instant::now() >= deadline {
                if let Phase::Flushing(id) = c.phase {
                    self.request_release(id);
                }
                let _ = self.ep_close(c.ep);
                return Err(Error::TimedOut);
            }
            self.progress();
        }
    }

    fn finish_close(&mut self, c: &mut Closing, r: Result<()>) -> Result<()> {
        c.phase = Phase::Done;
        self.ep_close(c.ep)?;
        r
    }
}
