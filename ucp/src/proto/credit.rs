//! Eager credits: a hard bound on the memory unexpected tag messages take
//! on a worker (`RUCX_UNEXPECTED_MAX`).
//!
//! Every endpoint may send eagerly only as many bytes as its receiver
//! allowed: each eager message is charged its length plus
//! [`UNEXP_ENTRY`] (what it costs the receiver if no receive waits for
//! it), and a message that does not fit what is left goes by rendezvous,
//! so only its small announcement can wait at the receiver while the data
//! stays with the sender until a receive matches it. An endpoint starts
//! with [`CREDIT_INITIAL`] bytes; once half of what it was granted is
//! used it asks for more (`CREDIT` request, carrying the total it
//! charged so far), behind its eager messages on the same lane, so when
//! the request arrives every byte it counts has arrived too. It asks
//! again when a message does not fit, if it sent eagerly since it last
//! asked (the receiver then knows its earlier credit is used up).
//!
//! The receiver grants from one budget for the worker: the bytes its
//! unexpected messages hold plus every grant not yet used stay within the
//! limit. A grant is four times what the endpoint used since its last
//! request (enough for the message that did not fit, if one did not; and
//! at least a sixteenth of what the budget has left once the endpoint ran
//! out, so that a window of large messages stops falling back to
//! rendezvous after a request or two), at most [`CREDIT_GRANT_MAX`] and a
//! quarter of what the budget has left, so an endpoint that stops sending
//! holds little; when that leaves less than
//! [`CREDIT_GRANT_MIN`], the endpoint
//! waits (sending by rendezvous) until receives take the held bytes and
//! grants to half the limit. The bound is therefore the limit plus
//! `CREDIT_INITIAL` per endpoint that sends eagerly before its first
//! request, plus the announcements of rendezvous sends. Nothing is lost or
//! reordered: eager messages, announcements and requests share a lane and
//! keep their order. Empty messages hold no data: they are charged their
//! entry while credit lasts and never wait for it.
//! A receiver without a limit grants everything when it makes the
//! endpoint (behind its wireup).
//! UCX has no such bound.

use super::command::Command;
use super::core::{Core, Unexp};
use super::lanes::Lanes;
use crate::ucs::slab::SlabId;
use crate::ucs::PeerMisbehaved;
use crate::uct::{AmId, SrcId};

/// Active message id of `CREDIT`: a kind byte, then little-endian `u64`s.
/// A request (0) carries the bytes charged so far and the charge of the
/// message that did not fit (0 if none); a grant (1) the total the sender
/// may charge.
pub(crate) const AM_CREDIT: AmId = 27;

/// What an unexpected message costs beyond its data: its queue entry.
pub(crate) const UNEXP_ENTRY: usize = std::mem::size_of::<Unexp>() + 32;
/// Bytes an endpoint may charge before its receiver granted any.
pub(crate) const CREDIT_INITIAL: u64 = 128 * 1024;
/// Largest single grant.
pub(crate) const CREDIT_GRANT_MAX: u64 = 16 * 1024 * 1024;
/// Smallest grant worth sending; below it the endpoint waits.
pub(crate) const CREDIT_GRANT_MIN: u64 = 4 * 1024;

/// One endpoint's eager credit, as a sender and as a receiver.
#[derive(Debug, Clone)]
pub(crate) struct EagerCredit {
    /// Bytes charged by eager messages sent so far.
    pub(crate) sent: u64,
    /// What the peer allows `sent` to reach.
    pub(crate) limit: u64,
    /// At this `sent`, ask for more (`u64::MAX`: asked, or unlimited).
    pub(crate) ask_at: u64,
    /// The charge of the last message that did not fit, for the request.
    pub(crate) need: u64,
    /// `sent` when last asked.
    pub(crate) asked: u64,
    /// Receiving: the total granted to the peer.
    granted: u64,
    /// Receiving: the peer's charge at its last request.
    reported: u64,
    /// Receiving: `granted - reported` counts in the worker's budget.
    tracked: bool,
    /// Receiving: a request waits for the budget.
    starved: bool,
    /// Receiving: what the peer's next grant should be.
    want: u64,
}

impl Default for EagerCredit {
    fn default() -> Self {
        EagerCredit {
            sent: 0,
            limit: CREDIT_INITIAL,
            ask_at: CREDIT_INITIAL / 2,
            need: 0,
            asked: 0,
            granted: CREDIT_INITIAL,
            reported: 0,
            tracked: false,
            starved: false,
            want: 0,
        }
    }
}

impl EagerCredit {
    /// Whether an eager message charged `cost` fits what is left.
    #[inline]
    pub(crate) fn fits(&self, cost: u64) -> bool {
        self.limit - self.sent >= cost
    }

