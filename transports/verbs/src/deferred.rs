//! Sends posted before their queue pair's connection is up.
//!
//! The provider trait lets a caller post sends on a queue pair that is
//! still connecting ("sends wait for the connection"), and the RC
//! transport does so. A device refuses them (`ibv_post_send` on a queue
//! pair short of RTS is EINVAL on rxe), so they are kept here, in order,
//! and posted once the queue pair reaches RTS, or completed with
//! `IBV_WC_WR_FLUSH_ERR` if it fails first.

use rdma_sys as sys;
use rucx_rdma::{SendFlags, SendOp, SendWr, Sge};
use uct::ucs::Result;

use crate::res::Qp;
use crate::wc::RawWc;
use crate::wr;

/// One send kept until the connection is up.
#[derive(Debug)]
pub(crate) struct Deferred {
    wr_id: u64,
    op: SendOp,
    flags: SendFlags,
    /// The caller's gather list (the caller keeps its memory valid until
    /// completion), or empty when the data was copied into `data`.
    sges: Vec<Sge>,
    /// The data of a send the caller asked to go inline: the caller may
    /// reuse its buffer as soon as the post returns, so it is copied.
    data: Option<Box<[u8]>>,
}

impl Deferred {
    /// Keeps `wr`, copying its data if the caller asked for INLINE.
    ///
    /// # Safety
    ///
    /// As [`Verbs::post_send`](rucx_rdma::Verbs::post_send): the memory of
    /// `wr.sges` is readable for the call (and, unless INLINE is asked
    /// for, valid until the send's completion).
    pub(crate) unsafe fn of(wr: &SendWr<'_>) -> Deferred {
        if wr.flags.contains(SendFlags::INLINE) {
            let mut data = Vec::with_capacity(wr.sges.iter().map(|s| s.len as usize).sum());
            for s in wr.sges {
                // SAFETY: the caller's entries describe readable memory for
                // the call (the contract of an inline send).
                let src =
                    unsafe { std::slice::from_raw_parts(s.addr as *const u8, s.len as usize) };
                data.extend_from_slice(src);
            }
            return Deferred {
                wr_id: wr.wr_id,
                op: wr.op,
                flags: wr.flags,
                sges: Vec::new(),
                data: Some(data.into_boxed_slice()),
            };
        }
        Deferred {
            wr_id: wr.wr_id,
            op: wr.op,
            flags: wr.flags,
            sges: wr.sges.to_vec(),
            data: None,
        }
    }

    /// Posts it on `qp`, now in RTS.
    ///
    /// # Safety
    ///
    /// The caller's memory named by the kept gather list is still valid
    /// (the contract of the original post).
    pub(crate) unsafe fn post(&self, qp: &Qp) -> Result<()> {
        let copied;
        let sges: &[Sge] = match &self.data {
            Some(d) => {
                copied = [Sge {
                    addr: d.as_ptr() as u64,
                    len: d.len() as u32,
                    lkey: 0,
                }];
                &copied[..usize::from(!d.is_empty())]
            }
            None => &self.sges,
        };
        let w = SendWr {
            wr_id: self.wr_id,
            op: self.op,
            sges,
            flags: self.flags,
        };
        // SAFETY: inline data is read during the call from `self.data`;
        // other memory is the caller's, valid as the caller promised.
        unsafe { wr::post_send(qp, &w) }
    }

    /// Its completion when it is never posted: flushed, as the device
    /// completes a send outstanding when its queue pair fails.
    pub(crate) fn flushed(&self, qp_num: u32) -> RawWc {
        RawWc {
            wr_id: self.wr_id,
            status: sys::ibv_wc_status::IBV_WC_WR_FLUSH_ERR,
            qp_num,
            ..RawWc::EMPTY
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn inline_data_is_copied_and_other_sends_keep_their_list() {
        let mut buf = *b"hello";
        let sge = Sge {
            addr: buf.as_ptr() as u64,
            len: 5,
            lkey: 7,
        };
        let mut wr = SendWr {
            wr_id: 3,
            op: SendOp::Send,
            sges: &[sge],
            flags: SendFlags::INLINE | SendFlags::SIGNALED,
        };
        // SAFETY: `buf` is readable for the call.
        let d = unsafe { Deferred::of(&wr) };
        buf.copy_from_slice(b"XXXXX");
        assert_eq!(d.data.as_deref(), Some(&b"hello"[..]));
        assert!(d.sges.is_empty());
        let f = d.flushed(9);
        assert_eq!((f.wr_id, f.qp_num), (3, 9));
        assert_eq!(f.status, sys::ibv_wc_status::IBV_WC_WR_FLUSH_ERR);

        wr.flags = SendFlags::SIGNALED;
        // SAFETY: as above.
        let d = unsafe { Deferred::of(&wr) };
        assert!(d.data.is_none());
        assert_eq!(d.sges, vec![sge]);
    }
}
