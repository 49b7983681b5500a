//! The transport over IPv6: ifaces on the loopback device's `::1`
//! (`RUCX_TCP_AF_PRIO=inet6`) pass the conformance checks (active
//! messages of every kind, puts, flush, ordering, peer failure), and
//! never reach an IPv4 iface, nor one of them an IPv6 iface.
//!
//! Without `::1` on `lo` the tests print `skipped: <why>`, or fail when
//! `RUCX_REQUIRE_ALL=1`.

use std::sync::OnceLock;

use rucx_tcp::{open_iface, TcpConfig, COMPONENT};
use uct::testing::{checks, Fixture};
use uct::ucs::config::ConfigValue;
use uct::ucs::netif::{self, AddrFamily, AfPrio};
use uct::{Component, Iface, IfaceParams, MemoryDomain};

/// A configuration whose ifaces use IPv6 only.
fn inet6() -> TcpConfig {
    TcpConfig {
        af_prio: AfPrio::parse("inet6").expect("inet6"),
        ..TcpConfig::default()
    }
}

/// Whether `lo` has `::1`; otherwise reports the skip (or fails when
/// everything is required).
fn have_ipv6_loopback() -> bool {
    let has = netif::find("lo")
        .map(|i| i.addr_of(AddrFamily::Inet6).is_some())
        .unwrap_or(false);
    if !has {
        if std::env::var("RUCX_REQUIRE_ALL").is_ok_and(|v| v == "1") {
            panic!("required but unavailable: ::1 on lo");
        }
        println!("skipped: no IPv6 address (::1) on lo");
    }
    has
}

/// Ifaces on `lo` over IPv6, and the component's memory domain for the
/// one-sided checks (registrations are process-wide).
struct Ipv6Lo {
    mds: OnceLock<Vec<Box<dyn MemoryDomain>>>,
}

impl Ipv6Lo {
    fn open(&self, worker_uuid: u64) -> Box<dyn Iface> {
        let iface = open_iface("lo", &IfaceParams { worker_uuid }, &inet6())
            .expect("open a tcp iface on lo over IPv6");
        assert_eq!(iface.device_addr()[0], 6, "an IPv6 device address");
        iface
    }
}

impl Fixture for Ipv6Lo {
    fn name(&self) -> &str {
        "tcp/lo/inet6"
    }

    fn open_pair(&self) -> (Box<dyn Iface>, Box<dyn Iface>) {
        (self.open(1), self.open(2))
    }

    fn memory_domain(&self) -> Option<&dyn MemoryDomain> {
        let mds = self
            .mds
            .get_or_init(|| COMPONENT.md_open().expect("tcp memory domain"));
        mds.first().map(|m| &**m)
    }
}

#[test]
fn conformance_over_ipv6_loopback() {
    if !have_ipv6_loopback() {
        return;
    }
    let f = Ipv6Lo {
        mds: OnceLock::new(),
    };
    checks::caps_consistent(&f);
    checks::reachability(&f);
    checks::am_short(&f);
    checks::am_bcopy(&f);
    checks::am_zcopy(&f);
    checks::limits(&f);
    checks::ordering(&f);
    checks::pending(&f);
    checks::flush(&f);
    checks::many_endpoints(&f);
    checks::peer_failure(&f);
    checks::rma_put(&f);
    checks::rma_iov(&f);
    checks::rma_access(&f);
    checks::rma_bounds(&f);
}

#[test]
fn families_do_not_reach_each_other() {
    if !have_ipv6_loopback() {
        return;
    }
    let p = IfaceParams::default();
    let mut four = open_iface("lo", &p, &TcpConfig::default()).expect("IPv4 iface");
    let mut six = open_iface("lo", &p, &inet6()).expect("IPv6 iface");
    assert_eq!(four.device_addr()[0], 4);
    assert_eq!(six.device_addr()[0], 6);
    assert!(!four.is_reachable(six.device_addr(), six.iface_addr()));
    assert!(!six.is_reachable(four.device_addr(), four.iface_addr()));
    let (d6, i6) = (six.device_addr().to_vec(), six.iface_addr().to_vec());
    let (d4, i4) = (four.device_addr().to_vec(), four.iface_addr().to_vec());
    assert!(matches!(
        four.ep_create(&d6, &i6),
        Err(uct::Error::Unreachable(_))
    ));
    assert!(matches!(
        six.ep_create(&d4, &i4),
        Err(uct::Error::Unreachable(_))
    ));
}

#[test]
fn the_listed_devices_follow_af_prio() {
    // Every listed device has an address of a family in the list; `lo`
    // has both, and the default prefers IPv4.
    let lo = open_iface("lo", &IfaceParams::default(), &TcpConfig::default()).expect("lo");
    assert_eq!(lo.device_addr()[0], 4, "inet first by default");
    let only4 = TcpConfig {
        af_prio: AfPrio::parse("inet").expect("inet"),
        ..TcpConfig::default()
    };
    for nif in netif::interfaces().expect("interfaces") {
        let has4 = nif.addr_of(AddrFamily::Inet).is_some();
        let opened = open_iface(&nif.name, &IfaceParams::default(), &only4);
        assert_eq!(opened.is_ok(), has4, "{}", nif.name);
    }
}
