//! The memory domain of an RDMA device: registrations are memory regions
//! of the device's protection domain, packed keys carry the steering tag.
//!
//! Packed key (little-endian, 32 bytes):
//!
//! | offset | bytes | field |
//! |-------:|------:|-------|
//! | 0 | 4 | `rcmk` |
//! | 4 | 1 | version (1) |
//! | 5 | 3 | reserved, zero |
//! | 8 | 4 | steering tag (rkey), never 0 |
//! | 12 | 8 | start address |
//! | 20 | 8 | length |
//! | 28 | 4 | access bits |
//!
//! Unpacking checks the form; the device that owns the memory checks every
//! access against its live region (a forged or stale tag is refused there
//! with a Terminate, and the requester gets an error completion).

use std::sync::Arc;

use crate::provider::{Device, Provider};
use crate::verbs::{Mr, PdId};
use uct::ucs::config::ConfigTable;
use uct::ucs::{Error, Result};
use uct::{
    Access, DeviceType, Iface, IfaceParams, MemHandle, MemoryDomain, RegCost, RemoteKey, TlResource,
};

use super::config::{Limits, RcConfig};
use super::iface::RcIface;

const KEY_TAG: [u8; 4] = *b"rcmk";
const KEY_VERSION: u8 = 1;
/// Length of a packed key.
pub(crate) const KEY_LEN: usize = 32;

/// One RDMA device as a memory domain, with its resource `rc_<provider>`.
#[derive(Debug)]
pub(crate) struct RcMd {
    pub(crate) tl_name: String,
    pub(crate) device: Arc<dyn Device>,
    pub(crate) pd: PdId,
    pub(crate) config: RcConfig,
}

impl RcMd {
    pub(crate) fn open(
        provider: &'static dyn Provider,
        dev: &str,
        config: &RcConfig,
    ) -> Result<RcMd> {
        Limits::from_config(config)?;
        let device = provider.open_device(dev)?;
        let pd = device.alloc_pd()?;
        Ok(RcMd {
            tl_name: format!("rc_{}", provider.name()),
            device,
            pd,
            config: config.clone(),
        })
    }

    fn mr_of(&self, memh: &MemHandle) -> Mr {
        Mr {
            addr: memh.addr as u64,
            len: memh.len as u64,
            access: memh.access,
            pd: self.pd,
            lkey: (memh.id >> 32) as u32,
            rkey: memh.id as u32,
        }
    }
}

impl Drop for RcMd {
    fn drop(&mut self) {
        if let Err(e) = self.device.dealloc_pd(self.pd) {
            tracing::debug!(error = %e, "rc: protection domain not freed");
        }
    }
}

/// The steering tag and declared range of a packed key.
pub(crate) fn key_stag(rkey: &RemoteKey) -> Option<u32> {
    let p = &rkey.packed;
    if p.len() != KEY_LEN {
        return None;
    }
    let stag = u32::from_le_bytes([p[8], p[9], p[10], p[11]]);
    (stag != 0).then_some(stag)
}

fn invalid(what: &str) -> Error {
    Error::InvalidParam(format!("rc: invalid remote key: {what}"))
}

/// Decodes a packed key (form only).
pub(crate) fn unpack_key(md_name: &str, packed: &[u8]) -> Result<RemoteKey> {
    if packed.len() != KEY_LEN {
        return Err(invalid(&format!(
            "{} bytes, expected {KEY_LEN}",
            packed.len()
        )));
    }
    if packed[..4] != KEY_TAG {
        return Err(invalid("not an rc key"));
    }
    if packed[4] != KEY_VERSION {
        return Err(invalid(&format!("version {}", packed[4])));
    }
    if packed[5..8] != [0, 0, 0] {
        return Err(invalid("reserved bytes set"));
    }
    let u64_at = |o: usize| {
        let mut b = [0u8; 8];
        b.copy_from_slice(&packed[o..o + 8]);
        u64::from_le_bytes(b)
    };
    let stag = u32::from_le_bytes([packed[8], packed[9], packed[10], packed[11]]);
    if stag == 0 {
        return Err(invalid("steering tag 0"));
    }
    let (addr, len) = (u64_at(12), u64_at(20));
    if addr.checked_add(len).is_none() {
        return Err(invalid("range overflows"));
    }
    let bits = u32::from_le_bytes([packed[28], packed[29], packed[30], packed[31]]);
    let access = Access::from_bits(bits).ok_or_else(|| invalid(&format!("access {bits:#x}")))?;
    Ok(RemoteKey {
        md_name: md_name.to_string(),
        packed: Arc::from(packed),
        addr,
        len,
        access,
    })
}

/// Packs a region's key.
pub(crate) fn pack_key(mr: &Mr) -> Vec<u8> {
    let mut k = Vec::with_capacity(KEY_LEN);
    k.extend_from_slice(&KEY_TAG);
    k.extend_from_slice(&[KEY_VERSION, 0, 0, 0]);
    k.extend_from_slice(&mr.rkey.to_le_bytes());
    k.extend_from_slice(&mr.addr.to_le_bytes());
    k.extend_from_slice(&mr.len.to_le_bytes());
    k.extend_from_slice(&mr.access.bits().to_le_bytes());
    k
}

impl MemoryDomain for RcMd {
    fn name(&self) -> &str {
        &self.device.attr().name
    }

    fn resources(&self) -> Result<Vec<TlResource>> {
        Ok(vec![TlResource {
            tl_name: self.tl_name.clone(),
            dev_name: self.device.attr().name.clone(),
            dev_type: DeviceType::Net,
        }])
    }

