//! Behaviour of the virtual transport beyond the conformance suite: each
//! fault, the failure reports in order, the clock and its helpers.

mod faults;
mod lifecycle;

use super::{LinkConfig, VirtConfig, VirtIface, VirtNet};
use crate::{AmId, AmSink, EpId, Error, Iface, Iov, Posted, SrcId, Status, Token};

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
        let r = self.iface.am_bcopy(ep, 1, &[data]).expect("am_bcopy");
        assert_eq!(r, (Posted::Done, data.len()));
    }

    /// `am_zcopy` of `data` (copied at once by this transport).
    fn zcopy(&mut self, ep: EpId, data: &[u8], token: Token) -> crate::Result<Posted> {
        let iov = [Iov::from_slice(data)];
        // SAFETY: the virtual transport copies the range during the call.
        unsafe { self.iface.am_zcopy(ep, 2, &[], &iov, token) }
    }
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
