//! The state behind a [`VirtNet`](super::VirtNet): the clock, the ifaces
//! (nodes) with their endpoints, the links and the packets on the wire.
//!
//! Invariants:
//!
//! * after every operation the wire holds only packets due after `now`;
//!   everything due has been settled: moved into its receiver's inbox, its
//!   zero-copy completion queued for the sender, carried out (RMA), or
//!   dropped;
//! * every one-sided operation in a node's `rma` table has exactly one
//!   packet on the wire, its request or its reply, until it finishes (so a
//!   drive loop always reaches its end).

use super::config::{LinkConfig, NodeId};
use super::flush::FlushWait;
use super::packet::{Fate, Filter, Op, TraceEvent};
use super::rma::{RmaMsg, RmaOp};
use super::rng::Rng;
use super::VirtConfig;
use crate::ucs::progress::EventFd;
use crate::{AmId, AmSink, EpId, Error, RegTable, Result, SrcId, Token};
use std::collections::{BTreeMap, VecDeque};
use std::sync::Arc;

/// Whether an iface works, died (`kill`) or was dropped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum State {
    Open,
    Killed,
    Closed,
}

/// What a `progress` hands to the sink, collected with the net locked and
/// delivered after it is unlocked (so that a sink may use the net).
#[derive(Debug)]
pub(super) enum Report {
    Am { id: AmId, src: SrcId, data: Vec<u8> },
    Completed(Token, Result<()>),
    PendingReady(EpId, Token),
    EpFailed(EpId, Error),
    SrcFailed(SrcId, Error),
}

impl Report {
    pub(super) fn deliver(self, sink: &mut dyn AmSink) {
        match self {
            Report::Am { id, src, data } => sink.am(id, src, &data),
            Report::Completed(t, r) => sink.completed(t, r),
            Report::PendingReady(ep, t) => sink.pending_ready(ep, t),
            Report::EpFailed(ep, e) => sink.ep_failed(ep, e),
            Report::SrcFailed(src, e) => sink.src_failed(src, e),
        }
    }
}

#[derive(Debug)]
pub(super) struct Ep {
    /// Unique on the net, unlike the reusable `EpId`: names the endpoint's
    /// packets.
    pub(super) uid: u64,
    pub(super) target: usize,
    pub(super) src: SrcId,
    pub(super) failed: bool,
    pub(super) pending: VecDeque<Token>,
    pub(super) in_pending_list: bool,
}

/// A source of messages into a node (one per endpoint to it).
#[derive(Debug)]
pub(super) struct SrcState {
    pub(super) delivered: bool,
    pub(super) ended: bool,
}

#[derive(Debug)]
pub(super) struct Node {
    pub(super) name: String,
    /// Index of its device in the net's configuration.
    pub(super) dev: usize,
    /// The memory domain it was opened from: keys of other domains are
    /// refused when they reach it.
    pub(super) md: u32,
    pub(super) state: State,
    pub(super) eps: Vec<Option<Ep>>,
    pub(super) free_eps: Vec<u32>,
    pub(super) srcs: Vec<SrcState>,
    /// Arrived packets (messages and source ends) in arrival order.
    pub(super) inbox: VecDeque<(u64, Packet)>,
    pub(super) reports: VecDeque<Report>,
    pub(super) pending_eps: Vec<u32>,
    pub(super) armed: bool,
    pub(super) event: Option<EventFd>,
    /// One-sided operations it started, by operation number.
    pub(super) rma: BTreeMap<u64, RmaOp>,
    /// Flushes waiting, in the order they were asked for.
    pub(super) flushes: Vec<FlushWait>,
}

