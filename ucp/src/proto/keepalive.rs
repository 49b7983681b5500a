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
        let watched: Vec<SlabId> = self
            .eps
            .iter()
            .filter(|(_, s)| s.report_failure && s.failed.is_none())
            .map(|(id, _)| id)
            .collect();
        if watched.is_empty() {
            return 0;
        }
        let n = watched.len();
        let start = self.ka_cursor % n;
        let take = max.clamp(1, n);
        self.ka_cursor = (start + take) % n;
        let mut pinged = 0;
        for &ep in watched.iter().cycle().skip(start).take(take) {
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
