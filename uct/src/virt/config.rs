//! Settings of a virtual network, its devices and its links.

use crate::{Error, PerfModel, Result};

/// Name of an iface on a [`VirtNet`](super::VirtNet): its index there,
/// which is also its iface address. Never reused within one net.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct NodeId(pub(super) u64);

impl NodeId {
    /// The id as a number (the iface address, little-endian, is its bytes).
    pub fn get(self) -> u64 {
        self.0
    }

    /// Decodes an iface address (8 bytes, little-endian); `None` if it has
    /// another length. Whether such an iface exists is another matter.
    pub fn from_iface_addr(addr: &[u8]) -> Option<NodeId> {
        Some(NodeId(u64::from_le_bytes(addr.try_into().ok()?)))
    }
}

impl std::fmt::Display for NodeId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "virt#{}", self.0)
    }
}

/// How the virtual wire treats messages from one iface to another.
///
/// Times are virtual nanoseconds. Settings apply to messages sent after
/// they are made.
///
/// `reorder` and `loss` break the transport contract on purpose (a uct
/// transport delivers every message of a source, in order): they model a
/// misbehaving network for testing the robustness of protocols above, and
/// are off by default.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LinkConfig {
    /// Fixed one-way delay.
    pub latency: u64,
    /// Bytes per second on the link; a message occupies the link for
    /// `len / bandwidth`, and messages queue behind each other. 0: no limit.
    pub bandwidth: u64,
    /// Each message gets an extra delay uniform in `0..=jitter`. Without
    /// `reorder`, a message never overtakes the previous one: jitter then
    /// delays the ones behind it too (head-of-line blocking).
    pub jitter: u64,
    /// Lets a message overtake earlier ones of the same link when its
    /// delay is shorter. Breaks per-source order.
    pub reorder: bool,
    /// Probability in `0.0..=1.0` that a packet is lost. A lost zero-copy
    /// send still completes with `Ok`, as on an unreliable network; a lost
    /// request or reply of a one-sided operation completes it with
    /// `TimedOut`.
    pub loss: f64,
    /// Most messages on the link (sent and not yet taken by the receiver's
    /// `progress`, or one-sided operations not yet finished); beyond it
    /// sends are `NoResource`.
    pub window_msgs: usize,
    /// A message is accepted while fewer than this many bytes are on the
    /// link (so one message may overshoot); else `NoResource`. A one-sided
    /// operation counts its length until it finishes.
    pub window_bytes: usize,
}

impl LinkConfig {
    /// A perfect link: no delay, unlimited bandwidth, no faults, a window
    /// of 256 messages and 4 MiB.
    pub const IDEAL: LinkConfig = LinkConfig {
        latency: 0,
        bandwidth: 0,
        jitter: 0,
        reorder: false,
        loss: 0.0,
        window_msgs: 256,
        window_bytes: 4 << 20,
    };

    /// Checks the ranges: `loss` in `0..=1`, windows at least 1.
    pub fn validate(&self) -> Result<()> {
        if !(0.0..=1.0).contains(&self.loss) {
            return Err(Error::InvalidParam(format!(
                "virt: link loss {} is not a probability",
                self.loss
            )));
        }
        if self.window_msgs == 0 || self.window_bytes == 0 {
            return Err(Error::InvalidParam(
                "virt: link window of 0 messages or bytes".into(),
            ));
        }
        Ok(())
    }
}

impl Default for LinkConfig {
    fn default() -> LinkConfig {
        LinkConfig::IDEAL
    }
}

/// One device of a [`VirtNet`](super::VirtNet): a separate network (a
/// rail) with its own name, links and performance model. An iface opened
/// on a device reaches only ifaces of the same device.
#[derive(Debug, Clone, PartialEq)]
pub struct VirtDevice {
    /// Device name, unique within the net (also the resource's).
    pub name: String,
    /// Settings of the device's links where no per-link setting was made;
    /// `None`: the net's [`VirtConfig::link`].
    pub link: Option<LinkConfig>,
    /// Performance model its ifaces advertise; `None`: derived from the
    /// device's link (its latency, its bandwidth or 100 GB/s if unlimited,
    /// 10 ns overhead).
    pub model: Option<PerfModel>,
    /// The device stands for a host's loopback path: its ifaces say that
    /// every peer of theirs loops back ([`crate::Iface::loops_back`]), as
    /// a network transport does for peers of its own host.
    pub loopback: bool,
}

impl VirtDevice {
    /// A device with the net's link and a model derived from it.
    pub fn new(name: &str) -> VirtDevice {
        VirtDevice {
            name: name.to_owned(),
            link: None,
            model: None,
            loopback: false,
        }
    }

