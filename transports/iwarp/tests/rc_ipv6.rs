//! The RC transport over the userspace iWARP engine over IPv6: the
//! conformance checks on `iwarp_lo` with `RUCX_IWARP_AF_PRIO=inet6`
//! (set for this test binary alone), so that the device, the iface
//! addresses and the connection requests carry `::1`.
//!
//! Without `::1` on `lo` the test prints `skipped: <why>`, or fails when
//! `RUCX_REQUIRE_ALL=1`.

use uct::testing::{checks, ComponentFixture, Fixture};
use uct::ucs::netif::{self, AddrFamily};

#[test]
fn conformance_over_ipv6_loopback() {
    let has = netif::find("lo")
        .map(|i| i.addr_of(AddrFamily::Inet6).is_some())
        .unwrap_or(false);
    if !has {
        if std::env::var("RUCX_REQUIRE_ALL").is_ok_and(|v| v == "1") {
            panic!("required but unavailable: ::1 on lo");
        }
        println!("skipped: no IPv6 address (::1) on lo");
        return;
    }
    // The only test of this binary, before any device is opened.
    std::env::set_var("RUCX_IWARP_AF_PRIO", "inet6");
    let f = ComponentFixture::new(&rucx_iwarp::COMPONENT, "iwarp_lo");
    let (a, _b) = f.open_pair();
    assert_eq!(a.device_addr()[0], 6, "an IPv6 device address");
    drop((a, _b));
    checks::reachability(&f);
    checks::am_short(&f);
    checks::am_bcopy(&f);
    checks::am_zcopy(&f);
    checks::ordering(&f);
    checks::flush(&f);
    checks::peer_failure(&f);
    checks::rma_put(&f);
    checks::rma_get(&f);
}