    /// Whether an eager message charged `cost` fits what is left and
    /// leaves the endpoint short of asking for more: the send fast path's
    /// test, which charges nothing else (a message at or past `ask_at`
    /// takes the way that asks).
    #[inline(always)]
    pub(crate) fn fits_quietly(&self, cost: u64) -> bool {
        self.sent + cost < self.limit.min(self.ask_at)
    }
}

/// What an eager message of `len` bytes is charged.
#[inline]
pub(crate) fn charge_of(len: usize) -> u64 {
    (len + UNEXP_ENTRY) as u64
}

/// What a worker's unexpected messages hold, against the limit.
#[derive(Debug)]
pub(crate) struct UnexpBudget {
    /// Bytes held now (in the units senders are charged).
    held: usize,
    /// The limit (`usize::MAX`: none).
    max: usize,
    /// Granted to peers and not yet known to be used.
    out: u64,
    /// Endpoints whose request waits for the budget.
    starved: Vec<SlabId>,
    /// Highest `held` seen.
    peak: usize,
}

impl UnexpBudget {
    pub(crate) fn new(max: usize) -> UnexpBudget {
        UnexpBudget {
            held: 0,
            max,
            out: 0,
            starved: Vec::new(),
            peak: 0,
        }
    }

    /// Bytes held now.
    pub(crate) fn held(&self) -> usize {
        self.held
    }

    /// Highest bytes held so far.
    pub(crate) fn peak(&self) -> usize {
        self.peak
    }

    /// Granted to peers and not yet known to be used.
    #[cfg(test)]
    pub(crate) fn out(&self) -> u64 {
        self.out
    }

    /// What the budget has left for grants.
    fn room(&self) -> u64 {
        (self.max as u64)
            .saturating_sub(self.held as u64)
            .saturating_sub(self.out)
    }
}

/// What unexpected message `u` counts for: an eager one its length and
/// entry, as its sender was charged; a rendezvous announcement its entry.
fn cost(u: &Unexp) -> usize {
    match u.rts {
        Some(_) => UNEXP_ENTRY,
        None => u.total.saturating_add(UNEXP_ENTRY),
    }
}

impl Core {
    /// Counts unexpected message `u`.
    pub(crate) fn unexp_added(&mut self, u: &Unexp) {
        let b = &mut self.unexp;
        b.held = b.held.saturating_add(cost(u));
        b.peak = b.peak.max(b.held);
    }

    /// Unexpected message `u` left the queue (matched, probed away or
    /// dropped); below half the limit, waiting requests are granted.
    pub(crate) fn unexp_taken(&mut self, u: &Unexp) {
        let b = &mut self.unexp;
        b.held = b.held.saturating_sub(cost(u));
        if b.starved.is_empty() || b.held as u64 + b.out > (b.max / 2) as u64 {
            return;
        }
        for ep in std::mem::take(&mut b.starved) {
            if let Some(st) = self.eps.get_mut(ep).filter(|s| s.credit.starved) {
                st.credit.starved = false;
                self.commands.push_back(Command::CreditGrant { ep });
            }
        }
    }

    /// Whether endpoint `ep` is due to ask for credit; asks if so.
    #[inline]
    pub(crate) fn credit_check(&mut self, tx: &mut dyn Lanes, ep: SlabId) {
        if self
            .eps
            .get(ep)
            .is_some_and(|s| s.credit.sent >= s.credit.ask_at)
        {
            self.credit_ask(tx, ep);
        }
    }

    /// Asks the peer of `ep` for more eager credit, behind what was sent.
    #[cold]
    pub(crate) fn credit_ask(&mut self, tx: &mut dyn Lanes, ep: SlabId) {
        let Some(st) = self.eps.get_mut(ep) else {
            return;
        };
        st.credit.ask_at = u64::MAX;
        st.credit.asked = st.credit.sent;
        let (sent, need) = (st.credit.sent, std::mem::take(&mut st.credit.need));
        let mut m = credit_msg(0, sent);
        m.extend_from_slice(&need.to_le_bytes());
        self.send_ctrl(tx, ep, AM_CREDIT, m);
    }

    /// A request of peer `(iface, src)`, which had charged `sent` and
    /// could not send a message charged `need`: after the wireup that came
    /// before it, as a command.
    pub(crate) fn credit_requested(
        &mut self,
        tx: &mut dyn Lanes,
        (iface, src): (usize, SrcId),
        (sent, need): (u64, u64),
    ) {
        let Some(&ep) = self.src_eps.get(&(iface, src)) else {
            tracing::debug!("a credit request from source {} without an endpoint", src.0);
            return;
        };
        let Some(st) = self.eps.get_mut(ep) else {
            return;
        };
        let c = &mut st.credit;
        // What the peer says is bounded by what it was allowed; a smaller
        // total than before changes nothing.
        let sent = sent.clamp(c.reported, c.granted);
        // The next grant: four times what was used since the last request
        // (a sender streaming faster gets more each time), enough for what
        // did not fit; and for a sender that ran out (it sent by
        // rendezvous), at least a sixteenth of what the budget has left, so
        // that a window of large messages is covered after one or two
        // requests rather than after many round trips.
        c.want = (sent - c.reported).saturating_mul(4).max(need);
        if need > 0 {
            c.want = c.want.max(self.unexp.room() / 16);
        }
        if c.tracked {
            self.unexp.out = self.unexp.out.saturating_sub(sent - c.reported);
        } else if c.granted != u64::MAX {
            c.tracked = true;
            self.unexp.out = self.unexp.out.saturating_add(c.granted - sent);
        }
        c.reported = sent;
        self.credit_grant(tx, ep);
    }

