//! Behaviour of the virtual transport beyond the conformance suite: each
//! fault, the failure reports in order, the clock and its helpers,
//! one-sided operations on the wire, devices.

mod devices;
mod faults;
mod lifecycle;
mod rma;
mod rma_faults;
mod rma_keys;

use super::{LinkConfig, VirtConfig, VirtIface, VirtNet};
use crate::{
    Access, AmId, AmSink, EpId, Error, Iface, Iov, MemHandle, MemoryDomain, Posted, RemoteKey,
    SrcId, Status, Token,
};

/// Everything a sink heard, in one ordered log.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Ev {
    Am(AmId, SrcId, Vec<u8>),
    Done(Token, Option<Status>),
    Ready(EpId, Token),
    EpFailed(EpId),
    SrcFailed(SrcId),
}

#[derive(Debug, Default)]
struct Log(Vec<Ev>);

impl Log {
    /// Payloads of the messages (the 8 header bytes of `am_short` cut).
    fn payloads(&self) -> Vec<Vec<u8>> {
        self.0
            .iter()
            .filter_map(|e| match e {
                Ev::Am(_, _, d) => Some(d.clone()),
                _ => None,
            })
            .collect()
    }

    fn count(&self, f: impl Fn(&Ev) -> bool) -> usize {
        self.0.iter().filter(|e| f(e)).count()
    }
}

impl AmSink for Log {
    fn am(&mut self, id: AmId, src: SrcId, data: &[u8]) {
        self.0.push(Ev::Am(id, src, data.to_vec()));
    }
    fn completed(&mut self, token: Token, result: crate::Result<()>) {
        self.0
            .push(Ev::Done(token, result.err().map(|e| e.status())));
    }
    fn pending_ready(&mut self, ep: EpId, token: Token) {
        self.0.push(Ev::Ready(ep, token));
    }
    fn ep_failed(&mut self, ep: EpId, _error: Error) {
        self.0.push(Ev::EpFailed(ep));
    }
    fn src_failed(&mut self, src: SrcId, _error: Error) {
        self.0.push(Ev::SrcFailed(src));
    }
}

/// An iface with its log.
#[derive(Debug)]
struct Node {
    iface: VirtIface,
    log: Log,
}

impl Node {
    fn progress(&mut self) -> usize {
        self.iface.progress(&mut self.log)
    }

    fn connect(&mut self, to: &Node) -> EpId {
        let (d, i) = (to.iface.device_addr(), to.iface.iface_addr());
        self.iface.ep_create(d, i).expect("ep_create")
    }

    /// `am_bcopy` of `data` with id 1, expecting `Done`.
    fn send(&mut self, ep: EpId, data: &[u8]) {
        let r = self
            .iface
            .am()
            .unwrap()
            .am_bcopy(ep, 1, &[data])
            .expect("am_bcopy");
        assert_eq!(r, (Posted::Done, data.len()));
    }

    /// `put_zcopy` of `iov` to `addr` with `key`.
    fn put(&mut self, ep: EpId, iov: &[Iov], addr: u64, key: &RemoteKey, t: Token) -> PostResult {
        // SAFETY: the tests' ranges lie in `Mem`s that outlive the ifaces
        // (created first, dropped last) and are read only between
        // operations.
        unsafe { self.iface.put().unwrap().put_zcopy(ep, iov, addr, key, t) }
    }

    /// `get_zcopy` into `iov` from `addr` with `key`.
    fn get(&mut self, ep: EpId, iov: &[Iov], addr: u64, key: &RemoteKey, t: Token) -> PostResult {
        // SAFETY: as for `put`; nothing else writes the ranges meanwhile.
        unsafe {
            self.iface
                .get()
                .unwrap()
                .get_zcopy(ep, &crate::testing::writable(iov), addr, key, t)
        }
    }

