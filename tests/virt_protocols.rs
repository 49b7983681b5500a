//! The protocol layer on the virtual network: every protocol through
//! real workers, deterministically — request to send before and after the
//! receive, zero-length messages, reordered rendezvous data, data split
//! over two lanes by bandwidth (the second connected when first used, or
//! given up if it cannot be), and a receiver that dies mid-rendezvous.

mod common;

use common::pattern;
use rucx::ucp::proto::select::ProtocolId;
use rucx::ucp::uct::virt::{
    LinkConfig, NodeId, Op as NetOp, Verdict, VirtConfig, VirtDevice, VirtNet,
};
use rucx::ucp::uct::Registry;
use rucx::ucp::wireup::address::WorkerAddress;
use rucx::ucp::{Context, UcpConfig};
use rucx::{Ep, Op, Posted, ReqId, Worker, TAG_MASK_ALL};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// A link of `gbps` GB/s with 2 us latency.
fn link(gbps: u64) -> LinkConfig {
    LinkConfig {
        latency: 2_000,
        bandwidth: gbps * 1_000_000_000,
        ..LinkConfig::IDEAL
    }
}

/// A net with devices `(name, GB/s)`, and two contexts on it (two
/// "processes": separate memory domains) with settings `vars`.
fn world(devices: &[(&str, u64)], vars: &[(&str, &str)]) -> (VirtNet, Context, Context) {
    world_of(devices, |d| d, vars)
}

/// [`world`] with each device made by `dev` from its name and link.
fn world_of(
    devices: &[(&str, u64)],
    dev: impl Fn(VirtDevice) -> VirtDevice,
    vars: &[(&str, &str)],
) -> (VirtNet, Context, Context) {
    let cfg = VirtConfig {
        devices: devices
            .iter()
            .map(|&(n, bw)| dev(VirtDevice::new(n).with_link(link(bw))))
            .collect(),
        ..VirtConfig::default()
    };
    let net = VirtNet::new(cfg).expect("net");
    let registry = Registry::new().with(net.component().leak());
    let ctx = || {
        let cfg = UcpConfig::from_lookup(|k| {
            if k == "RUCX_TLS" {
                return Some("virt".into());
            }
            vars.iter()
                .find(|(n, _)| format!("RUCX_{n}") == k)
                .map(|(_, v)| v.to_string())
        })
        .expect("config");
        Context::with_registry(cfg, &registry).expect("context")
    };
    let (a, b) = (ctx(), ctx());
    (net, a, b)
}

struct Pair {
    net: VirtNet,
    a: Worker,
    b: Worker,
    ep: Ep,
}

impl Pair {
    fn new(devices: &[(&str, u64)], vars: &[(&str, &str)]) -> Pair {
        Pair::of(world(devices, vars))
    }

    fn of((net, ca, cb): (VirtNet, Context, Context)) -> Pair {
        let mut a = ca.create_worker().expect("worker");
        let b = cb.create_worker().expect("worker");
        let ep = a.connect(&b.address()).expect("connect");
        Pair { net, a, b, ep }
    }

    /// Runs the net until `done` holds; panics if it goes idle first.
    fn until(&mut self, what: &str, mut done: impl FnMut(&mut Worker, &mut Worker) -> bool) {
        for _ in 0..1_000_000 {
            if done(&mut self.a, &mut self.b) {
                return;
            }
            if self.a.progress() + self.b.progress() > 0 {
                continue;
            }
            match self.net.next_event_time() {
                Some(t) => self.net.advance_to(t),
                None if done(&mut self.a, &mut self.b) => return,
                None => panic!("the net went idle before {what}"),
            }
        }
        panic!("no end in sight: {what}");
    }

    fn send(&mut self, size: usize, tag: u64) -> (Vec<u8>, Option<ReqId>) {
        let out = pattern(size, tag);
        match self
            .a
            .tag_send(self.ep, out.clone(), tag, Op::new())
            .expect("send")
        {
            Posted::Done(..) => (out, None),
            Posted::InFlight(id) => (out, Some(id)),
        }
    }

