//! The transport conformance suite on the virtual transport, in five
//! settings: an ideal link with a manual clock (everything arrives at
//! once), a slow jittery link with an eventfd, a tiny window with small
//! limits, the slower of two devices with links of their own, and through
//! the component interface. All but the first and the last let `progress`
//! advance the virtual clock (auto-advance), so that the suite's polling
//! loops see every message arrive.
#![cfg(feature = "testing")]

use rucx_uct::testing::{ComponentFixture, Fixture};
use rucx_uct::virt::{LinkConfig, VirtComponent, VirtConfig, VirtDevice, VirtMd, VirtNet};
use rucx_uct::{Iface, MemoryDomain};
use std::sync::OnceLock;

/// Opens every pair of one test on one net made from `cfg` on first use,
/// on device `dev` (the first if `None`); the net's default memory domain
/// is the pairs'.
struct VirtFixture {
    name: &'static str,
    cfg: VirtConfig,
    dev: Option<&'static str>,
    net: OnceLock<(VirtNet, VirtMd)>,
}

impl VirtFixture {
    fn new(name: &'static str, cfg: VirtConfig) -> VirtFixture {
        VirtFixture {
            name,
            cfg,
            dev: None,
            net: OnceLock::new(),
        }
    }

    fn net(&self) -> &(VirtNet, VirtMd) {
        self.net.get_or_init(|| {
            let net = VirtNet::new(self.cfg.clone())
                .unwrap_or_else(|e| panic!("{}: bad config: {e}", self.name));
            let md = net.memory_domain();
            (net, md)
        })
    }
}

impl Fixture for VirtFixture {
    fn name(&self) -> &str {
        self.name
    }

    fn open_pair(&self) -> (Box<dyn Iface>, Box<dyn Iface>) {
        let (net, md) = self.net();
        let open = |name| match self.dev {
            Some(dev) => md.iface(dev, name),
            None => net.iface(name),
        };
        let a = open("a").expect("iface a");
        let b = open("b").expect("iface b");
        (Box::new(a), Box::new(b))
    }

    fn memory_domain(&self) -> Option<&dyn MemoryDomain> {
        Some(&self.net().1)
    }
}

fn ideal() -> VirtFixture {
    VirtFixture::new("virt/ideal", VirtConfig::default())
}

rucx_uct::conformance_tests!(ideal());

mod slow_link {
    use super::*;

    fn fixture() -> VirtFixture {
        VirtFixture::new(
            "virt/slow-link",
            VirtConfig {
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
        )
    }

    rucx_uct::conformance_tests!(fixture());
}

mod tiny_window {
    use super::*;

    fn fixture() -> VirtFixture {
        VirtFixture::new(
            "virt/tiny-window",
            VirtConfig {
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
                max_put_zcopy: 8192,
                max_get_zcopy: 4096,
                ..VirtConfig::default()
            },
        )
    }

    rucx_uct::conformance_tests!(fixture());
}

mod second_device {
    use super::*;

    /// Two devices with links of their own; the pairs are on the second,
    /// slower one.
    fn fixture() -> VirtFixture {
        let link = |latency, bandwidth| LinkConfig {
            latency,
            bandwidth,
            ..LinkConfig::IDEAL
        };
        let mut f = VirtFixture::new(
            "virt/second-device",
            VirtConfig {
                auto_advance: true,
                devices: vec![
                    VirtDevice::new("fast").with_link(link(500, 12_500_000_000)),
                    VirtDevice::new("slow").with_link(link(3_000, 1_250_000_000)),
                ],
                ..VirtConfig::default()
            },
        );
        f.dev = Some("slow");
        f
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
