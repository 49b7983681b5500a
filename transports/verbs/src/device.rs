//! [`VerbsDevice`]: one port of an RDMA NIC as a `rucx-rdma` device, with
//! the protection domains and memory regions every context of it shares.

use std::collections::HashMap;
use std::sync::Arc;

use parking_lot::Mutex;
use rdma_sys as sys;
use rucx_rdma::{Access, Device, DeviceAttr, DeviceInfo, Mr, PdId, TransportKind, Verbs};
use uct::ucs::{Error, Result};

use crate::context::VerbsContext;
use crate::discover::{self, AtomicCap, VerbsDeviceInfo};
use crate::events::AsyncRouter;
use crate::ffi::{set_nonblocking, Ctx};
use crate::res::{Channel, Cq, MrReg, Pd, Qp, QpCap, QpSpec};

/// Private data a connection request or reply carries: the InfiniBand
/// connection manager's limit for a request (56 bytes), which RoCE shares;
/// iWARP allows more, but one limit for all keeps the RC handshake
/// portable.
const MAX_PRIVATE_DATA: usize = 56;

/// An open port of an RDMA device.
#[derive(Debug, Clone)]
pub struct VerbsDevice {
    pub(crate) shared: Arc<DevShared>,
}

/// What every context of a device shares.
#[derive(Debug)]
pub(crate) struct DevShared {
    pub(crate) ctx: Arc<Ctx>,
    pub(crate) attr: DeviceAttr,
    /// The port (from 1).
    pub(crate) port: u8,
    /// What discovery said of the device when it was opened.
    info: VerbsDeviceInfo,
    /// Protection domains by id; regions and queue pairs hold them too.
    pds: Mutex<Pds>,
    /// Live regions by local key.
    mrs: Mutex<HashMap<u32, (MrReg, Mr)>>,
    /// Where asynchronous events go.
    pub(crate) router: Mutex<AsyncRouter>,
}

#[derive(Debug, Default)]
struct Pds {
    next: u32,
    by_id: HashMap<u32, Arc<Pd>>,
}

impl DevShared {
    /// The protection domain `pd`.
    pub(crate) fn pd(&self, pd: PdId) -> Result<Arc<Pd>> {
        self.pds
            .lock()
            .by_id
            .get(&pd.0)
            .cloned()
            .ok_or_else(|| refused("protection domain", "no such protection domain"))
    }
}

fn refused(what: &str, why: &str) -> Error {
    Error::InvalidParam(format!("verbs: {what}: {why}"))
}

/// The IBV_ACCESS_* bits of `access`.
pub(crate) fn ibv_access(access: Access) -> u32 {
    use sys::ibv_access_flags as flags;
    [
        (Access::LOCAL_WRITE, flags::IBV_ACCESS_LOCAL_WRITE),
        (Access::REMOTE_READ, flags::IBV_ACCESS_REMOTE_READ),
        (Access::REMOTE_WRITE, flags::IBV_ACCESS_REMOTE_WRITE),
        (Access::REMOTE_ATOMIC, flags::IBV_ACCESS_REMOTE_ATOMIC),
    ]
    .iter()
    .filter(|(a, _)| access.contains(*a))
    .fold(0, |bits, (_, f)| bits | f.0)
}

impl VerbsDevice {
    /// Opens port `info.name` (`<device>:<port>`) found by discovery.
    pub(crate) fn open(info: &DeviceInfo) -> Result<VerbsDevice> {
        let no_device = || Error::InvalidParam(format!("verbs: no device {:?}", info.name));
        let (dev, port) = info.name.rsplit_once(':').ok_or_else(no_device)?;
        let port: u8 = port.parse().map_err(|_| no_device())?;
        let ctx = Arc::new(Ctx::open(dev)?);
        let vi = discover::query(&ctx)?;
        let p = vi
            .ports
            .iter()
            .find(|p| p.num == port)
            .ok_or_else(no_device)?;
        let max_inline = probe_max_inline(&ctx, &vi);
        let attr = attr_of(info, &vi, p.max_msg_size, max_inline);
        set_nonblocking(ctx.async_fd(), "async event fd")?;
        Ok(VerbsDevice {
            shared: Arc::new(DevShared {
                ctx,
                attr,
                port,
                info: vi,
                pds: Mutex::new(Pds::default()),
                mrs: Mutex::new(HashMap::new()),
                router: Mutex::new(AsyncRouter::default()),
            }),
        })
    }
}

