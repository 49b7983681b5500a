//! Credits of the RC transport, without I/O: what a connection may send,
//! what it owes its peer, and the shared receive pool's commitments.
//!
//! iWARP has no receiver-not-ready retry: a SEND that finds no receive
//! ends the connection. So every receive a peer may consume is committed
//! in the iface's [`RxPool`] before the peer learns of it:
//!
//! * each connection's *window* — the credits its peer holds, has in
//!   flight or has spent on messages not returned yet — plus one receive
//!   for a credit grant ([`GRANT_SLOT`]) is committed;
//! * the pool's commitments never exceed the receives it gave the shared
//!   receive queue (posted, or filled and not reposted yet).
//!
//! A connection starts with a small window. A sender marks the message
//! that spends its last credit ([`LAST`]); the receiver then doubles the
//! window (up to the limit it announced) if the pool has room or can
//! grow, and returns the credits at once. Credits go back in the header
//! of every message, or in a grant message once more than half of the
//! window waits to be returned (or the sender ran dry). A grant consumes
//! a receive the sender holds no credit for: at most one is unacknowledged
//! per direction, and the next message the other way acknowledges it
//! ([`ACK`]).

/// Header bit: the message acknowledges the peer's last grant.
pub(crate) const ACK: u16 = 1 << 15;
/// Header bit: the message spent the sender's last credit.
pub(crate) const LAST: u16 = 1 << 14;
/// Header bits holding the credits returned.
pub(crate) const COUNT: u16 = LAST - 1;
/// Receives committed per connection for grants.
pub(crate) const GRANT_SLOT: u32 = 1;

/// How a peer broke the credit protocol.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Violation {
    /// It returned more credits than it can have been given.
    TooManyCredits { have: u32, max: u32 },
    /// It sent more messages than its window.
    OverWindow { unreturned: u32, window: u32 },
    /// A second grant before we acknowledged the first.
    GrantUnacknowledged,
    /// An acknowledgement with no grant of ours outstanding.
    StrayAck,
}

impl std::fmt::Display for Violation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Violation::TooManyCredits { have, max } => {
                write!(f, "{have} credits, at most {max}")
            }
            Violation::OverWindow { unreturned, window } => {
                write!(f, "{unreturned} messages sent on a window of {window}")
            }
            Violation::GrantUnacknowledged => write!(f, "a grant before the last was acknowledged"),
            Violation::StrayAck => write!(f, "an acknowledgement of no grant"),
        }
    }
}

/// What an arriving message said about credits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Arrival {
    /// We had no credits before it.
    pub(crate) was_starved: bool,
    /// Its sender spent its last credit on it.
    pub(crate) last: bool,
}

/// Both directions of one connection's credits.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Credits {
    /// Sends the peer can take now.
    pub(crate) credits: u32,
    /// Most credits the peer may give (the window limit it announced).
    pub(crate) max_credits: u32,
    /// We may send a grant (the peer acknowledged our last one).
    pub(crate) grant_slot: bool,
    /// Credits the peer may use: receives committed to it.
    pub(crate) window: u32,
    /// Received (and reposted) but not returned yet, plus credits added
    /// to the window and not sent yet.
    pub(crate) to_return: u32,
    /// Arrived and not reposted yet (the data is being delivered).
    pub(crate) held: u32,
    /// A grant of the peer's waits for our acknowledgement.
    pub(crate) owe_ack: bool,
    /// The peer spent its last credit and no credits went back since.
    pub(crate) peer_dry: bool,
}

impl Credits {
    /// A connection whose peer gave us `credits` (and may give up to
    /// `max_credits`) and to which we committed `window`.
    pub(crate) fn new(credits: u32, max_credits: u32, window: u32) -> Credits {
        Credits {
            credits,
            max_credits: max_credits.max(credits),
            grant_slot: true,
            window,
            to_return: 0,
            held: 0,
            owe_ack: false,
            peer_dry: false,
        }
    }

    /// Receives committed for this connection.
    pub(crate) fn committed(&self) -> u32 {
        self.window + GRANT_SLOT
    }

