//! Arbitrary device and iface addresses into real `posix` and `cma` ifaces
//! of the `shm` component: `is_reachable`, `ep_create`, `am_short` on the
//! endpoints that were created, `ep_destroy`.
//!
//! Addresses are raw bytes, or the real addresses of the ifaces here (the
//! posix iface under test, a second posix iface as its peer, the cma
//! iface) with edits: bytes flipped or set, cut or extended, and fields of
//! the posix layout set to chosen values, so that an address passes the
//! length check and reaches the deeper ones (geometry, segment length,
//! process, descriptor). The checks:
//!
//! * no panic;
//! * `is_reachable` says exactly what the documented address formats
//!   allow: the device address must be this host's, a posix iface address
//!   is 44 bytes with a pid, a valid FIFO geometry and a segment long
//!   enough for it, a cma iface address is a 12-byte process id whose pid
//!   the system calls take;
//! * a malformed address never gives an endpoint; the real addresses of
//!   the ifaces here (this process) always do;
//! * on an endpoint, `am_short` succeeds or fails (too long a payload
//!   fails, so does any on `cma`, which has no active messages), and what
//!   it sent arrives intact at the posix iface whose segment it reached;
//! * every endpoint can be destroyed, after which it refuses sends.
//!
//! Shared by the `decoder_robustness` test and the `shm_addresses` fuzz
//! target, so it uses the public API only.

#![allow(dead_code)]

use rucx_shm::proc_id::ProcessId;
use rucx_shm::COMPONENT;
use uct::{
    AmId, AmSink, Caps, Component, EpId, Error, Iface, IfaceParams, Posted, SrcId, Token, AM_ID_MAX,
};

/// Bytes of a posix iface address.
pub(crate) const POSIX_ADDR_LEN: usize = 44;
/// Bytes of a cma iface address (a process id).
pub(crate) const CMA_ADDR_LEN: usize = 12;
/// Offset of the FIFO in a posix segment: a 64-byte header and 32768
/// sender entries of 32 bytes.
const FIFO_OFF: u64 = 64 + 32768 * 32;
/// Most endpoints one case creates.
pub(crate) const MAX_PROBES: usize = 8;
/// Most sends on one endpoint.
pub(crate) const MAX_SENDS: usize = 4;

/// Which iface is asked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Tl {
    Posix,
    Cma,
}

/// A real address to start from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Base {
    /// The iface's own device address.
    Device,
    /// The posix iface under test.
    Posix,
    /// The second posix iface.
    PosixPeer,
    /// The cma iface.
    Cma,
}

/// A change to an address.
#[derive(Debug, Clone)]
pub(crate) enum Edit {
    Xor(u16, u8),
    Set(u16, u8),
    Truncate(u16),
    Append(Vec<u8>),
    /// A little-endian u32 at `4 * (field % 11)` (the posix layout's
    /// fields are 4-byte aligned), if it fits.
    U32(u8, u32),
    /// A little-endian u64 at `4 * (field % 10)`, if it fits.
    U64(u8, u64),
}

/// Where an address's bytes come from.
#[derive(Debug, Clone)]
pub(crate) enum Bytes {
    Raw(Vec<u8>),
    Real(Base, Vec<Edit>),
}

/// One `am_short`: id (taken modulo `AM_ID_MAX`), header, payload length.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Send {
    pub(crate) id: u8,
    pub(crate) header: u64,
    pub(crate) len: u8,
}

/// One address tried on one iface, and the sends on its endpoint.
#[derive(Debug, Clone)]
pub(crate) struct Probe {
    pub(crate) tl: Tl,
    pub(crate) dev: Bytes,
    pub(crate) iface: Bytes,
    pub(crate) sends: Vec<Send>,
}

/// Records what a posix iface delivers.
#[derive(Debug, Default)]
pub(crate) struct Recorder {
    pub(crate) ams: Vec<(AmId, Vec<u8>)>,
    pub(crate) events: usize,
}

impl AmSink for Recorder {
    fn am(&mut self, id: AmId, _src: SrcId, data: &[u8]) {
        self.ams.push((id, data.to_vec()));
    }
    fn completed(&mut self, _token: Token, _result: uct::Result<()>) {
        self.events += 1;
    }
    fn pending_ready(&mut self, _ep: EpId, _token: Token) {
        self.events += 1;
    }
    fn ep_failed(&mut self, _ep: EpId, _error: Error) {
        self.events += 1;
    }
    fn src_failed(&mut self, _src: SrcId, _error: Error) {
        self.events += 1;
    }
}

