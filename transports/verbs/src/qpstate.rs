//! Queue pair state changes (`ibv_modify_qp`). The connection manager does
//! not own the queue pairs here (they exist before their connection, as
//! the provider trait has it), so the provider moves them itself: to INIT
//! at creation, to RTR and RTS with the attributes `rdma_init_qp_attr`
//! gives for the connection, to ERR when it ends.

use rdma_sys as sys;
use uct::ucs::Result;

use crate::ffi::rc_err;
use crate::res::{zeroed, Qp};

/// Rights a queue pair grants its peer; each region still grants its own.
fn qp_access() -> u32 {
    use sys::ibv_access_flags as f;
    f::IBV_ACCESS_LOCAL_WRITE.0
        | f::IBV_ACCESS_REMOTE_READ.0
        | f::IBV_ACCESS_REMOTE_WRITE.0
        | f::IBV_ACCESS_REMOTE_ATOMIC.0
}

fn modify(qp: &Qp, attr: &mut sys::ibv_qp_attr, mask: u32, what: &str) -> Result<()> {
    // SAFETY: the queue pair is live and `attr` initialized for the bits
    // of `mask`.
    let rc = unsafe { sys::ibv_modify_qp(qp.as_raw(), attr, mask as i32) };
    if rc != 0 {
        return Err(rc_err(format!("ibv_modify_qp to {what}"), rc));
    }
    Ok(())
}

/// RESET to INIT on `port` (receives may be posted from here on).
pub(crate) fn to_init(qp: &Qp, port: u8) -> Result<()> {
    use sys::ibv_qp_attr_mask as m;
    let mut attr: sys::ibv_qp_attr = zeroed();
    attr.qp_state = sys::ibv_qp_state::IBV_QPS_INIT;
    attr.port_num = port;
    attr.pkey_index = 0;
    attr.qp_access_flags = qp_access();
    let mask =
        m::IBV_QP_STATE.0 | m::IBV_QP_PORT.0 | m::IBV_QP_PKEY_INDEX.0 | m::IBV_QP_ACCESS_FLAGS.0;
    modify(qp, &mut attr, mask, "INIT")
}

/// Read depths to set instead of the connection manager's: the
/// responder's (RTR) and the requester's (RTS).
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Depths {
    pub(crate) ird: Option<u32>,
    pub(crate) ord: Option<u32>,
}

/// To RTR, then RTS, with the attributes of connection `id`.
///
/// # Safety
///
/// `id` is a live connection manager id whose route is resolved and whose
/// peer's reply (initiator) or request (responder) has been received.
pub(crate) unsafe fn to_rts(qp: &Qp, id: *mut sys::rdma_cm_id, depths: Depths) -> Result<()> {
    for (state, what) in [
        (sys::ibv_qp_state::IBV_QPS_RTR, "RTR"),
        (sys::ibv_qp_state::IBV_QPS_RTS, "RTS"),
    ] {
        let mut attr: sys::ibv_qp_attr = zeroed();
        attr.qp_state = state;
        let mut mask: libc::c_int = 0;
        // SAFETY: the caller gives a live id in the right phase; `attr`
        // and `mask` are written by the call.
        let rc = unsafe { sys::rdma_init_qp_attr(id, &mut attr, &mut mask) };
        if rc != 0 {
            return Err(crate::ffi::os_err(format!("rdma_init_qp_attr for {what}")));
        }
        let mask = mask as u32;
        use sys::ibv_qp_attr_mask as m;
        if let (Some(ird), true) = (depths.ird, mask & m::IBV_QP_MAX_DEST_RD_ATOMIC.0 != 0) {
            attr.max_dest_rd_atomic = ird.min(255) as u8;
        }
        if let (Some(ord), true) = (depths.ord, mask & m::IBV_QP_MAX_QP_RD_ATOMIC.0 != 0) {
            attr.max_rd_atomic = ord.min(255) as u8;
        }
        modify(qp, &mut attr, mask, what)?;
    }
    Ok(())
}

/// To ERR: outstanding requests complete flushed, new ones are flushed at
/// once.
pub(crate) fn to_err(qp: &Qp) -> Result<()> {
    let mut attr: sys::ibv_qp_attr = zeroed();
    attr.qp_state = sys::ibv_qp_state::IBV_QPS_ERR;
    modify(qp, &mut attr, sys::ibv_qp_attr_mask::IBV_QP_STATE.0, "ERR")
}
