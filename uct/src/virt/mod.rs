//! A virtual transport for deterministic tests: ifaces on a simulated
//! network whose clock, delays and faults a test controls.
//!
//! A [`VirtNet`] holds a virtual clock (nanoseconds, moved only by the
//! test or, if asked, by `progress`), the ifaces created on it
//! ([`VirtIface`], a full [`Iface`](crate::Iface)) and the messages
//! between them. No threads, no real time, no sockets: one seed and one
//! sequence of calls always give the same deliveries, at the same virtual
//! times, so that protocol tests run in milliseconds and reproduce.
//!
//! # The wire
//!
//! Each `am_short`, `am_bcopy` or `am_zcopy` becomes a message due at
//! `now + transmission + latency + jitter` by the settings of its directed
//! link ([`LinkConfig`]; one default for the net, overridable per device
//! and per link).
//! Transmission is `len / bandwidth`, and messages queue behind each
//! other on a link. A message that is due moves into its receiver's inbox;
//! the receiver's `progress` delivers it. Messages of a link arrive in send
//! order unless the link allows reordering.
//!
//! * `am_zcopy` copies the data when accepted, returns `InFlight`, and
//!   completes (at the sender's next `progress`) once the message arrives,
//!   so protocols meet real completion paths. `flush` likewise is
//!   `InFlight` until everything it covers has arrived and its one-sided
//!   operations have finished.
//! * `put_zcopy` and `get_zcopy` are a request to the target and a reply
//!   back, each a packet with its link's delay, bandwidth and faults; the
//!   target carries out the access when the request arrives, checked
//!   against the registration its key names (`rma.rs` has the details).
//!   Both return `InFlight`; the completion carries the target's verdict
//!   (`RemoteAccess`, `InvalidParam`), `TimedOut` if a packet was lost, or
//!   the endpoint's error if it failed first.
//! * Each link has a window ([`LinkConfig::window_msgs`],
//!   [`LinkConfig::window_bytes`]): a message holds it from send until the
//!   receiver's `progress` takes it, a one-sided operation until it
//!   finishes. A full window refuses sends with
//!   `NoResource`; pending tokens come back once it has room.
//! * Addresses: device address = the net's 64-bit id and the device's
//!   index (32 bits), 12 bytes; iface address = the iface's [`NodeId`], 8
//!   bytes; all little-endian. Ifaces of another net or another device
//!   are unreachable; malformed addresses are unreachable (`InvalidAddr`
//!   from `ep_create`).
//! * Source ids: one per endpoint, never reused.
//!
//! # Devices
//!
//! A net has one or more devices ([`VirtDevice`]; one `vnet` by default),
//! like separate networks or rails: an iface opened on a device reaches
//! only ifaces of the same device, advertises that device's model, and
//! sends over that device's links (the device's [`LinkConfig`] unless the
//! link has its own). [`VirtNet::bytes_sent`] counts the bytes each device
//! carried: message bytes, put data and get data; requests,
//! acknowledgements and refusals count 0.
//!
//! # Memory
//!
//! Memory domains ([`VirtMd`]) register memory in tables of their own,
//! and pack keys that name net, domain and registration (`rkey.rs`). An
//! iface belongs to the domain it was opened from and exposes its memory
//! only: a target refuses keys of other domains, so two domains behave as
//! two processes. [`VirtNet::iface`] and [`VirtNet::iface_on`] open ifaces
//! of the net's default domain ([`VirtNet::memory_domain`]); each
//! `md_open` of the component makes a new domain.
//!
//! # Driving the clock
//!
//! Manual (the default): the test calls [`VirtNet::advance`] or
//! [`VirtNet::advance_to`]; [`VirtNet::next_event_time`] tells when the
//! next message arrives, and [`VirtNet::step`], [`VirtNet::drive`] and
//! [`VirtNet::drive_until`] run "progress until idle, jump to the next
//! arrival" loops. With the default ideal link (latency 0) everything
//! arrives at once and no advancing is needed.
//!
//! Auto-advance ([`VirtConfig::auto_advance`]): `progress` jumps the clock
//! to the next arrival whenever no open iface of the net has anything to
//! do at the current time (no report, message or ready pending token).
//! Time thus passes only when the whole net is idle, as in a discrete
//! event simulation, and code that polls `progress` in a loop, like the
//! conformance suite, sees every message arrive. An open iface that holds
//! work and is never progressed stops the clock; use manual mode there.
//!
//! # Faults
//!
//! * Delay and jitter per link; a [filter](VirtNet::set_filter) can delay
//!   or drop single packets chosen by content or operation.
//! * Reordering and loss ([`LinkConfig::reorder`], [`LinkConfig::loss`],
//!   [`Verdict::Drop`]) break the transport contract on purpose, to test
//!   protocols against a misbehaving network. Off by default.
//! * [`VirtNet::kill`]: peer death. The iface stops at once: its packets
//!   still on the wire are lost (one-sided operations to or from it finish
//!   with the error), its own endpoints and every endpoint to it
//!   report `ep_failed` once (then their in-flight operations complete with
//!   the error, then their pending tokens come back), and each side hears
//!   `src_failed` once for every source of the other that delivered
//!   anything, after the messages that had arrived.
//! * Dropping a [`VirtIface`] is a clean close: what it sent is still
//!   delivered, then its sources end; endpoints to it fail as above.
//! * `ep_destroy` is abrupt: the endpoint's packets still on the wire are
//!   lost (zero-copy sends, one-sided operations and flushes complete with
//!   `Canceled`) and the receiver sees the source end.
//!
//! With [`VirtConfig::trace`] the net records every packet's fate
//! ([`TraceEvent`]) for comparing runs.
//!
//! # Not for performance
//!
//! Every operation takes the net's mutex and allocates the message; the
//! transport is a test instrument, not a fast path. Reports are collected
//! with the net locked and handed to the sink after it is unlocked, so a
//! sink may call the net (advance, kill, set a link) from its callbacks.
//!
//! # Map
//!
//! * `mod.rs`: [`VirtNet`], the handle tests use;
//! * `config.rs`: [`VirtConfig`], [`VirtDevice`], [`LinkConfig`];
//!   `packet.rs`: what filters and traces see;
//! * `net.rs`: the shared state and arrival; `send.rs`: the wire's timing
//!   and faults, sends, pending tokens; `flush.rs`: flushes;
//!   `progress.rs`: progress, auto-advance, arm;
//! * `rma.rs`: one-sided operations; `md.rs`: [`VirtMd`]; `rkey.rs`: the
//!   packed key layout;
//! * `fail.rs`: `ep_destroy`, `kill`, close;
//! * `iface.rs`: [`VirtIface`]; `component.rs`: [`VirtComponent`];
//! * `rng.rs`: the seeded generator.