/// What a run did, to show that the checks were not vacuous.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Stats {
    pub(crate) reachable: usize,
    pub(crate) created: usize,
    pub(crate) sent: usize,
    pub(crate) delivered: usize,
}

/// The ifaces under attack, opened once.
#[derive(Debug)]
pub(crate) struct Target {
    posix: Box<dyn Iface>,
    peer: Box<dyn Iface>,
    /// `None` where cross-memory attach is not available.
    cma: Option<Box<dyn Iface>>,
    me: ProcessId,
}

/// Whether `b` is a well-formed posix iface address.
pub(crate) fn posix_well_formed(b: &[u8]) -> bool {
    if b.len() != POSIX_ADDR_LEN || ProcessId::decode(b).is_none() {
        return false;
    }
    let u32_at = |at: usize| u32::from_le_bytes(b[at..at + 4].try_into().unwrap()) as usize;
    let fifo = rucx_shm::FifoConfig {
        elem_size: u32_at(24),
        capacity: u32_at(28),
        release_every: u32_at(32),
        desc_size: u32_at(36),
    };
    let seg_len = u64::from_le_bytes(b[16..24].try_into().unwrap());
    fifo.region_size()
        .is_ok_and(|n| seg_len >= FIFO_OFF + n as u64)
}

/// Whether `b` is a well-formed cma iface address.
pub(crate) fn cma_well_formed(b: &[u8]) -> bool {
    b.len() == CMA_ADDR_LEN && ProcessId::decode(b).is_some_and(|p| p.pid <= i32::MAX as u32)
}

fn edit(mut v: Vec<u8>, edits: &[Edit]) -> Vec<u8> {
    for e in edits {
        match e {
            Edit::Xor(at, x) if !v.is_empty() => {
                let n = v.len();
                v[usize::from(*at) % n] ^= x;
            }
            Edit::Set(at, x) if !v.is_empty() => {
                let n = v.len();
                v[usize::from(*at) % n] = *x;
            }
            Edit::Truncate(n) => v.truncate(usize::from(*n)),
            Edit::Append(b) => v.extend_from_slice(b),
            Edit::U32(field, x) => {
                let at = 4 * usize::from(field % 11);
                if let Some(w) = v.get_mut(at..at + 4) {
                    w.copy_from_slice(&x.to_le_bytes());
                }
            }
            Edit::U64(field, x) => {
                let at = 4 * usize::from(field % 10);
                if let Some(w) = v.get_mut(at..at + 8) {
                    w.copy_from_slice(&x.to_le_bytes());
                }
            }
            _ => {}
        }
    }
    v
}

fn drain(iface: &mut dyn Iface, sink: &mut Recorder) {
    let mut idle = 0;
    for _ in 0..256 {
        if iface.progress(sink) == 0 {
            idle += 1;
            if idle == 2 {
                break;
            }
        } else {
            idle = 0;
        }
    }
}

impl Target {
    /// Opens the ifaces through the component, as the protocol layer does.
    pub(crate) fn open() -> Target {
        let mds = COMPONENT.md_open().expect("open the shm memory domain");
        let md = &mds[0];
        let res = md.resources().expect("list shm resources");
        let open = |tl: &str| {
            res.iter()
                .find(|r| r.tl_name == tl)
                .map(|r| md.iface_open(r, &IfaceParams::default()))
        };
        let posix = open("posix").expect("a posix resource");
        Target {
            posix: posix.expect("open a posix iface"),
            peer: open("posix").unwrap().expect("open a second posix iface"),
            cma: open("cma").map(|r| r.expect("open the cma iface")),
            me: ProcessId::current().expect("this process"),
        }
    }

    /// Whether there is a cma iface to test.
    pub(crate) fn has_cma(&self) -> bool {
        self.cma.is_some()
    }

    fn real(&self, tl: Tl, base: Base) -> Vec<u8> {
        match base {
            Base::Device => match tl {
                Tl::Posix => self.posix.device_addr().to_vec(),
                Tl::Cma => self
                    .cma
                    .as_ref()
                    .map_or(Vec::new(), |c| c.device_addr().to_vec()),
            },
            Base::Posix => self.posix.iface_addr().to_vec(),
            Base::PosixPeer => self.peer.iface_addr().to_vec(),
            Base::Cma => self.me.encode().to_vec(),
        }
    }

