//! [`IwarpDevice`]: one network interface as an RDMA device, with the
//! protection domains and memory regions every context of it shares.

use std::sync::Arc;

use parking_lot::RwLock;
use rucx_rdma::{Access, Device, DeviceAttr, Mr, PdId, TransportKind, Verbs};
use uct::ucs::{Error, Result};

use crate::config::{Settings, MAX_RD};
use crate::engine::Context;
use crate::mr::{Tables, LOCAL_LKEY};
use crate::shared::{
    Shared, MAX_CQE, MAX_INLINE, MAX_MSG, MAX_PRIVATE_DATA, MAX_QP_WR, MAX_SGE, MAX_SRQ_SGE,
    MAX_SRQ_WR,
};

/// An open iWARP device.
#[derive(Debug, Clone)]
pub struct IwarpDevice {
    shared: Arc<Shared>,
}

impl IwarpDevice {
    pub(crate) fn new(netdev: &str, addr: std::net::IpAddr, settings: Settings) -> IwarpDevice {
        let attr = DeviceAttr {
            name: format!("iwarp_{netdev}"),
            netdev: netdev.to_string(),
            addr,
            transport: TransportKind::Iwarp,
            max_qp_wr: MAX_QP_WR,
            max_cqe: MAX_CQE,
            max_srq_wr: MAX_SRQ_WR,
            max_srq_sge: MAX_SRQ_SGE,
            max_sge: MAX_SGE as u32,
            max_sge_rd: 1,
            max_inline: MAX_INLINE as u32,
            max_msg_size: MAX_MSG,
            max_mr_size: 1 << 46,
            max_qp_rd_atom: MAX_RD,
            max_qp_init_rd_atom: MAX_RD,
            atomics: false,
            max_private_data: MAX_PRIVATE_DATA,
            local_lkey: Some(LOCAL_LKEY),
        };
        IwarpDevice {
            shared: Arc::new(Shared {
                attr,
                settings,
                tables: RwLock::new(Tables::default()),
                addr,
            }),
        }
    }
}

fn refused(what: &str, why: &str) -> Error {
    Error::InvalidParam(format!("iwarp: {what}: {why}"))
}

impl Device for IwarpDevice {
    fn attr(&self) -> &DeviceAttr {
        &self.shared.attr
    }

    fn alloc_pd(&self) -> Result<PdId> {
        Ok(self.shared.tables.write().alloc_pd())
    }

    fn dealloc_pd(&self, pd: PdId) -> Result<()> {
        self.shared
            .tables
            .write()
            .dealloc_pd(pd)
            .map_err(|why| refused("dealloc_pd", why))
    }

    unsafe fn reg_mr(&self, pd: PdId, addr: *mut u8, len: usize, access: Access) -> Result<Mr> {
        let (a, l) = (addr as u64, len as u64);
        if a.checked_add(l).is_none() || l > self.shared.attr.max_mr_size {
            return Err(refused("reg_mr", "range too large"));
        }
        // Remote writes and atomics need local write (as in verbs).
        if access.intersects(Access::REMOTE_WRITE | Access::REMOTE_ATOMIC)
            && !access.contains(Access::LOCAL_WRITE)
        {
            return Err(refused("reg_mr", "remote write needs LOCAL_WRITE"));
        }
        let stag = self
            .shared
            .tables
            .write()
            .insert(pd, a, l, access)
            .map_err(|why| refused("reg_mr", why))?;
        Ok(Mr {
            addr: a,
            len: l,
            access,
            pd,
            lkey: stag,
            rkey: stag,
        })
    }

    fn dereg_mr(&self, mr: &Mr) -> Result<()> {
        self.shared
            .tables
            .write()
            .remove(mr.lkey)
            .map_err(|why| refused("dereg_mr", why))
    }

    fn open_context(&self) -> Result<Box<dyn Verbs>> {
        let ctx = Context::new(self.shared.clone())?;
        if self.shared.settings.thread {
            return Ok(Box::new(crate::engine_thread::Threaded::start(ctx)?));
        }
        Ok(Box::new(ctx))
    }
}