mod component;
mod config;
mod fail;
mod flush;
mod iface;
mod md;
mod net;
mod packet;
mod progress;
mod rkey;
mod rma;
mod rng;
mod send;
#[cfg(test)]
mod tests;

pub use component::VirtComponent;
pub use config::{LinkConfig, NodeId, VirtConfig, VirtDevice};
pub use iface::VirtIface;
pub use md::{VirtMd, REG_COST};
pub use packet::{Fate, Filter, Op, PacketInfo, TraceEvent, Verdict};

use crate::{Error, Result};
use net::Net;
use parking_lot::{Mutex, MutexGuard};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// Transport, component and memory domain name.
pub const TL_NAME: &str = "virt";

/// Most `progress` rounds at one instant before a drive loop gives up: a
/// protocol that never goes idle is livelocked.
const MAX_ROUNDS: u32 = 1 << 20;
/// Most clock steps of one drive loop.
const MAX_STEPS: u64 = 1 << 24;

/// A virtual network: clock, ifaces, links, faults. Cloning gives another
/// handle on the same net.
#[derive(Clone)]
pub struct VirtNet {
    inner: Arc<Mutex<Net>>,
}

impl std::fmt::Debug for VirtNet {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.inner.try_lock() {
            Some(n) => n.fmt(f),
            None => f.write_str("VirtNet { <locked> }"),
        }
    }
}

impl Default for VirtNet {
    fn default() -> VirtNet {
        VirtNet::with_seed(VirtConfig::default().seed)
    }
}

