//! Settings of protocol selection.

use crate::ucs::config::MemUnits;

crate::ucs::config_enum! {
    /// Which rendezvous flavour to use (like `UCX_RNDV_SCHEME`).
    pub enum RndvScheme {
        /// The cheapest the lanes can do, by the model.
        Auto = "auto",
        /// The receiver reads the sender's buffer (RTS, get, ATS).
        GetZcopy = "get_zcopy",
        /// The sender writes the receiver's buffer (RTS, RTR, put, ATP).
        PutZcopy = "put_zcopy",
        /// The sender sends fragments as active messages (RTS, RTR, data).
        Am = "am",
    }
}

/// Fixed software costs of the protocols themselves, seconds, on top of
/// the transports' own overheads (UCX's `UCX_PROTO_OVERHEAD` defaults).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ProtoOverhead {
    /// Per message of a single-fragment protocol.
    pub single: f64,
    /// Per fragment of a multi-fragment protocol.
    pub multi: f64,
    /// Building and sending a rendezvous request (RTS), handling it.
    pub rndv_rts: f64,
    /// Building and sending a ready-to-receive (RTR), handling it.
    pub rndv_rtr: f64,
}

impl Default for ProtoOverhead {
    fn default() -> ProtoOverhead {
        ProtoOverhead {
            single: 5e-9,
            multi: 10e-9,
            rndv_rts: 275e-9,
            rndv_rtr: 40e-9,
        }
    }
}

/// Host memory copy bandwidth assumed by the model, bytes per second
/// (10 GB/s: a single core's `memcpy` of cache-cold buffers on a current
/// server; UCX's `UCX_BCOPY_BW` plays the same part).
pub const MEMCPY_BW: f64 = 10e9;

/// Default fragment size of zero-copy rendezvous: 0, each lane's largest
/// put or get (as UCX's zero-copy rendezvous uses the lane's limit; its
/// `UCX_RNDV_FRAG_SIZE` sizes pipeline staging buffers). On TCP over
/// loopback 1 MiB fragments moved 1 MiB messages 5-10% faster than 512 KiB
/// ones.
pub const RNDV_FRAG_SIZE: usize = 0;

/// Default message size from which a rendezvous by get is split between
/// the receiver's reads and the sender's writes. Two processes copying at
/// once move a large message about twice as fast as one; below this the
/// extra messages cost more than the halved copy saves.
pub const RNDV_SPLIT_THRESH: usize = 32 * 1024;

/// Default number of lanes a zero-copy rendezvous spreads over (like
/// `UCX_MAX_RNDV_RAILS`), as text: the default of `RUCX_MAX_RNDV_LANES`
/// in the configuration table, and the one definition of
/// [`MAX_RNDV_LANES`].
pub const MAX_RNDV_LANES_TEXT: &str = "2";

/// Default number of lanes a zero-copy rendezvous spreads over:
/// [`MAX_RNDV_LANES_TEXT`] read at compile time.
pub const MAX_RNDV_LANES: usize = decimal(MAX_RNDV_LANES_TEXT);

/// The value of a decimal count; anything but digits fails the build.
const fn decimal(text: &str) -> usize {
    let digits = text.as_bytes();
    assert!(!digits.is_empty(), "a count needs digits");
    let mut n = 0;
    let mut i = 0;
    while i < digits.len() {
        assert!(digits[i].is_ascii_digit(), "a count is decimal digits");
        n = n * 10 + (digits[i] - b'0') as usize;
        i += 1;
    }
    n
}

/// Most lanes one protocol uses, whatever `max_rndv_lanes` says.
pub const MAX_LANES: usize = 8;

/// A lane slower than the fastest candidate by more than this factor is
/// not used for rendezvous (like UCX's `MULTI_LANE_MAX_RATIO`).
pub const MULTI_LANE_MAX_RATIO: f64 = 4.0;

/// Extra header bytes of a synchronous eager message over a plain one
/// (the sender's endpoint and request ids the receiver acknowledges to).
pub const SYNC_EXTRA_HDR: usize = 16;

/// Everything that steers protocol selection; see the module doc of
/// [`select`](super) for how the thresholds combine.
#[derive(Debug, Clone, PartialEq)]
pub struct SelectConfig {
    /// Eager to rendezvous (`UCX_RNDV_THRESH`): `Auto` by the model;
    /// `Bytes(n)` forbids rendezvous below `n` and forces it at and above;
    /// `Inf` never.
    pub rndv_thresh: MemUnits,
    /// Copy to zero-copy eager (`UCX_ZCOPY_THRESH`), same rules for eager
    /// zero-copy.
    pub zcopy_thresh: MemUnits,
    /// Short to copy eager (`UCX_BCOPY_THRESH`), same rules for eager
    /// copy (bcopy).
    pub bcopy_thresh: MemUnits,
    /// Rendezvous flavour.
    pub rndv_scheme: RndvScheme,
    /// Size of one zero-copy rendezvous operation, bytes (0: the lane's
    /// largest).
    pub rndv_frag_size: usize,
    /// Message size from which a rendezvous by get is split: the sender
    /// writes the second half while the receiver reads the first
    /// (`usize::MAX`: never).
    pub rndv_split_thresh: usize,
    /// Most lanes a zero-copy rendezvous spreads over (0 counts as 1;
    /// capped at [`MAX_LANES`]).
    pub max_rndv_lanes: usize,
    /// Host memory copy bandwidth, bytes per second.
    pub memcpy_bw: f64,
    /// Software costs of the protocols.
    pub overhead: ProtoOverhead,
}

impl Default for SelectConfig {
    fn default() -> SelectConfig {
        SelectConfig {
            rndv_thresh: MemUnits::Auto,
            zcopy_thresh: MemUnits::Auto,
            bcopy_thresh: MemUnits::Auto,
            rndv_scheme: RndvScheme::Auto,
            rndv_frag_size: RNDV_FRAG_SIZE,
            max_rndv_lanes: MAX_RNDV_LANES,
            rndv_split_thresh: RNDV_SPLIT_THRESH,
            memcpy_bw: MEMCPY_BW,
            overhead: ProtoOverhead::default(),
        }
    }
}

impl SelectConfig {
    /// Lanes a zero-copy rendezvous may use: `max_rndv_lanes` in
    /// `1..=MAX_LANES`.
    pub fn rndv_lanes(&self) -> usize {
        self.max_rndv_lanes.clamp(1, MAX_LANES)
    }
}
