//! State of a tag receive: its buffer, what it has received, and where it
//! stands as a phase of the protocol that feeds it.

use super::buf::RecvBuf;
use crate::proto::FragKey;
use crate::tag::PostId;
use crate::ucs::slab::SlabId;
use crate::uct::SrcId;
use crate::Error;

/// State of a tag receive.
#[derive(Debug)]
pub(crate) struct RecvState {
    pub(crate) buf: RecvBuf,
    /// Where the receive stands.
    pub(crate) phase: RecvPhase,
    /// Sender's tag, once matched.
    pub(crate) tag: u64,
    /// Total length the sender announced, once matched.
    pub(crate) total: usize,
    /// Bytes received so far.
    pub(crate) received: usize,
    /// Registration of the buffer for a rendezvous by put (or the tail of a
    /// split rendezvous by get), released when the request completes.
    pub(crate) memh: Option<Box<crate::reg::BufReg>>,
    /// The first failure of a read of the sender's buffer (or of the
    /// sender's writes of a split tail); the receive reports it when its
    /// transfers are over.
    pub(crate) read_error: Option<Box<Error>>,
    /// Bytes of one message or fragment a transport is writing straight
    /// into the buffer (`proto/direct.rs`), until it reports them in.
    pub(crate) direct: Option<u32>,
}

/// Where a receive stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum RecvPhase {
    /// Posted in the matcher under this id; nothing matched yet.
    Posted(PostId),
    /// Matched, and nothing more is due from the sender (the data is in,
    /// or the receive is finishing).
    Matched,
    /// Matched an eager message whose later fragments arrive under this
    /// key.
    Frags(FragKey),
    /// Matched a rendezvous request fed by the sender at `from`
    /// (iface, transport source).
    Rndv { from: (usize, SrcId), by: RndvRecv },
    /// The sender is gone or stopped, but reads of its memory are still in
    /// flight and own the buffer: their completions finish the receive.
    Draining { reads: u32 },
}

/// How the data of a rendezvous receive arrives.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum RndvRecv {
    /// As `RNDV_DATA` active messages, asked for by `RNDV_RTR`.
    Am,
    /// Written by the sender into the offered buffer; its `RNDV_ATP`
    /// finishes the receive.
    Put,
    /// Read from the sender's buffer by this side: `reads` in flight, the
    /// `RNDV_ATS` still to send to `ats_to` (`None` before the reads are
    /// planned, and once sent), and whether the sender writes a split tail
    /// whose ATP is still due.
    Get {
        reads: u32,
        ats_to: Option<AtsTo>,
        tail: bool,
    },
}

/// Where a receiver acknowledges having read a sender's buffer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct AtsTo {
    pub(crate) ep: SlabId,
    pub(crate) sreq: u64,
}

impl RecvState {
    /// A receive into `buf` that has matched nothing yet (and is not
    /// posted: the caller posts it, or matches it at once).
    pub(crate) fn new(buf: RecvBuf) -> RecvState {
        RecvState {
            buf,
            phase: RecvPhase::Matched,
            tag: 0,
            total: 0,
            received: 0,
            memh: None,
            read_error: None,
            direct: None,
        }
    }

    /// The whole message `payload`, tagged `tag`, arrived for this
    /// matched receive: it is no longer posted, and the bytes that fit are
    /// in its buffer (the caller reports a truncation).
    #[inline(always)]
    pub(crate) fn take_whole(&mut self, tag: u64, payload: &[u8]) {
        let n = payload.len();
        self.phase = RecvPhase::Matched;
        self.tag = tag;
        self.total = n;
        self.received = n;
        self.buf.write(0, payload);
    }

    /// A message of `total` bytes tagged `tag` matched this receive, which
    /// then waits in `phase`.
    pub(crate) fn matched(&mut self, tag: u64, total: usize, phase: RecvPhase) {
        self.phase = phase;
        self.tag = tag;
        self.total = total;
        self.received = 0;
    }

    /// Takes the receive out of the posted phase, returning its post id.
    pub(crate) fn take_post(&mut self) -> Option<PostId> {
        match self.phase {
            RecvPhase::Posted(p) => {
                self.phase = RecvPhase::Matched;
                Some(p)
            }
            _ => None,
        }
    }

    /// The sender whose rendezvous feeds this receive, if one does.
    pub(crate) fn fed_by(&self) -> Option<(usize, SrcId)> {
        match self.phase {
            RecvPhase::Rndv { from, .. } => Some(from),
            _ => None,
        }
    }

    /// Reads of the sender's memory in flight.
    pub(crate) fn reads(&self) -> u32 {
        match self.phase {
            RecvPhase::Rndv {
                by: RndvRecv::Get { reads, .. },
                ..
            }
            | RecvPhase::Draining { reads } => reads,
            _ => 0,
        }
    }

    /// Counts `n` more reads posted (a rendezvous by get).
    pub(crate) fn add_reads(&mut self, n: u32) {
        if let RecvPhase::Rndv {
            by: RndvRecv::Get { reads, .. },
            ..
        }
        | RecvPhase::Draining { reads } = &mut self.phase
        {
            *reads += n;
        }
    }

    /// A read completed.
    pub(crate) fn read_done(&mut self) {
        if let RecvPhase::Rndv {
            by: RndvRecv::Get { reads, .. },
            ..
        }
        | RecvPhase::Draining { reads } = &mut self.phase
        {
            *reads = reads.saturating_sub(1);
        }
    }

    /// Whether the sender still writes a split tail whose ATP is due.
    pub(crate) fn tail_due(&self) -> bool {
        matches!(
            self.phase,
            RecvPhase::Rndv {
                by: RndvRecv::Get { tail: true, .. },
                ..
            }
        )
    }

    /// Nothing more comes from the sender: reads still in flight drain,
    /// else the receive is just matched (and finishing).
    pub(crate) fn sender_done(&mut self) {
        self.phase = match self.reads() {
            0 => RecvPhase::Matched,
            reads => RecvPhase::Draining { reads },
        };
    }
}
