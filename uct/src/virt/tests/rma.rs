//! `put_zcopy` and `get_zcopy` on the wire: contents, timing, refusals at
//! post and at the target, flushes, the window.

use super::*;
use crate::virt::{Fate, Op, VirtMd};
use crate::Caps;

/// Posted as `InFlight`, then driven until the net is idle: the status of
/// the one completion of `t` (`None` for success).
fn outcome(net: &VirtNet, a: &mut Node, posted: PostResult, t: Token) -> Option<Status> {
    assert_eq!(posted.expect("posted"), Posted::InFlight);
    drive(net, &mut [a]);
    let done: Vec<Option<Status>> = a
        .log
        .0
        .iter()
        .filter_map(|e| match e {
            Ev::Done(x, s) if *x == t => Some(*s),
            _ => None,
        })
        .collect();
    assert_eq!(done.len(), 1, "{t:?} completed {} times", done.len());
    done[0]
}

fn rw() -> Access {
    Access::REMOTE_READ | Access::REMOTE_WRITE
}

#[test]
fn put_and_get_travel_the_wire() {
    let slow = LinkConfig {
        latency: 1000,
        bandwidth: 1_000_000_000, // one byte per nanosecond
        ..LinkConfig::IDEAL
    };
    let net = net_with(slow, |_| {});
    let md = net.memory_domain();
    let target = Mem::new(&[0; 64]);
    let local = Mem::new(&bytes(1, 40));
    let (mut a, mut b) = (node(&net, "a"), node(&net, "b"));
    let ep = a.connect(&b);
    let (h, key) = target.register(&md, rw());
    assert!(a
        .iface
        .attr()
        .caps
        .contains(Caps::PUT_ZCOPY | Caps::GET_ZCOPY));

    let iov = [local.iov(0, 5), local.iov(5, 0), local.iov(10, 15)];
    let posted = a.put(ep, &iov, target.addr(8), &key, Token(1));
    assert_eq!(posted.unwrap(), Posted::InFlight);
    // 20 bytes at one byte per nanosecond, then the latency.
    assert_eq!(net.next_event_time(), Some(1020));
    net.advance(1019);
    assert_eq!(target.read(), [0; 64], "written before the request arrived");
    net.advance(1);
    let mut want = vec![0; 64];
    want[8..13].copy_from_slice(&local.read()[..5]);
    want[13..28].copy_from_slice(&local.read()[10..25]);
    assert_eq!(target.read(), want, "written on arrival");
    assert_eq!(a.progress(), 0, "the acknowledgement is on its way");
    assert_eq!(net.next_event_time(), Some(2020));
    net.advance(1000);
    assert_eq!(a.progress(), 1);
    assert_eq!(a.log.0, [Ev::Done(Token(1), None)]);

    let before = local.read();
    let iov = [local.iov(2, 10), local.iov(20, 20)];
    let posted = a.get(ep, &iov, target.addr(4), &key, Token(2));
    assert_eq!(posted.unwrap(), Posted::InFlight);
    // A request without data, then 30 bytes back.
    assert_eq!(net.next_event_time(), Some(3020));
    net.advance(1000);
    assert_eq!(net.next_event_time(), Some(4050));
    assert_eq!(local.read(), before, "written before the reply arrived");
    net.advance(1030);
    let src = &target.read()[4..34];
    let mut want = before;
    want[2..12].copy_from_slice(&src[..10]);
    want[20..40].copy_from_slice(&src[10..]);
    assert_eq!(local.read(), want);
    assert_eq!(a.progress(), 1);
    assert_eq!(a.log.0[1], Ev::Done(Token(2), None));
    assert_eq!(b.progress(), 0, "one-sided: the target hears nothing");
    md.mem_dereg(&h).unwrap();

    let t: Vec<(Op, usize, Fate)> = net.trace().iter().map(|e| (e.op, e.len, e.fate)).collect();
    let ok = Fate::Delivered;
    assert_eq!(
        t,
        [
            (Op::Put, 20, ok),
            (Op::PutAck, 0, ok),
            (Op::Get, 0, ok),
            (Op::GetReply, 30, ok)
        ]
    );
}