    /// The same device standing for a host's loopback path.
    pub fn looping_back(self) -> VirtDevice {
        VirtDevice {
            loopback: true,
            ..self
        }
    }

    /// The same device with its own link settings.
    pub fn with_link(self, link: LinkConfig) -> VirtDevice {
        VirtDevice {
            link: Some(link),
            ..self
        }
    }

    /// The same device with an explicit model.
    pub fn with_model(self, model: PerfModel) -> VirtDevice {
        VirtDevice {
            model: Some(model),
            ..self
        }
    }

    fn validate(&self) -> Result<()> {
        if self.name.is_empty() {
            return Err(Error::InvalidParam("virt: empty device name".into()));
        }
        if let Some(l) = &self.link {
            l.validate()?;
        }
        if let Some(m) = self.model {
            let ok = m.latency.is_finite()
                && m.latency >= 0.0
                && m.overhead.is_finite()
                && m.overhead >= 0.0
                && m.bandwidth.is_finite()
                && m.bandwidth > 0.0;
            if !ok {
                return Err(Error::InvalidParam(format!(
                    "virt: bad model {m:?} of device {}",
                    self.name
                )));
            }
        }
        Ok(())
    }
}

/// Settings of a [`VirtNet`](super::VirtNet) and of every iface on it.
#[derive(Debug, Clone, PartialEq)]
pub struct VirtConfig {
    /// Seed of the generator behind jitter and losses.
    pub seed: u64,
    /// Link settings wherever neither the device nor the link has its own.
    pub link: LinkConfig,
    /// Advance the clock in `progress` whenever no open iface has anything
    /// to do at the current time (see the module documentation).
    pub auto_advance: bool,
    /// Give each iface an eventfd and advertise `EVENT_FD`.
    pub event_fd: bool,
    /// Record a [`TraceEvent`](super::TraceEvent) for every packet
    /// delivered, dropped or lost.
    pub trace: bool,
    /// The devices, at least one, names unique. Ifaces opened without a
    /// device name ([`VirtNet::iface`](super::VirtNet::iface)) are on the
    /// first. Default: one device `vnet` with the net's link.
    pub devices: Vec<VirtDevice>,
    /// Largest `am_short` payload.
    pub max_short: usize,
    /// Largest `am_bcopy` message.
    pub max_bcopy: usize,
    /// Largest `am_zcopy` data (header not counted).
    pub max_zcopy: usize,
    /// Largest `am_zcopy` header.
    pub max_hdr: usize,
    /// Most iov entries of `am_zcopy`, `put_zcopy` and `get_zcopy`.
    pub max_iov: usize,
    /// Largest `put_zcopy`; 0: the ifaces do not offer `put_zcopy`.
    pub max_put_zcopy: usize,
    /// Largest `get_zcopy`; 0: the ifaces do not offer `get_zcopy`.
    pub max_get_zcopy: usize,
}

/// Name of the default device.
pub(super) const DEFAULT_DEVICE: &str = "vnet";

impl Default for VirtConfig {
    fn default() -> VirtConfig {
        VirtConfig {
            seed: 0x5eed,
            link: LinkConfig::IDEAL,
            auto_advance: false,
            event_fd: false,
            trace: false,
            devices: vec![VirtDevice::new(DEFAULT_DEVICE)],
            max_short: 1 << 10,
            max_bcopy: 8 << 10,
            max_zcopy: 1 << 20,
            max_hdr: 128,
            max_iov: 16,
            max_put_zcopy: 1 << 20,
            max_get_zcopy: 1 << 20,
        }
    }
}

impl VirtConfig {
    /// Checks limits (all at least 1, except the one-sided ones), the
    /// link and the devices (at least one, names unique and not empty,
    /// their links and models).
    pub fn validate(&self) -> Result<()> {
        self.link.validate()?;
        let limits = [
            self.max_short,
            self.max_bcopy,
            self.max_zcopy,
            self.max_hdr,
            self.max_iov,
        ];
        if limits.contains(&0) {
            return Err(Error::InvalidParam("virt: a size limit of 0".into()));
        }
        if self.devices.is_empty() {
            return Err(Error::InvalidParam("virt: no device".into()));
        }
        for (i, d) in self.devices.iter().enumerate() {
            d.validate()?;
            if self.devices[..i].iter().any(|e| e.name == d.name) {
                return Err(Error::InvalidParam(format!(
                    "virt: device {:?} named twice",
                    d.name
                )));
            }
        }
        if u32::try_from(self.devices.len()).is_err() {
            return Err(Error::InvalidParam("virt: too many devices".into()));
        }
        Ok(())
    }

