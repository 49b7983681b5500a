//! Work requests: the trait's [`SendWr`] and [`RecvWr`] posted as
//! `ibv_send_wr` and `ibv_recv_wr`, their scatter/gather lists on the
//! stack.

use std::ptr;

use rdma_sys as sys;
use rucx_rdma::{RecvWr, SendFlags, SendOp, SendWr, Sge};
use uct::ucs::{Error, Result};

use crate::ffi::rc_err;
use crate::res::{zeroed, Qp, QpCap, Srq};

/// Most scatter/gather entries one work request takes here (devices
/// offer up to about 30).
pub(crate) const MAX_SGE: usize = 32;

type SgList = [sys::ibv_sge; MAX_SGE];

/// `sges` as verbs entries in `buf`; how many.
fn fill_sges(sges: &[Sge], buf: &mut SgList, op: &'static str) -> Result<i32> {
    if sges.len() > MAX_SGE {
        return Err(Error::Limit {
            op,
            len: sges.len(),
            max: MAX_SGE,
        });
    }
    for (d, s) in buf.iter_mut().zip(sges) {
        *d = sys::ibv_sge {
            addr: s.addr,
            length: s.len,
            lkey: s.lkey,
        };
    }
    Ok(sges.len() as i32)
}

/// The IBV_SEND_* bits of `flags`.
pub(crate) fn send_flags(flags: SendFlags) -> u32 {
    use sys::ibv_send_flags as f;
    [
        (SendFlags::FENCE, f::IBV_SEND_FENCE),
        (SendFlags::SIGNALED, f::IBV_SEND_SIGNALED),
        (SendFlags::SOLICITED, f::IBV_SEND_SOLICITED),
        (SendFlags::INLINE, f::IBV_SEND_INLINE),
    ]
    .iter()
    .filter(|(ours, _)| flags.contains(*ours))
    .fold(0, |bits, (_, theirs)| bits | theirs.0)
}

/// The flags a send goes with: INLINE added to a SEND or WRITE whose data
/// fits the queue pair's inline size (it is copied at post time, so the
/// device reads no host memory for it), and refused where it was asked
/// for and does not fit.
pub(crate) fn effective_flags(wr: &SendWr<'_>, max_inline: u32) -> Result<SendFlags> {
    let len: u64 = wr.sges.iter().map(|s| u64::from(s.len)).sum();
    let carries_data = matches!(
        wr.op,
        SendOp::Send | SendOp::SendInv { .. } | SendOp::Write { .. }
    );
    let mut flags = wr.flags;
    if flags.contains(SendFlags::INLINE) {
        if !carries_data || len > u64::from(max_inline) {
            return Err(Error::Limit {
                op: "verbs inline send",
                len: len as usize,
                max: if carries_data { max_inline as usize } else { 0 },
            });
        }
    } else if carries_data && len > 0 && len <= u64::from(max_inline) {
        flags |= SendFlags::INLINE;
    }
    Ok(flags)
}

/// What the device would refuse of `wr` on a queue pair of `cap`: more
/// gather entries than it has, or an INLINE send that does not fit.
pub(crate) fn check(wr: &SendWr<'_>, cap: &QpCap) -> Result<()> {
    let max = (cap.max_send_sge as usize).min(MAX_SGE);
    if wr.sges.len() > max {
        return Err(Error::Limit {
            op: "verbs send gather list",
            len: wr.sges.len(),
            max,
        });
    }
    effective_flags(wr, cap.max_inline).map(|_| ())
}

/// Posts `wr` on `qp` (`ibv_post_send`).
///
/// # Safety
///
/// As [`Verbs::post_send`](rucx_rdma::Verbs::post_send): unless the send
/// goes inline, the memory of `wr.sges` stays valid until its completion
/// is polled or the queue pair is destroyed.
pub(crate) unsafe fn post_send(qp: &Qp, wr: &SendWr<'_>) -> Result<()> {
    let mut sg: SgList = [sys::ibv_sge {
        addr: 0,
        length: 0,
        lkey: 0,
    }; MAX_SGE];
    let flags = effective_flags(wr, qp.cap.max_inline)?;
    let mut w: sys::ibv_send_wr = zeroed();
    w.wr_id = wr.wr_id;
    w.num_sge = fill_sges(wr.sges, &mut sg, "verbs send gather list")?;
    w.sg_list = sg.as_mut_ptr();
    w.send_flags = send_flags(flags);
    use sys::ibv_wr_opcode as o;
    match wr.op {
        SendOp::Send => w.opcode = o::IBV_WR_SEND,
        SendOp::SendInv { rkey } => {
            w.opcode = o::IBV_WR_SEND_WITH_INV;
            w.imm_data_invalidated_rkey_union.invalidated_rkey = rkey;
        }
        SendOp::Write { remote_addr, rkey } => {
            w.opcode = o::IBV_WR_RDMA_WRITE;
            w.wr.rdma = sys::rdma_t { remote_addr, rkey };
        }
        SendOp::Read { remote_addr, rkey } => {
            w.opcode = o::IBV_WR_RDMA_READ;
            w.wr.rdma = sys::rdma_t { remote_addr, rkey };
        }
        SendOp::FetchAdd {
            remote_addr,
            rkey,
            add,
        } => {
            w.opcode = o::IBV_WR_ATOMIC_FETCH_AND_ADD;
            w.wr.atomic = sys::atomic_t {
                remote_addr,
                compare_add: add,
                swap: 0,
                rkey,
            };
        }
        SendOp::CmpSwap {
            remote_addr,
            rkey,
            compare,
            swap,
        } => {
            w.opcode = o::IBV_WR_ATOMIC_CMP_AND_SWP;
            w.wr.atomic = sys::atomic_t {
                remote_addr,
                compare_add: compare,
                swap,
                rkey,
            };
        }
    }
    let mut bad = ptr::null_mut();
    // SAFETY: the queue pair is live; `w` and `sg` outlive the call (the
    // device copies the request, and inline data, at post time); the
    // caller keeps the memory of the gather list valid until completion.
    let rc = unsafe { sys::ibv_post_send(qp.as_raw(), &mut w, &mut bad) };
    if rc != 0 {
        return Err(rc_err("ibv_post_send", rc));
    }
    Ok(())
}

