//! The transport conformance suite on the virtual transport, in four
//! settings: an ideal link with a manual clock (everything arrives at
//! once), a slow jittery link with an eventfd, a tiny window with small
//! limits, and through the component interface. The last three let
//! `progress` advance the virtual clock (auto-advance), so that the
//! suite's polling loops see every message arrive.
#![cfg(feature = "testing")]

use rucx_uct::testing::{ComponentFixture, Fixture};
use rucx_uct::virt::{LinkConfig, VirtComponent, VirtConfig, VirtNet};
use rucx_uct::Iface;
use std::sync::OnceLock;

/// Opens each pair on a fresh net with `cfg`.
struct VirtFixture {
    name: &'static str,
    cfg: VirtConfig,
}

impl Fixture for VirtFixture {
    fn name(&self) -> &str {
        self.name
    }

    fn open_pair(&self) -> (Box<dyn Iface>, Box<dyn Iface>) {
        let net = VirtNet::new(self.cfg.clone())
            .unwrap_or_else(|e| panic!("{}: bad config: {e}", self.name));
        let a = net.iface("a").expect("iface a");
        let b = net.iface("b").expect("iface b");
        (Box::new(a), Box::new(b))
    }
}

fn ideal() -> VirtFixture {
    VirtFixture {
        name: "virt/ideal",
        cfg: VirtConfig::default(),
    }
}

rucx_uct::conformance_tests!(ideal());

mod slow_link {
    use super::*;

    fn fixture() -> VirtFixture {
        VirtFixture {
            name: "virt/slow-link",
            cfg: VirtConfig {
                seed: 11,
                auto_advance: true,
                event_fd: true,
                link: LinkConfig {
                    latency: 5_000,
                    bandwidth: 1_000_000_000,
                    jitter: 2_000,
                    ..LinkConfig::IDEAL
                },
                ..VirtConfig::default()
            },
        }
    }

    rucx_uct::conformance_tests!(fixture());
}

mod tiny_window {
    use super::*;

    fn fixture() -> VirtFixture {
        VirtFixture {
            name: "virt/tiny-window",
            cfg: VirtConfig {
                auto_advance: true,
                link: LinkConfig {
                    latency: 1_000,
                    window_msgs: 2,
                    window_bytes: 4096,
                    ..LinkConfig::IDEAL
                },
                max_short: 64,
                max_bcopy: 512,
                max_zcopy: 4096,
                max_hdr: 16,
                max_iov: 2,
                ..VirtConfig::default()
            },
        }
    }

    rucx_uct::conformance_tests!(fixture());
}

mod component {
    use super::*;

    /// One net for the whole binary, shared by the tests' threads; manual
    /// clock and ideal link, so that no test waits on another's ifaces.
    fn component() -> &'static VirtComponent {
        static C: OnceLock<&'static VirtComponent> = OnceLock::new();
        C.get_or_init(|| VirtNet::with_seed(3).component().leak())
    }

    rucx_uct::conformance_tests!(ComponentFixture::new(component(), "vnet"));
}
