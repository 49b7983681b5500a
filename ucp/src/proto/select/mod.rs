//! Protocol selection: which protocol sends a message of a given size.
//!
//! Sans-IO and pure: from plain descriptions of an endpoint's lanes
//! ([`EpLanes`], [`LaneInfo`]: the transports' performance models and
//! limits) and the settings ([`SelectConfig`]), [`select`] computes a
//! [`SelectionTable`] that covers every message size of one operation
//! ([`Op`]); [`SelectCache`] keeps one per lane configuration. The send
//! path only calls [`SelectionTable::lookup`]. Nothing here touches an
//! iface, a clock or a socket.
//!
//! # How a table is made
//! 1. Every registered protocol ([`ProtocolId::ALL`], in registration
//!    order) that serves the operation is *probed*: it returns its cost as
//!    a [`PiecewiseLinear`] function of the size, over the sizes it can
//!    send, or nothing if the lanes cannot run it. The formulas, with
//!    units, are documented in `protocols.rs` (eager) and `rndv.rs`
//!    (rendezvous).
//! 2. The settings restrict the candidates (below).
//! 3. The lower envelope ([`Envelope`]) of the remaining candidates picks
//!    the cheapest per size range; on equal cost the earlier-registered
//!    protocol wins.
//!
//! Zero-length messages are always sent eager (short or copy): zero-copy
//! and rendezvous protocols start at one byte.
//!
//! # How the settings combine
//! Protocols fall in four classes of increasing priority: eager short,
//! eager copy (`bcopy_thresh`), eager zero-copy (`zcopy_thresh`),
//! rendezvous (`rndv_thresh`). Like UCX since its PR #5659, a threshold is
//! a priority, not a cost tweak:
//! * `auto`: the class competes on cost at every size;
//! * `inf`: the class is never used;
//! * `n` bytes: the class is not used below `n`, and at `n` and above it
//!   *disables every lower class* wherever it can send the size; classes
//!   above it still compete on cost. So `rndv_thresh=n` means exactly
//!   "rendezvous from `n` on", `zcopy_thresh=n` means "no copy eager from
//!   `n` on, rendezvous still by cost", and `bcopy_thresh=n` moves the
//!   short-to-copy switch to `n`.
//!
//! Where a forced class cannot send some sizes (say `rndv_thresh=0` on
//! lanes without any rendezvous), the other classes serve them and the
//! table records a [`Note::ForcedUnavailable`]. Where the thresholds leave
//! no protocol at all (say `bcopy_thresh=1m` on a lane without zero-copy),
//! they are ignored for those sizes ([`Note::ThresholdsIgnored`]).
//!
//! `rndv_scheme` (`auto`, `get_zcopy`, `put_zcopy`, `am`) keeps only that
//! rendezvous protocol; if the lanes cannot do it, the cheapest scheme
//! they can do is used and [`Note::SchemeUnavailable`] is recorded, for
//! the caller to log at info level. `rndv_frag_size` is the size of one
//! zero-copy rendezvous operation; `max_rndv_lanes` how many lanes a
//! zero-copy rendezvous spreads over, sharing the data in proportion to
//! bandwidth.
//!
//! # Example
//! ```
//! use rucx_ucp::proto::select::{select, EpLanes, LaneInfo, Op, ProtocolId, SelectConfig};
//! use rucx_ucp::uct::{Caps, PerfModel};
//!
//! let lane = LaneInfo {
//!     name: "tcp/lo".into(),
//!     model: PerfModel { latency: 5.2e-6, overhead: 2e-6, bandwidth: 2200.0 * 1048576.0 },
//!     caps: Caps::AM_SHORT | Caps::AM_BCOPY | Caps::AM_ZCOPY,
//!     max_short: 8184,
//!     max_bcopy: 65536,
//!     max_zcopy: 1 << 20,
//!     max_put_zcopy: 0,
//!     max_get_zcopy: 0,
//!     reg_cost: Default::default(),
//! };
//! let table = select(&EpLanes::new(vec![lane]), &SelectConfig::default(), Op::TagSend)?;
//! assert_eq!(table.lookup(8).proto, ProtocolId::EagerShort);
//! println!("{table}");
//! # Ok::<(), rucx_ucp::proto::select::SelectError>(())
//! ```

mod cache;
mod config;
mod display;
mod envelope;
mod lanes;
mod linear;
mod protocols;
mod ranges;
mod rndv;
mod table;
#[cfg(test)]
mod tests;

pub use cache::SelectCache;
pub use config::{
    ProtoOverhead, RndvScheme, SelectConfig, MAX_LANES, MAX_RNDV_LANES, MAX_RNDV_LANES_TEXT,
    MEMCPY_BW, MULTI_LANE_MAX_RATIO, RNDV_FRAG_SIZE, RNDV_SPLIT_THRESH, SYNC_EXTRA_HDR,
};
pub use display::size_text;
pub use envelope::{Envelope, Piece};
pub use lanes::{EpLanes, LaneInfo, LaneSet, LanesFingerprint, MAX_EP_LANES};
pub use linear::{Linear, PiecewiseLinear, Segment};
pub use protocols::{Op, Probe, ProtoClass, ProtocolId};
pub use ranges::Ranges;
pub use rndv::RNDV_CTRL_LEN;
pub use table::{select, Choice, Note, SelectError, SelectionTable};
