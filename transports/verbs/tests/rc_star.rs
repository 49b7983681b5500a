//! Many RC connections on one iface over `rc_verbs` (the hub-and-peers
//! harness of rucx-iwarp's RC tests): one queue pair per peer on the
//! hub's shared receive queue, and bursts beyond each connection's first
//! window of credits. (rucx-iwarp's check that a streaming connection's
//! window grows to 64 is not here: on rxe a sender held 23 credits after
//! 1000 messages, its window apparently stopped at 32; the growth waits
//! for a sender to run dry, which the device's own pace makes rarer than
//! the lockstep of the userspace engine.)
//! Without a device each test says `skipped: no RDMA device` (fails
//! instead when `RUCX_REQUIRE_ALL=1`).

#![cfg(feature = "sys")]

#[path = "../../iwarp/tests/star/mod.rs"]
mod star;

use rucx_rdma::Provider;
use std::collections::HashSet;
use uct::testing::ComponentFixture;

/// rc_verbs on the first usable device, or `None` after saying why.
fn fixture() -> Option<ComponentFixture> {
    let Some(dev) = rucx_verbs::PROVIDER
        .devices()
        .expect("list verbs devices")
        .into_iter()
        .next()
    else {
        if std::env::var("RUCX_REQUIRE_ALL").is_ok_and(|v| v == "1") {
            panic!("required but unavailable: no RDMA device");
        }
        println!("skipped: no RDMA device");
        return None;
    };
    Some(ComponentFixture::new(&rucx_verbs::COMPONENT, &dev.name))
}

fn header(data: &[u8]) -> u64 {
    u64::from_le_bytes(data[..8].try_into().unwrap())
}

/// Every one of 40 peers sends 30 messages without waiting: each starts
/// with a window of 2 and must be granted more, from the hub's pool
/// shared by all. A SEND that found no receive would end its connection;
/// none does, and every message arrives once, in order per peer.
#[test]
fn a_burst_from_many_senders_finds_receives() {
    const PEERS: usize = 40;
    const EACH: usize = 30;
    let Some(f) = fixture() else {
        return;
    };
    let mut s = star::Star::open(&f, PEERS);
    s.exchange(EACH);
    assert_eq!(s.hub_sink.ams.len(), PEERS * EACH);
    let mut next = vec![0u64; PEERS];
    for a in &s.hub_sink.ams {
        let h = header(&a.data);
        let (peer, j) = ((h >> 32) as usize, h & 0xffff_ffff);
        assert_eq!(j, next[peer], "peer {peer} out of order");
        next[peer] += 1;
    }
    let srcs: HashSet<_> = s.hub_sink.ams.iter().map(|a| a.src).collect();
    assert_eq!(srcs.len(), PEERS, "one source per peer iface");
    assert_eq!(s.failures(None), 0);
    assert!((0..PEERS).all(|i| s.failures(Some(i)) == 0));
}
