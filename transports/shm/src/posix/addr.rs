//! The posix iface's address: which process owns the receive segment, how
//! to open it, and the FIFO's shape.
//!
//! ```text
//! 0   12  owner ProcessId (pid, start time)
//! 12  4   fd of the segment in the owner (opened via /proc/<pid>/fd/<fd>)
//! 16  8   segment length
//! 24  4   FIFO element size
//! 28  4   FIFO capacity
//! 32  4   FIFO release interval
//! 36  4   FIFO descriptor size
//! 40  4   iface number within the owner (names its wake-up socket)
//! ```
//!
//! All little-endian. Decoding checks the length and the FIFO geometry.

use uct::ucs::{Error, Result};

use crate::fifo::FifoConfig;
use crate::proc_id::{ProcessId, PROCESS_ID_LEN};

/// Bytes of an encoded address.
pub(crate) const IFACE_ADDR_LEN: usize = 44;

/// A decoded posix iface address.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct IfaceAddr {
    pub(crate) owner: ProcessId,
    pub(crate) fd: u32,
    pub(crate) seg_len: u64,
    pub(crate) fifo: FifoConfig,
    pub(crate) iface_id: u32,
}

fn u32_at(b: &[u8], at: usize) -> u32 {
    let mut w = [0u8; 4];
    w.copy_from_slice(&b[at..at + 4]);
    u32::from_le_bytes(w)
}

impl IfaceAddr {
    pub(crate) fn encode(&self) -> [u8; IFACE_ADDR_LEN] {
        let mut out = [0u8; IFACE_ADDR_LEN];
        out[..PROCESS_ID_LEN].copy_from_slice(&self.owner.encode());
        out[12..16].copy_from_slice(&self.fd.to_le_bytes());
        out[16..24].copy_from_slice(&self.seg_len.to_le_bytes());
        let f = &self.fifo;
        for (i, v) in [f.elem_size, f.capacity, f.release_every, f.desc_size]
            .into_iter()
            .enumerate()
        {
            out[24 + 4 * i..28 + 4 * i].copy_from_slice(&(v as u32).to_le_bytes());
        }
        out[40..44].copy_from_slice(&self.iface_id.to_le_bytes());
        out
    }

    pub(crate) fn decode(b: &[u8]) -> Result<IfaceAddr> {
        if b.len() != IFACE_ADDR_LEN {
            return Err(Error::InvalidAddr(format!(
                "posix: iface address of {} bytes, expected {IFACE_ADDR_LEN}",
                b.len()
            )));
        }
        let owner = ProcessId::decode(b)
            .ok_or_else(|| Error::InvalidAddr("posix: iface address without a pid".into()))?;
        let mut len = [0u8; 8];
        len.copy_from_slice(&b[16..24]);
        let fifo = FifoConfig {
            elem_size: u32_at(b, 24) as usize,
            capacity: u32_at(b, 28) as usize,
            release_every: u32_at(b, 32) as usize,
            desc_size: u32_at(b, 36) as usize,
        };
        let needed = fifo
            .region_size()
            .map_err(|e| Error::InvalidAddr(format!("posix: iface address: {e}")))?;
        let seg_len = u64::from_le_bytes(len);
        if seg_len < super::shared::Shared::segment_len(needed) as u64 {
            return Err(Error::InvalidAddr(format!(
                "posix: segment of {seg_len} bytes too small for its FIFO"
            )));
        }
        Ok(IfaceAddr {
            owner,
            fd: u32_at(b, 12),
            seg_len,
            fifo,
            iface_id: u32_at(b, 40),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_rejections() {
        let fifo = FifoConfig::default();
        let a = IfaceAddr {
            owner: ProcessId {
                pid: 42,
                start_time: 7,
            },
            fd: 9,
            seg_len: super::super::shared::Shared::segment_len(fifo.region_size().unwrap()) as u64,
            fifo,
            iface_id: 3,
        };
        let b = a.encode();
        assert_eq!(IfaceAddr::decode(&b).unwrap(), a);
        assert!(IfaceAddr::decode(&b[..43]).is_err());
        let mut small = a;
        small.seg_len -= 1;
        assert!(IfaceAddr::decode(&small.encode()).is_err());
        let mut bad = b;
        bad[24] = 3; // element size 131
        assert!(IfaceAddr::decode(&bad).is_err());
        let mut nopid = b;
        nopid[..4].fill(0);
        assert!(IfaceAddr::decode(&nopid).is_err());
    }
}