    fn bytes(&self, tl: Tl, b: &Bytes) -> Vec<u8> {
        match b {
            Bytes::Raw(v) => v.clone(),
            Bytes::Real(base, edits) => edit(self.real(tl, *base), edits),
        }
    }

    /// Runs one case; panics with a description of the first broken
    /// property.
    pub(crate) fn check(&mut self, probes: &[Probe]) -> Stats {
        let mut stats = Stats::default();
        let mut eps = Vec::new();
        let mut sent = Vec::new();
        for p in probes.iter().take(MAX_PROBES) {
            if p.tl == Tl::Cma && self.cma.is_none() {
                continue;
            }
            let dev = self.bytes(p.tl, &p.dev);
            let addr = self.bytes(p.tl, &p.iface);
            let (iface, well_formed, must_connect) = match p.tl {
                Tl::Posix => {
                    let own = dev == self.posix.device_addr();
                    let real = addr == self.posix.iface_addr() || addr == self.peer.iface_addr();
                    let ok = own && posix_well_formed(&addr);
                    (&mut self.posix, ok, own && real)
                }
                Tl::Cma => {
                    let cma = self.cma.as_mut().unwrap();
                    let own = dev == cma.device_addr();
                    let ok = own && cma_well_formed(&addr);
                    (cma, ok, own && addr == self.me.encode())
                }
            };
            let what = format!("{:?} dev {dev:02x?} iface {addr:02x?}", p.tl);
            assert_eq!(iface.is_reachable(&dev, &addr), well_formed, "{what}");
            stats.reachable += usize::from(well_formed);
            let ep = match iface.ep_create(&dev, &addr) {
                Ok(ep) => ep,
                Err(e) => {
                    assert!(!must_connect, "{what}: a real address refused: {e}");
                    continue;
                }
            };
            assert!(well_formed, "{what}: an endpoint to a malformed address");
            stats.created += 1;
            let attr = iface.attr().clone();
            for s in p.sends.iter().take(MAX_SENDS) {
                let payload = vec![s.id ^ s.len; usize::from(s.len)];
                let id = s.id % AM_ID_MAX;
                let Some(am) = iface.am() else {
                    // No active messages (cma): nothing to send, by type.
                    assert!(!attr.caps.contains(Caps::AM_SHORT), "{what}: AM_SHORT");
                    continue;
                };
                let got = am.am_short(ep, id, s.header, &payload);
                if !attr.caps.contains(Caps::AM_SHORT) || payload.len() > attr.max_short {
                    assert!(got.is_err(), "{what}: am_short of {} bytes: {got:?}", s.len);
                }
                if let Ok(Posted::Done) = got {
                    let mut data = s.header.to_le_bytes().to_vec();
                    data.extend_from_slice(&payload);
                    sent.push((id, data));
                    stats.sent += 1;
                }
            }
            eps.push((p.tl, ep));
        }
        // What was sent arrived at one of the posix ifaces, intact.
        let mut got = Recorder::default();
        drain(self.posix.as_mut(), &mut got);
        drain(self.peer.as_mut(), &mut got);
        stats.delivered = got.ams.len();
        got.ams.sort();
        sent.sort();
        assert_eq!(got.ams, sent, "messages delivered are not those sent");
        for (tl, ep) in eps.into_iter().rev() {
            let iface = match tl {
                Tl::Posix => &mut self.posix,
                Tl::Cma => self.cma.as_mut().unwrap(),
            };
            iface.ep_destroy(ep);
            iface.ep_destroy(ep);
            if let Some(am) = iface.am() {
                assert!(
                    am.am_short(ep, 0, 0, b"x").is_err(),
                    "a destroyed endpoint sends"
                );
            } else {
                assert!(
                    iface.flush(Some(ep), Token(0)).is_err(),
                    "a destroyed endpoint flushes"
                );
            }
        }
        // The receivers notice the closed senders and free their slots.
        let mut rest = Recorder::default();
        drain(self.posix.as_mut(), &mut rest);
        drain(self.peer.as_mut(), &mut rest);
        assert!(rest.ams.is_empty(), "messages after the endpoints closed");
        stats
    }
}
