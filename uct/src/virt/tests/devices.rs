//! Several devices on one net: separate networks with their own links and
//! models, byte counters, and memory keys that serve every device.

use super::*;
use crate::component::{Component, IfaceParams};
use crate::virt::{Op, VirtDevice};
use crate::PerfModel;

const FAST: u64 = 10_000_000_000; // ten bytes per nanosecond
const SLOW: u64 = 1_000_000_000; // one byte per nanosecond

/// A net with devices `fast` (100 ns, 10 B/ns) and `slow` (1000 ns,
/// 1 B/ns), traced.
fn two_devices() -> VirtNet {
    let link = |latency, bandwidth| LinkConfig {
        latency,
        bandwidth,
        ..LinkConfig::IDEAL
    };
    net_with(LinkConfig::IDEAL, |c| {
        c.devices = vec![
            VirtDevice::new("fast").with_link(link(100, FAST)),
            VirtDevice::new("slow").with_link(link(1000, SLOW)),
        ];
    })
}

fn on(net: &VirtNet, dev: &str, name: &str) -> Node {
    Node {
        iface: net.iface_on(dev, name).expect("iface_on"),
        log: Log::default(),
    }
}

fn addrs(n: &Node) -> (Vec<u8>, Vec<u8>) {
    (
        n.iface.device_addr().to_vec(),
        n.iface.iface_addr().to_vec(),
    )
}

#[test]
fn devices_are_separate_networks() {
    let net = two_devices();
    let (mut a, mut b) = (on(&net, "fast", "a"), on(&net, "fast", "b"));
    let (mut c, mut d) = (on(&net, "slow", "c"), on(&net, "slow", "d"));
    assert_eq!((a.iface.dev_name(), c.iface.dev_name()), ("fast", "slow"));
    let ((a_dev, _), (b_dev, b_if)) = (addrs(&a), addrs(&b));
    let ((c_dev, _), (d_dev, d_if)) = (addrs(&c), addrs(&d));
    assert_eq!(a_dev, b_dev);
    assert_eq!(c_dev, d_dev);
    assert_ne!(a_dev, c_dev);
    assert_eq!(a_dev[..8], c_dev[..8], "one net");
    assert!(a.iface.is_reachable(&b_dev, &b_if));
    assert!(!a.iface.is_reachable(&d_dev, &d_if));
    let e = a.iface.ep_create(&d_dev, &d_if).unwrap_err();
    assert_eq!(e.status(), Status::Unreachable);
    // An address pair that lies: this device, an iface of the other.
    assert!(!a.iface.is_reachable(&a_dev, &d_if));
    let e = a.iface.ep_create(&a_dev, &d_if).unwrap_err();
    assert_eq!(e.status(), Status::Unreachable);
    // Without a device name: the first.
    let first = node(&net, "first");
    assert_eq!(first.iface.dev_name(), "fast");
    assert!(a.iface.is_reachable(&addrs(&first).0, &addrs(&first).1));
    let e = net.iface_on("eth0", "x").unwrap_err();
    assert_eq!(e.status(), Status::InvalidParam);

    let (ab, cd) = (a.connect(&b), c.connect(&d));
    a.send(ab, b"on fast");
    c.send(cd, b"on slow");
    drive(&net, &mut [&mut a, &mut b, &mut c, &mut d]);
    assert_eq!(b.log.payloads(), [b"on fast".to_vec()]);
    assert_eq!(d.log.payloads(), [b"on slow".to_vec()]);
}

