//! Messages taken out of the unexpected queue by a probe (`tag_probe`
//! with removal, `MPI_Mprobe`), received later into a buffer the caller
//! chooses after seeing the length (`msg_recv`, `MPI_Mrecv`).
//!
//! A removed message no longer matches any receive. Fragments that are
//! still arriving go to it; if its sender fails first, receiving it fails
//! with that error. A rendezvous message is only announced: receiving it
//! starts the transfer.

use super::eager_rx::RecvStarted;
use crate::proto::core::{Core, FragTarget, ProbedMsg};
use crate::request::buf::RecvBuf;
use crate::request::{Info, Kind, Op, RecvState, Request};
use crate::ucs::slab::SlabId;
use crate::{Error, Result};

impl Core {
    /// Removes the oldest unexpected message matching `(tag, mask)`.
    pub(crate) fn probe_remove(&mut self, tag: u64, mask: u64) -> Option<(SlabId, Info)> {
        let (uid, _, _) = self.matcher.probe(tag, mask)?;
        let u = self.matcher.take_unexpected(uid)?;
        self.unexp_taken(&u);
        let info = Info {
            tag: u.tag,
            length: u.total,
        };
        let key = u.key;
        let pid = self.probed.insert(ProbedMsg {
            msg: Some(u),
            error: None,
        });
        if let Some(k) = key {
            if let Some(t) = self.frags.get_mut(&k) {
                *t = FragTarget::Probed(pid);
            }
        }
        Some((pid, info))
    }

    /// Receives removed message `pid` into `buf`.
    pub(crate) fn msg_recv_start(
        &mut self,
        pid: SlabId,
        buf: RecvBuf,
        op: Op,
    ) -> Result<RecvStarted> {
        let p = self.probed.remove(pid).ok_or(Error::InvalidHandle)?;
        let u = match (p.msg, p.error) {
            (Some(u), _) => u,
            (None, Some(e)) => return Err(e),
            (None, None) => return Err(Error::InvalidHandle),
        };
        let id = self
            .reqs
            .insert(Request::new(Kind::Recv(RecvState::new(buf)), op));
        self.start_matched(id, buf, u)
    }
}
