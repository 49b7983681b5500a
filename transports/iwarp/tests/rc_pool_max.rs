//! The shared receive pool grows in chunks up to `RUCX_RC_RX_POOL_MAX`;
//! a connection that finds it full fails alone, the others go on. Its own
//! test binary: the setting comes from the environment.

mod star;

/// The RC transport over userspace iWARP on `lo`.
fn fixture() -> uct::testing::ComponentFixture {
    uct::testing::ComponentFixture::new(&rucx_iwarp::COMPONENT, "iwarp_lo")
}

use uct::testing::Event;

#[test]
fn pool_grows_to_its_maximum_then_refuses_connections() {
    // Two chunks of 64 receives of 8 KiB; a connection commits 2 + 1.
    std::env::set_var("RUCX_RC_RX_POOL_MAX", "1m");
    const FIT: usize = 128 / 3;
    let f = fixture();
    let mut s = star::Star::open(&f, FIT + 2);
    let eps: Vec<_> = (0..=FIT).map(|i| s.peer_ep(i).unwrap()).collect();
    for (i, &ep) in eps.iter().enumerate() {
        s.short(Some(i), ep, 1, i as u64);
    }
    // The hub accepts FIT connections (growing its pool to a second
    // chunk) and rejects the next: that peer's endpoint fails.
    s.drive_until("the first connections and the refusal", |s| {
        s.hub_sink.ams.len() >= FIT && s.failures(Some(FIT)) > 0
    });
    let refused = s.sinks[FIT].events.iter().find_map(|e| match e {
        Event::EpFailed { error, .. } => Some(error.to_string()),
        _ => None,
    });
    assert!(refused.is_some_and(|e| e.contains("rejected")));
    assert!((0..FIT).all(|i| s.failures(Some(i)) == 0));
    // The hub itself cannot open one more either: a clear error, at once.
    let err = s.hub_ep(FIT + 1).unwrap_err().to_string();
    assert!(err.contains("receive pool full"), "{err}");
    assert!(
        err.contains("of 128 receives"),
        "the pool grew to two chunks: {err}"
    );
    // Those connected still work, both ways.
    for (i, &ep) in eps.iter().enumerate().take(FIT) {
        s.short(Some(i), ep, 1, 1000 + i as u64);
    }
    s.drive_until("more messages", |s| s.hub_sink.ams.len() >= 2 * FIT);
    let back = s.hub_ep(0).unwrap();
    s.short(None, back, 2, 0);
    s.drive_until("an answer", |s| s.sinks[0].ams.iter().any(|a| a.id == 2));
    assert_eq!(s.failures(None), 0);
}