#[test]
fn the_target_refuses_what_the_registration_does_not_allow() {
    let net = net_with(LinkConfig::IDEAL, |_| {});
    let md = net.memory_domain();
    let ro = Mem::new(&[7; 32]);
    let wo = Mem::new(&[9; 32]);
    let other = Mem::new(&[5; 32]);
    let local = Mem::new(&bytes(100, 40));
    let (mut a, b) = (node(&net, "a"), node(&net, "b"));
    let ep = a.connect(&b);
    let (_, ro_key) = ro.register(&md, Access::REMOTE_READ);
    let (wo_h, wo_key) = wo.register(&md, Access::REMOTE_WRITE);
    let md2 = net.new_memory_domain().unwrap();
    let (_, other_key) = other.register(&md2, rw());
    let rejected = Some(Status::Rejected);
    let mut t = 0;
    let mut put = |a: &mut Node, addr: u64, n: usize, key: &RemoteKey| {
        t += 1;
        let r = a.put(ep, &[local.iov(0, n)], addr, key, Token(t));
        outcome(&net, a, r, Token(t))
    };
    assert_eq!(
        put(&mut a, ro.addr(0), 4, &ro_key),
        rejected,
        "no write right"
    );
    for (what, addr, n) in [
        ("past the end", wo.addr(32), 1),
        ("across the end", wo.addr(30), 4),
        ("before the start", wo.addr(0) - 1, 2),
        ("longer than the registration", wo.addr(0), 33),
        ("wrapping", u64::MAX - 1, 4),
    ] {
        assert_eq!(put(&mut a, addr, n, &wo_key), rejected, "{what}");
    }
    assert_eq!(
        put(&mut a, other.addr(0), 4, &other_key),
        rejected,
        "domain"
    );
    md.mem_dereg(&wo_h).unwrap();
    let dead = put(&mut a, wo.addr(0), 4, &wo_key);
    assert_eq!(dead, Some(Status::InvalidParam), "deregistered");
    assert_eq!(ro.read(), [7; 32]);
    assert_eq!(wo.read(), [9; 32]);
    assert_eq!(other.read(), [5; 32]);

    let mine = local.read();
    let r = a.get(ep, &[local.iov(0, 4)], other.addr(0), &other_key, Token(50));
    assert_eq!(outcome(&net, &mut a, r, Token(50)), rejected);
    let r = a.get(ep, &[local.iov(0, 8)], ro.addr(28), &ro_key, Token(51));
    assert_eq!(outcome(&net, &mut a, r, Token(51)), rejected);
    assert_eq!(local.read(), mine);
    // The endpoint still works.
    let r = a.get(ep, &[local.iov(0, 8)], ro.addr(24), &ro_key, Token(52));
    assert_eq!(outcome(&net, &mut a, r, Token(52)), None);
    assert_eq!(local.read()[..8], [7; 8]);
}

#[test]
fn bad_requests_are_refused_at_post() {
    let net = net_with(LinkConfig::IDEAL, |c| c.max_put_zcopy = 16);
    let other_net = VirtNet::default();
    let md = net.memory_domain();
    let mem = Mem::new(&[3; 32]);
    let local = Mem::new(&[4; 32]);
    let (mut a, b) = (node(&net, "a"), node(&net, "b"));
    let ep = a.connect(&b);
    let (_, key) = mem.register(&md, rw());
    let (_, foreign) = mem.register(&other_net.memory_domain(), rw());
    let status = |r: PostResult| r.unwrap_err().status();
    let one = [local.iov(0, 1)];
    let addr = mem.addr(0);
    assert_eq!(
        status(a.put(ep, &one, addr, &foreign, Token(1))),
        Status::Unreachable
    );
    assert_eq!(
        status(a.get(ep, &one, addr, &foreign, Token(1))),
        Status::Unreachable
    );
    let mut named = key.clone();
    named.md_name = "self".into();
    assert_eq!(
        status(a.put(ep, &one, addr, &named, Token(1))),
        Status::InvalidParam
    );
    let mut cut = key.clone();
    cut.packed = cut.packed[1..].into();
    assert_eq!(
        status(a.get(ep, &one, addr, &cut, Token(1))),
        Status::InvalidParam
    );
    let many = vec![local.iov(0, 1); 17];
    assert_eq!(
        status(a.get(ep, &many, addr, &key, Token(1))),
        Status::InvalidParam
    );
    let long = [local.iov(0, 17)];
    assert_eq!(
        status(a.put(ep, &long, addr, &key, Token(1))),
        Status::InvalidParam
    );
    let nobody = EpId(77);
    assert_eq!(
        status(a.put(nobody, &one, addr, &key, Token(1))),
        Status::InvalidParam
    );
    assert_eq!(net.on_wire(), 0, "nothing was sent");
    assert_eq!(
        a.put(ep, &[], addr, &key, Token(9)).unwrap(),
        Posted::InFlight
    );
    drive(&net, &mut [&mut a]);
    assert_eq!(
        a.log.0,
        [Ev::Done(Token(9), None)],
        "only the empty put ran"
    );
    assert_eq!(mem.read(), [3; 32]);
    // Unpacking, too, refuses another net's key.
    assert_eq!(
        md.rkey_unpack(&foreign.packed).unwrap_err().status(),
        Status::Unreachable
    );
}

#[test]
fn operations_not_configured_are_not_offered() {
    let net = net_with(LinkConfig::IDEAL, |c| c.max_get_zcopy = 0);
    let mut a = node(&net, "a");
    let attr = a.iface.attr().clone();
    assert!(attr.caps.contains(Caps::PUT_ZCOPY));
    assert!(!attr.caps.contains(Caps::GET_ZCOPY));
    assert_eq!(attr.max_get_zcopy, 0);
    assert!(a.iface.put().is_some(), "put_zcopy is not offered");
    assert!(a.iface.get().is_none(), "get_zcopy is offered");
}

