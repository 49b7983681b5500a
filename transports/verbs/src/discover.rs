//! Device discovery: what `ibv_get_device_list`, `ibv_query_device`,
//! `ibv_query_port` and the GID table say about each RDMA device, and
//! which of its ports the RC transport can use (an active port whose
//! network interface has an IP address, as the connection manager needs).

use std::mem::MaybeUninit;

use rdma_sys as sys;
use rucx_rdma::{DeviceInfo, TransportKind};
use uct::ucs::netif::{self, AfPrio};
use uct::ucs::Result;

use crate::ffi::{device_name, rc_err, Ctx, DeviceList};

/// Link layer of a port (`ibv_port_attr.link_layer`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LinkLayer {
    /// InfiniBand.
    Ib,
    /// Ethernet (RoCE, or iWARP).
    Ethernet,
    /// Not reported (older kernels, iWARP devices).
    Unspecified,
}

/// State of a port (`ibv_port_state`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PortState {
    /// Link down.
    Down,
    /// Link up, not yet configured by a subnet manager.
    Init,
    /// Configured, not yet active.
    Armed,
    /// Usable.
    Active,
    /// Active, deferring to a peer's state change.
    ActiveDefer,
    /// A value this crate does not know.
    Other(u32),
}

impl PortState {
    fn from_raw(v: u32) -> PortState {
        match v {
            1 => PortState::Down,
            2 => PortState::Init,
            3 => PortState::Armed,
            4 => PortState::Active,
            5 => PortState::ActiveDefer,
            v => PortState::Other(v),
        }
    }
}

/// The protocol a GID table entry is for (`ibv_gid_type`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GidKind {
    /// InfiniBand (or iWARP).
    Ib,
    /// RoCE v1 (Ethernet frames, ethertype 0x8915).
    RoceV1,
    /// RoCE v2 (UDP/IP, port 4791).
    RoceV2,
    /// A value this crate does not know.
    Other(u32),
}

/// One valid entry of a port's GID table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GidEntry {
    /// Index in the table (what `ib_write_bw -x` takes).
    pub index: u32,
    /// The GID, in network byte order.
    pub gid: [u8; 16],
    /// Its protocol.
    pub kind: GidKind,
    /// The network interface it belongs to (RoCE), if any.
    pub netdev: Option<String>,
}

/// What `ibv_query_port` says about one port, and its GIDs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PortInfo {
    /// Port number (from 1).
    pub num: u8,
    /// Link layer.
    pub link_layer: LinkLayer,
    /// State.
    pub state: PortState,
    /// Active MTU in bytes (256 to 4096).
    pub active_mtu: u32,
    /// Local identifier (InfiniBand; 0 on Ethernet).
    pub lid: u16,
    /// Largest message.
    pub max_msg_size: u32,
    /// Valid GID table entries (empty where the table cannot be read).
    pub gids: Vec<GidEntry>,
}

/// Atomic operations a device offers (`ibv_atomic_cap`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AtomicCap {
    /// None.
    None,
    /// Atomic among the device's own operations.
    Hca,
    /// Atomic with respect to the CPUs as well.
    Global,
    /// A value this crate does not know (treated as none).
    Other(u32),
}

/// Device capabilities (`ibv_query_device`, trimmed to what rucx uses).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DeviceCaps {
    /// Most queue pairs.
    pub max_qp: u32,
    /// Most outstanding work requests per queue.
    pub max_qp_wr: u32,
    /// Most scatter/gather entries per work request.
    pub max_sge: u32,
    /// Most scatter entries of an RDMA READ.
    pub max_sge_rd: u32,
    /// Most completions per completion queue.
    pub max_cqe: u32,
    /// Most shared receive queues.
    pub max_srq: u32,
    /// Most receives per shared receive queue.
    pub max_srq_wr: u32,
    /// Most scatter entries per shared receive.
    pub max_srq_sge: u32,
    /// Largest memory region.
    pub max_mr_size: u64,
    /// Atomics.
    pub atomic_cap: AtomicCap,
    /// Most READs and atomics a QP has outstanding as requester (ORD).
    pub max_qp_init_rd_atom: u32,
    /// Most READs and atomics a QP serves at once as responder (IRD).
    pub max_qp_rd_atom: u32,
}

/// One RDMA device as discovery sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VerbsDeviceInfo {
    /// Kernel name, e.g. `rxe0`, `mlx5_0`.
    pub name: String,
    /// Wire protocol of its ports (RoCE for Ethernet ports of an
    /// InfiniBand-transport device).
    pub transport: TransportKind,
    /// Capabilities.
    pub caps: DeviceCaps,
    /// Ports, from 1.
    pub ports: Vec<PortInfo>,
}

