//! Keepalive of endpoints in peer error mode, as UCX's
//! (`UCX_KEEPALIVE_INTERVAL`, `UCX_KEEPALIVE_NUM_EPS`): the worker runs a
//! round every interval (it holds the clock; this module counts rounds).
//!
//! A round sends `KEEPALIVE` pings to up to `max` endpoints in peer mode,
//! taking turns when there are more. A peer answers a ping with a pong as
//! soon as it progresses. Anything of the keepalive heard from the peer
//! (ping or pong) clears the endpoint's count of unanswered rounds; an
//! endpoint whose count reaches `misses` fails with a timeout, as does one
//! whose ping cannot be sent (its transport reports the failure). So a
//! peer that died, whose link went down, or that stopped progressing is
//! noticed within about `misses + 1` intervals, even when no traffic
//! flows. Endpoints in error mode none have no keepalive, as in UCX.

use super::command::Command;
use super::core::Core;
use super::lanes::Lanes;
use crate::ucs::slab::SlabId;
use crate::ucs::{self, PeerMisbehaved};
use crate::uct::{AmId, SrcId};
use crate::Error;

/// Active message id of keepalive messages: one byte, [`PING`] or
/// [`PONG`].
pub(crate) const AM_KEEPALIVE: AmId = 24;
const PING: u8 = 0;
const PONG: u8 = 1;

impl Core {
    /// One keepalive round over up to `max` endpoints in peer mode;
    /// `misses` unanswered rounds fail one. Returns how many it pinged.
    pub(crate) fn keepalive_round(&mut self, tx: &mut dyn Lanes, max: usize, misses: u32) -> usize {
        let mut watched = Vec::new();
        let take = max.max(1);
        // Up to `take` live entries from the cursor on, dropping the
        // stale ones met on the way: a round's work does not grow with
        // the number of endpoints that are not watched.
        let mut i = self.ka_cursor;
        while watched.len() < take && !self.ka_watched.is_empty() {
            if i >= self.ka_watched.len() {
                i = 0;
            }
            let id = self.ka_watched[i];
            let live = self
                .eps
                .get(id)
                .is_some_and(|s| s.report_failure && s.failed.is_none());
            if !live {
                self.ka_watched.swap_remove(i);
                continue;
            }
            if watched.contains(&id) {
                break;
            }
            watched.push(id);
            i += 1;
        }
        self.ka_cursor = i;
        let mut pinged = 0;
        for ep in watched {
            let Some(st) = self.eps.get_mut(ep) else {
                continue;
            };
            if st.ka_missed >= misses {
                let why = format!("keepalive: no answer from the peer in {misses} rounds");
                self.fail_ep(ep, Error::endpoint(ucs::Error::TimedOut(why)));
                continue;
            }
            st.ka_missed += 1;
            self.send_ctrl(tx, ep, AM_KEEPALIVE, vec![PING]);
            pinged += 1;
        }
        pinged
    }

    /// Puts endpoint `ep` in peer error mode (`on`) or back in mode none.
    pub(crate) fn set_report_failure(&mut self, ep: SlabId, on: bool) {
        let Some(st) = self.eps.get_mut(ep) else {
            return;
        };
        if on && !st.report_failure {
            self.ka_watched.push(ep);
        }
        st.report_failure = on;
    }

    /// A `KEEPALIVE` message arrived from `src`.
    pub(crate) fn rx_keepalive(&mut self, src: SrcId, data: &[u8]) -> Result<(), PeerMisbehaved> {
        let kind = match data {
            [k @ (PING | PONG)] => *k,
            _ => {
                return Err(PeerMisbehaved::Invalid {
                    what: "keepalive message",
                    detail: format!("{} bytes", data.len()),
                })
            }
        };
        let iface = self.cur_iface;
        let Some(&ep) = self.src_eps.get(&(iface, src)) else {
            // Not wired up yet: its wireup will make the endpoint.
            return Ok(());
        };
        if let Some(st) = self.eps.get_mut(ep) {
            st.ka_missed = 0;
        }
        if kind == PING {
            self.commands.push_back(Command::KeepaliveAnswer { ep });
        }
        Ok(())
    }

    /// Answers a ping on endpoint `ep`.
    pub(crate) fn keepalive_answer(&mut self, tx: &mut dyn Lanes, ep: SlabId) {
        self.send_ctrl(tx, ep, AM_KEEPALIVE, vec![PONG]);
    }
}