#[test]
fn flush_waits_for_one_sided_operations() {
    let net = net_with(link(1000), |_| {});
    let md = net.memory_domain();
    let mem = Mem::new(&[0; 16]);
    let local = Mem::new(&[1; 16]);
    let (mut a, b) = (node(&net, "a"), node(&net, "b"));
    let (ep, quiet) = (a.connect(&b), a.connect(&b));
    let (_, key) = mem.register(&md, rw());
    let put = a.put(ep, &[local.iov(0, 8)], mem.addr(0), &key, Token(1));
    assert_eq!(put.unwrap(), Posted::InFlight);
    assert_eq!(a.iface.flush(Some(ep), Token(2)).unwrap(), Posted::InFlight);
    assert_eq!(a.iface.flush(None, Token(3)).unwrap(), Posted::InFlight);
    assert_eq!(a.iface.flush(Some(quiet), Token(4)).unwrap(), Posted::Done);
    net.advance(1000);
    assert_eq!(mem.read()[..8], [1; 8]);
    assert_eq!(a.progress(), 0, "written, not acknowledged");
    // A later operation is not waited for by the earlier flushes.
    let get = a.get(quiet, &[local.iov(8, 8)], mem.addr(8), &key, Token(5));
    assert_eq!(get.unwrap(), Posted::InFlight);
    assert_eq!(a.iface.flush(None, Token(6)).unwrap(), Posted::InFlight);
    net.advance(1000);
    a.progress();
    let ok = |t| Ev::Done(Token(t), None);
    assert_eq!(a.log.0, [ok(1), ok(2), ok(3)]);
    net.advance(1000);
    a.progress();
    assert_eq!(a.log.0[3..], [ok(5), ok(6)]);

    // Messages and an operation: the flush waits for the later of both.
    a.send(ep, b"m");
    let put = a.put(ep, &[local.iov(0, 1)], mem.addr(0), &key, Token(7));
    assert_eq!(put.unwrap(), Posted::InFlight);
    assert_eq!(a.iface.flush(Some(ep), Token(8)).unwrap(), Posted::InFlight);
    net.advance(1000);
    assert_eq!(
        a.progress(),
        0,
        "the message arrived, the put is unanswered"
    );
    net.advance(1000);
    a.progress();
    assert_eq!(a.log.0[5..], [ok(7), ok(8)]);
}

#[test]
fn operations_hold_the_window_until_they_finish() {
    let tight = LinkConfig {
        latency: 1000,
        window_msgs: 1,
        ..LinkConfig::IDEAL
    };
    let net = net_with(tight, |_| {});
    let md = net.memory_domain();
    let mem = Mem::new(&[0; 8]);
    let (mut a, b) = (node(&net, "a"), node(&net, "b"));
    let ep = a.connect(&b);
    let (_, key) = mem.register(&md, rw());
    let iov = [mem.iov(0, 4)];
    let addr = mem.addr(4);
    assert_eq!(
        a.put(ep, &iov, addr, &key, Token(1)).unwrap(),
        Posted::InFlight
    );
    assert_eq!(
        a.put(ep, &iov, addr, &key, Token(2)).unwrap(),
        Posted::NoResource
    );
    assert_eq!(
        a.get(ep, &iov, addr, &key, Token(2)).unwrap(),
        Posted::NoResource
    );
    a.iface.pending_add(ep, Token(3)).unwrap();
    net.advance(1000);
    assert_eq!(
        a.progress(),
        0,
        "still held while the acknowledgement travels"
    );
    net.advance(1000);
    a.progress();
    assert_eq!(a.log.0, [Ev::Done(Token(1), None), Ev::Ready(ep, Token(3))]);
    assert_eq!(
        a.get(ep, &iov, addr, &key, Token(4)).unwrap(),
        Posted::InFlight
    );
}

#[test]
fn keys_belong_to_the_domain_of_the_target() {
    let net = net_with(LinkConfig::IDEAL, |_| {});
    let (p, q) = (
        net.new_memory_domain().unwrap(),
        net.new_memory_domain().unwrap(),
    );
    let mem_q = Mem::new(&[0; 8]);
    let local = Mem::new(&[6; 8]);
    let open = |md: &VirtMd, name| Node {
        iface: md.iface("vnet", name).unwrap(),
        log: Log::default(),
    };
    let (mut x, y, z) = (open(&p, "x"), open(&q, "y"), open(&p, "z"));
    let (_, key) = mem_q.register(&q, rw());
    let (to_y, to_z) = (x.connect(&y), x.connect(&z));
    let r = x.put(to_z, &[local.iov(0, 8)], mem_q.addr(0), &key, Token(1));
    assert_eq!(outcome(&net, &mut x, r, Token(1)), Some(Status::Rejected));
    assert_eq!(
        mem_q.read(),
        [0; 8],
        "a key of q reaches no memory through p"
    );
    let r = x.put(to_y, &[local.iov(0, 8)], mem_q.addr(0), &key, Token(2));
    assert_eq!(outcome(&net, &mut x, r, Token(2)), None);
    assert_eq!(mem_q.read(), [6; 8]);
}
