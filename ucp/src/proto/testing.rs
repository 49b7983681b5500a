//! Protocol-level test harness: a [`Core`] with one recorded lane, and a
//! way to carry what one core posted to another, without a worker or a
//! transport.
//!
//! [`Rec`] implements [`Lanes`]: it records every operation as a
//! [`Sent`], answers `NoResource` while `full` is set and fails every
//! operation while `fail` is set. A zero-copy operation is `InFlight`
//! until the test completes its token ([`Node::complete_all`]). [`Node`]
//! pairs a core with its recorder and one endpoint; [`deliver`] feeds the
//! active messages one node sent to the other as arrivals, then carries
//! out the commands they produced.
#![allow(unsafe_code)]

use super::core::Core;
use super::ep::EpConfig;
use super::lanes::{no_iface, Lanes};
use super::wire::AM_WIREUP;
use crate::request::buf::{RecvBuf, SendBuf};
use crate::request::Op;
use crate::ucs;
use crate::ucs::slab::SlabId;
use crate::uct::{
    AmId, AmSink, DeviceType, EpId, IfaceAttr, Iov, IovMut, Posted, RemoteKey, SrcId, Token,
};
use crate::{Context, UcpConfig};

/// One operation a core posted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Sent {
    /// An active message as its receiver's sink sees it (header, then
    /// payload); `token` for a zero-copy one.
    Am {
        ep: EpId,
        id: AmId,
        data: Vec<u8>,
        token: Option<Token>,
    },
    /// A zero-copy write of `len` bytes to `remote`.
    Put {
        ep: EpId,
        remote: u64,
        len: usize,
        token: Token,
    },
    /// A zero-copy read of `len` bytes from `remote`.
    Get {
        ep: EpId,
        remote: u64,
        len: usize,
        token: Token,
    },
    /// A request to be told when `ep` has room.
    Pending { ep: EpId, token: Token },
}

/// A recording [`Lanes`] with one iface (index 0).
#[derive(Debug)]
pub(crate) struct Rec {
    pub(crate) attr: IfaceAttr,
    pub(crate) sent: Vec<Sent>,
    /// Every operation but `pending_add` answers `NoResource`.
    pub(crate) full: bool,
    /// Every operation fails with this.
    pub(crate) fail: Option<ucs::Error>,
    /// Zero-copy operations posted and not yet completed.
    pub(crate) inflight: Vec<Token>,
    /// If set, how many more operations the lane takes before it is full.
    pub(crate) room_for: Option<usize>,
}

impl Rec {
    fn check(&mut self, iface: usize) -> ucs::Result<Option<Posted>> {
        if iface != 0 {
            return Err(no_iface(iface));
        }
        if let Some(e) = &self.fail {
            return Err(e.duplicate());
        }
        if let Some(n) = &mut self.room_for {
            if *n == 0 {
                self.full = true;
            } else {
                *n -= 1;
            }
        }
        Ok(self.full.then_some(Posted::NoResource))
    }

    /// Records a zero-copy read or write (that `check` let through), in
    /// flight until completed.
    fn rma(&mut self, token: Token, op: impl FnOnce(Token) -> Sent) -> ucs::Result<Posted> {
        self.sent.push(op(token));
        self.inflight.push(token);
        Ok(Posted::InFlight)
    }

    /// The data of the active messages with id `id` sent so far.
    pub(crate) fn ams_of(&self, id: AmId) -> Vec<Vec<u8>> {
        self.ams()
            .into_iter()
            .filter_map(|(i, d)| (i == id).then_some(d))
            .collect()
    }

    /// The zero-copy reads (`get`) or writes (not `get`) posted so far, as
    /// (remote address, length, token).
    pub(crate) fn rmas(&self, get: bool) -> Vec<(u64, usize, Token)> {
        self.sent
            .iter()
            .filter_map(|s| match *s {
                Sent::Get {
                    remote, len, token, ..
                } if get => Some((remote, len, token)),
                Sent::Put {
                    remote, len, token, ..
                } if !get => Some((remote, len, token)),
                _ => None,
            })
            .collect()
    }