/// A receive request over `sg` (filled from `wr`).
fn recv_wr(wr: &RecvWr<'_>, sg: &mut SgList) -> Result<sys::ibv_recv_wr> {
    let mut w: sys::ibv_recv_wr = zeroed();
    w.wr_id = wr.wr_id;
    w.num_sge = fill_sges(wr.sges, sg, "verbs receive scatter list")?;
    w.sg_list = sg.as_mut_ptr();
    Ok(w)
}

const EMPTY_SGE: sys::ibv_sge = sys::ibv_sge {
    addr: 0,
    length: 0,
    lkey: 0,
};

/// Posts a receive on `qp` (`ibv_post_recv`).
///
/// # Safety
///
/// As [`Verbs::post_recv`](rucx_rdma::Verbs::post_recv).
pub(crate) unsafe fn post_recv(qp: &Qp, wr: &RecvWr<'_>) -> Result<()> {
    let mut sg: SgList = [EMPTY_SGE; MAX_SGE];
    let mut w = recv_wr(wr, &mut sg)?;
    let mut bad = ptr::null_mut();
    // SAFETY: the queue pair is live; `w` and `sg` outlive the call; the
    // caller keeps the scatter memory valid and untouched until
    // completion.
    let rc = unsafe { sys::ibv_post_recv(qp.as_raw(), &mut w, &mut bad) };
    if rc != 0 {
        return Err(rc_err("ibv_post_recv", rc));
    }
    Ok(())
}

/// Posts a receive on `srq` (`ibv_post_srq_recv`).
///
/// # Safety
///
/// As [`Verbs::post_srq_recv`](rucx_rdma::Verbs::post_srq_recv).
pub(crate) unsafe fn post_srq_recv(srq: &Srq, wr: &RecvWr<'_>) -> Result<()> {
    let mut sg: SgList = [EMPTY_SGE; MAX_SGE];
    let mut w = recv_wr(wr, &mut sg)?;
    let mut bad = ptr::null_mut();
    // SAFETY: as `post_recv`, on a live shared receive queue.
    let rc = unsafe { sys::ibv_post_srq_recv(srq.as_raw(), &mut w, &mut bad) };
    if rc != 0 {
        return Err(rc_err("ibv_post_srq_recv", rc));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn wr<'a>(op: SendOp, sges: &'a [Sge], flags: SendFlags) -> SendWr<'a> {
        SendWr {
            wr_id: 1,
            op,
            sges,
            flags,
        }
    }

    #[test]
    fn small_sends_and_writes_go_inline() {
        let s = [Sge {
            addr: 0x1000,
            len: 64,
            lkey: 0,
        }];
        let f = effective_flags(&wr(SendOp::Send, &s, SendFlags::SIGNALED), 128).unwrap();
        assert!(f.contains(SendFlags::INLINE | SendFlags::SIGNALED));
        let write = SendOp::Write {
            remote_addr: 0,
            rkey: 1,
        };
        assert!(effective_flags(&wr(write, &s, SendFlags::empty()), 64)
            .unwrap()
            .contains(SendFlags::INLINE));
        // Too long, a READ, or a zero-length send: not inline.
        assert!(
            !effective_flags(&wr(SendOp::Send, &s, SendFlags::empty()), 32)
                .unwrap()
                .contains(SendFlags::INLINE)
        );
        let read = SendOp::Read {
            remote_addr: 0,
            rkey: 1,
        };
        assert!(!effective_flags(&wr(read, &s, SendFlags::empty()), 128)
            .unwrap()
            .contains(SendFlags::INLINE));
        assert!(
            !effective_flags(&wr(SendOp::Send, &[], SendFlags::empty()), 128)
                .unwrap()
                .contains(SendFlags::INLINE)
        );
        // Asked for and does not fit: refused.
        assert!(effective_flags(&wr(SendOp::Send, &s, SendFlags::INLINE), 32).is_err());
        assert!(effective_flags(&wr(read, &s, SendFlags::INLINE), 128).is_err());
    }

    #[test]
    fn flags_map_to_ibv_bits() {
        assert_eq!(send_flags(SendFlags::empty()), 0);
        assert_eq!(send_flags(SendFlags::FENCE), 1);
        assert_eq!(send_flags(SendFlags::SIGNALED), 2);
        assert_eq!(send_flags(SendFlags::SOLICITED), 4);
        assert_eq!(send_flags(SendFlags::INLINE), 8);
    }

    #[test]
    fn too_many_entries_are_refused() {
        let many = vec![Sge::default(); MAX_SGE + 1];
        let mut sg: SgList = [EMPTY_SGE; MAX_SGE];
        assert!(fill_sges(&many, &mut sg, "t").is_err());
        assert_eq!(fill_sges(&many[..3], &mut sg, "t").unwrap(), 3);
    }
}