/// Every RDMA device of this machine (none is an empty list, not an
/// error), with its ports and GIDs. A device that cannot be opened or
/// queried is left out, with a debug log line.
pub fn discover() -> Vec<VerbsDeviceInfo> {
    let list = DeviceList::get();
    let mut out = Vec::new();
    for dev in list.iter() {
        let name = device_name(dev);
        match Ctx::open(&name).and_then(|ctx| query(&ctx)) {
            Ok(info) => out.push(info),
            Err(e) => tracing::debug!(dev = %name, error = %e, "verbs: device left out"),
        }
    }
    out
}

/// What an open device says about itself.
pub(crate) fn query(ctx: &Ctx) -> Result<VerbsDeviceInfo> {
    let attr = query_device(ctx)?;
    let caps = caps_of(&attr);
    let mut ports = Vec::new();
    let mut gid_slots = 0;
    for num in 1..=attr.phys_port_cnt {
        let (port, slots) = query_port(ctx, num)?;
        ports.push(port);
        gid_slots += slots;
    }
    for (port, gid) in gid_table(ctx, gid_slots) {
        if let Some(p) = ports.iter_mut().find(|p| u32::from(p.num) == port) {
            p.gids.push(gid);
        }
    }
    // SAFETY: the context is open; `device` is set by ibv_open_device.
    let iwarp = unsafe { (*(*ctx.as_raw()).device).transport_type }
        == sys::ibv_transport_type::IBV_TRANSPORT_IWARP;
    let transport = if iwarp {
        TransportKind::Iwarp
    } else if ports.iter().any(|p| p.link_layer == LinkLayer::Ethernet) {
        TransportKind::Roce
    } else {
        TransportKind::Ib
    };
    Ok(VerbsDeviceInfo {
        name: ctx.name.clone(),
        transport,
        caps,
        ports,
    })
}

pub(crate) fn query_device(ctx: &Ctx) -> Result<sys::ibv_device_attr> {
    let mut attr = MaybeUninit::<sys::ibv_device_attr>::zeroed();
    // SAFETY: the context is open and `attr` is a writable struct of the
    // size libibverbs expects.
    let rc = unsafe { sys::ibv_query_device(ctx.as_raw(), attr.as_mut_ptr()) };
    if rc != 0 {
        return Err(rc_err(format!("ibv_query_device {}", ctx.name), rc));
    }
    // SAFETY: zero-initialized plain integers, filled in by the call.
    Ok(unsafe { attr.assume_init() })
}

fn caps_of(a: &sys::ibv_device_attr) -> DeviceCaps {
    let u = |v: libc::c_int| v.max(0) as u32;
    DeviceCaps {
        max_qp: u(a.max_qp),
        max_qp_wr: u(a.max_qp_wr),
        max_sge: u(a.max_sge),
        max_sge_rd: u(a.max_sge_rd),
        max_cqe: u(a.max_cqe),
        max_srq: u(a.max_srq),
        max_srq_wr: u(a.max_srq_wr),
        max_srq_sge: u(a.max_srq_sge),
        max_mr_size: a.max_mr_size,
        atomic_cap: match a.atomic_cap {
            0 => AtomicCap::None,
            1 => AtomicCap::Hca,
            2 => AtomicCap::Global,
            v => AtomicCap::Other(v),
        },
        max_qp_init_rd_atom: u(a.max_qp_init_rd_atom),
        max_qp_rd_atom: u(a.max_qp_rd_atom),
    }
}

/// A port's attributes (its GIDs still empty) and the size of its GID
/// table.
fn query_port(ctx: &Ctx, num: u8) -> Result<(PortInfo, usize)> {
    let mut pa = MaybeUninit::<sys::ibv_port_attr>::zeroed();
    // SAFETY: the context is open, `num` is a port of it and `pa` a
    // writable struct of the size passed.
    let rc = unsafe { sys::___ibv_query_port(ctx.as_raw(), num, pa.as_mut_ptr()) };
    if rc != 0 {
        return Err(rc_err(format!("ibv_query_port {}:{num}", ctx.name), rc));
    }
    // SAFETY: zero-initialized plain integers, filled in by the call.
    let pa = unsafe { pa.assume_init() };
    let link_layer = match pa.link_layer as u32 {
        1 => LinkLayer::Ib,
        2 => LinkLayer::Ethernet,
        _ => LinkLayer::Unspecified,
    };
    let port = PortInfo {
        num,
        link_layer,
        state: PortState::from_raw(pa.state),
        active_mtu: 128u32 << pa.active_mtu.min(5),
        lid: pa.lid,
        max_msg_size: pa.max_msg_sz,
        gids: Vec::new(),
    };
    Ok((port, pa.gid_tbl_len.max(0) as usize))
}

