//! Memory per RC connection over userspace iWARP, printed: `n` peers
//! (`RUCX_TEST_RC_CONNS`, default 500) in this process, each its own
//! iface, exchange one message each way with a hub, then with a second
//! hub. The first round also pays what each peer iface sets up once
//! (its send batch, its first receive chunk); the second shows what one
//! more connection costs on both sides. Its own test binary, so that no
//! other test runs beside it.

mod star;

/// The RC transport over userspace iWARP on `lo`.
fn fixture() -> uct::testing::ComponentFixture {
    uct::testing::ComponentFixture::new(&rucx_iwarp::COMPONENT, "iwarp_lo")
}

#[test]
fn resident_memory_per_connection() {
    let n: usize = std::env::var("RUCX_TEST_RC_CONNS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(500);
    let f = fixture();
    // Opens the memory domain (and whatever it sets up once) first.
    drop(f.open(0));
    let before = star::rss_kib();
    let mut s = star::Star::open(&f, n);
    s.progress();
    let opened = star::rss_kib();
    s.exchange(1);
    for _ in 0..100 {
        s.progress();
    }
    let first = star::rss_kib();
    assert_eq!(s.hub_sink.ams.len(), n);
    assert_eq!(s.failures(None), 0);
    // The first hub stays, idle, with its connections.
    let hub0 = std::mem::replace(&mut s.hub, f.open(2));
    s.hub_sink = Default::default();
    for k in &mut s.sinks {
        k.ams.clear();
    }
    s.progress();
    let second_hub = star::rss_kib();
    s.exchange(1);
    for _ in 0..100 {
        s.progress();
    }
    let second = star::rss_kib();
    let kib = |a: u64, b: u64, d: usize| b.saturating_sub(a) as f64 / d as f64;
    println!(
        "rc_iwarp memory, {n} connections per round; VmRSS KiB: {before} before, {opened} \
         with {} ifaces ({:.1} each); round 1: {first} ({:.1} per connection, both sides, \
         with the peers' one-time costs); round 2: {second} ({:.1} per connection, both sides)",
        n + 1,
        kib(before, opened, n + 1),
        kib(opened, first, n),
        kib(second_hub, second, n),
    );
    assert_eq!(s.hub_sink.ams.len(), n);
    assert_eq!(s.failures(None), 0);
    drop(hub0);
}