    /// Takes the active messages with id `id` out of those sent (so that
    /// they are not delivered), returning their data.
    pub(crate) fn take_ams_of(&mut self, id: AmId) -> Vec<Vec<u8>> {
        let mut out = Vec::new();
        self.sent.retain(|s| match s {
            Sent::Am { id: i, data, .. } if *i == id => {
                out.push(data.clone());
                false
            }
            _ => true,
        });
        out
    }

    /// The ids of the active messages sent so far.
    pub(crate) fn am_ids(&self) -> Vec<AmId> {
        self.ams().into_iter().map(|(i, _)| i).collect()
    }

    /// The active messages sent so far, as (id, data).
    pub(crate) fn ams(&self) -> Vec<(AmId, Vec<u8>)> {
        self.sent
            .iter()
            .filter_map(|s| match s {
                Sent::Am { id, data, .. } => Some((*id, data.clone())),
                _ => None,
            })
            .collect()
    }
}

impl Lanes for Rec {
    fn attr(&self, iface: usize) -> Option<&IfaceAttr> {
        (iface == 0).then_some(&self.attr)
    }

    fn am_short(
        &mut self,
        iface: usize,
        ep: EpId,
        id: AmId,
        header: u64,
        payload: &[u8],
    ) -> ucs::Result<Posted> {
        if let Some(p) = self.check(iface)? {
            return Ok(p);
        }
        let data = [&header.to_le_bytes()[..], payload].concat();
        self.sent.push(Sent::Am {
            ep,
            id,
            data,
            token: None,
        });
        Ok(Posted::Done)
    }

    fn am_bcopy(
        &mut self,
        iface: usize,
        ep: EpId,
        id: AmId,
        parts: &[&[u8]],
    ) -> ucs::Result<(Posted, usize)> {
        if let Some(p) = self.check(iface)? {
            return Ok((p, 0));
        }
        let data = parts.concat();
        let n = data.len();
        self.sent.push(Sent::Am {
            ep,
            id,
            data,
            token: None,
        });
        Ok((Posted::Done, n))
    }

    unsafe fn am_zcopy(
        &mut self,
        iface: usize,
        ep: EpId,
        id: AmId,
        header: &[u8],
        iov: &[Iov],
        token: Token,
    ) -> ucs::Result<Posted> {
        if let Some(p) = self.check(iface)? {
            return Ok(p);
        }
        let mut data = header.to_vec();
        for v in iov {
            if v.len > 0 {
                // SAFETY: the caller keeps the ranges valid (the contract).
                data.extend_from_slice(unsafe { std::slice::from_raw_parts(v.ptr, v.len) });
            }
        }
        self.sent.push(Sent::Am {
            ep,
            id,
            data,
            token: Some(token),
        });
        self.inflight.push(token);
        Ok(Posted::InFlight)
    }

    unsafe fn put_zcopy(
        &mut self,
        iface: usize,
        ep: EpId,
        iov: &[Iov],
        remote_addr: u64,
        rkey: &RemoteKey,
        token: Token,
    ) -> ucs::Result<Posted> {
        let len = iov.iter().map(|v| v.len).sum();
        if let Some(p) = self.check(iface)? {
            return Ok(p);
        }
        {
            let mut at = remote_addr;
            for v in iov {
                // SAFETY: both nodes of a test live in this process: the
                // key's range is the peer's buffer, which its test keeps
                // alive, and `iov` is valid by the caller's contract.
                unsafe { copy_checked(rkey, at, v.ptr, at as *mut u8, v.len) };
                at += v.len as u64;
            }
        }
        self.rma(token, |token| Sent::Put {
            ep,
            remote: remote_addr,
            len,
            token,
        })
    }

    unsafe fn get_zcopy(
        &mut self,
        iface: usize,
        ep: EpId,
        iov: &[IovMut],
        remote_addr: u64,
        rkey: &RemoteKey,
        token: Token,
    ) -> ucs::Result<Posted> {
        let len = iov.iter().map(|v| v.len).sum();
        if let Some(p) = self.check(iface)? {
            return Ok(p);
        }
        {
            let mut at = remote_addr;
            for v in iov {
                // SAFETY: as for `put_zcopy`.
                unsafe { copy_checked(rkey, at, at as *const u8, v.ptr, v.len) };
                at += v.len as u64;
            }
        }
        self.rma(token, |token| Sent::Get {
            ep,
            remote: remote_addr,
            len,
            token,
        })
    }