impl VirtNet {
    /// A net with these settings (checked).
    pub fn new(cfg: VirtConfig) -> Result<VirtNet> {
        cfg.validate()?;
        // A tag in the high half keeps ids clear of small numbers.
        static NEXT: AtomicU64 = AtomicU64::new(1);
        let id = 0x7669_7274 << 32 | (NEXT.fetch_add(1, Ordering::Relaxed) & 0xffff_ffff);
        Ok(VirtNet {
            inner: Arc::new(Mutex::new(Net::new(cfg, id))),
        })
    }

    /// A net with default settings and this seed.
    pub fn with_seed(seed: u64) -> VirtNet {
        let cfg = VirtConfig {
            seed,
            ..VirtConfig::default()
        };
        // The default configuration is valid, so this cannot fail.
        match VirtNet::new(cfg) {
            Ok(n) => n,
            Err(e) => unreachable!("default virt config rejected: {e}"),
        }
    }

    fn lock(&self) -> MutexGuard<'_, Net> {
        self.inner.lock()
    }

    /// Opens an iface on the first device, of the net's default memory
    /// domain; `name` labels it in logs. Fails only if its eventfd cannot
    /// be created.
    pub fn iface(&self, name: &str) -> Result<VirtIface> {
        VirtIface::open(self, name, None, 0)
    }

    /// Opens an iface on device `dev_name`, of the net's default memory
    /// domain; `InvalidParam` for an unknown device.
    pub fn iface_on(&self, dev_name: &str, name: &str) -> Result<VirtIface> {
        VirtIface::open(self, name, Some(dev_name), 0)
    }

    /// The net's default memory domain: the one of the ifaces opened by
    /// [`VirtNet::iface`] and [`VirtNet::iface_on`].
    pub fn memory_domain(&self) -> VirtMd {
        let n = self.lock();
        VirtMd::with_id(self, n.id, 0, Arc::clone(&n.mds[0]))
    }

    /// A new memory domain of the net (what `md_open` of the component
    /// gives): its ifaces ([`VirtMd::iface`]) expose its memory only.
    /// `NoMemory` after 2^32 domains.
    pub fn new_memory_domain(&self) -> Result<VirtMd> {
        let mut n = self.lock();
        let (id, regs) = n.add_md()?;
        Ok(VirtMd::with_id(self, n.id, id, regs))
    }

    /// Bytes device `dev_name` carried so far: message bytes, put data and
    /// get data put on its wire, lost ones included. `InvalidParam` for an
    /// unknown device.
    pub fn bytes_sent(&self, dev_name: &str) -> Result<u64> {
        let n = self.lock();
        Ok(n.dev_bytes[n.device(dev_name)?])
    }

    /// The settings the net was created with (with the current default
    /// link and auto-advance mode).
    pub fn config(&self) -> VirtConfig {
        self.lock().cfg.clone()
    }

    /// A component whose ifaces join this net.
    pub fn component(&self) -> VirtComponent {
        VirtComponent::new(self.clone())
    }

    /// The virtual time, nanoseconds.
    pub fn now(&self) -> u64 {
        self.lock().now
    }

    /// Moves the clock forward by `ns`; what falls due arrives.
    pub fn advance(&self, ns: u64) {
        let mut n = self.lock();
        n.now = n.now.saturating_add(ns);
        n.settle();
    }

    /// Moves the clock to `time` if that is later.
    pub fn advance_to(&self, time: u64) {
        let mut n = self.lock();
        n.now = n.now.max(time);
        n.settle();
    }

    /// When the next packet (message, RMA request or reply, flush marker,
    /// source end) arrives; `None` when the wire is empty. Always later
    /// than [`VirtNet::now`].
    pub fn next_event_time(&self) -> Option<u64> {
        self.lock().next_event_time()
    }

    /// Packets (messages, RMA requests and replies, flush markers, source
    /// ends) still on the wire.
    pub fn on_wire(&self) -> usize {
        self.lock().wire.len()
    }

    /// Turns auto-advance on or off (see the module documentation).
    pub fn set_auto_advance(&self, on: bool) {
        self.lock().cfg.auto_advance = on;
    }

    /// Settings for links without their own whose device has none either,
    /// for packets sent from now.
    pub fn set_default_link(&self, link: LinkConfig) -> Result<()> {
        link.validate()?;
        self.lock().cfg.link = link;
        Ok(())
    }

    /// Settings of the directed link `from -> to`, for messages sent from
    /// now; `None` returns it to the default.
    pub fn set_link(&self, from: NodeId, to: NodeId, link: Option<LinkConfig>) -> Result<()> {
        if let Some(l) = &link {
            l.validate()?;
        }
        let mut n = self.lock();
        let (f, t) = (node_index(&n, from)?, node_index(&n, to)?);
        n.links.entry((f, t)).or_default().cfg = link;
        Ok(())
    }

    /// Runs `filter` on every packet sent from now on (messages and both
    /// halves of one-sided operations); it decides to pass,
    /// drop or delay it. It runs with the net locked: it must not call the
    /// net.
    pub fn set_filter(&self, filter: impl FnMut(&PacketInfo<'_>) -> Verdict + Send + 'static) {
        self.lock().filter = Some(Box::new(filter));
    }

    /// Removes the filter.
    pub fn clear_filter(&self) {
        self.lock().filter = None;
    }

    /// Peer death of `node` (see the module documentation). Killing a dead
    /// or closed iface does nothing; an unknown id is an error.
    pub fn kill(&self, node: NodeId) -> Result<()> {
        let mut n = self.lock();
        let i = node_index(&n, node)?;
        n.kill(i);
        Ok(())
    }

    /// Whether `node` is open (neither killed nor dropped).
    pub fn is_alive(&self, node: NodeId) -> bool {
        let n = self.lock();
        usize::try_from(node.0).is_ok_and(|i| n.is_open(i))
    }

    /// The trace so far (empty unless [`VirtConfig::trace`]).
    pub fn trace(&self) -> Vec<TraceEvent> {
        self.lock().trace.clone()
    }

    /// Takes the trace so far, leaving it empty.
    pub fn take_trace(&self) -> Vec<TraceEvent> {
        std::mem::take(&mut self.lock().trace)
    }

    /// Calls `progress` (which should progress every iface of interest and
    /// return the events they reported) until it returns 0, then moves the
    /// clock to the next arrival. Returns that time, or `None` when the
    /// wire is empty (nothing more will ever happen without new sends).
    /// `TimedOut` if `progress` never goes idle.
    pub fn step(&self, mut progress: impl FnMut() -> usize) -> Result<Option<u64>> {
        let mut rounds = 0u32;
        while progress() > 0 {
            rounds += 1;
            if rounds >= MAX_ROUNDS {
                return Err(livelock());
            }
        }
        let next = self.next_event_time();
        if let Some(t) = next {
            self.advance_to(t);
        }
        Ok(next)
    }

    /// [`VirtNet::step`] until the net is idle: `progress` returns 0 and
    /// the wire is empty.
    pub fn drive(&self, mut progress: impl FnMut() -> usize) -> Result<()> {
        for _ in 0..MAX_STEPS {
            if self.step(&mut progress)?.is_none() {
                return Ok(());
            }
        }
        Err(livelock())
    }

    /// Steps until `done(state)` holds; `TimedOut` if the net goes idle
    /// first. `state` is handed to both closures (e.g. ifaces and sinks).
    pub fn drive_until<S>(
        &self,
        state: &mut S,
        mut progress: impl FnMut(&mut S) -> usize,
        mut done: impl FnMut(&S) -> bool,
    ) -> Result<()> {
        let mut rounds = 0u32;
        for _ in 0..MAX_STEPS {
            if done(state) {
                return Ok(());
            }
            if progress(state) > 0 {
                rounds += 1;
                if rounds >= MAX_ROUNDS {
                    return Err(livelock());
                }
                continue;
            }
            rounds = 0;
            match self.next_event_time() {
                Some(t) => self.advance_to(t),
                None if done(state) => return Ok(()),
                None => {
                    return Err(Error::TimedOut(
                        "virt: the net went idle before the condition held".into(),
                    ))
                }
            }
        }
        Err(livelock())
    }
}

fn livelock() -> Error {
    Error::TimedOut("virt: progress never went idle".into())
}

fn node_index(n: &Net, node: NodeId) -> Result<usize> {
    usize::try_from(node.0)
        .ok()
        .filter(|&i| i < n.nodes.len())
        .ok_or_else(|| Error::InvalidParam(format!("virt: no iface {node}")))
}