    fn recv(&mut self, size: usize, tag: u64) -> ReqId {
        match self
            .b
            .tag_recv(vec![0u8; size], tag, TAG_MASK_ALL, Op::new())
            .expect("recv")
        {
            Posted::InFlight(id) => id,
            Posted::Done(..) => panic!("tag {tag}: received at once"),
        }
    }

    /// Sends `size` bytes; the receive is posted before the message or
    /// after its first part arrived. Checks contents and that nothing is
    /// left over.
    fn transfer(&mut self, size: usize, tag: u64, recv_first: bool) {
        let early = recv_first.then(|| self.recv(size, tag));
        let (out, s) = self.send(size, tag);
        let r = match early {
            Some(r) => r,
            None => {
                self.until("the message arrives", |_, b| {
                    b.tag_probe(tag, TAG_MASK_ALL).is_some()
                });
                let proto = self.a.ep_protocols(self.ep).expect("tables")[0]
                    .lookup(size)
                    .proto;
                let rndv = matches!(
                    proto,
                    ProtocolId::RndvAm | ProtocolId::RndvGetZcopy | ProtocolId::RndvPutZcopy
                );
                if size > 0 && rndv {
                    assert!(
                        s.is_some_and(|id| self.a.request_is_active(id)),
                        "rendezvous sent before the receive"
                    );
                }
                // Posted with room to spare, to see the length reported.
                match self
                    .b
                    .tag_recv(vec![0u8; size + 5], tag, TAG_MASK_ALL, Op::new())
                    .expect("recv")
                {
                    Posted::InFlight(id) => id,
                    Posted::Done(info, buf) => {
                        assert_eq!(info.length, size);
                        assert!(buf[..size] == out[..], "size {size}: corrupted");
                        self.until("the send completes", |a, _| {
                            s.is_none_or(|id| !a.request_is_active(id))
                        });
                        self.finish_send(s);
                        return;
                    }
                }
            }
        };
        self.until("both complete", |a, b| {
            !b.request_is_active(r) && s.is_none_or(|id| !a.request_is_active(id))
        });
        let (info, got) = self.b.take::<Vec<u8>>(r).expect("done").expect("received");
        assert_eq!(info.length, size);
        assert!(
            got[..size] == out[..],
            "size {size} (recv first {recv_first}): corrupted"
        );
        self.finish_send(s);
    }

    fn finish_send(&mut self, s: Option<ReqId>) {
        if let Some(id) = s {
            assert!(self.a.take::<Vec<u8>>(id).expect("send done").is_ok());
        }
        assert_eq!(self.a.requests_outstanding(), 0, "sender leaked");
        assert_eq!(self.b.requests_outstanding(), 0, "receiver leaked");
    }
}

const SIZES: [usize; 7] = [0, 1, 1000, 8192, 100_000, (1 << 20) + 3, 3 << 20];

fn every_size(vars: &[(&str, &str)], want: Option<(usize, ProtocolId)>) {
    let mut p = Pair::new(&[("vnet", 10)], vars);
    if let Some((size, want)) = want {
        let t = &p.a.ep_protocols(p.ep).expect("tables")[0];
        assert_eq!(t.lookup(size).proto, want, "{vars:?}");
    }
    for (i, &size) in SIZES.iter().enumerate() {
        for recv_first in [true, false] {
            p.transfer(size, 2 * i as u64 + u64::from(recv_first), recv_first);
        }
    }
}

#[test]
fn eager_protocols() {
    every_size(&[], None);
    every_size(
        &[("RNDV_THRESH", "inf"), ("ZCOPY_THRESH", "inf")],
        Some((3 << 20, ProtocolId::EagerBcopyMulti)),
    );
    every_size(
        &[("RNDV_THRESH", "inf"), ("ZCOPY_THRESH", "1")],
        Some((3 << 20, ProtocolId::EagerZcopyMulti)),
    );
}

#[test]
fn rendezvous_schemes() {
    for (scheme, want) in [
        ("am", ProtocolId::RndvAm),
        ("get_zcopy", ProtocolId::RndvGetZcopy),
        ("put_zcopy", ProtocolId::RndvPutZcopy),
    ] {
        every_size(
            &[
                ("RNDV_THRESH", "1k"),
                ("RNDV_SCHEME", scheme),
                ("RNDV_FRAG_SIZE", "64k"),
            ],
            Some((100_000, want)),
        );
    }
}

