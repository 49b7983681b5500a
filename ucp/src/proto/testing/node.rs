//! A core with one recorded lane and an endpoint over it.
#![allow(unsafe_code)]

use super::rec::Rec;
use crate::proto::command::Command;
use crate::proto::core::Core;
use crate::proto::ep::EpConfig;
use crate::proto::wire::AM_WIREUP;
use crate::request::buf::{RecvBuf, SendBuf};
use crate::request::Op;
use crate::ucs;
use crate::ucs::slab::SlabId;
use crate::uct::{AmId, AmSink, DeviceType, EpId, IfaceAttr, SrcId, Token};
use crate::{Context, UcpConfig};

/// The attributes of the virtual transport's ifaces (with `cfg` changes).
pub(crate) fn virt_attr(change: impl FnOnce(&mut crate::uct::virt::VirtConfig)) -> IfaceAttr {
    let mut cfg = crate::uct::virt::VirtConfig::default();
    change(&mut cfg);
    let net = crate::uct::virt::VirtNet::new(cfg).expect("virtual net");
    let iface = net.iface("attr").expect("virtual iface");
    crate::uct::Iface::attr(&iface).clone()
}

/// A context under `config` whose only transport is `net`.
pub(crate) fn context_on(net: &crate::uct::virt::VirtNet, config: &UcpConfig) -> Context {
    let registry = crate::uct::Registry::new().with(net.component().leak());
    Context::with_registry(config.clone(), &registry).expect("context")
}

/// A core with one lane (iface 0, transport endpoint 0), a recorder for
/// it, and the endpoint over that lane.
#[derive(Debug)]
pub(crate) struct Node {
    pub(crate) core: Core,
    pub(crate) tx: Rec,
    pub(crate) ep: SlabId,
}

impl Node {
    /// A node whose lane has `attr`, under the default configuration.
    pub(crate) fn new(attr: IfaceAttr) -> Node {
        Node::with_config(attr, UcpConfig::default())
    }

    /// A node whose lane has `attr`, under `config`.
    pub(crate) fn with_config(attr: IfaceAttr, config: UcpConfig) -> Node {
        let net = crate::uct::virt::VirtNet::with_seed(1);
        Node::on(&net, attr, config, DeviceType::Net)
    }

    /// Two nodes whose lanes have `attr`, under `config`, with memory
    /// domains of one virtual net: keys one packs, the other unpacks.
    pub(crate) fn pair(attr: IfaceAttr, config: UcpConfig) -> (Node, Node) {
        Node::pair_on(attr, config, DeviceType::Net)
    }

    /// As [`Node::pair`], the lanes' device being of kind `dev` (`Shm`:
    /// within the host, where a rendezvous by get may be split).
    pub(crate) fn pair_on(attr: IfaceAttr, config: UcpConfig, dev: DeviceType) -> (Node, Node) {
        let net = crate::uct::virt::VirtNet::with_seed(1);
        let a = Node::on(&net, attr.clone(), config.clone(), dev);
        (a, Node::on(&net, attr, config, dev))
    }

    /// A node over the memory domains of `net`, its lane on a device of
    /// kind `dev`.
    fn on(
        net: &crate::uct::virt::VirtNet,
        attr: IfaceAttr,
        config: UcpConfig,
        dev: DeviceType,
    ) -> Node {
        let ctx = context_on(net, &config);
        let mut core = Core::new(
            1,
            b"address".to_vec(),
            config.select_config(),
            false,
            (ctx, vec![0], vec![dev]),
        );
        let mut tx = Rec {
            attr: attr.clone(),
            sent: Vec::new(),
            full: false,
            fail: None,
            inflight: Vec::new(),
            room_for: None,
            atomics: false,
        };
        let info = core.lane_info("rec/0".into(), &attr, 0);
        let ep = core
            .add_ep(
                vec![(0, EpId(0))],
                vec!["virt".into()],
                vec![info],
                EpConfig::of(&attr),
                7,
            )
            .expect("endpoint");
        // Nothing leaves until the endpoint is used.
        assert!(
            tx.ams().is_empty(),
            "the wireup waits for the first operation"
        );
        core.wake_ep(&mut tx, ep);
        // The endpoint's first message is its wireup, with this address
        // (then, without a limit on unexpected data, its grant, which
        // tests that need it deliver by asking).
        assert_eq!(tx.ams()[0], (AM_WIREUP, b"address".to_vec()));
        tx.sent.clear();
        // Whatever arrives from source 0 is answered on this endpoint.
        core.src_eps.insert((0, SrcId(0)), ep);
        Node { core, tx, ep }
    }

    /// Posts a tag send of `data` (which the test keeps alive until the
    /// send completes).
    pub(crate) fn send(
        &mut self,
        data: &[u8],
        tag: u64,
        op: Op,
    ) -> crate::Result<crate::proto::eager_tx::Started> {
        // SAFETY: the tests keep `data` alive and unchanged while the
        // request is open.
        let buf = unsafe { SendBuf::new(data.as_ptr(), data.len()) };
        self.core.send_start(&mut self.tx, self.ep, buf, tag, op)
    }

