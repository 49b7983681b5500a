//! Data received straight into a receive buffer: a transport that
//! receives into a buffer of its own offers the start of a large message
//! (`AmSink::am_begin`) before the rest has arrived; for a whole eager
//! message that a posted receive matches, and for rendezvous data sent as
//! active messages, the protocol names the place in the user's buffer and
//! the transport writes the rest there, saving a copy.
//!
//! While a transport writes, the receive holds `direct` (the bytes on
//! their way) and cannot complete: it is matched (so it cannot be
//! canceled), and its data source ends the write with `am_end` before it
//! can report its own failure. Anything that does not fit this (an
//! unexpected message, a header that does not decode, a fragment outside
//! the announced length) is declined and arrives whole through `am`, where
//! it is handled, or refused, as always.

use super::wire::{AM_EAGER_ONLY, AM_RNDV_DATA, ONLY_HDR};
use crate::proto::core::Core;
use crate::request::RecvPhase;
use crate::ucs;
use crate::ucs::slab::SlabId;
use crate::uct::{AmDest, AmId, SrcId, Token};
use crate::Error;

/// Header of rendezvous data: receive request, offset.
const RNDV_DATA_HDR: usize = 16;

fn u64_at(b: &[u8], at: usize) -> Option<u64> {
    let mut a = [0u8; 8];
    a.copy_from_slice(b.get(at..at + 8)?);
    Some(u64::from_le_bytes(a))
}

impl Core {
    /// Where the rest of message `id` (`total` bytes, starting with
    /// `head`) from `src` goes, if it can go straight to a receive buffer.
    pub(crate) fn direct_begin(
        &mut self,
        id: AmId,
        src: SrcId,
        head: &[u8],
        total: usize,
    ) -> Option<AmDest> {
        match id {
            AM_EAGER_ONLY => self.direct_whole(head, total),
            AM_RNDV_DATA => self.direct_rndv(src, head, total),
            _ => None,
        }
    }

    /// A whole eager message: only into a receive posted for it.
    fn direct_whole(&mut self, head: &[u8], total: usize) -> Option<AmDest> {
        let tag = u64_at(head, 0)?;
        // Everything that can decline is checked before the match, which
        // takes the receive out of the matcher.
        let len = total.checked_sub(ONLY_HDR)?;
        let direct = u32::try_from(len).ok()?;
        let req = self.matcher.arrive(tag)?;
        let Some(r) = self.recv_state(req) else {
            // A posted entry always names a receive; stay safe.
            return None;
        };
        r.matched(tag, len, RecvPhase::Matched);
        r.direct = Some(direct);
        Some(r.buf.dest(ONLY_HDR, 0, len, Token(req.to_u64())))
    }

    /// Rendezvous data for a receive fed by `src`, within its length.
    fn direct_rndv(&mut self, src: SrcId, head: &[u8], total: usize) -> Option<AmDest> {
        let (rreq, offset) = (u64_at(head, 0)?, u64_at(head, 8)?);
        let len = total.checked_sub(RNDV_DATA_HDR)?;
        let direct = u32::try_from(len).ok()?;
        let from = (self.cur_iface, src);
        let req = SlabId::from_u64(rreq);
        let r = self.recv_state(req)?;
        let offset = usize::try_from(offset).ok()?;
        if r.fed_by() != Some(from)
            || r.direct.is_some()
            || offset.checked_add(len).is_none_or(|end| end > r.total)
        {
            return None;
        }
        r.direct = Some(direct);
        Some(r.buf.dest(RNDV_DATA_HDR, offset, len, Token(rreq)))
    }

    /// The transport finished (or gave up) writing into receive `token`.
    pub(crate) fn direct_end(&mut self, token: Token, result: ucs::Result<()>) {
        let id = SlabId::from_u64(token.0);
        let Some(r) = self.recv_state(id) else {
            return;
        };
        let Some(n) = r.direct.take() else {
            return;
        };
        if let Err(e) = result {
            r.sender_done();
            self.complete(id, Err(Error::endpoint(e)));
            return;
        }
        r.received += n as usize;
        if r.received < r.total {
            return;
        }
        r.sender_done();
        self.finish_recv(id);
    }
}