    /// `am_zcopy` of `data` (copied at once by this transport).
    fn zcopy(&mut self, ep: EpId, data: &[u8], token: Token) -> crate::Result<Posted> {
        let iov = [Iov::from_slice(data)];
        // SAFETY: the virtual transport copies the range during the call.
        unsafe {
            self.iface
                .zcopy()
                .unwrap()
                .am_zcopy(ep, 2, &[], &iov, token)
        }
    }
}

type PostResult = crate::Result<Posted>;

/// A heap buffer reached only through its raw pointer, so that no Rust
/// reference to it is live while an operation may touch it.
#[derive(Debug)]
struct Mem {
    ptr: *mut u8,
    len: usize,
}

impl Mem {
    fn new(data: &[u8]) -> Mem {
        let b: Box<[u8]> = data.into();
        let len = b.len();
        Mem {
            ptr: Box::into_raw(b).cast::<u8>(),
            len,
        }
    }

    /// `[off, off + len)` as an iov entry.
    fn iov(&self, off: usize, len: usize) -> Iov {
        assert!(off + len <= self.len);
        Iov {
            ptr: self.ptr.wrapping_add(off),
            len,
        }
    }

    fn addr(&self, off: usize) -> u64 {
        self.ptr.wrapping_add(off).addr() as u64
    }

    fn read(&self) -> Vec<u8> {
        // SAFETY: `len` initialized bytes owned by this buffer; tests read
        // only while no operation is about to touch it.
        unsafe { std::slice::from_raw_parts(self.ptr, self.len) }.to_vec()
    }

    /// Registers the whole buffer with `md`; returns handle and key.
    fn register(&self, md: &dyn MemoryDomain, access: Access) -> (MemHandle, RemoteKey) {
        // SAFETY: the buffer lives until dropped, which the tests do after
        // the ifaces; it is reached only through its pointer.
        let h = unsafe { md.mem_reg(self.ptr, self.len, access) }.expect("mem_reg");
        let key = md
            .rkey_unpack(&md.mkey_pack(&h).expect("pack"))
            .expect("unpack");
        (h, key)
    }
}

impl Drop for Mem {
    fn drop(&mut self) {
        let slice = std::ptr::slice_from_raw_parts_mut(self.ptr, self.len);
        // SAFETY: from `Box::into_raw` of a boxed slice in `new`, freed
        // only here.
        drop(unsafe { Box::from_raw(slice) });
    }
}

/// `len` bytes counting up from `start`.
fn bytes(start: u8, len: usize) -> Vec<u8> {
    (0..len).map(|i| start.wrapping_add(i as u8)).collect()
}

fn net_with(link: LinkConfig, f: impl FnOnce(&mut VirtConfig)) -> VirtNet {
    let mut cfg = VirtConfig {
        link,
        trace: true,
        ..VirtConfig::default()
    };
    f(&mut cfg);
    VirtNet::new(cfg).expect("valid config")
}

fn node(net: &VirtNet, name: &str) -> Node {
    Node {
        iface: net.iface(name).expect("iface"),
        log: Log::default(),
    }
}

/// Progresses all nodes until idle, jumping the clock, until the wire is
/// empty.
fn drive(net: &VirtNet, nodes: &mut [&mut Node]) {
    net.drive(|| nodes.iter_mut().map(|n| n.progress()).sum())
        .expect("drive");
}

fn link(latency: u64) -> LinkConfig {
    LinkConfig {
        latency,
        ..LinkConfig::IDEAL
    }
}

/// Whether `fd` polls readable right now.
pub(super) fn readable(fd: std::os::fd::RawFd) -> bool {
    let mut p = libc::pollfd {
        fd,
        events: libc::POLLIN,
        revents: 0,
    };
    // SAFETY: one valid pollfd on the stack, count 1, no wait.
    let rc = unsafe { libc::poll(&mut p, 1, 0) };
    rc == 1 && p.revents & libc::POLLIN != 0
}
