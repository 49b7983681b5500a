//! [`VirtIface`]: the [`Iface`] implementation, a handle on one node of a
//! [`VirtNet`].

use super::config::NodeId;
use super::md::VirtMd;
use super::net::Report;
use super::packet::Op;
use super::rkey::VirtKey;
use super::rma::RmaPost;
use super::VirtNet;
use crate::{
    limits, AmId, AmOps, AmSink, AmZcopyOps, Armed, Caps, ConnectMode, EpId, Error, GetOps, Iface,
    IfaceAttr, IfaceInfo, Iov, Posted, PutOps, RemoteKey, Result, Token,
};
use std::os::fd::RawFd;

/// An iface on a [`VirtNet`]: sends go on the net's virtual wire and
/// arrive when the net's clock says so.
///
/// Dropping it is a clean close: what it sent is still delivered, the
/// receivers then see its sources end (`src_failed`), and endpoints to it
/// fail.
#[derive(Debug)]
pub struct VirtIface {
    net: VirtNet,
    node: usize,
    info: IfaceInfo,
    net_id: u64,
    /// Its device stands for a loopback path (`VirtDevice::loopback`).
    loopback: bool,
    event_fd: Option<RawFd>,
    /// Reports collected under the lock, delivered after it.
    out: Vec<Report>,
}

/// Device address: the net id, then the device index, little-endian.
const DEV_ADDR_LEN: usize = 12;

impl VirtIface {
    /// Opens a node on device `dev` (the first with `None`) belonging to
    /// memory domain `md`.
    pub(super) fn open(net: &VirtNet, name: &str, dev: Option<&str>, md: u32) -> Result<VirtIface> {
        let mut n = net.lock();
        let dev = match dev {
            Some(d) => n.device(d)?,
            None => 0,
        };
        let node = n.add_node(name, dev, md)?;
        let cfg = &n.cfg;
        let device = &cfg.devices[dev];
        // The operation bits are derived below.
        let mut caps = Caps::CONNECT_TO_IFACE | Caps::PEER_FAILURE;
        if cfg.event_fd {
            caps |= Caps::EVENT_FD;
        }
        let attr = IfaceAttr {
            caps,
            max_short: cfg.max_short,
            max_bcopy: cfg.max_bcopy,
            max_zcopy: cfg.max_zcopy,
            max_hdr: cfg.max_hdr,
            max_iov: cfg.max_iov,
            max_put_zcopy: cfg.max_put_zcopy,
            max_get_zcopy: cfg.max_get_zcopy,
            model: cfg.model_of(device),
            connect: ConnectMode::ToIface,
        };
        let mut dev_addr = [0u8; DEV_ADDR_LEN];
        dev_addr[..8].copy_from_slice(&n.id.to_le_bytes());
        // Fits: the configuration has at most u32::MAX devices.
        dev_addr[8..].copy_from_slice(&(dev as u32).to_le_bytes());
        let mut iface = VirtIface {
            info: IfaceInfo {
                tl_name: super::TL_NAME.into(),
                dev_name: device.name.clone(),
                device_addr: dev_addr.to_vec(),
                iface_addr: (node as u64).to_le_bytes().to_vec(),
                attr,
            },
            net_id: n.id,
            loopback: device.loopback,
            event_fd: n.nodes[node]
                .event
                .as_ref()
                .map(std::os::fd::AsRawFd::as_raw_fd),
            node,
            net: net.clone(),
            out: Vec::new(),
        };
        drop(n);
        iface.info.attr.caps = crate::derive_caps(&mut iface);
        Ok(iface)
    }

    /// This iface's id on its net.
    pub fn node(&self) -> NodeId {
        NodeId(self.node as u64)
    }

    /// The net it lives on.
    pub fn net(&self) -> &VirtNet {
        &self.net
    }

    /// The name given at creation.
    pub fn name(&self) -> String {
        self.net.lock().nodes[self.node].name.clone()
    }