/// The valid entries of every port's GID table, with their port numbers
/// (`ibv_query_gid_table`, which reports each entry's type and network
/// interface); `slots` is the size of all the tables together.
fn gid_table(ctx: &Ctx, slots: usize) -> Vec<(u32, GidEntry)> {
    if slots == 0 {
        return Vec::new();
    }
    let mut entries: Vec<sys::ibv_gid_entry> = Vec::with_capacity(slots);
    // SAFETY: the context is open; the buffer has room for `slots`
    // entries of the size passed; the call writes the first `n` of them.
    let n = unsafe {
        crate::ffi::_ibv_query_gid_table(
            ctx.as_raw(),
            entries.as_mut_ptr(),
            slots,
            0,
            std::mem::size_of::<sys::ibv_gid_entry>(),
        )
    };
    if n < 0 {
        tracing::debug!(dev = %ctx.name, rc = n, "verbs: GID table not read");
        return Vec::new();
    }
    // SAFETY: the call initialized `n <= slots` entries.
    unsafe { entries.set_len((n as usize).min(slots)) };
    entries
        .iter()
        .map(|e| {
            let gid = GidEntry {
                index: e.gid_index,
                // SAFETY: every bit pattern of the union is a byte array.
                gid: unsafe { e.gid.raw },
                kind: match e.gid_type {
                    0 => GidKind::Ib,
                    1 => GidKind::RoceV1,
                    2 => GidKind::RoceV2,
                    v => GidKind::Other(v),
                },
                netdev: ifname(e.ndev_ifindex),
            };
            (e.port_num, gid)
        })
        .collect()
}

/// The name of network interface `index` (0 is none).
fn ifname(index: u32) -> Option<String> {
    if index == 0 {
        return None;
    }
    let mut buf = [0 as libc::c_char; libc::IF_NAMESIZE];
    // SAFETY: `buf` has the IF_NAMESIZE bytes if_indextoname may write.
    let p = unsafe { libc::if_indextoname(index, buf.as_mut_ptr()) };
    if p.is_null() {
        return None;
    }
    // SAFETY: on success the buffer holds a NUL-terminated name.
    let name = unsafe { std::ffi::CStr::from_ptr(buf.as_ptr()) };
    Some(name.to_string_lossy().into_owned())
}

/// The network interface of a port: that of its first GID with one
/// (RoCE), else the one sysfs shows beside the device (IPoIB, iWARP).
pub(crate) fn port_netdev(dev: &str, port: &PortInfo) -> Option<String> {
    if let Some(n) = port.gids.iter().find_map(|g| g.netdev.clone()) {
        return Some(n);
    }
    let dir = format!("/sys/class/infiniband/{dev}/device/net");
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .ok()?
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .collect();
    names.sort();
    names.into_iter().next()
}

/// The resource name of a port: `<device>:<port>`, as UCX names them.
pub(crate) fn port_dev_name(dev: &str, port: u8) -> String {
    format!("{dev}:{port}")
}

/// The ports the RC transport can use: active, with a network interface
/// that has an address of a family in `prio` (the connection manager
/// resolves routes by IP address) and is not a loopback interface.
///
/// A RoCE device on the loopback interface (soft-RoCE's `rxe0` on `lo`)
/// moves data, but the kernel's connection manager cannot route on it:
/// `rdma_resolve_route` fails with ENODEV (Linux 6.1, perftest's
/// `ib_write_bw -R` alike), so no connection could ever be made.
pub(crate) fn usable_ports(devs: &[VerbsDeviceInfo], prio: &AfPrio) -> Vec<DeviceInfo> {
    let mut out = Vec::new();
    for d in devs {
        for p in &d.ports {
            if !matches!(p.state, PortState::Active | PortState::ActiveDefer) {
                continue;
            }
            let Some(netdev) = port_netdev(&d.name, p) else {
                continue;
            };
            let Some(addr) = netif::find(&netdev)
                .ok()
                .filter(|n| !n.loopback)
                .and_then(|n| n.addr(prio))
            else {
                continue;
            };
            out.push(DeviceInfo {
                name: port_dev_name(&d.name, p.num),
                netdev,
                addr,
            });
        }
    }
    out
}

