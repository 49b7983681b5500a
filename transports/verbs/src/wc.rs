//! Work completions: `ibv_wc` to the trait's [`Wc`].

use rdma_sys as sys;
use rucx_rdma::{QpId, Wc, WcOpcode, WcStatus};

/// The trait's status for an `ibv_wc_status`. Statuses the trait has no
/// word for (transport or receiver-not-ready retries exceeded, response
/// timeout, bad response, local QP errors, ...) mean the connection
/// broke: [`WcStatus::FatalErr`].
pub(crate) fn status_of(raw: u32) -> WcStatus {
    use sys::ibv_wc_status as s;
    match raw {
        s::IBV_WC_SUCCESS => WcStatus::Success,
        s::IBV_WC_LOC_LEN_ERR => WcStatus::LocLenErr,
        s::IBV_WC_LOC_PROT_ERR | s::IBV_WC_LOC_ACCESS_ERR | s::IBV_WC_MW_BIND_ERR => {
            WcStatus::LocProtErr
        }
        s::IBV_WC_WR_FLUSH_ERR => WcStatus::WrFlushErr,
        s::IBV_WC_REM_ACCESS_ERR => WcStatus::RemAccessErr,
        s::IBV_WC_REM_INV_REQ_ERR | s::IBV_WC_REM_INV_RD_REQ_ERR => WcStatus::RemInvReqErr,
        s::IBV_WC_REM_OP_ERR => WcStatus::RemOpErr,
        _ => WcStatus::FatalErr,
    }
}

/// The name of an `ibv_wc_status`, for logs (`ibv_wc_status_str` without
/// the call).
pub(crate) fn status_name(raw: u32) -> &'static str {
    use sys::ibv_wc_status as s;
    match raw {
        s::IBV_WC_SUCCESS => "success",
        s::IBV_WC_LOC_LEN_ERR => "local length error",
        s::IBV_WC_LOC_QP_OP_ERR => "local QP operation error",
        s::IBV_WC_LOC_PROT_ERR => "local protection error",
        s::IBV_WC_WR_FLUSH_ERR => "flushed",
        s::IBV_WC_MW_BIND_ERR => "memory window bind error",
        s::IBV_WC_BAD_RESP_ERR => "bad response",
        s::IBV_WC_LOC_ACCESS_ERR => "local access error",
        s::IBV_WC_REM_INV_REQ_ERR => "remote invalid request",
        s::IBV_WC_REM_ACCESS_ERR => "remote access error",
        s::IBV_WC_REM_OP_ERR => "remote operation error",
        s::IBV_WC_RETRY_EXC_ERR => "transport retry counter exceeded",
        s::IBV_WC_RNR_RETRY_EXC_ERR => "receiver-not-ready retry counter exceeded",
        s::IBV_WC_REM_INV_RD_REQ_ERR => "remote invalid RD request",
        s::IBV_WC_REM_ABORT_ERR => "remote aborted",
        s::IBV_WC_FATAL_ERR => "fatal error",
        s::IBV_WC_RESP_TIMEOUT_ERR => "response timeout",
        s::IBV_WC_GENERAL_ERR => "general error",
        _ => "other error",
    }
}

/// The trait's opcode for an `ibv_wc_opcode`. Only a successful
/// completion's opcode is meaningful (verbs leaves it undefined on
/// errors); anything else is reported as [`WcOpcode::Send`].
pub(crate) fn opcode_of(raw: u32) -> WcOpcode {
    use sys::ibv_wc_opcode as o;
    match raw {
        o::IBV_WC_RDMA_WRITE => WcOpcode::RdmaWrite,
        o::IBV_WC_RDMA_READ => WcOpcode::RdmaRead,
        o::IBV_WC_COMP_SWAP => WcOpcode::CmpSwap,
        o::IBV_WC_FETCH_ADD => WcOpcode::FetchAdd,
        o::IBV_WC_RECV => WcOpcode::Recv,
        _ => WcOpcode::Send,
    }
}