fn attr_of(info: &DeviceInfo, vi: &VerbsDeviceInfo, max_msg: u32, max_inline: u32) -> DeviceAttr {
    let c = &vi.caps;
    DeviceAttr {
        name: info.name.clone(),
        netdev: info.netdev.clone(),
        addr: info.addr,
        transport: vi.transport,
        max_qp_wr: c.max_qp_wr,
        max_cqe: c.max_cqe,
        max_srq_wr: c.max_srq_wr,
        max_srq_sge: c.max_srq_sge,
        max_sge: c.max_sge,
        max_sge_rd: if vi.transport == TransportKind::Iwarp {
            1
        } else {
            c.max_sge_rd.max(1)
        },
        max_inline,
        max_msg_size: u64::from(max_msg),
        max_mr_size: c.max_mr_size,
        // The trait's ORD (requester depth) is the device's
        // max_qp_init_rd_atom, its IRD (responder) max_qp_rd_atom.
        max_qp_rd_atom: c.max_qp_init_rd_atom,
        max_qp_init_rd_atom: c.max_qp_rd_atom,
        atomics: matches!(c.atomic_cap, AtomicCap::Hca | AtomicCap::Global),
        max_private_data: MAX_PRIVATE_DATA,
        local_lkey: None,
    }
}

/// The largest inline send a queue pair of the device gets: ibv_query_device
/// does not say, so a throw-away queue pair is created asking for less and
/// less until one is granted (0 if none is).
fn probe_max_inline(ctx: &Arc<Ctx>, vi: &VerbsDeviceInfo) -> u32 {
    let probe = || -> Result<u32> {
        let pd = Pd::alloc(ctx)?;
        let ch = Channel::create(ctx)?;
        let cq = Cq::create(ctx, &ch, 1)?;
        for want in [1024u32, 512, 256, 128, 64, 32] {
            let cap = QpCap {
                max_send_wr: 1,
                max_recv_wr: 1,
                max_send_sge: 1,
                max_recv_sge: 1,
                max_inline: want,
            };
            let spec = QpSpec {
                pd: &pd,
                send_cq: &cq,
                recv_cq: &cq,
                srq: None,
                cap,
                sq_sig_all: false,
            };
            if let Ok(qp) = Qp::create(&spec) {
                return Ok(qp.cap.max_inline);
            }
        }
        Ok(0)
    };
    probe().unwrap_or_else(|e| {
        tracing::debug!(dev = %vi.name, error = %e, "verbs: inline size not probed");
        0
    })
}

impl Device for VerbsDevice {
    fn attr(&self) -> &DeviceAttr {
        &self.shared.attr
    }

    fn alloc_pd(&self) -> Result<PdId> {
        let pd = Pd::alloc(&self.shared.ctx)?;
        let mut pds = self.shared.pds.lock();
        pds.next = pds.next.wrapping_add(1);
        let id = pds.next;
        pds.by_id.insert(id, pd);
        Ok(PdId(id))
    }

    /// Refused while a region or queue pair of the domain is alive.
    fn dealloc_pd(&self, pd: PdId) -> Result<()> {
        let mut pds = self.shared.pds.lock();
        let held = pds
            .by_id
            .get(&pd.0)
            .ok_or_else(|| refused("dealloc_pd", "no such protection domain"))?;
        if Arc::strong_count(held) > 1 {
            return Err(refused("dealloc_pd", "regions or queue pairs remain"));
        }
        pds.by_id.remove(&pd.0);
        Ok(())
    }

