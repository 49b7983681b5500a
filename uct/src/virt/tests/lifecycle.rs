//! Peer death, clean close, endpoint destruction, flush, addresses, the
//! event fd, the clock helpers and the component.

use super::*;
use crate::virt::{Fate, NodeId};
use crate::{Armed, Component, IfaceParams};

#[test]
fn kill_fails_both_sides_exactly_once_in_order() {
    let net = net_with(link(1000), |_| {});
    let (mut a, mut b) = (node(&net, "a"), node(&net, "b"));
    let (ab, ba) = (a.connect(&b), b.connect(&a));
    // One message each way delivered, so that both sources count.
    a.send(ab, b"a1");
    b.send(ba, b"b1");
    drive(&net, &mut [&mut a, &mut b]);
    // b: one message arrives (not yet taken), one still on the wire.
    b.send(ba, b"b2");
    net.advance(1000);
    b.send(ba, b"b3");
    // a: a zero-copy send and a flush on the wire, two pending tokens.
    assert_eq!(a.zcopy(ab, b"z", Token(1)).unwrap(), Posted::InFlight);
    assert_eq!(a.iface.flush(Some(ab), Token(2)).unwrap(), Posted::InFlight);
    a.iface.pending_add(ab, Token(3)).unwrap();
    a.iface.pending_add(ab, Token(4)).unwrap();
    a.log.0.clear();
    b.log.0.clear();

    net.kill(b.iface.node()).unwrap();
    assert!(!net.is_alive(b.iface.node()));
    a.progress();
    let src_b = match &a.log.0[5] {
        Ev::Am(_, src, data) if data == b"b2" => *src,
        other => panic!("expected b2 after the failure reports, got {other:?}"),
    };
    let lost = Some(Status::ConnectionReset);
    assert_eq!(
        a.log.0,
        [
            Ev::EpFailed(ab),
            Ev::Done(Token(1), lost),
            Ev::Done(Token(2), lost),
            Ev::Ready(ab, Token(3)),
            Ev::Ready(ab, Token(4)),
            Ev::Am(1, src_b, b"b2".to_vec()),
            Ev::SrcFailed(src_b),
        ]
    );
    b.progress();
    assert_eq!(b.log.count(|e| *e == Ev::EpFailed(ba)), 1);
    assert_eq!(b.log.count(|e| matches!(e, Ev::SrcFailed(_))), 1);
    assert_eq!(b.log.count(|e| matches!(e, Ev::Am(..))), 0);

    // Nothing more, ever; operations fail; the dead is unreachable.
    drive(&net, &mut [&mut a, &mut b]);
    assert_eq!(a.log.0.len(), 7);
    assert_eq!(b.log.0.len(), 2);
    assert!(a.iface.am().unwrap().am_short(ab, 1, 0, &[]).is_err());
    assert!(a.zcopy(ab, b"z", Token(9)).is_err());
    assert!(a.iface.flush(Some(ab), Token(9)).is_err());
    assert!(a.iface.pending_add(ab, Token(9)).is_err());
    assert!(b.iface.am().unwrap().am_bcopy(ba, 1, &[b"x"]).is_err());
    assert!(b.iface.flush(None, Token(9)).is_err());
    let (d, i) = (
        b.iface.device_addr().to_vec(),
        b.iface.iface_addr().to_vec(),
    );
    assert!(!a.iface.is_reachable(&d, &i));
    assert!(a.iface.ep_create(&d, &i).is_err());
    net.kill(b.iface.node()).unwrap();
    assert!(net.kill(NodeId(77)).is_err());
    let lost_b3 = net
        .trace()
        .iter()
        .any(|t| t.fate == Fate::Lost && t.len == 2);
    assert!(lost_b3, "b3 was on the wire when b died");
}

#[test]
fn clean_close_delivers_then_ends_the_source() {
    let net = net_with(link(1000), |_| {});
    let (mut a, mut b) = (node(&net, "a"), node(&net, "b"));
    let (ab, ba) = (a.connect(&b), b.connect(&a));
    b.send(ba, b"last words");
    b.send(ba, b"really");
    drop(b);
    a.progress();
    assert_eq!(a.log.0, [Ev::EpFailed(ab)]);
    net.advance(1000);
    a.progress();
    let src = match &a.log.0[1] {
        Ev::Am(_, s, _) => *s,
        e => panic!("{e:?}"),
    };
    assert_eq!(
        a.log.0[1..],
        [
            Ev::Am(1, src, b"last words".to_vec()),
            Ev::Am(1, src, b"really".to_vec()),
            Ev::SrcFailed(src),
        ]
    );
}

