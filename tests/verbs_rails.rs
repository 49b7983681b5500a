//! Multi-rail over RDMA devices: with two rc_verbs devices (two soft-RoCE
//! devices, `tests/verbs_guest/run.sh --net rails`) a large rendezvous by
//! get splits over two lanes, one per device, each reading with the key
//! of its own device's protection domain, and the data arrives intact.
//!
//! Checked: the tag-send table of an endpoint between two contexts (two
//! sets of protection domains, as two processes would have) chooses two
//! lanes on two different devices for large messages; messages of several
//! sizes arrive intact both ways; the receiver's endpoint back to the
//! sender has connected its second lane; each device's port counters
//! (`hw_counters/rcvd_pkts` in sysfs) saw a share of the packets. A
//! rendezvous by put keeps to the lanes of the first lane's device (one
//! key) and still delivers every byte.
//!
//! Only with the `verbs` feature. Devices: those `RUCX_NET_DEVICES` names
//! (`rxed:1,rxed1:1` in the guest suite), else every rc_verbs device;
//! fewer than two prints `skipped: <why>` (fails with
//! `RUCX_REQUIRE_ALL=1`).

#![cfg(feature = "verbs")]

mod common;

use common::{context_vars, pattern, rc_verbs, skip_or_fail};
use rucx::ucp::proto::select::ProtocolId;
use rucx::{Op, Posted, Worker, TAG_MASK_ALL};
use std::time::{Duration, Instant};

const BIG: usize = 4 << 20;

/// The devices to use (`RUCX_NET_DEVICES` syntax), if at least two.
fn rails() -> Option<String> {
    rc_verbs()?;
    let devs = match std::env::var("RUCX_NET_DEVICES") {
        Ok(v) if v != "all" => v,
        _ => {
            use rucx_rdma::Provider;
            let d = rucx_verbs::PROVIDER.devices().unwrap_or_default();
            d.iter()
                .map(|d| format!("{}:1", d.name))
                .collect::<Vec<_>>()
                .join(",")
        }
    };
    if devs.split(',').count() < 2 {
        skip_or_fail(&format!(
            "fewer than two RDMA devices ({devs}); run.sh --net rails makes two"
        ));
        return None;
    }
    Some(devs)
}

/// Two workers of two contexts over `devs`, and endpoints both ways.
fn pair(devs: &str, scheme: &str) -> (Worker, Worker, rucx::Ep, rucx::Ep) {
    let vars = [
        ("RUCX_TLS", "rc_verbs"),
        ("RUCX_NET_DEVICES", devs),
        ("RUCX_MAX_RNDV_LANES", "2"),
        ("RUCX_RNDV_SCHEME", scheme),
    ];
    let (ca, cb) = (context_vars(&vars), context_vars(&vars));
    let mut a = ca.create_worker().expect("worker a");
    let mut b = cb.create_worker().expect("worker b");
    let ab = a.connect(&b.address()).expect("a->b");
    let ba = b.connect(&a.address()).expect("b->a");
    (a, b, ab, ba)
}

/// Progresses both workers until `done` holds (120 s at most: the guest
/// emulates its CPUs).
fn drive(a: &mut Worker, b: &mut Worker, mut done: impl FnMut(&mut Worker, &mut Worker) -> bool) {
    let deadline = Instant::now() + Duration::from_secs(120);
    while !done(a, b) {
        assert!(Instant::now() < deadline, "timed out");
        a.progress();
        b.progress();
    }
}

/// Sends `size` bytes from `s` (endpoint `ep`) to `r` and checks them.
fn transfer(s: &mut Worker, r: &mut Worker, ep: rucx::Ep, size: usize, seed: u64) {
    let out = pattern(size, seed);
    let tag = 0x5000 + seed;
    let recv = match r
        .tag_recv(vec![0u8; size], tag, TAG_MASK_ALL, Op::new())
        .expect("recv")
    {
        Posted::InFlight(id) => id,
        Posted::Done(..) => panic!("receive done before send"),
    };
    if let Posted::InFlight(id) = s.tag_send(ep, out.clone(), tag, Op::new()).expect("send") {
        drive(s, r, |s, _| !s.request_is_active(id));
        let (info, _) = s.take::<Vec<u8>>(id).expect("done").expect("send ok");
        assert_eq!(info.length, size);
    }
    drive(s, r, |_, r| !r.request_is_active(recv));
    let (info, got) = r.take::<Vec<u8>>(recv).expect("done").expect("recv ok");
    assert_eq!((info.tag, info.length), (tag, size));
    assert!(got == out, "size {size} corrupted");
}

/// A device's received-packet counter, if the device has one.
fn rcvd_pkts(dev: &str) -> Option<u64> {
    let p = format!("/sys/class/infiniband/{dev}/ports/1/hw_counters/rcvd_pkts");
    std::fs::read_to_string(p).ok()?.trim().parse().ok()
}

#[test]
fn large_rendezvous_splits_over_two_devices() {
    let Some(devs) = rails() else {
        return;
    };
    let (mut a, mut b, ab, ba) = pair(&devs, "get_zcopy");
    let t = &a.ep_protocols(ab).expect("tables")[0];
    let c = t.lookup(BIG);
    assert_eq!(c.proto, ProtocolId::RndvGetZcopy, "{t}");
    let names: Vec<&str> = c
        .lanes
        .iter()
        .map(|(l, _)| t.lane_names()[l].as_str())
        .collect();
    assert_eq!(names.len(), 2, "two lanes for {BIG} bytes:\n{t}");
    let devices: Vec<&str> = names
        .iter()
        .map(|n| {
            let d = n.strip_prefix("rc_verbs/").expect("an rc_verbs lane");
            d.split(':').next().unwrap_or(d)
        })
        .collect();
    assert_ne!(devices[0], devices[1], "two devices: {names:?}");
    println!("lanes for {BIG} bytes: {names:?}");

    let before: Vec<Option<u64>> = devices.iter().map(|d| rcvd_pkts(d)).collect();
    let sizes = [BIG, (1 << 20) + 3, 3 << 20, (8 << 20) - 5];
    for (i, &size) in sizes.iter().enumerate() {
        transfer(&mut a, &mut b, ab, size, i as u64);
        transfer(&mut b, &mut a, ba, size, 100 + i as u64);
    }
    // The reader's endpoint back to the sender connected its second lane.
    assert_eq!(b.ep_lanes_connected(ba).expect("lanes"), 2);
    assert_eq!(a.ep_lanes_connected(ab).expect("lanes"), 2);
    // Each device received at least a quarter of the data (at most 4 KiB
    // per packet), where the counters exist.
    let total: usize = 2 * sizes.iter().sum::<usize>();
    for (d, b0) in devices.iter().zip(before) {
        match (b0, rcvd_pkts(d)) {
            (Some(x), Some(y)) => {
                let min = (total / 4 / 4096) as u64;
                println!("{d}: {} packets received", y - x);
                assert!(
                    y - x >= min,
                    "{d}: {} packets, expected {min} or more",
                    y - x
                );
            }
            _ => println!("{d}: no rcvd_pkts counter; lanes checked by the endpoint only"),
        }
    }
}

#[test]
fn rendezvous_by_put_keeps_to_one_device_and_delivers() {
    let Some(devs) = rails() else {
        return;
    };
    let (mut a, mut b, ab, ba) = pair(&devs, "put_zcopy");
    for (i, size) in [BIG, (2 << 20) + 7].into_iter().enumerate() {
        transfer(&mut a, &mut b, ab, size, 200 + i as u64);
        transfer(&mut b, &mut a, ba, size, 300 + i as u64);
    }
}