#[test]
fn reordered_rendezvous_data_lands_in_place() {
    for scheme in ["am", "get_zcopy", "put_zcopy"] {
        let mut p = Pair::new(
            &[("vnet", 10)],
            &[
                ("RNDV_THRESH", "1k"),
                ("RNDV_SCHEME", scheme),
                ("RNDV_FRAG_SIZE", "16k"),
            ],
        );
        let mut cfg = link(10);
        cfg.reorder = true;
        p.net.set_default_link(cfg).expect("link");
        // Every other data packet is held back, so later ones overtake it.
        let held = Arc::new(AtomicU64::new(0));
        let seen = held.clone();
        let mut n = 0u64;
        p.net.set_filter(move |pk| {
            let data = matches!(pk.op, NetOp::Put | NetOp::GetReply) || pk.id == 10;
            if !data {
                return Verdict::Pass;
            }
            n += 1;
            if n % 2 == 1 {
                seen.fetch_add(1, Ordering::Relaxed);
                Verdict::Delay(50_000)
            } else {
                Verdict::Pass
            }
        });
        for recv_first in [true, false] {
            p.transfer(200_000, u64::from(recv_first), recv_first);
        }
        p.net.clear_filter();
        assert!(
            held.load(Ordering::Relaxed) >= 4,
            "{scheme}: nothing reordered"
        );
    }
}

#[test]
fn two_lanes_share_the_data_by_bandwidth() {
    for scheme in ["get_zcopy", "put_zcopy"] {
        let mut p = Pair::new(
            &[("fast", 20), ("slow", 10)],
            &[("RNDV_THRESH", "1k"), ("RNDV_SCHEME", scheme)],
        );
        let t = &p.a.ep_protocols(p.ep).expect("tables")[0];
        let c = t.lookup(8 << 20);
        assert_eq!(c.lanes.len(), 2, "{scheme}: {t}");
        let before = (
            p.net.bytes_sent("fast").expect("fast"),
            p.net.bytes_sent("slow").expect("slow"),
        );
        p.transfer(8 << 20, 1, true);
        let fast = p.net.bytes_sent("fast").expect("fast") - before.0;
        let slow = p.net.bytes_sent("slow").expect("slow") - before.1;
        assert!(fast + slow >= 8 << 20, "{scheme}: {fast} + {slow}");
        let ratio = fast as f64 / slow as f64;
        assert!(
            (1.8..=2.2).contains(&ratio),
            "{scheme}: fast {fast} slow {slow}"
        );
    }
}

/// The endpoint that moves the data of `scheme` (the receiver's back to
/// the sender for a rendezvous by get).
fn data_side(p: &mut Pair, scheme: &str) -> (bool, Ep) {
    if scheme == "get_zcopy" {
        let a = p.a.address();
        (false, p.b.connect(&a).expect("the endpoint back"))
    } else {
        (true, p.ep)
    }
}

fn lanes_connected(p: &Pair, (on_a, ep): (bool, Ep)) -> usize {
    let w = if on_a { &p.a } else { &p.b };
    w.ep_lanes_connected(ep).expect("lanes")
}

#[test]
fn second_lanes_connect_with_the_first_message_that_uses_them() {
    for scheme in ["get_zcopy", "put_zcopy"] {
        let mut p = Pair::new(
            &[("fast", 20), ("slow", 10)],
            &[("RNDV_THRESH", "1k"), ("RNDV_SCHEME", scheme)],
        );
        let t = &p.a.ep_protocols(p.ep).expect("tables")[0];
        let one_lane = (1usize..64 << 20)
            .step_by(4096)
            .take_while(|&n| t.lookup(n).lanes.len() < 2)
            .last()
            .expect("small messages use one lane");
        let side = data_side(&mut p, scheme);
        // Small and one-lane rendezvous messages: one connection.
        p.transfer(100, 1, true);
        p.transfer(one_lane, 2, true);
        assert_eq!(lanes_connected(&p, side), 1, "{scheme}");
        assert_eq!(p.net.bytes_sent("slow").expect("slow"), 0, "{scheme}");
        // The first message split over both connects the second.
        p.transfer(8 << 20, 3, true);
        assert_eq!(lanes_connected(&p, side), 2, "{scheme}");
        assert!(p.net.bytes_sent("slow").expect("slow") > 0, "{scheme}");
    }
}