    /// The node an address names, if the device is this iface's.
    fn decode(&self, dev_addr: &[u8], iface_addr: &[u8]) -> Result<usize> {
        if dev_addr.len() != DEV_ADDR_LEN || iface_addr.len() != 8 {
            return Err(Error::InvalidAddr(format!(
                "virt: addresses of {} and {} bytes, expected {DEV_ADDR_LEN} and 8",
                dev_addr.len(),
                iface_addr.len()
            )));
        }
        if dev_addr != &self.info.device_addr[..] {
            return Err(Error::Unreachable(
                "virt: another virtual net or device".into(),
            ));
        }
        let id = NodeId::from_iface_addr(iface_addr).map_or(u64::MAX, NodeId::get);
        usize::try_from(id).map_err(|_| Error::Unreachable(format!("virt: no iface {id}")))
    }
}

impl VirtIface {
    /// Checks an RMA request: offered, iov within limits, key of this net.
    fn rma_check(&self, op: Op, iov: &[Iov], rkey: &RemoteKey) -> Result<(usize, VirtKey)> {
        let max = match op {
            Op::Put => self.info.attr.max_put_zcopy,
            _ => self.info.attr.max_get_zcopy,
        };
        let total = limits::check_iov(op.name(), iov, self.info.attr.max_iov, max)?;
        if rkey.md_name != super::TL_NAME {
            return Err(Error::InvalidParam(format!(
                "virt: remote key of memory domain {:?}",
                rkey.md_name
            )));
        }
        Ok((total, VirtMd::decode(self.net_id, &rkey.packed)?))
    }
}

impl Drop for VirtIface {
    fn drop(&mut self) {
        self.net.lock().close(self.node);
    }
}

impl Iface for VirtIface {
    fn info(&self) -> &IfaceInfo {
        &self.info
    }

    fn is_reachable(&self, dev_addr: &[u8], iface_addr: &[u8]) -> bool {
        let Ok(target) = self.decode(dev_addr, iface_addr) else {
            return false;
        };
        let n = self.net.lock();
        target < n.nodes.len() && n.is_open(self.node) && n.reaches(self.node, target)
    }

    /// Whether the device is configured as a loopback path
    /// ([`super::VirtDevice::loopback`]) and `dev_addr` one of its net's.
    fn loops_back(&self, dev_addr: &[u8]) -> bool {
        self.loopback
            && dev_addr.len() == DEV_ADDR_LEN
            && dev_addr[..8] == self.net_id.to_le_bytes()
    }

    fn ep_create(&mut self, dev_addr: &[u8], iface_addr: &[u8]) -> Result<EpId> {
        let target = self.decode(dev_addr, iface_addr)?;
        self.net.lock().ep_create(self.node, target)
    }

    fn ep_destroy(&mut self, ep: EpId) {
        self.net.lock().ep_destroy(self.node, ep);
    }

    fn am(&mut self) -> Option<&mut dyn AmOps> {
        Some(self)
    }

    fn zcopy(&mut self) -> Option<&mut dyn AmZcopyOps> {
        Some(self)
    }

    /// Offered unless the net's `max_put_zcopy` is 0.
    fn put(&mut self) -> Option<&mut dyn PutOps> {
        (self.info.attr.max_put_zcopy > 0).then_some(self as &mut dyn PutOps)
    }

    /// Offered unless the net's `max_get_zcopy` is 0.
    fn get(&mut self) -> Option<&mut dyn GetOps> {
        (self.info.attr.max_get_zcopy > 0).then_some(self as &mut dyn GetOps)
    }

    fn pending_add(&mut self, ep: EpId, token: Token) -> Result<()> {
        self.net.lock().pending_add(self.node, ep, token)
    }

    /// `Done` if nothing of the endpoint (or iface) is outstanding, else
    /// `InFlight` until its messages have arrived and its one-sided
    /// operations have finished.
    fn flush(&mut self, ep: Option<EpId>, token: Token) -> Result<Posted> {
        self.net.lock().flush(self.node, ep, token)
    }

    /// Reports, in order: completions and failures queued since the last
    /// call, up to 64 arrived messages, then pending tokens of endpoints
    /// whose link has room. With auto-advance, first moves the clock if no
    /// iface of the net has work at the current time.
    fn progress(&mut self, sink: &mut dyn AmSink) -> usize {
        self.net.lock().progress(self.node, &mut self.out);
        let n = self.out.len();
        for r in self.out.drain(..) {
            r.deliver(sink);
        }
        n
    }