    /// Grants endpoint `ep`'s peer what the budget allows, or marks it
    /// waiting.
    pub(crate) fn credit_grant(&mut self, tx: &mut dyn Lanes, ep: SlabId) {
        let b = &mut self.unexp;
        let Some(st) = self.eps.get_mut(ep) else {
            return;
        };
        let c = &mut st.credit;
        if c.granted == u64::MAX {
            // Granted everything already; say it again (the peer asked
            // before that grant reached it).
        } else if b.max == usize::MAX {
            if c.tracked {
                b.out = b.out.saturating_sub(c.granted - c.reported);
                c.tracked = false;
            }
            c.granted = u64::MAX;
        } else {
            let g = c
                .want
                .clamp(CREDIT_GRANT_MIN, CREDIT_GRANT_MAX)
                .min(b.room() / 4);
            if g < CREDIT_GRANT_MIN {
                if !c.starved {
                    c.starved = true;
                    b.starved.push(ep);
                }
                return;
            }
            c.starved = false;
            c.granted += g;
            b.out += g;
        }
        let limit = c.granted;
        self.send_ctrl(tx, ep, AM_CREDIT, credit_msg(1, limit));
    }

    /// The budget's part in removing endpoint `ep`: what it was granted
    /// and did not use is no longer out.
    pub(crate) fn credit_forget(&mut self, c: &EagerCredit) {
        if c.tracked {
            self.unexp.out = self.unexp.out.saturating_sub(c.granted - c.reported);
        }
    }

    /// A `CREDIT` message arrived from `src`.
    pub(crate) fn rx_credit(&mut self, src: SrcId, data: &[u8]) -> Result<(), PeerMisbehaved> {
        let word = |b: &[u8]| {
            let mut w = [0u8; 8];
            w.copy_from_slice(b);
            u64::from_le_bytes(w)
        };
        let (kind, v, need) = match data {
            [0, rest @ ..] if rest.len() == 16 => (0, word(&rest[..8]), word(&rest[8..])),
            [1, rest @ ..] if rest.len() == 8 => (1, word(rest), 0),
            _ => {
                return Err(PeerMisbehaved::Invalid {
                    what: "credit message",
                    detail: format!("{} bytes", data.len()),
                })
            }
        };
        // Both wait for the wireup that came before them (which makes the
        // endpoint a grant is for).
        let iface = self.cur_iface;
        self.commands.push_back(match kind {
            0 => Command::CreditRequest {
                iface,
                src,
                sent: v,
                need,
            },
            _ => Command::CreditGranted {
                iface,
                src,
                limit: v,
            },
        });
        Ok(())
    }

    /// Peer `(iface, src)` allows charging up to `limit`.
    pub(crate) fn credit_granted(&mut self, (iface, src): (usize, SrcId), limit: u64) {
        let Some(&ep) = self.src_eps.get(&(iface, src)) else {
            return;
        };
        if let Some(st) = self.eps.get_mut(ep) {
            let c = &mut st.credit;
            c.limit = c.limit.max(limit);
            c.ask_at = match c.limit {
                u64::MAX => u64::MAX,
                l => c.sent + (l - c.sent) / 2,
            };
        }
    }

    /// A new endpoint `ep`: a worker without a limit grants its peer
    /// everything at once (told with the endpoint's wireup,
    /// [`Core::credit_announced`]).
    pub(crate) fn credit_new_ep(&mut self, ep: SlabId) {
        if self.unexp.max == usize::MAX {
            if let Some(st) = self.eps.get_mut(ep) {
                st.credit.granted = u64::MAX;
            }
        }
    }

    /// The grant that goes with endpoint `ep`'s wireup, if any: everything,
    /// from a worker without a limit.
    pub(crate) fn credit_announced(&self, ep: SlabId) -> Option<(AmId, Vec<u8>)> {
        let unlimited = self.unexp.max == usize::MAX;
        let granted = self
            .eps
            .get(ep)
            .is_some_and(|s| s.credit.granted == u64::MAX);
        (unlimited && granted).then(|| (AM_CREDIT, credit_msg(1, u64::MAX)))
    }
}

/// A `CREDIT` message: `kind` and `v`.
fn credit_msg(kind: u8, v: u64) -> Vec<u8> {
    let mut m = Vec::with_capacity(9);
    m.push(kind);
    m.extend_from_slice(&v.to_le_bytes());
    m
}