#[test]
fn ep_destroy_cancels_what_is_on_the_wire() {
    let net = net_with(link(1000), |_| {});
    let (mut a, mut b) = (node(&net, "a"), node(&net, "b"));
    let ep = a.connect(&b);
    let quiet = a.connect(&b);
    a.send(ep, b"m1");
    net.advance(1000);
    assert_eq!(a.zcopy(ep, b"m2", Token(1)).unwrap(), Posted::InFlight);
    assert_eq!(a.iface.flush(Some(ep), Token(2)).unwrap(), Posted::InFlight);
    a.iface.pending_add(ep, Token(3)).unwrap();
    a.iface.ep_destroy(ep);
    a.iface.ep_destroy(quiet);
    a.iface.ep_destroy(ep);
    drive(&net, &mut [&mut a, &mut b]);
    let canceled = Some(Status::Canceled);
    assert_eq!(
        a.log.0,
        [Ev::Done(Token(1), canceled), Ev::Done(Token(2), canceled)]
    );
    // m1 had arrived; m2 is lost; the source ends (the quiet one, which
    // delivered nothing, ends silently).
    let src = match &b.log.0[0] {
        Ev::Am(_, s, d) if d == b"m1" => *s,
        e => panic!("{e:?}"),
    };
    assert_eq!(b.log.0[1..], [Ev::SrcFailed(src)]);
    assert!(a.iface.am().unwrap().am_short(ep, 1, 0, &[]).is_err());
}

#[test]
fn flush_waits_for_arrival() {
    let net = net_with(link(500), |_| {});
    let (mut a, b) = (node(&net, "a"), node(&net, "b"));
    let ep = a.connect(&b);
    assert_eq!(a.iface.flush(Some(ep), Token(1)).unwrap(), Posted::Done);
    assert_eq!(a.iface.flush(None, Token(1)).unwrap(), Posted::Done);
    assert_eq!(a.zcopy(ep, b"z", Token(2)).unwrap(), Posted::InFlight);
    assert_eq!(a.iface.flush(Some(ep), Token(3)).unwrap(), Posted::InFlight);
    assert_eq!(a.iface.flush(None, Token(4)).unwrap(), Posted::InFlight);
    assert_eq!(a.progress(), 0);
    net.advance(500);
    a.progress();
    assert_eq!(
        a.log.0,
        [
            Ev::Done(Token(2), None),
            Ev::Done(Token(3), None),
            Ev::Done(Token(4), None)
        ]
    );
}

#[test]
fn addresses_name_one_net() {
    let net = VirtNet::default();
    let other = VirtNet::default();
    let (mut a, b) = (node(&net, "a"), node(&net, "b"));
    let x = node(&other, "x");
    // Node 1 of each net: same iface address, other device.
    assert_eq!(b.iface.iface_addr(), &1u64.to_le_bytes());
    let ox = node(&other, "y");
    assert_eq!(ox.iface.iface_addr(), b.iface.iface_addr());
    let (d, i) = (ox.iface.device_addr(), ox.iface.iface_addr());
    assert!(!a.iface.is_reachable(d, i));
    let e = a.iface.ep_create(d, i).unwrap_err();
    assert_eq!(e.status(), Status::Unreachable);
    let dev = a.iface.device_addr().to_vec();
    assert!(a.iface.is_reachable(&dev, b.iface.iface_addr()));
    assert!(a.iface.is_reachable(&dev, a.iface.iface_addr()), "loopback");
    for bad in [
        &[][..],
        &[1, 2, 3],
        &99u64.to_le_bytes(),
        &u64::MAX.to_le_bytes(),
    ] {
        assert!(!a.iface.is_reachable(&dev, bad));
        assert!(a.iface.ep_create(&dev, bad).is_err());
    }
    let e = a
        .iface
        .ep_create(&dev[..7], b.iface.iface_addr())
        .unwrap_err();
    assert_eq!(e.status(), Status::InvalidAddr);
    drop(x);
}

#[test]
fn event_fd_follows_virtual_time() {
    let net = net_with(link(1000), |c| c.event_fd = true);
    let (mut a, mut b) = (node(&net, "a"), node(&net, "b"));
    let fd = b.iface.event_fd().expect("event fd");
    let ep = a.connect(&b);
    assert_eq!(b.iface.arm().unwrap(), Armed::Sleep);
    a.send(ep, b"wake up");
    assert!(!super::readable(fd), "not due yet");
    net.advance(1000);
    assert!(super::readable(fd));
    assert_eq!(b.iface.arm().unwrap(), Armed::Busy);
    assert_eq!(b.progress(), 1);
    assert_eq!(b.iface.arm().unwrap(), Armed::Sleep);
    assert!(!super::readable(fd));

    // Without the option: no fd, no EVENT_FD, arm unsupported.
    let plain = VirtNet::default().iface("p").unwrap();
    let mut plain = Node {
        iface: plain,
        log: Log::default(),
    };
    assert!(plain.iface.event_fd().is_none());
    assert!(!plain.iface.attr().caps.contains(crate::Caps::EVENT_FD));
    let e = plain.iface.arm().unwrap_err();
    assert_eq!(e.status(), Status::Unsupported);
    assert_eq!(plain.progress(), 0);
}

