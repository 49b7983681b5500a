//! Selection: the cheapest protocol per size range, under the user's
//! thresholds, as a table the send path looks sizes up in.

use super::config::{RndvScheme, SelectConfig};
use super::envelope::Envelope;
use super::lanes::{EpLanes, LaneSet};
use super::linear::{Linear, PiecewiseLinear};
use super::protocols::{Op, ProtoClass, ProtocolId};
use super::ranges::Ranges;
use crate::ucs::config::MemUnits;

/// The protocol for one range of message sizes.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Choice {
    /// First size of the range.
    pub start: usize,
    /// Last size of the range (inclusive).
    pub end: usize,
    /// The protocol.
    pub proto: ProtocolId,
    /// The lanes carrying the data, and their shares.
    pub lanes: LaneSet,
    /// Estimated cost over the range (seconds).
    pub cost: Linear,
}

impl Choice {
    /// Estimated time to send `size` bytes, seconds.
    pub fn cost_at(&self, size: usize) -> f64 {
        self.cost.at(size)
    }
}

/// Something selection did other than what the settings asked, for the
/// caller to log at info level.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Note {
    /// `rndv_scheme` names a scheme the lanes cannot do; the cheapest
    /// scheme they can do is used instead.
    SchemeUnavailable {
        /// The scheme asked for.
        requested: RndvScheme,
    },
    /// A threshold forces a class of protocols at these sizes, but none of
    /// that class can send them; the other protocols are used there.
    ForcedUnavailable {
        /// The setting, e.g. `"rndv_thresh"`.
        setting: &'static str,
        /// The sizes concerned.
        sizes: Ranges,
    },
    /// The thresholds left no protocol for these sizes; they were ignored
    /// there.
    ThresholdsIgnored {
        /// The sizes concerned.
        sizes: Ranges,
    },
}

impl std::fmt::Display for Note {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Note::SchemeUnavailable { requested } => write!(
                f,
                "rndv_scheme {requested}: the lanes cannot do it; using the cheapest scheme they can"
            ),
            Note::ForcedUnavailable { setting, sizes } => write!(
                f,
                "{setting}: no such protocol for sizes {}; using others there",
                super::display::ranges_text(sizes)
            ),
            Note::ThresholdsIgnored { sizes } => write!(
                f,
                "thresholds leave no protocol for sizes {}; ignored there",
                super::display::ranges_text(sizes)
            ),
        }
    }
}

/// Selection failed: no protocol at all can send some sizes on these lanes.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("no protocol for {op:?} of {start}..={end} bytes on these lanes")]
pub struct SelectError {
    /// The operation.
    pub op: Op,
    /// First size without a protocol.
    pub start: usize,
    /// Last size of that gap.
    pub end: usize,
}

/// The protocol for every message size of one operation on one lane
/// configuration: ranges covering `0..=usize::MAX` without gaps or
/// overlaps, in order.
#[derive(Debug, Clone, PartialEq)]
pub struct SelectionTable {
    pub(crate) op: Op,
    pub(crate) lane_names: Vec<String>,
    /// Never empty; first starts at 0, last ends at `usize::MAX`, each
    /// starts one after the previous ends.
    pub(crate) choices: Vec<Choice>,
    /// `choices[i].end`, densely, for `lookup` (a message's first cache
    /// line holds the whole search).
    ends: Box<[usize]>,
    pub(crate) notes: Vec<Note>,
}

impl SelectionTable {
    /// The protocol for a message of `size` bytes. O(log n) in the number
    /// of ranges, no allocation.
    #[inline]
    pub fn lookup(&self, size: usize) -> &Choice {
        // Tables have a handful of ranges: a scan of the dense ends beats a
        // binary search over the wide entries. The last range ends at
        // usize::MAX, so a range is always found.
        let i = self
            .ends
            .iter()
            .position(|&end| size <= end)
            .unwrap_or(self.choices.len() - 1);
        &self.choices[i]
    }

    /// Sizes below this bound take eager short (with at most `max_short`
    /// bytes of payload); 0 if no size does. What the send fast path tests
    /// instead of a lookup.
    pub fn short_end(&self, max_short: usize) -> usize {
        match self.choices.first() {
            Some(c) if c.proto == ProtocolId::EagerShort => c.end.min(max_short).saturating_add(1),
            _ => 0,
        }
    }

    /// The ranges, in order.
    pub fn choices(&self) -> &[Choice] {
        &self.choices
    }

    /// What selection did other than asked.
    pub fn notes(&self) -> &[Note] {
        &self.notes
    }

    /// The operation.
    pub fn op(&self) -> Op {
        self.op
    }

    /// Names of the endpoint's lanes, by index.
    pub fn lane_names(&self) -> &[String] {
        &self.lane_names
    }
}

/// The protocol a fixed scheme stands for.
fn scheme_protocol(s: RndvScheme) -> Option<ProtocolId> {
    match s {
        RndvScheme::Auto => None,
        RndvScheme::GetZcopy => Some(ProtocolId::RndvGetZcopy),
        RndvScheme::PutZcopy => Some(ProtocolId::RndvPutZcopy),
        RndvScheme::Am => Some(ProtocolId::RndvAm),
    }
}