    /// The credit field of a message we send now: the credits piled up,
    /// an acknowledgement owed, and for an active message (which spends a
    /// credit) whether it is our last.
    pub(crate) fn outgoing(&mut self, am: bool) -> u16 {
        let n = self.to_return.min(u32::from(COUNT));
        self.to_return -= n;
        if n > 0 {
            self.peer_dry = false;
        }
        let mut field = n as u16;
        if std::mem::take(&mut self.owe_ack) {
            field |= ACK;
        }
        if am && self.credits == 1 {
            field |= LAST;
        }
        field
    }

    /// Takes back the field of a message that was not sent.
    pub(crate) fn unsent(&mut self, field: u16) {
        if field & COUNT > 0 && self.to_return == 0 {
            // Conservatively: the peer may be waiting for these.
            self.peer_dry = true;
        }
        self.to_return += u32::from(field & COUNT);
        if field & ACK != 0 {
            self.owe_ack = true;
        }
    }

    /// The credit field of a grant we send now (`None` if we may not).
    pub(crate) fn grant(&mut self) -> Option<u16> {
        if !self.grant_slot || self.to_return == 0 {
            return None;
        }
        self.grant_slot = false;
        Some(self.outgoing(false))
    }

    /// Takes back a grant that was not sent.
    pub(crate) fn grant_unsent(&mut self, field: u16) {
        self.grant_slot = true;
        self.unsent(field);
    }

    /// Accounts for a message that arrived (`grant`: a grant message,
    /// else an active message, held until [`Credits::reposted`]: its
    /// credit cannot go back before its receive is posted again).
    pub(crate) fn arrived(&mut self, grant: bool, field: u16) -> Result<Arrival, Violation> {
        let was_starved = self.credits == 0;
        self.credits += u32::from(field & COUNT);
        if self.credits > self.max_credits {
            return Err(Violation::TooManyCredits {
                have: self.credits,
                max: self.max_credits,
            });
        }
        if field & ACK != 0 {
            if self.grant_slot {
                return Err(Violation::StrayAck);
            }
            self.grant_slot = true;
        }
        if grant {
            if self.owe_ack {
                return Err(Violation::GrantUnacknowledged);
            }
            self.owe_ack = true;
        } else {
            self.held += 1;
            if self.to_return + self.held > self.window {
                return Err(Violation::OverWindow {
                    unreturned: self.to_return + self.held,
                    window: self.window,
                });
            }
        }
        let last = !grant && field & LAST != 0;
        self.peer_dry |= last;
        Ok(Arrival { was_starved, last })
    }

    /// The receive of an active message that arrived is posted again:
    /// its credit can go back.
    pub(crate) fn reposted(&mut self) {
        if self.held > 0 {
            self.held -= 1;
            self.to_return += 1;
        }
    }

    /// How much the window should grow after its sender ran dry: it
    /// doubles, up to `limit`.
    pub(crate) fn growth(&self, limit: u32) -> u32 {
        self.window.min(limit.saturating_sub(self.window))
    }

    /// Grows the window by `n` committed receives, returned with the
    /// next credits.
    pub(crate) fn grow(&mut self, n: u32) {
        self.window += n;
        self.to_return += n;
    }

    /// Whether to send a grant now: more than half of the window waits to
    /// be returned, or the peer has nothing left.
    pub(crate) fn wants_grant(&self) -> bool {
        self.grant_slot && self.to_return > 0 && (self.peer_dry || 2 * self.to_return > self.window)
    }
}

/// The commitments of an iface's shared receive pool.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct RxPool {
    /// Receives given to the shared receive queue: posted, or filled and
    /// not reposted yet.
    pub(crate) in_srq: u32,
    /// Receives committed to connections.
    pub(crate) committed: u32,
}

impl RxPool {
    /// Receives not committed.
    pub(crate) fn room(&self) -> u32 {
        self.in_srq.saturating_sub(self.committed)
    }

    /// Commits `n` receives if there is room.
    pub(crate) fn commit(&mut self, n: u32) -> bool {
        if self.room() < n {
            return false;
        }
        self.committed += n;
        true
    }

    /// Ends a commitment of `n` receives.
    pub(crate) fn release(&mut self, n: u32) {
        self.committed = self.committed.saturating_sub(n);
    }
}

#[cfg(test)]
mod tests;
