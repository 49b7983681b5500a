//! A sink that records everything an iface reports.

use crate::{AmId, AmSink, EpId, Error, Result, SrcId, Token};

/// An active message as delivered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Am {
    /// Message id.
    pub id: AmId,
    /// Source as the receiving iface named it.
    pub src: SrcId,
    /// Header and payload.
    pub data: Vec<u8>,
}

/// Any report other than an active message.
#[derive(Debug)]
pub enum Event {
    /// [`AmSink::completed`].
    Completed {
        /// The operation's token.
        token: Token,
        /// Its outcome.
        result: Result<()>,
    },
    /// [`AmSink::pending_ready`].
    PendingReady {
        /// The endpoint.
        ep: EpId,
        /// The token given to `pending_add`.
        token: Token,
    },
    /// [`AmSink::ep_failed`].
    EpFailed {
        /// The endpoint.
        ep: EpId,
        /// Why.
        error: Error,
    },
    /// [`AmSink::src_failed`].
    SrcFailed {
        /// The source.
        src: SrcId,
        /// Why.
        error: Error,
    },
}

/// Records every report, in order: active messages in `ams`, the rest in
/// `events`.
#[derive(Debug, Default)]
pub struct TestSink {
    /// Active messages in arrival order.
    pub ams: Vec<Am>,
    /// Other reports in order.
    pub events: Vec<Event>,
}

impl TestSink {
    /// An empty sink.
    pub fn new() -> TestSink {
        TestSink::default()
    }

    /// The outcome reported for `token`, if any (the first one).
    pub fn completion(&self, token: Token) -> Option<&Result<()>> {
        self.events.iter().find_map(|e| match e {
            Event::Completed { token: t, result } if *t == token => Some(result),
            _ => None,
        })
    }

    /// How many completions were reported for `token`.
    pub fn completions(&self, token: Token) -> usize {
        self.events
            .iter()
            .filter(|e| matches!(e, Event::Completed { token: t, .. } if *t == token))
            .count()
    }

    /// Tokens handed back for `ep`, in order.
    pub fn pending_tokens(&self, ep: EpId) -> Vec<Token> {
        self.events
            .iter()
            .filter_map(|e| match e {
                Event::PendingReady { ep: x, token } if *x == ep => Some(*token),
                _ => None,
            })
            .collect()
    }

    /// How many times `ep` was reported failed.
    pub fn ep_failures(&self, ep: EpId) -> usize {
        self.events
            .iter()
            .filter(|e| matches!(e, Event::EpFailed { ep: x, .. } if *x == ep))
            .count()
    }
}

impl AmSink for TestSink {
    fn am(&mut self, id: AmId, src: SrcId, data: &[u8]) {
        self.ams.push(Am {
            id,
            src,
            data: data.to_vec(),
        });
    }

    fn completed(&mut self, token: Token, result: Result<()>) {
        self.events.push(Event::Completed { token, result });
    }

    fn pending_ready(&mut self, ep: EpId, token: Token) {
        self.events.push(Event::PendingReady { ep, token });
    }

    fn ep_failed(&mut self, ep: EpId, error: Error) {
        self.events.push(Event::EpFailed { ep, error });
    }

    fn src_failed(&mut self, src: SrcId, error: Error) {
        self.events.push(Event::SrcFailed { src, error });
    }
}