    fn iface_open(&self, resource: &TlResource, params: &IfaceParams) -> Result<Box<dyn Iface>> {
        if resource.tl_name != self.tl_name || resource.dev_name != self.device.attr().name {
            return Err(Error::InvalidParam(format!(
                "{}: no resource {}/{}",
                self.tl_name, resource.tl_name, resource.dev_name
            )));
        }
        let iface = RcIface::open(self, params)?;
        Ok(Box::new(iface))
    }

    fn device_info(&self) -> Vec<(&'static str, String)> {
        let a = self.device.attr();
        let yes_no = |b: bool| if b { "yes" } else { "no" }.to_string();
        let mut info = vec![
            ("Device", a.name.clone()),
            ("Network device", a.netdev.clone()),
            ("RDMA transport", a.transport.as_str().to_string()),
            ("max_qp_wr", a.max_qp_wr.to_string()),
            ("max_sge", a.max_sge.to_string()),
            ("max_sge_rd", a.max_sge_rd.to_string()),
            ("max_inline", a.max_inline.to_string()),
            ("max_msg_size", a.max_msg_size.to_string()),
            ("max_mr_size", a.max_mr_size.to_string()),
            ("ORD (max_qp_rd_atom)", a.max_qp_rd_atom.to_string()),
            (
                "IRD (max_qp_init_rd_atom)",
                a.max_qp_init_rd_atom.to_string(),
            ),
            ("atomics", yes_no(a.atomics)),
            ("max_private_data", a.max_private_data.to_string()),
            ("local dma key", yes_no(a.local_lkey.is_some())),
        ];
        info.extend(self.device.details());
        info
    }

    fn can_register(&self) -> bool {
        true
    }

    fn atomic_caps(&self) -> uct::AtomicCaps {
        device_atomics(self.device.attr().atomics)
    }

    fn reg_cost(&self) -> RegCost {
        // A table entry in a software provider; hardware pins pages
        // (UCX's verbs model: 16 us + 60 ns per 4 KiB page is typical).
        if self.device.attr().local_lkey.is_some() {
            RegCost { c0: 2e-7, c1: 0.0 }
        } else {
            RegCost {
                c0: 16e-6,
                c1: 0.015e-9,
            }
        }
    }

    unsafe fn mem_reg(&self, addr: *mut u8, len: usize, access: Access) -> Result<MemHandle> {
        // Verbs refuse remote write or atomic rights without local write.
        let mut rights = access;
        if access.intersects(Access::REMOTE_WRITE | Access::REMOTE_ATOMIC) {
            rights |= Access::LOCAL_WRITE;
        }
        // SAFETY: forwarded under the caller's contract.
        let mr = unsafe { self.device.reg_mr(self.pd, addr, len, rights) }?;
        Ok(MemHandle {
            addr: addr as usize,
            len,
            access,
            id: (u64::from(mr.lkey) << 32) | u64::from(mr.rkey),
            table: 0,
        })
    }

    fn mem_dereg(&self, memh: &MemHandle) -> Result<()> {
        self.device.dereg_mr(&self.mr_of(memh))
    }

    fn mkey_pack(&self, memh: &MemHandle) -> Result<Vec<u8>> {
        Ok(pack_key(&self.mr_of(memh)))
    }

    fn rkey_unpack(&self, packed: &[u8]) -> Result<RemoteKey> {
        unpack_key(self.name(), packed)
    }
}

/// The config tables of the RC transport over `provider`.
pub(crate) fn tables(provider: &'static dyn Provider) -> Vec<&'static ConfigTable> {
    let mut t = vec![&super::config::RC_TABLE];
    t.extend(provider.config_tables());
    t
}

/// What an RC iface executes on a device with atomics (its memory
/// domain reports the same, so it lives here).
pub(crate) const RC_ATOMICS: uct::AtomicCaps = uct::AtomicCaps::ADD64
    .union(uct::AtomicCaps::FADD64)
    .union(uct::AtomicCaps::CSWAP64);

/// The atomics of a device: [`RC_ATOMICS`] if it has any, else none.
pub(crate) fn device_atomics(atomics: bool) -> uct::AtomicCaps {
    if atomics {
        RC_ATOMICS
    } else {
        uct::AtomicCaps::empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn key_round_trip_and_refusals() {
        let mr = Mr {
            addr: 0x1000,
            len: 64,
            access: Access::REMOTE_READ,
            pd: PdId(1),
            lkey: 0x101,
            rkey: 0x101,
        };
        let k = pack_key(&mr);
        assert_eq!(k.len(), KEY_LEN);
        assert_eq!(&k[..8], b"rcmk\x01\0\0\0");
        let r = unpack_key("dev", &k).unwrap();
        assert_eq!((r.addr, r.len, r.access), (0x1000, 64, Access::REMOTE_READ));
        assert_eq!(key_stag(&r), Some(0x101));
        let mut bad = vec![k[..31].to_vec()];
        for (at, v) in [(0, b'x'), (4, 9), (6, 1), (31, 0xff)] {
            let mut b = k.clone();
            b[at] = v;
            bad.push(b);
        }
        let mut b = k.clone();
        b[8..12].copy_from_slice(&[0; 4]);
        bad.push(b);
        let mut b = k.clone();
        b[12..20].copy_from_slice(&u64::MAX.to_le_bytes());
        bad.push(b);
        for b in bad {
            assert!(unpack_key("dev", &b).is_err());
        }
    }
}