#[test]
fn auto_advance_moves_the_clock_only_when_all_are_idle() {
    let net = net_with(link(1000), |c| c.auto_advance = true);
    let (mut a, mut b) = (node(&net, "a"), node(&net, "b"));
    let ep = a.connect(&b);
    a.send(ep, b"1");
    assert_eq!(a.progress(), 0);
    assert_eq!(net.now(), 1000, "everyone idle: jump to the arrival");
    a.send(ep, b"2");
    assert_eq!(a.progress(), 0);
    assert_eq!(net.now(), 1000, "b has a message to take: time stands");
    assert_eq!(b.progress(), 1);
    assert_eq!(b.progress(), 1);
    assert_eq!(net.now(), 2000);
    assert_eq!(b.log.payloads(), [b"1".to_vec(), b"2".to_vec()]);
}

#[test]
fn drive_helpers() {
    let net = net_with(link(100), |_| {});
    let (mut a, mut b) = (node(&net, "a"), node(&net, "b"));
    assert_eq!(net.next_event_time(), None);
    assert_eq!(net.step(|| 0).unwrap(), None);
    let ep = a.connect(&b);
    for _ in 0..3 {
        a.send(ep, b"x");
        net.advance(10);
    }
    assert_eq!(net.on_wire(), 3);
    let mut state = (&mut a, &mut b);
    net.drive_until(
        &mut state,
        |(a, b)| a.progress() + b.progress(),
        |(_, b)| b.log.0.len() == 2,
    )
    .unwrap();
    assert_eq!(net.now(), 110);
    let e = net
        .drive_until(
            &mut state,
            |(_, b)| b.progress(),
            |(_, b)| b.log.0.len() > 3,
        )
        .unwrap_err();
    assert_eq!(e.status(), Status::TimedOut);
    assert_eq!(b.log.0.len(), 3);
    // A progress that never goes idle is reported, not spun forever.
    assert!(net.step(|| 1).is_err());
}

/// A sink that kills a node when the first message arrives.
struct Killer {
    net: VirtNet,
    victim: NodeId,
    log: Log,
}

impl AmSink for Killer {
    fn am(&mut self, id: AmId, src: SrcId, data: &[u8]) {
        self.net.kill(self.victim).unwrap();
        self.log.am(id, src, data);
    }
    fn completed(&mut self, t: Token, r: crate::Result<()>) {
        self.log.completed(t, r)
    }
    fn pending_ready(&mut self, ep: EpId, t: Token) {
        self.log.pending_ready(ep, t)
    }
    fn ep_failed(&mut self, ep: EpId, e: Error) {
        self.log.ep_failed(ep, e)
    }
    fn src_failed(&mut self, src: SrcId, e: Error) {
        self.log.src_failed(src, e)
    }
}

#[test]
fn a_sink_may_use_the_net() {
    let net = VirtNet::default();
    let (mut a, mut b) = (node(&net, "a"), node(&net, "b"));
    let ab = a.connect(&b);
    let ba = b.connect(&a);
    a.send(ab, b"kill me");
    let mut sink = Killer {
        net: net.clone(),
        victim: a.iface.node(),
        log: Log::default(),
    };
    assert_eq!(b.iface.progress(&mut sink), 1);
    assert_eq!(b.iface.progress(&mut sink), 2, "ep_failed, src_failed");
    assert_eq!(sink.log.0[1], Ev::EpFailed(ba));
}

#[test]
fn component_opens_ifaces_on_the_net() {
    let net = VirtNet::with_seed(9);
    let comp = net.component();
    assert_eq!(comp.name(), "virt");
    let mds = comp.md_open().unwrap();
    let res = mds[0].resources().unwrap();
    assert_eq!(res.len(), 1);
    assert_eq!(
        (res[0].tl_name.as_str(), res[0].dev_name.as_str()),
        ("virt", "vnet")
    );
    let p = IfaceParams { worker_uuid: 5 };
    let mut x = mds[0].iface_open(&res[0], &p).unwrap();
    let y = mds[0].iface_open(&res[0], &p).unwrap();
    assert!(x.ep_create(y.device_addr(), y.iface_addr()).is_ok());
    let mut wrong = res[0].clone();
    wrong.dev_name = "eth0".into();
    let e = mds[0].iface_open(&wrong, &p).unwrap_err();
    assert_eq!(e.status(), Status::InvalidParam);
    assert!(std::ptr::eq(comp.net(), comp.net()));
    assert_eq!(comp.net().config().devices[0].name, "vnet");
}