/// What `rucx-info -d` shows of a device and its port `port`, beyond the
/// provider's attributes.
pub(crate) fn details(d: &VerbsDeviceInfo, port: u8) -> Vec<(&'static str, String)> {
    let c = &d.caps;
    let mut out = vec![
        ("max_qp", c.max_qp.to_string()),
        ("max_cqe", c.max_cqe.to_string()),
        ("max_srq_wr", c.max_srq_wr.to_string()),
        ("atomic_cap", format!("{:?}", c.atomic_cap)),
    ];
    let Some(p) = d.ports.iter().find(|p| p.num == port) else {
        return out;
    };
    out.push(("Port", p.num.to_string()));
    out.push(("Link layer", format!("{:?}", p.link_layer)));
    out.push(("Port state", format!("{:?}", p.state)));
    out.push(("Active MTU", p.active_mtu.to_string()));
    if p.link_layer == LinkLayer::Ib {
        out.push(("LID", p.lid.to_string()));
    }
    let gids: Vec<String> = p
        .gids
        .iter()
        .map(|g| {
            let kind = match g.kind {
                GidKind::Ib => "IB".to_string(),
                GidKind::RoceV1 => "RoCE v1".to_string(),
                GidKind::RoceV2 => "RoCE v2".to_string(),
                GidKind::Other(v) => format!("type {v}"),
            };
            let dev = g
                .netdev
                .as_deref()
                .map(|n| format!(" on {n}"))
                .unwrap_or_default();
            format!(
                "[{}] {} {kind}{dev}",
                g.index,
                std::net::Ipv6Addr::from(g.gid)
            )
        })
        .collect();
    out.push(("GIDs", gids.join(", ")));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A RoCE device `rxe0` with one active port on `netdev`.
    fn fake(netdev: &str) -> VerbsDeviceInfo {
        let caps = DeviceCaps {
            max_qp: 10,
            max_qp_wr: 1,
            max_sge: 1,
            max_sge_rd: 1,
            max_cqe: 1,
            max_srq: 1,
            max_srq_wr: 1,
            max_srq_sge: 1,
            max_mr_size: 1,
            atomic_cap: AtomicCap::Hca,
            max_qp_init_rd_atom: 1,
            max_qp_rd_atom: 1,
        };
        let mut gid = [0u8; 16];
        gid[10] = 0xff;
        gid[11] = 0xff;
        gid[12..].copy_from_slice(&[10, 0, 0, 1]);
        VerbsDeviceInfo {
            name: "rxe0".into(),
            transport: TransportKind::Roce,
            caps,
            ports: vec![PortInfo {
                num: 1,
                link_layer: LinkLayer::Ethernet,
                state: PortState::Active,
                active_mtu: 1024,
                lid: 0,
                max_msg_size: 1 << 31,
                gids: vec![GidEntry {
                    index: 1,
                    gid,
                    kind: GidKind::RoceV2,
                    netdev: Some(netdev.into()),
                }],
            }],
        }
    }

    /// The connection manager cannot route on a loopback interface, so a
    /// device there (with 127.0.0.1, which `lo` has everywhere) is not
    /// offered; nor is one whose interface does not exist.
    #[test]
    fn ports_on_loopback_are_not_usable() {
        let prio = AfPrio(vec![netif::AddrFamily::Inet, netif::AddrFamily::Inet6]);
        assert_eq!(usable_ports(&[fake("lo")], &prio), Vec::new());
        assert_eq!(usable_ports(&[fake("no-such-if0")], &prio), Vec::new());
    }

    #[test]
    fn details_show_the_port_and_its_gids() {
        let d = fake("va");
        let info = details(&d, 1);
        let get = |k: &str| info.iter().find(|(l, _)| *l == k).map(|(_, v)| v.clone());
        assert_eq!(get("Link layer").as_deref(), Some("Ethernet"));
        assert_eq!(get("Active MTU").as_deref(), Some("1024"));
        assert_eq!(get("atomic_cap").as_deref(), Some("Hca"));
        assert_eq!(
            get("GIDs").as_deref(),
            Some("[1] ::ffff:10.0.0.1 RoCE v2 on va")
        );
        assert!(get("LID").is_none());
        assert_eq!(port_dev_name("rxe0", 1), "rxe0:1");
    }
}