#[test]
fn each_device_has_its_model_and_its_wire() {
    let net = two_devices();
    let (mut a, mut b) = (on(&net, "fast", "a"), on(&net, "fast", "b"));
    let (mut c, mut d) = (on(&net, "slow", "c"), on(&net, "slow", "d"));
    let (fast, slow) = (a.iface.attr().model, c.iface.attr().model);
    assert_eq!(net.config().model("fast"), Some(fast));
    assert!((fast.bandwidth - FAST as f64).abs() < 1.0);
    assert!((slow.bandwidth - SLOW as f64).abs() < 1.0);
    assert!((fast.latency - 100e-9).abs() < 1e-15);
    assert!((slow.latency - 1000e-9).abs() < 1e-15);
    let (ab, cd) = (a.connect(&b), c.connect(&d));
    a.send(ab, &[1; 1000]);
    c.send(cd, &[2; 1000]);
    drive(&net, &mut [&mut b, &mut d]);
    let times: Vec<(String, u64)> = net
        .trace()
        .iter()
        .map(|e| (net_dev(&net, e.to.get()), e.time))
        .collect();
    // 1000 bytes: 100 ns + 100 ns on fast, 1000 ns + 1000 ns on slow.
    assert_eq!(
        times,
        [("fast".to_string(), 200), ("slow".to_string(), 2000)]
    );
    drop((b, d));

    let model = PerfModel {
        latency: 3e-6,
        overhead: 1e-9,
        bandwidth: 5e8,
    };
    let net = net_with(LinkConfig::IDEAL, |c| {
        c.devices = vec![VirtDevice::new("m").with_model(model)];
    });
    let m = on(&net, "m", "m").iface.attr().model;
    assert_eq!((m.latency, m.overhead, m.bandwidth), (3e-6, 1e-9, 5e8));
}

/// The device name of node `id` (nodes 0 and 1 on fast, 2 and 3 on slow).
fn net_dev(net: &VirtNet, id: u64) -> String {
    let n = net.inner.lock();
    let dev = n.nodes[id as usize].dev;
    n.cfg.devices[dev].name.clone()
}

#[test]
fn bytes_are_counted_per_device() {
    let net = two_devices();
    let md = net.memory_domain();
    let mem = Mem::new(&[0; 2000]);
    let (mut a, b) = (on(&net, "fast", "a"), on(&net, "fast", "b"));
    let (mut c, d) = (on(&net, "slow", "c"), on(&net, "slow", "d"));
    let (ab, cd) = (a.connect(&b), c.connect(&d));
    let (_, key) = mem.register(&md, Access::REMOTE_READ | Access::REMOTE_WRITE);
    assert_eq!(net.bytes_sent("fast").unwrap(), 0);
    a.send(ab, &[1; 100]);
    let r = a.iface.am().unwrap().am_short(ab, 1, 7, &[0; 10]).unwrap();
    assert_eq!(r, Posted::Done);
    let r = c.put(cd, &[mem.iov(0, 1000)], mem.addr(1000), &key, Token(1));
    assert_eq!(r.unwrap(), Posted::InFlight);
    let r = c.get(cd, &[mem.iov(0, 500)], mem.addr(1500), &key, Token(2));
    assert_eq!(r.unwrap(), Posted::InFlight);
    drive(&net, &mut [&mut a, &mut c]);
    assert_eq!(net.bytes_sent("fast").unwrap(), 100 + 8 + 10);
    assert_eq!(net.bytes_sent("slow").unwrap(), 1000 + 500);
    let e = net.bytes_sent("nope").unwrap_err();
    assert_eq!(e.status(), Status::InvalidParam);
    drop((b, d));
}

