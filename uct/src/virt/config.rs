//! Settings of a virtual network and its links, and what a test can see
//! of the traffic (packet descriptions for filters, the delivery trace).

use crate::{AmId, Error, PerfModel, Result, SrcId};

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
    /// Probability in `0.0..=1.0` that a message is lost. A lost zero-copy
    /// send still completes with `Ok`, as on an unreliable network.
    pub loss: f64,
    /// Most messages on the link (sent and not yet taken by the receiver's
    /// `progress`); beyond it sends are `NoResource`.
    pub window_msgs: usize,
    /// A message is accepted while fewer than this many bytes are on the
    /// link (so one message may overshoot); else `NoResource`.
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

/// Settings of a [`VirtNet`](super::VirtNet) and of every iface on it.
#[derive(Debug, Clone, PartialEq)]
pub struct VirtConfig {
    /// Seed of the generator behind jitter and losses.
    pub seed: u64,
    /// Link settings wherever no per-link setting was made.
    pub link: LinkConfig,
    /// Advance the clock in `progress` whenever no open iface has anything
    /// to do at the current time (see the module documentation).
    pub auto_advance: bool,
    /// Give each iface an eventfd and advertise `EVENT_FD`.
    pub event_fd: bool,
    /// Record a [`TraceEvent`] for every message delivered, dropped or lost.
    pub trace: bool,
    /// Device name of every iface (also the resource's, for the component).
    pub dev_name: String,
    /// Largest `am_short` payload.
    pub max_short: usize,
    /// Largest `am_bcopy` message.
    pub max_bcopy: usize,
    /// Largest `am_zcopy` data (header not counted).
    pub max_zcopy: usize,
    /// Largest `am_zcopy` header.
    pub max_hdr: usize,
    /// Most `am_zcopy` iov entries.
    pub max_iov: usize,
    /// Performance model the ifaces advertise; `None`: derived from `link`
    /// (its latency, its bandwidth or 100 GB/s if unlimited, 10 ns overhead).
    pub model: Option<PerfModel>,
}

impl Default for VirtConfig {
    fn default() -> VirtConfig {
        VirtConfig {
            seed: 0x5eed,
            link: LinkConfig::IDEAL,
            auto_advance: false,
            event_fd: false,
            trace: false,
            dev_name: "vnet".into(),
            max_short: 1 << 10,
            max_bcopy: 8 << 10,
            max_zcopy: 1 << 20,
            max_hdr: 128,
            max_iov: 16,
            model: None,
        }
    }
}

impl VirtConfig {
    /// Checks limits (all at least 1), the link and the model.
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
        if self.dev_name.is_empty() {
            return Err(Error::InvalidParam("virt: empty device name".into()));
        }
        if let Some(m) = self.model {
            let ok = m.latency.is_finite()
                && m.latency >= 0.0
                && m.overhead.is_finite()
                && m.overhead >= 0.0
                && m.bandwidth.is_finite()
                && m.bandwidth > 0.0;
            if !ok {
                return Err(Error::InvalidParam(format!("virt: bad model {m:?}")));
            }
        }
        Ok(())
    }

    /// The model the ifaces advertise.
    pub fn perf_model(&self) -> PerfModel {
        self.model.unwrap_or(PerfModel {
            latency: self.link.latency as f64 * 1e-9,
            overhead: 10e-9,
            bandwidth: match self.link.bandwidth {
                0 => 100e9,
                b => b as f64,
            },
        })
    }
}

/// Which operation sent a message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op {
    /// `am_short`.
    Short,
    /// `am_bcopy`.
    Bcopy,
    /// `am_zcopy`.
    Zcopy,
}

/// A message about to go on the wire, as a filter sees it.
#[derive(Debug, Clone, Copy)]
pub struct PacketInfo<'a> {
    /// Sending iface.
    pub from: NodeId,
    /// Receiving iface.
    pub to: NodeId,
    /// Source id the receiver will see.
    pub src: SrcId,
    /// Active message id.
    pub id: AmId,
    /// Operation.
    pub op: Op,
    /// Number of the message on this net (0, 1, ... in send order).
    pub seq: u64,
    /// Send time.
    pub time: u64,
    /// The message as the receiver would get it.
    pub data: &'a [u8],
}

/// What a filter decides for one message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// Send as the link settings say.
    Pass,
    /// Lose it (breaks the transport contract, like [`LinkConfig::loss`]).
    Drop,
    /// Add this many nanoseconds of delay (reorders only where the link
    /// allows reordering).
    Delay(u64),
}

/// A test's hook over every message sent: `net.set_filter(...)`. It runs
/// with the net locked and must not call back into the net.
pub type Filter = Box<dyn FnMut(&PacketInfo<'_>) -> Verdict + Send>;

/// What became of a message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fate {
    /// Handed to the receiver's sink.
    Delivered,
    /// Lost on the wire (loss or filter).
    Dropped,
    /// Discarded because an endpoint or iface went away first.
    Lost,
}

/// One entry of the delivery trace.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TraceEvent {
    /// Virtual time of the event.
    pub time: u64,
    /// Number of the message on the net.
    pub seq: u64,
    /// Sender.
    pub from: NodeId,
    /// Receiver.
    pub to: NodeId,
    /// Source id at the receiver.
    pub src: SrcId,
    /// Active message id.
    pub id: AmId,
    /// Length as delivered.
    pub len: usize,
    /// What happened.
    pub fate: Fate,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Status;

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
        let e = bad_loss.validate().unwrap_err();
        assert_eq!(e.status(), Status::InvalidParam);
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
        let bad_model = VirtConfig {
            model: Some(PerfModel {
                latency: 0.0,
                overhead: 0.0,
                bandwidth: 0.0,
            }),
            ..VirtConfig::default()
        };
        assert!(bad_model.validate().is_err());
    }

    #[test]
    fn model_follows_link() {
        let c = VirtConfig {
            link: LinkConfig {
                latency: 2000,
                bandwidth: 1_000_000_000,
                ..LinkConfig::IDEAL
            },
            ..VirtConfig::default()
        };
        let m = c.perf_model();
        assert!((m.latency - 2e-6).abs() < 1e-15);
        assert!((m.bandwidth - 1e9).abs() < 1.0);
        assert!(VirtConfig::default().perf_model().bandwidth > 0.0);
        assert_eq!(
            NodeId::from_iface_addr(&7u64.to_le_bytes()),
            Some(NodeId(7))
        );
        assert_eq!(NodeId::from_iface_addr(&[1, 2]), None);
    }
}