    /// Posts a tag receive into `buf` (kept alive by the test until it
    /// completes).
    pub(crate) fn recv(
        &mut self,
        buf: &mut [u8],
        tag: u64,
        mask: u64,
    ) -> crate::Result<crate::proto::eager_rx::RecvStarted> {
        // SAFETY: as for `send`.
        let b = unsafe { RecvBuf::new(buf.as_mut_ptr(), buf.len()) };
        self.core.recv_start(b, tag, mask, Op::new())
    }

    /// Receives message `pid` that a probe removed into `buf` (kept alive
    /// by the test until it completes), then runs what that started.
    pub(crate) fn msg_recv(
        &mut self,
        pid: SlabId,
        buf: &mut [u8],
    ) -> crate::Result<crate::proto::eager_rx::RecvStarted> {
        // SAFETY: as for `send`.
        let b = unsafe { RecvBuf::new(buf.as_mut_ptr(), buf.len()) };
        let r = self.core.msg_recv_start(pid, b, Op::new());
        self.run();
        r
    }

    /// Carries out the commands queued so far (wireup is not expected).
    pub(crate) fn run(&mut self) {
        while let Some(c) = self.core.commands.pop_front() {
            match c {
                // As the worker's executor does, with the recorder as the
                // transport.
                Command::AwaitRoom { iface, uct_ep } => match self.tx.room_asked(iface, uct_ep) {
                    Ok(()) => {}
                    Err(e) => self.core.room_refused(iface, uct_ep, e),
                },
                c => self.core.execute(&mut self.tx, c),
            }
        }
    }

    /// Posts a synchronous tag send of `data` (as [`Node::send`]).
    pub(crate) fn ssend(&mut self, data: &[u8], tag: u64) -> crate::proto::eager_tx::Started {
        self.send(data, tag, Op::new().sync())
            .expect("synchronous send")
    }

    /// Posts a tag send of `data` that does not finish at once.
    pub(crate) fn send_pending(&mut self, data: &[u8], tag: u64) -> SlabId {
        match self.send(data, tag, Op::new()).expect("send") {
            crate::proto::eager_tx::Started::InFlight(id) => id,
            other => panic!("a send expected in flight finished: {other:?}"),
        }
    }

    /// Posts a tag receive (exact tag) that does not finish at once.
    pub(crate) fn recv_pending(&mut self, buf: &mut [u8], tag: u64) -> SlabId {
        match self.recv(buf, tag, !0).expect("receive") {
            crate::proto::eager_rx::RecvStarted::InFlight(id) => id,
            other => panic!("a receive expected in flight finished: {other:?}"),
        }
    }

    /// Feeds one active message to this node as an arrival from source 0,
    /// then carries out its commands.
    pub(crate) fn arrive(&mut self, id: AmId, data: &[u8]) {
        self.core.am(id, SrcId(0), data);
        self.run();
    }

    /// Offers message `msg` from `src` to the core for writing straight
    /// into a receive buffer, as a transport that receives into its own
    /// buffer does (`am_begin` with the first `AM_HEAD_MIN` bytes). If the
    /// core names a destination, writes the rest of the message there (what
    /// fits) and returns the token to end it with ([`AmSink::am_end`]);
    /// else the message is still to be delivered.
    pub(crate) fn direct(&mut self, id: AmId, src: SrcId, msg: &[u8]) -> Option<Token> {
        let head = &msg[..msg.len().min(crate::uct::AM_HEAD_MIN)];
        let dest = self.core.am_begin(id, src, head, msg.len())?;
        let rest = &msg[dest.hdr().min(msg.len())..];
        let n = rest.len().min(dest.len());
        // SAFETY: the core vouches for the destination until `am_end`.
        unsafe { std::ptr::copy_nonoverlapping(rest.as_ptr(), dest.ptr(), n) };
        Some(dest.token())
    }

    /// The length of request `id`'s successful result (`None` while open).
    /// Panics on a failure.
    pub(crate) fn done_len(&self, id: SlabId) -> Option<usize> {
        self.result(id).map(|r| match r {
            Ok(i) => i.length,
            Err(e) => panic!("request failed: {e}"),
        })
    }

    /// Reports zero-copy operation `token` (in flight) as done with
    /// `result`, then carries out the commands that produced.
    pub(crate) fn complete(&mut self, token: Token, result: ucs::Result<()>) {
        let at = self.tx.inflight.iter().position(|&t| t == token);
        let at = at.expect("no such operation in flight");
        self.tx.inflight.remove(at);
        self.core.completed(token, result);
        self.run();
    }

    /// Tells the node its lane has room again (`pending_ready` with the
    /// token of its last `Pending`), and runs what that resumes.
    pub(crate) fn room(&mut self) {
        self.tx.full = false;
        self.tx.room_for = None;
        self.core.pending_ready(EpId(0), Token(self.ep.to_u64()));
        self.run();
    }

    /// Reports every zero-copy operation in flight as done with `result`.
    pub(crate) fn complete_all(&mut self, result: ucs::Result<()>) {
        for t in std::mem::take(&mut self.tx.inflight) {
            let r = match &result {
                Ok(()) => Ok(()),
                Err(e) => Err(e.duplicate()),
            };
            self.core.completed(t, r);
        }
        self.run();
    }

    /// The result of request `id`, once it has one.
    pub(crate) fn result(&self, id: SlabId) -> Option<crate::Result<crate::Info>> {
        self.core.reqs.get(id).and_then(|r| r.result.clone())
    }
}