#[test]
fn a_second_lane_that_cannot_connect_leaves_the_data_to_the_first() {
    for scheme in ["get_zcopy", "put_zcopy"] {
        let mut p = Pair::new(
            &[("fast", 20), ("slow", 10)],
            &[("RNDV_THRESH", "1k"), ("RNDV_SCHEME", scheme)],
        );
        let side = data_side(&mut p, scheme);
        // The slow device's iface of the side that would connect is gone.
        let peer = if side.0 { &p.b } else { &p.a };
        let a = WorkerAddress::decode(&peer.address()).expect("address");
        let slow = a
            .ifaces
            .iter()
            .min_by(|x, y| x.model.bandwidth.total_cmp(&y.model.bandwidth))
            .expect("a slow iface");
        let id = NodeId::from_iface_addr(&slow.iface_addr).expect("virt iface");
        p.net.kill(id).expect("kill");
        p.transfer(8 << 20, 1, true);
        p.transfer(8 << 20, 2, false);
        assert_eq!(lanes_connected(&p, side), 1, "{scheme}");
        assert_eq!(p.net.bytes_sent("slow").expect("slow"), 0, "{scheme}");
    }
}

/// The node id of a worker's only virt iface.
fn node(w: &Worker) -> NodeId {
    let a = WorkerAddress::decode(&w.address()).expect("address");
    NodeId::from_iface_addr(&a.ifaces[0].iface_addr).expect("virt iface")
}

#[test]
fn receiver_dies_between_request_and_acknowledgement() {
    for scheme in ["am", "get_zcopy", "put_zcopy"] {
        let mut p = Pair::new(
            &[("vnet", 1)],
            &[("RNDV_THRESH", "1k"), ("RNDV_SCHEME", scheme)],
        );
        let r = p.recv(4 << 20, 5);
        let (_, s) = p.send(4 << 20, 5);
        let s = s.expect("rendezvous in flight");
        // Kill the receiver once a quarter of the data moved: after the
        // request to send, before the end.
        let net = p.net.clone();
        let start = net.bytes_sent("vnet").expect("bytes");
        p.until("a quarter moved", |_, _| {
            net.bytes_sent("vnet").expect("bytes") > start + (1 << 20)
        });
        assert!(
            p.b.request_is_active(r) && p.a.request_is_active(s),
            "{scheme}: too late"
        );
        p.net.kill(node(&p.b)).expect("kill");
        p.until("the sender fails", |a, _| !a.request_is_active(s));
        assert!(matches!(p.a.request_test(s), Some(Err(_))), "{scheme}");
        assert_eq!(p.a.requests_outstanding(), 0, "{scheme}: sender leaked");
    }
}

#[test]
fn sender_dies_while_its_data_is_read() {
    // The receiver's reads fail and its endpoint to the sender fails in
    // the same progress call: the receive must end with the error, once,
    // not later as a success with the data missing.
    for scheme in ["get_zcopy", "put_zcopy"] {
        let mut p = Pair::new(
            &[("vnet", 1)],
            &[("RNDV_THRESH", "1k"), ("RNDV_SCHEME", scheme)],
        );
        let r = p.recv(4 << 20, 6);
        let (_, s) = p.send(4 << 20, 6);
        assert!(s.is_some(), "{scheme}: rendezvous in flight");
        let net = p.net.clone();
        let start = net.bytes_sent("vnet").expect("bytes");
        p.until("a quarter moved", |_, _| {
            net.bytes_sent("vnet").expect("bytes") > start + (1 << 20)
        });
        assert!(p.b.request_is_active(r), "{scheme}: too late");
        p.net.kill(node(&p.a)).expect("kill");
        p.until("the receive ends", |_, b| !b.request_is_active(r));
        let end = p.b.request_test(r);
        assert!(matches!(end, Some(Err(_))), "{scheme}: {end:?}");
        p.until("the receiver settles", |_, b| b.requests_outstanding() == 0);
    }
}