#[derive(Debug)]
pub(super) enum Body {
    Am {
        id: AmId,
        op: Op,
        data: Vec<u8>,
        token: Option<Token>,
        dropped: bool,
    },
    /// A request or reply of one-sided operation `op` of the initiator.
    Rma {
        op: u64,
        kind: Op,
        msg: RmaMsg,
        dropped: bool,
    },
    /// The source is gone: the receiver reports `src_failed`.
    End(&'static str),
    /// Marks, at the sender (`to == from`), the arrival of the last
    /// message flush `.0` waits for.
    Flush(u64),
}

#[derive(Debug)]
pub(super) struct Packet {
    pub(super) from: usize,
    /// The sending endpoint's uid (for RMA replies: the initiating
    /// endpoint's); `None` for an iface flush and ends.
    pub(super) ep: Option<u64>,
    pub(super) to: usize,
    pub(super) src: SrcId,
    pub(super) body: Body,
}

/// Use and settings of one directed link.
#[derive(Debug, Default)]
pub(super) struct Link {
    pub(super) cfg: Option<LinkConfig>,
    pub(super) msgs: usize,
    pub(super) bytes: usize,
    pub(super) busy_until: u64,
    pub(super) last_arrival: u64,
}

pub(super) struct Net {
    pub(super) cfg: VirtConfig,
    pub(super) id: u64,
    pub(super) now: u64,
    pub(super) seq: u64,
    pub(super) next_ep_uid: u64,
    pub(super) rng: Rng,
    pub(super) links: BTreeMap<(usize, usize), Link>,
    pub(super) nodes: Vec<Node>,
    /// Packets by (arrival time, sequence number).
    pub(super) wire: BTreeMap<(u64, u64), Packet>,
    pub(super) filter: Option<Filter>,
    pub(super) trace: Vec<TraceEvent>,
    /// Registrations of each memory domain, by id.
    pub(super) mds: Vec<Arc<RegTable>>,
    /// Bytes put on the wire per device (see `VirtNet::bytes_sent`).
    pub(super) dev_bytes: Vec<u64>,
    /// Number of the next one-sided operation.
    pub(super) next_rma: u64,
    /// Number of the next flush that waits.
    pub(super) next_flush: u64,
}

impl std::fmt::Debug for Net {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Net")
            .field("id", &format_args!("{:#018x}", self.id))
            .field("now", &self.now)
            .field("devices", &self.cfg.devices.len())
            .field("nodes", &self.nodes.len())
            .field("on_wire", &self.wire.len())
            .field("filter", &self.filter.is_some())
            .finish_non_exhaustive()
    }
}

pub(super) fn no_ep(ep: EpId) -> Error {
    Error::UnknownEndpoint {
        transport: "virt".into(),
        ep: ep.0.into(),
    }
}

impl Net {
    /// A net with its default memory domain (id 0).
    pub(super) fn new(cfg: VirtConfig, id: u64) -> Net {
        Net {
            rng: Rng::new(cfg.seed),
            dev_bytes: vec![0; cfg.devices.len()],
            mds: vec![Arc::new(RegTable::new(super::TL_NAME))],
            next_rma: 0,
            next_flush: 0,
            cfg,
            id,
            now: 0,
            seq: 0,
            next_ep_uid: 0,
            links: BTreeMap::new(),
            nodes: Vec::new(),
            wire: BTreeMap::new(),
            filter: None,
            trace: Vec::new(),
        }
    }

    /// A new memory domain: its id and its table.
    pub(super) fn add_md(&mut self) -> Result<(u32, Arc<RegTable>)> {
        let id = u32::try_from(self.mds.len())
            .map_err(|_| Error::NoMemory("virt: memory domain ids exhausted".into()))?;
        let table = Arc::new(RegTable::new(super::TL_NAME));
        self.mds.push(Arc::clone(&table));
        Ok((id, table))
    }

    /// The index of device `name`.
    pub(super) fn device(&self, name: &str) -> Result<usize> {
        self.cfg
            .devices
            .iter()
            .position(|d| d.name == name)
            .ok_or_else(|| Error::InvalidParam(format!("virt: no device {name:?}")))
    }

    /// Adds a node on device `dev` belonging to memory domain `md`.
    pub(super) fn add_node(&mut self, name: &str, dev: usize, md: u32) -> Result<usize> {
        let event = if self.cfg.event_fd {
            Some(EventFd::new()?)
        } else {
            None
        };
        self.nodes.push(Node {
            name: name.to_owned(),
            dev,
            md,
            state: State::Open,
            eps: Vec::new(),
            free_eps: Vec::new(),
            srcs: Vec::new(),
            inbox: VecDeque::new(),
            reports: VecDeque::new(),
            pending_eps: Vec::new(),
            armed: false,
            event,
            rma: BTreeMap::new(),
            flushes: Vec::new(),
        });
        Ok(self.nodes.len() - 1)
    }

    pub(super) fn is_open(&self, node: usize) -> bool {
        self.nodes.get(node).is_some_and(|n| n.state == State::Open)
    }

    pub(super) fn next_seq(&mut self) -> u64 {
        self.seq += 1;
        self.seq - 1
    }

    pub(super) fn ep_ref(&self, me: usize, ep: EpId) -> Result<&Ep> {
        self.nodes[me]
            .eps
            .get(ep.0 as usize)
            .and_then(Option::as_ref)
            .ok_or_else(|| no_ep(ep))
    }

    /// Settings of the link `from -> to`: its own, else its device's,
    /// else the net's.
    pub(super) fn link_cfg(&self, from: usize, to: usize) -> LinkConfig {
        self.links
            .get(&(from, to))
            .and_then(|l| l.cfg)
            .or(self.cfg.devices[self.nodes[from].dev].link)
            .unwrap_or(self.cfg.link)
    }