    /// The device called `name`.
    pub fn device(&self, name: &str) -> Option<&VirtDevice> {
        self.devices.iter().find(|d| d.name == name)
    }

    /// The model the ifaces of device `name` advertise.
    pub fn model(&self, name: &str) -> Option<PerfModel> {
        self.device(name).map(|d| self.model_of(d))
    }

    /// The model of `dev`: its own, or one derived from its link.
    pub(super) fn model_of(&self, dev: &VirtDevice) -> PerfModel {
        let link = dev.link.unwrap_or(self.link);
        dev.model.unwrap_or(PerfModel {
            latency: link.latency as f64 * 1e-9,
            overhead: 10e-9,
            bandwidth: match link.bandwidth {
                0 => 100e9,
                b => b as f64,
            },
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Status;

    fn status(c: &VirtConfig) -> Status {
        c.validate().unwrap_err().status()
    }

    #[test]
    fn validation() {
        assert!(VirtConfig::default().validate().is_ok());
        let bad_loss = VirtConfig {
            link: LinkConfig {
                loss: 1.5,
                ..LinkConfig::IDEAL
            },
            ..VirtConfig::default()
        };
        assert_eq!(status(&bad_loss), Status::InvalidParam);
        let nan = LinkConfig {
            loss: f64::NAN,
            ..LinkConfig::IDEAL
        };
        assert!(nan.validate().is_err());
        let no_window = LinkConfig {
            window_msgs: 0,
            ..LinkConfig::IDEAL
        };
        assert!(no_window.validate().is_err());
        let no_iov = VirtConfig {
            max_iov: 0,
            ..VirtConfig::default()
        };
        assert!(no_iov.validate().is_err());
        let no_rma = VirtConfig {
            max_put_zcopy: 0,
            max_get_zcopy: 0,
            ..VirtConfig::default()
        };
        assert!(
            no_rma.validate().is_ok(),
            "one-sided operations are optional"
        );
    }

    #[test]
    fn devices_are_checked() {
        let with = |devices: Vec<VirtDevice>| VirtConfig {
            devices,
            ..VirtConfig::default()
        };
        let zero = PerfModel {
            latency: 0.0,
            overhead: 0.0,
            bandwidth: 0.0,
        };
        let bad_link = LinkConfig {
            window_bytes: 0,
            ..LinkConfig::IDEAL
        };
        for (what, c) in [
            ("none", with(vec![])),
            ("empty name", with(vec![VirtDevice::new("")])),
            (
                "twice",
                with(vec![VirtDevice::new("x"), VirtDevice::new("x")]),
            ),
            ("model", with(vec![VirtDevice::new("x").with_model(zero)])),
            ("link", with(vec![VirtDevice::new("x").with_link(bad_link)])),
        ] {
            assert_eq!(status(&c), Status::InvalidParam, "{what}");
        }
        let two = with(vec![VirtDevice::new("x"), VirtDevice::new("y")]);
        assert!(two.validate().is_ok());
        assert_eq!(two.device("y").map(|d| d.name.as_str()), Some("y"));
        assert!(two.device("z").is_none());
        assert!(two.model("z").is_none());
    }

    #[test]
    fn model_follows_the_device_link_unless_given() {
        let c = VirtConfig {
            link: LinkConfig {
                latency: 2000,
                bandwidth: 1_000_000_000,
                ..LinkConfig::IDEAL
            },
            devices: vec![
                VirtDevice::new("net"),
                VirtDevice::new("own").with_link(LinkConfig {
                    latency: 500,
                    bandwidth: 4_000_000_000,
                    ..LinkConfig::IDEAL
                }),
                VirtDevice::new("fixed").with_model(PerfModel {
                    latency: 1e-6,
                    overhead: 2e-9,
                    bandwidth: 3e9,
                }),
            ],
            ..VirtConfig::default()
        };
        let m = c.model("net").unwrap();
        assert!((m.latency - 2e-6).abs() < 1e-15);
        assert!((m.bandwidth - 1e9).abs() < 1.0);
        let m = c.model("own").unwrap();
        assert!((m.latency - 5e-7).abs() < 1e-15);
        assert!((m.bandwidth - 4e9).abs() < 1.0);
        let m = c.model("fixed").unwrap();
        assert_eq!((m.latency, m.overhead, m.bandwidth), (1e-6, 2e-9, 3e9));
        let unlimited = VirtConfig::default().model(DEFAULT_DEVICE).unwrap();
        assert!((unlimited.bandwidth - 100e9).abs() < 1.0);
        assert_eq!(
            NodeId::from_iface_addr(&7u64.to_le_bytes()),
            Some(NodeId(7))
        );
        assert_eq!(NodeId::from_iface_addr(&[1, 2]), None);
    }
}