    fn event_fd(&self) -> Option<RawFd> {
        self.event_fd
    }

    fn arm(&mut self) -> Result<Armed> {
        self.net.lock().arm(self.node)
    }
}

impl AmOps for VirtIface {
    fn am_short(&mut self, ep: EpId, id: AmId, header: u64, payload: &[u8]) -> Result<Posted> {
        limits::check_short(payload.len(), self.info.attr.max_short)?;
        let len = 8 + payload.len();
        self.net
            .lock()
            .post(self.node, ep, Op::Short, id, len, None, |b| {
                b.extend_from_slice(&header.to_le_bytes());
                b.extend_from_slice(payload);
            })
    }

    fn am_bcopy(&mut self, ep: EpId, id: AmId, parts: &[&[u8]]) -> Result<(Posted, usize)> {
        let total = limits::bcopy_len(parts, self.info.attr.max_bcopy)?;
        let posted = self
            .net
            .lock()
            .post(self.node, ep, Op::Bcopy, id, total, None, |b| {
                for p in parts {
                    b.extend_from_slice(p);
                }
            })?;
        Ok(posted.with_len(total))
    }
}

impl AmZcopyOps for VirtIface {
    /// Copies header and iov when accepted and returns `InFlight`; the
    /// completion comes when the message arrives on the virtual wire (or
    /// with an error if its endpoint or the peer goes first).
    unsafe fn am_zcopy(
        &mut self,
        ep: EpId,
        id: AmId,
        header: &[u8],
        iov: &[Iov],
        token: Token,
    ) -> Result<Posted> {
        let a = &self.info.attr;
        let total = limits::check_zcopy(header, iov, a.max_hdr, a.max_iov, a.max_zcopy)?;
        let len = header.len() + total;
        self.net
            .lock()
            .post(self.node, ep, Op::Zcopy, id, len, Some(token), |b| {
                b.extend_from_slice(header);
                for v in iov.iter().filter(|v| v.len > 0) {
                    // SAFETY: the caller of `am_zcopy` promises each range
                    // is valid for reads until the operation completes,
                    // which is after this call. Empty ranges are skipped,
                    // so their pointer may be anything.
                    b.extend_from_slice(unsafe { std::slice::from_raw_parts(v.ptr, v.len) });
                }
            })
    }
}

impl PutOps for VirtIface {
    /// Copies the data into the request and returns `InFlight`; the
    /// completion comes with the target's acknowledgement (see `rma.rs`).
    unsafe fn put_zcopy(
        &mut self,
        ep: EpId,
        iov: &[Iov],
        remote_addr: u64,
        rkey: &RemoteKey,
        token: Token,
    ) -> Result<Posted> {
        let (len, key) = self.rma_check(Op::Put, iov, rkey)?;
        let req = RmaPost {
            key,
            addr: remote_addr,
            len,
            token,
        };
        self.net.lock().put(self.node, ep, req, |b| {
            for v in iov.iter().filter(|v| v.len > 0) {
                // SAFETY: the caller of `put_zcopy` promises each range is
                // valid for reads until the operation completes, which is
                // after this call. Empty ranges are skipped, so their
                // pointer may be anything.
                b.extend_from_slice(unsafe { std::slice::from_raw_parts(v.ptr, v.len) });
            }
        })
    }
}

impl GetOps for VirtIface {
    /// Sends a request and returns `InFlight`; the reply's data is written
    /// into `iov` when it arrives, then the completion comes (see
    /// `rma.rs`).
    unsafe fn get_zcopy(
        &mut self,
        ep: EpId,
        iov: &[crate::IovMut],
        remote_addr: u64,
        rkey: &RemoteKey,
        token: Token,
    ) -> Result<Posted> {
        crate::with_iovs(iov, |iov| {
            let (len, key) = self.rma_check(Op::Get, iov, rkey)?;
            let req = RmaPost {
                key,
                addr: remote_addr,
                len,
                token,
            };
            // The ranges are written later, under the caller's promise that
            // they stay valid and unshared until the completion.
            self.net.lock().get(self.node, ep, req, iov.to_vec())
        })
    }
}
