//! Many RC connections on one iface (over userspace iWARP on `lo`):
//! well beyond the 64 that a receive pool sized per connection allowed,
//! with every peer bursting more messages than its first window.

mod star;

/// The RC transport over userspace iWARP on `lo`.
fn fixture() -> uct::testing::ComponentFixture {
    uct::testing::ComponentFixture::new(&rucx_iwarp::COMPONENT, "iwarp_lo")
}

use std::collections::HashSet;

#[test]
fn three_hundred_connections_exchange_messages() {
    let f = fixture();
    let mut s = star::Star::open(&f, 300);
    s.exchange(1);
    let mut seen: HashSet<u64> = s.hub_sink.ams.iter().map(|a| header(&a.data)).collect();
    assert_eq!(seen.len(), 300);
    // One source per peer iface.
    let srcs: HashSet<_> = s.hub_sink.ams.iter().map(|a| a.src).collect();
    assert_eq!(srcs.len(), 300);
    seen.clear();
    assert_eq!(s.failures(None), 0);
    assert!((0..300).all(|i| s.failures(Some(i)) == 0));
}

/// Every one of 150 peers sends 40 messages without waiting: each starts
/// with a window of 2, so each must be granted more, from a pool shared
/// by all. A SEND that found no receive would end its connection; none
/// does, and every message arrives once, in order per peer.
#[test]
fn a_burst_from_many_senders_finds_receives() {
    const PEERS: usize = 150;
    const EACH: usize = 40;
    let f = fixture();
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
    assert_eq!(s.failures(None), 0);
    assert!((0..PEERS).all(|i| s.failures(Some(i)) == 0));
}

fn header(data: &[u8]) -> u64 {
    u64::from_le_bytes(data[..8].try_into().unwrap())
}

/// A connection that streams gets its window grown up to
/// `RUCX_RC_RX_QUEUE_LEN` (64): once idle, its sender holds at least half
/// of it (what is not returned stays below half), where it started with 2.
#[test]
fn a_streaming_connection_grows_its_window() {
    let f = fixture();
    let mut s = star::Star::open(&f, 1);
    let ep = s.exchange(1)[0];
    for j in 0..2000 {
        s.short(Some(0), ep, 1, j);
    }
    s.drive_until("the stream", |s| s.hub_sink.ams.len() >= 2001);
    for _ in 0..200 {
        s.progress();
    }
    let mut credits = 0;
    loop {
        let r = s.peers[0].am().unwrap().am_short(ep, 1, 0, b"x").unwrap();
        if r == uct::Posted::NoResource {
            break;
        }
        credits += 1;
        assert!(credits <= 64, "more credits than the window limit");
    }
    assert!(credits >= 32, "{credits} credits after streaming");
}