#[test]
fn one_key_serves_every_device_of_its_domain() {
    let net = two_devices();
    let (w, v) = (
        net.new_memory_domain().unwrap(),
        net.new_memory_domain().unwrap(),
    );
    let mem = Mem::new(&[0; 2000]);
    let src = Mem::new(&bytes(7, 2000));
    let open = |md: &crate::virt::VirtMd, dev, name| Node {
        iface: md.iface(dev, name).unwrap(),
        log: Log::default(),
    };
    let (w_fast, w_slow) = (open(&w, "fast", "w0"), open(&w, "slow", "w1"));
    let (mut v_fast, mut v_slow) = (open(&v, "fast", "v0"), open(&v, "slow", "v1"));
    let (_, key) = mem.register(&w, Access::REMOTE_WRITE);
    let (ef, es) = (v_fast.connect(&w_fast), v_slow.connect(&w_slow));
    // The same key, one half over each device.
    let r = v_fast.put(ef, &[src.iov(0, 1000)], mem.addr(0), &key, Token(1));
    assert_eq!(r.unwrap(), Posted::InFlight);
    let r = v_slow.put(es, &[src.iov(1000, 1000)], mem.addr(1000), &key, Token(2));
    assert_eq!(r.unwrap(), Posted::InFlight);
    let mut when = [None, None];
    net.drive(|| {
        let n = v_fast.progress() + v_slow.progress();
        for (i, v) in [&v_fast, &v_slow].into_iter().enumerate() {
            if when[i].is_none() && v.log.0.contains(&Ev::Done(Token(i as u64 + 1), None)) {
                when[i] = Some(net.now());
            }
        }
        n
    })
    .unwrap();
    // 1000 bytes and two latencies on each: 100 + 2 * 100 on fast,
    // 1000 + 2 * 1000 on slow.
    assert_eq!(when, [Some(300), Some(3000)]);
    assert_eq!(mem.read(), src.read());
    assert_eq!(net.bytes_sent("fast").unwrap(), 1000);
    assert_eq!(net.bytes_sent("slow").unwrap(), 1000);
    let ops: Vec<Op> = net.trace().iter().map(|e| e.op).collect();
    assert_eq!(ops, [Op::Put, Op::PutAck, Op::Put, Op::PutAck]);
    drop((w_fast, w_slow));
}

#[test]
fn the_component_lists_every_device_and_opens_new_domains() {
    let net = two_devices();
    let comp = net.component();
    let (m1, m2) = (
        comp.md_open().unwrap().remove(0),
        comp.md_open().unwrap().remove(0),
    );
    let res = m1.resources().unwrap();
    let names: Vec<&str> = res.iter().map(|r| r.dev_name.as_str()).collect();
    assert_eq!(names, ["fast", "slow"]);
    assert!(res.iter().all(|r| r.tl_name == "virt"));
    let p = IfaceParams { worker_uuid: 1 };
    let slow = m1.iface_open(&res[1], &p).unwrap();
    assert_eq!(slow.dev_name(), "slow");
    assert_eq!(Some(slow.attr().model), net.config().model("slow"));
    let mut wrong = res[0].clone();
    wrong.dev_name = "eth0".into();
    assert_eq!(
        m1.iface_open(&wrong, &p).unwrap_err().status(),
        Status::InvalidParam
    );
    wrong.tl_name = "tcp".into();
    assert!(m1.iface_open(&wrong, &p).is_err());

    // Each md_open is a domain of its own: its keys reach only its ifaces.
    let mem = Mem::new(&[0; 4]);
    let local = Mem::new(&[1; 4]);
    let (_, key) = mem.register(&*m1, Access::REMOTE_WRITE);
    let mut x = m2.iface_open(&res[1], &p).unwrap();
    let t1 = m1.iface_open(&res[1], &p).unwrap();
    let t2 = m2.iface_open(&res[1], &p).unwrap();
    let mut sink = Log::default();
    for (t, target, want) in [(1, &t2, Some(Status::Rejected)), (2, &t1, None)] {
        let ep = x
            .ep_create(target.device_addr(), target.iface_addr())
            .unwrap();
        // SAFETY: `local` and `mem` outlive the ifaces.
        let r = unsafe {
            x.put()
                .unwrap()
                .put_zcopy(ep, &[local.iov(0, 4)], mem.addr(0), &key, Token(t))
        };
        assert_eq!(r.unwrap(), Posted::InFlight);
        net.drive(|| x.progress(&mut sink)).unwrap();
        assert_eq!(sink.0.last(), Some(&Ev::Done(Token(t), want)));
    }
    assert_eq!(mem.read(), [1; 4]);
    drop((slow, t1, t2));
}