    /// Whether the link takes another message.
    pub(super) fn has_room(&self, from: usize, to: usize) -> bool {
        let cfg = self.link_cfg(from, to);
        self.links
            .get(&(from, to))
            .is_none_or(|l| l.msgs < cfg.window_msgs && l.bytes < cfg.window_bytes)
    }

    /// Gives back the window a message of `len` bytes took.
    pub(super) fn release(&mut self, from: usize, to: usize, len: usize) {
        if let Some(l) = self.links.get_mut(&(from, to)) {
            l.msgs = l.msgs.saturating_sub(1);
            l.bytes = l.bytes.saturating_sub(len);
        }
    }

    /// Signals a sleeping node.
    pub(super) fn wake(&mut self, node: usize) {
        let n = &mut self.nodes[node];
        if n.armed {
            n.armed = false;
            if let Some(e) = &n.event {
                let _ = e.signal();
            }
        }
    }

    /// Queues a report for a node that is still there to hear it.
    pub(super) fn report(&mut self, node: usize, r: Report) {
        if self.nodes[node].state != State::Closed {
            self.nodes[node].reports.push_back(r);
            self.wake(node);
        }
    }

    pub(super) fn record(&mut self, time: u64, seq: u64, p: &Packet, fate: Fate) {
        if !self.cfg.trace {
            return;
        }
        let (id, op, len) = match &p.body {
            Body::Am { id, op, data, .. } => (*id, *op, data.len()),
            Body::Rma { kind, msg, .. } => (0, *kind, msg.data_len()),
            Body::End(_) | Body::Flush(_) => return,
        };
        self.trace.push(TraceEvent {
            time,
            seq,
            from: NodeId(p.from as u64),
            to: NodeId(p.to as u64),
            src: p.src,
            id,
            op,
            len,
            fate,
        });
    }

    /// Whether `target` is open and on the device of `me`.
    pub(super) fn reaches(&self, me: usize, target: usize) -> bool {
        self.is_open(target) && self.nodes[target].dev == self.nodes[me].dev
    }

    pub(super) fn ep_create(&mut self, me: usize, target: usize) -> Result<EpId> {
        if !self.is_open(me) || !self.is_open(target) {
            return Err(Error::Unreachable(format!(
                "virt: {} or {} is not open",
                NodeId(me as u64),
                NodeId(target as u64)
            )));
        }
        if !self.reaches(me, target) {
            return Err(Error::Unreachable(format!(
                "virt: {} is on another device",
                NodeId(target as u64)
            )));
        }
        let src = u32::try_from(self.nodes[target].srcs.len())
            .map_err(|_| Error::NoMemory("virt: source ids exhausted".into()))?;
        let node = &mut self.nodes[me];
        let index = match node.free_eps.last() {
            Some(&i) => i,
            None => u32::try_from(node.eps.len())
                .map_err(|_| Error::NoMemory("virt: endpoint table full".into()))?,
        };
        let ep = Ep {
            uid: self.next_ep_uid,
            target,
            src: SrcId(src),
            failed: false,
            pending: VecDeque::new(),
            in_pending_list: false,
        };
        if node.free_eps.pop().is_some() {
            node.eps[index as usize] = Some(ep);
        } else {
            node.eps.push(Some(ep));
        }
        self.next_ep_uid += 1;
        self.nodes[target].srcs.push(SrcState {
            delivered: false,
            ended: false,
        });
        Ok(EpId(index))
    }

    /// Moves everything due by `now` off the wire.
    pub(super) fn settle(&mut self) {
        while let Some(entry) = self.wire.first_entry() {
            if entry.key().0 > self.now {
                break;
            }
            let ((time, seq), p) = entry.remove_entry();
            self.arrive(time, seq, p);
        }
    }

    fn arrive(&mut self, time: u64, seq: u64, p: Packet) {
        let (token, dropped) = match &p.body {
            Body::Am { token, dropped, .. } => (*token, *dropped),
            Body::End(_) => (None, false),
            Body::Flush(id) => return self.marker_arrived(p.from, *id),
            Body::Rma { .. } => return self.rma_arrive(time, seq, p),
        };
        if let Some(t) = token {
            self.report(p.from, Report::Completed(t, Ok(())));
        }
        if dropped || !self.is_open(p.to) {
            if let Body::Am { data, .. } = &p.body {
                self.release(p.from, p.to, data.len());
            }
            let fate = if dropped { Fate::Dropped } else { Fate::Lost };
            self.record(time, seq, &p, fate);
            return;
        }
        let to = p.to;
        self.nodes[to].inbox.push_back((seq, p));
        self.wake(to);
    }

    /// The earliest arrival on the wire (always after `now`).
    pub(super) fn next_event_time(&self) -> Option<u64> {
        self.wire.first_key_value().map(|(&(t, _), _)| t)
    }
}
