//! The transport conformance suite on `rc_verbs`, the RC transport over
//! this provider, on the first usable device (soft-RoCE `rxed` in the
//! guest of `tests/verbs_guest/run.sh --net dummy`, or a NIC). Without a
//! device each check says `skipped: no RDMA device`, and fails instead
//! when `RUCX_REQUIRE_ALL=1`.

#![cfg(feature = "sys")]

use rucx_rdma::Provider;
use uct::testing::ComponentFixture;

/// The fixture on the first usable device, or `None` after saying why.
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

// Each check returns at once, having said why, where no device exists.
uct::conformance_tests!({
    let Some(f) = fixture() else {
        return;
    };
    f
});
