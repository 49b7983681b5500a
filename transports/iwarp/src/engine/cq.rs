//! Completion queues, and everything a context reports: completions,
//! connection-manager events and asynchronous events.

use std::collections::VecDeque;

use rucx_rdma::{AsyncEvent, AsyncEventKind, CmEvent, CqId, QpId, TerminateCause, Wc};

use super::table::Table;

/// A bounded queue of completions.
#[derive(Debug)]
pub(crate) struct Cq {
    pub(crate) depth: usize,
    pub(crate) wcs: VecDeque<Wc>,
    /// Queue pairs that use it.
    pub(crate) users: u32,
}

/// What a context hands to its caller.
#[derive(Debug, Default)]
pub(crate) struct Outputs {
    pub(crate) cqs: Table<Cq>,
    pub(crate) cm: VecDeque<CmEvent>,
    pub(crate) asyncs: VecDeque<AsyncEvent>,
}

impl Outputs {
    /// Adds a completion. A full queue keeps it anyway (nothing is lost)
    /// and reports the overrun as a fatal event of the queue pair, as a
    /// CQ overrun is in verbs.
    pub(crate) fn complete(&mut self, cq: CqId, wc: Wc) {
        let Some(q) = self.cqs.get_mut(cq.0) else {
            return;
        };
        let overrun = q.wcs.len() >= q.depth;
        q.wcs.push_back(wc);
        if let (true, Some(qp)) = (overrun, wc.qp) {
            self.event(
                qp,
                AsyncEventKind::QpFatal,
                "completion queue overrun".into(),
            );
        }
    }

    pub(crate) fn event(&mut self, qp: QpId, kind: AsyncEventKind, detail: String) {
        self.event_with(qp, kind, detail, None);
    }

    /// An event of a queue pair that a Terminate ended.
    pub(crate) fn event_with(
        &mut self,
        qp: QpId,
        kind: AsyncEventKind,
        detail: String,
        terminate: Option<TerminateCause>,
    ) {
        tracing::debug!(qp = qp.0, ?kind, "iwarp: {detail}");
        self.asyncs.push_back(AsyncEvent {
            qp,
            kind,
            detail,
            terminate,
        });
    }

    pub(crate) fn cm(&mut self, ev: CmEvent) {
        self.cm.push_back(ev);
    }

    /// Whether anything waits for the caller.
    pub(crate) fn pending(&self) -> bool {
        !self.cm.is_empty()
            || !self.asyncs.is_empty()
            || self.cqs.values().any(|q| !q.wcs.is_empty())
    }
}