/// The fields of an `ibv_wc` the conversion reads, copied out of the C
/// struct (its union read once, where the flags say it holds a key).
#[derive(Debug, Clone, Copy)]
pub(crate) struct RawWc {
    pub(crate) wr_id: u64,
    pub(crate) status: u32,
    pub(crate) opcode: u32,
    pub(crate) vendor_err: u32,
    pub(crate) byte_len: u32,
    pub(crate) qp_num: u32,
    pub(crate) invalidated_rkey: Option<u32>,
}

impl RawWc {
    /// A placeholder to fill.
    pub(crate) const EMPTY: RawWc = RawWc {
        wr_id: 0,
        status: 0,
        opcode: 0,
        vendor_err: 0,
        byte_len: 0,
        qp_num: 0,
        invalidated_rkey: None,
    };

    /// Copies the fields of `wc`.
    pub(crate) fn of(wc: &sys::ibv_wc) -> RawWc {
        let flags = wc.wc_flags;
        let ok = wc.status == sys::ibv_wc_status::IBV_WC_SUCCESS;
        let with_inv = ok && flags & sys::ibv_wc_flags::IBV_WC_WITH_INV.0 != 0;
        // SAFETY: both members of the union are u32, so either reads as a
        // valid value; IBV_WC_WITH_INV says whether it is a key.
        let key = unsafe { wc.imm_data_invalidated_rkey_union.invalidated_rkey };
        RawWc {
            wr_id: wc.wr_id,
            status: wc.status,
            opcode: wc.opcode,
            vendor_err: wc.vendor_err,
            byte_len: wc.byte_len,
            qp_num: wc.qp_num,
            invalidated_rkey: with_inv.then_some(key),
        }
    }

    /// The trait's completion, with the queue pair found by number.
    pub(crate) fn to_wc(self, qp: Option<QpId>) -> Wc {
        let status = status_of(self.status);
        if status != WcStatus::Success && status != WcStatus::WrFlushErr {
            tracing::debug!(
                wr_id = self.wr_id,
                qp_num = self.qp_num,
                vendor_err = self.vendor_err,
                "verbs: completion with error: {}",
                status_name(self.status)
            );
        }
        Wc {
            wr_id: self.wr_id,
            status,
            opcode: if status == WcStatus::Success {
                opcode_of(self.opcode)
            } else {
                WcOpcode::Send
            },
            byte_len: self.byte_len,
            qp,
            invalidated_rkey: self.invalidated_rkey,
            // A receive completion of verbs does not say whether the SEND
            // was solicited (that only decides whether a queue armed for
            // solicited events wakes): never set.
            solicited: false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statuses_map_to_the_trait() {
        assert_eq!(status_of(0), WcStatus::Success);
        assert_eq!(status_of(1), WcStatus::LocLenErr);
        assert_eq!(status_of(4), WcStatus::LocProtErr);
        assert_eq!(status_of(5), WcStatus::WrFlushErr);
        assert_eq!(status_of(9), WcStatus::RemInvReqErr);
        assert_eq!(status_of(10), WcStatus::RemAccessErr);
        assert_eq!(status_of(11), WcStatus::RemOpErr);
        // Retries exceeded, response timeout, fatal: the connection broke.
        for s in [12, 13, 19, 20, 21, 99] {
            assert_eq!(status_of(s), WcStatus::FatalErr, "status {s}");
        }
        assert_eq!(status_name(12), "transport retry counter exceeded");
    }

    #[test]
    fn opcodes_map_and_errors_have_none() {
        assert_eq!(opcode_of(0), WcOpcode::Send);
        assert_eq!(opcode_of(1), WcOpcode::RdmaWrite);
        assert_eq!(opcode_of(2), WcOpcode::RdmaRead);
        assert_eq!(opcode_of(3), WcOpcode::CmpSwap);
        assert_eq!(opcode_of(4), WcOpcode::FetchAdd);
        assert_eq!(opcode_of(128), WcOpcode::Recv);
        let raw = RawWc {
            wr_id: 7,
            status: 5,
            opcode: 128,
            vendor_err: 0,
            byte_len: 0,
            qp_num: 3,
            invalidated_rkey: None,
        };
        let wc = raw.to_wc(Some(QpId(1)));
        assert_eq!(wc.status, WcStatus::WrFlushErr);
        assert_eq!(wc.opcode, WcOpcode::Send);
        assert_eq!((wc.wr_id, wc.qp), (7, Some(QpId(1))));
    }
}