    fn pending_add(&mut self, iface: usize, ep: EpId, token: Token) -> ucs::Result<()> {
        if iface != 0 {
            return Err(no_iface(iface));
        }
        if let Some(e) = &self.fail {
            return Err(e.duplicate());
        }
        self.sent.push(Sent::Pending { ep, token });
        Ok(())
    }
}

/// Copies `len` bytes from `from` to `to` for a one-sided operation,
/// after checking that its remote side, `len` bytes at `remote`, lies in
/// the range `rkey` declares.
///
/// # Safety
///
/// Both ranges are valid for the copy.
unsafe fn copy_checked(rkey: &RemoteKey, remote: u64, from: *const u8, to: *mut u8, len: usize) {
    assert!(
        rkey.covers(remote, len),
        "a one-sided access of {len} bytes outside its key's range"
    );
    if len > 0 {
        // SAFETY: the caller's contract.
        unsafe { std::ptr::copy(from, to, len) };
    }
}

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
        };
        let info = core.lane_info("rec/0".into(), &attr, 0);
        let ep = core
            .add_ep(
                &mut tx,
                vec![(0, EpId(0))],
                vec!["virt".into()],
                vec![info],
                EpConfig::of(&attr),
                7,
            )
            .expect("endpoint");
        // The endpoint's first message is its wireup, with this address.
        assert_eq!(tx.ams(), vec![(AM_WIREUP, b"address".to_vec())]);
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
    ) -> crate::Result<super::eager_tx::Started> {
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
    ) -> crate::Result<super::eager_rx::RecvStarted> {
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
    ) -> crate::Result<super::eager_rx::RecvStarted> {
        // SAFETY: as for `send`.
        let b = unsafe { RecvBuf::new(buf.as_mut_ptr(), buf.len()) };
        let r = self.core.msg_recv_start(pid, b, Op::new());
        self.run();
        r
    }

    /// Carries out the commands queued so far (wireup is not expected).
    pub(crate) fn run(&mut self) {
        while let Some(c) = self.core.commands.pop_front() {
            self.core.execute(&mut self.tx, c);
        }
    }

    /// Posts a synchronous tag send of `data` (as [`Node::send`]).
    pub(crate) fn ssend(&mut self, data: &[u8], tag: u64) -> super::eager_tx::Started {
        self.send(data, tag, Op::new().sync())
            .expect("synchronous send")
    }

    /// Posts a tag send of `data` that does not finish at once.
    pub(crate) fn send_pending(&mut self, data: &[u8], tag: u64) -> SlabId {
        match self.send(data, tag, Op::new()).expect("send") {
            super::eager_tx::Started::InFlight(id) => id,
            other => panic!("a send expected in flight finished: {other:?}"),
        }
    }

    /// Posts a tag receive (exact tag) that does not finish at once.
    pub(crate) fn recv_pending(&mut self, buf: &mut [u8], tag: u64) -> SlabId {
        match self.recv(buf, tag, !0).expect("receive") {
            super::eager_rx::RecvStarted::InFlight(id) => id,
            other => panic!("a receive expected in flight finished: {other:?}"),
        }
    }

    /// Feeds one active message to this node as an arrival from source 0,
    /// then carries out its commands.
    pub(crate) fn arrive(&mut self, id: AmId, data: &[u8]) {
        self.core.am(id, SrcId(0), data);
        self.run();
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

/// Delivers between `a` and `b` both ways until neither sends anything;
/// returns how many messages went. Panics after 1000 rounds (a loop).
pub(crate) fn exchange(a: &mut Node, b: &mut Node) -> usize {
    let mut n = 0;
    for _ in 0..1000 {
        let m = deliver(a, b) + deliver(b, a);
        if m == 0 {
            return n;
        }
        n += m;
    }
    panic!("the nodes keep sending");
}

/// Delivers between `a` and `b` and completes every zero-copy operation
/// in flight with success, until nothing is left to do.
pub(crate) fn settle(a: &mut Node, b: &mut Node) {
    for _ in 0..100 {
        exchange(a, b);
        if a.tx.inflight.is_empty() && b.tx.inflight.is_empty() {
            return;
        }
        a.complete_all(Ok(()));
        b.complete_all(Ok(()));
    }
    panic!("the nodes keep working");
}

/// Completes the reads in flight at `b` (the receiver of a rendezvous by
/// get), checks that receive `rid` finished with `len` bytes, then
/// carries `b`'s answer to `a` and checks that send `sid` finished too.
pub(crate) fn finish_reads(a: &mut Node, b: &mut Node, (sid, rid): (SlabId, SlabId), len: usize) {
    b.complete_all(Ok(()));
    assert_eq!(b.done_len(rid), Some(len));
    deliver(b, a);
    assert_eq!(a.done_len(sid), Some(len));
}

/// Sends `data` with `tag` from `a` (in flight) and delivers it to `b`,
/// which has no receive for it and must not answer yet; then posts the
/// receive of `buf` at `b` and carries out what matching started. Returns
/// (send, receive).
pub(crate) fn unexpected_then_recv(
    a: &mut Node,
    b: &mut Node,
    data: &[u8],
    buf: &mut [u8],
    tag: u64,
) -> (SlabId, SlabId) {
    let sid = a.send_pending(data, tag);
    deliver(a, b);
    assert!(b.tx.sent.is_empty(), "an answer before a receive matched");
    let rid = b.recv_pending(buf, tag);
    b.run();
    (sid, rid)
}

/// Little-endian `u64`s one after another: a wire header.
pub(crate) fn le(v: &[u64]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

/// A test pattern of `n` bytes.
pub(crate) fn pattern(n: usize) -> Vec<u8> {
    (0..n).map(|i| (i * 7 + 3) as u8).collect()
}

/// An attribute set that forces fragments: small bcopy, no zero-copy.
pub(crate) fn fragmenting() -> IfaceAttr {
    let mut a = virt_attr(|_| {});
    a.max_bcopy = 256;
    a.max_short = 32;
    a.caps.remove(crate::uct::Caps::AM_ZCOPY);
    a
}

/// The default configuration without rendezvous.
pub(crate) fn no_rndv() -> UcpConfig {
    UcpConfig {
        rndv_thresh: crate::ucs::config::MemUnits::Inf,
        ..UcpConfig::default()
    }
}

/// A configuration with rendezvous from `thresh` bytes on, by `scheme`.
pub(crate) fn rndv_config(scheme: crate::proto::select::RndvScheme, thresh: u64) -> UcpConfig {
    UcpConfig {
        rndv_thresh: crate::ucs::config::MemUnits::Bytes(thresh),
        rndv_scheme: scheme,
        ..UcpConfig::default()
    }
}

/// Two nodes over one net ([`Node::pair`]) whose lanes can read and
/// write, doing rendezvous by `scheme` from 1 KiB on, in zero-copy
/// operations of at most `frag` bytes.
pub(crate) fn rndv_pair(scheme: crate::proto::select::RndvScheme, frag: u64) -> (Node, Node) {
    let mut cfg = rndv_config(scheme, 1024);
    cfg.rndv_frag_size = crate::ucs::config::MemUnits::Bytes(frag);
    let attr = virt_attr(|_| {});
    assert!(attr
        .caps
        .contains(crate::uct::Caps::GET_ZCOPY | crate::uct::Caps::PUT_ZCOPY));
    Node::pair(attr, cfg)
}

/// Feeds the active messages `from` sent (and takes them) to `to` as
/// arrivals from source 0, then carries out `to`'s commands. Returns how
/// many it delivered.
pub(crate) fn deliver(from: &mut Node, to: &mut Node) -> usize {
    let sent = std::mem::take(&mut from.tx.sent);
    let mut n = 0;
    for s in sent {
        match s {
            Sent::Am { id, data, .. } => {
                to.core.am(id, SrcId(0), &data);
                n += 1;
            }
            other => from.tx.sent.push(other),
        }
    }
    to.run();
    n
}