/// A class's threshold and the name of its setting.
fn threshold(cfg: &SelectConfig, c: ProtoClass) -> (MemUnits, &'static str) {
    match c {
        ProtoClass::Short => (MemUnits::Auto, ""),
        ProtoClass::Bcopy => (cfg.bcopy_thresh, "bcopy_thresh"),
        ProtoClass::Zcopy => (cfg.zcopy_thresh, "zcopy_thresh"),
        ProtoClass::Rndv => (cfg.rndv_thresh, "rndv_thresh"),
    }
}

/// Sizes a class may serve: all (`auto`), none (`inf`), or from `n` on.
fn allowed(t: MemUnits) -> Ranges {
    match t {
        MemUnits::Auto => Ranges::all(),
        MemUnits::Inf => Ranges::none(),
        MemUnits::Bytes(n) => match usize::try_from(n) {
            Ok(n) => Ranges::from_range(n, usize::MAX),
            Err(_) => Ranges::none(),
        },
    }
}

const CLASSES: [ProtoClass; 4] = [
    ProtoClass::Short,
    ProtoClass::Bcopy,
    ProtoClass::Zcopy,
    ProtoClass::Rndv,
];

/// Selects the protocol for every size of `op` on `lanes`; see the module
/// doc of [`select`](super) for the rules.
pub fn select(lanes: &EpLanes, cfg: &SelectConfig, op: Op) -> Result<SelectionTable, SelectError> {
    let mut notes = Vec::new();
    let mut cands: Vec<_> = ProtocolId::ALL
        .iter()
        .filter(|id| id.serves(op))
        .filter_map(|&id| id.probe(lanes, cfg).map(|p| (id, p)))
        .collect();

    // A fixed scheme keeps only its protocol among the rendezvous ones.
    if let Some(want) = scheme_protocol(cfg.rndv_scheme) {
        if cands.iter().any(|(id, _)| *id == want) {
            cands.retain(|(id, _)| id.class() != ProtoClass::Rndv || *id == want);
        } else if cands.iter().any(|(id, _)| id.class() == ProtoClass::Rndv) {
            notes.push(Note::SchemeUnavailable {
                requested: cfg.rndv_scheme,
            });
        }
    }

    // Thresholds: each class only at or above its threshold; a class with a
    // fixed threshold disables the lower classes where it can send.
    let restricted: Vec<PiecewiseLinear> = cands
        .iter()
        .map(|(id, p)| p.cost.restrict_to(&allowed(threshold(cfg, id.class()).0)))
        .collect();
    let mut forced = Vec::new();
    for c in CLASSES {
        let (t, setting) = threshold(cfg, c);
        let Some(n) = t.bytes() else { continue };
        let dom = cands
            .iter()
            .zip(&restricted)
            .filter(|((id, _), _)| id.class() == c)
            .fold(Ranges::none(), |acc, (_, f)| acc.union(&f.domain()));
        // Zero-length messages never use zero-copy or rendezvous: no note.
        let from = match c {
            ProtoClass::Zcopy | ProtoClass::Rndv => n.max(1),
            _ => n,
        };
        let wanted = match usize::try_from(from) {
            Ok(from) => Ranges::from_range(from, usize::MAX),
            Err(_) => Ranges::none(),
        };
        let missing = wanted.subtract(&dom);
        if !missing.is_empty() {
            notes.push(Note::ForcedUnavailable {
                setting,
                sizes: missing,
            });
        }
        forced.push((c, dom));
    }
    let effective: Vec<PiecewiseLinear> = cands
        .iter()
        .zip(&restricted)
        .map(|((id, _), f)| {
            let above = forced
                .iter()
                .filter(|(c, _)| *c > id.class())
                .fold(Ranges::none(), |acc, (_, d)| acc.union(d));
            f.restrict_to(&above.complement())
        })
        .collect();
    let tagged: Vec<_> = cands.iter().map(|(id, _)| *id).zip(&effective).collect();
    let mut env = Envelope::lower(&tagged);

    // Where the thresholds left nothing, ignore them.
    let gaps = env.domain().complement();
    if !gaps.is_empty() {
        let all: Vec<_> = cands.iter().map(|(id, p)| (*id, &p.cost)).collect();
        env = env.fill_gaps(&Envelope::lower(&all));
        let filled = env.domain().intersect(&gaps);
        if !filled.is_empty() {
            notes.push(Note::ThresholdsIgnored { sizes: filled });
        }
    }
    if let Some(&(start, end)) = env.domain().complement().as_slice().first() {
        return Err(SelectError { op, start, end });
    }

    let choices = env
        .pieces()
        .iter()
        .map(|p| Choice {
            start: p.start,
            end: p.end,
            proto: p.tag,
            lanes: cands
                .iter()
                .find(|(id, _)| *id == p.tag)
                .map(|(_, pr)| pr.lanes)
                .unwrap_or_default(),
            cost: p.f,
        })
        .collect::<Vec<Choice>>();
    Ok(SelectionTable {
        op,
        lane_names: lanes.lanes.iter().map(|l| l.name.clone()).collect(),
        ends: choices.iter().map(|c| c.end).collect(),
        choices,
        notes,
    })
}