    unsafe fn reg_mr(&self, pd: PdId, addr: *mut u8, len: usize, access: Access) -> Result<Mr> {
        // Remote writes and atomics need local write (verbs refuses them
        // otherwise; say so in words).
        if access.intersects(Access::REMOTE_WRITE | Access::REMOTE_ATOMIC)
            && !access.contains(Access::LOCAL_WRITE)
        {
            return Err(refused("reg_mr", "remote write needs LOCAL_WRITE"));
        }
        let pdh = self.shared.pd(pd)?;
        // SAFETY: the caller keeps the memory valid until dereg_mr, which
        // drops the registration.
        let reg = unsafe { MrReg::register(&pdh, addr, len, ibv_access(access))? };
        let (lkey, rkey) = reg.keys();
        // The trait's keys are never 0, but rxe gives a region without
        // remote rights the rkey 0. Such a region is named by its lkey
        // instead, which the device refuses as a remote key (it compares
        // the key with the region's rkey), so peers still get a remote
        // access error.
        let rkey = if rkey == 0 { lkey } else { rkey };
        let mr = Mr {
            addr: addr as u64,
            len: len as u64,
            access,
            pd,
            lkey,
            rkey,
        };
        self.shared.mrs.lock().insert(lkey, (reg, mr));
        Ok(mr)
    }

    fn dereg_mr(&self, mr: &Mr) -> Result<()> {
        let mut mrs = self.shared.mrs.lock();
        // The region's identity, not the rights it was asked for (a caller
        // may have asked for fewer than were granted, as the RC memory
        // domain adds local write to remote write).
        let same = |live: &Mr| {
            (live.addr, live.len, live.pd, live.rkey) == (mr.addr, mr.len, mr.pd, mr.rkey)
        };
        match mrs.get(&mr.lkey) {
            Some((_, live)) if same(live) => {
                mrs.remove(&mr.lkey);
                Ok(())
            }
            _ => Err(refused("dereg_mr", "no such region")),
        }
    }

    fn open_context(&self) -> Result<Box<dyn Verbs>> {
        Ok(Box::new(VerbsContext::open(&self.shared)?))
    }

    fn details(&self) -> Vec<(&'static str, String)> {
        crate::discover::details(&self.shared.info, self.shared.port)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::discover::DeviceCaps;

    /// libibverbs' `max_qp_rd_atom` is the responder's depth (IRD) and
    /// `max_qp_init_rd_atom` the initiator's (ORD); the trait's fields of
    /// the same names carry the opposite meanings (its docs say ORD and
    /// IRD), so they are filled crosswise.
    #[test]
    fn read_depths_cross_to_the_traits_names() {
        let caps = DeviceCaps {
            max_qp: 1,
            max_qp_wr: 1,
            max_sge: 4,
            max_sge_rd: 2,
            max_cqe: 1,
            max_srq: 1,
            max_srq_wr: 1,
            max_srq_sge: 1,
            max_mr_size: 1,
            atomic_cap: AtomicCap::None,
            max_qp_init_rd_atom: 3,
            max_qp_rd_atom: 5,
        };
        let vi = VerbsDeviceInfo {
            name: "rxe0".into(),
            transport: TransportKind::Roce,
            caps,
            ports: Vec::new(),
        };
        let info = DeviceInfo {
            name: "rxe0:1".into(),
            netdev: "d0".into(),
            addr: "10.78.0.1".parse().unwrap(),
        };
        let a = attr_of(&info, &vi, 1 << 30, 256);
        assert_eq!(a.max_qp_rd_atom, 3, "the trait's ORD");
        assert_eq!(a.max_qp_init_rd_atom, 5, "the trait's IRD");
        assert_eq!((a.max_sge_rd, a.max_inline, a.atomics), (2, 256, false));
    }

    #[test]
    fn access_maps_to_ibv_bits() {
        assert_eq!(ibv_access(Access::empty()), 0);
        assert_eq!(ibv_access(Access::LOCAL_WRITE), 1);
        assert_eq!(
            ibv_access(Access::LOCAL_WRITE | Access::REMOTE_WRITE),
            1 | 2
        );
        assert_eq!(ibv_access(Access::REMOTE_READ), 4);
        assert_eq!(ibv_access(Access::all()), 1 | 2 | 4 | 8);
    }
}
