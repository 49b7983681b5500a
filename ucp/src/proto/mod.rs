//! The protocols: one module per protocol over the protocol state
//! (`core.rs`), reaching the transports through `lanes::Lanes` and
//! leaving what needs the ifaces to the worker's executor as
//! `command::Command`s. The crate's top documentation has the map.

pub(crate) mod am;
pub(crate) mod am_rndv;
pub(crate) mod am_state;
pub(crate) mod close;
crate::ucs::internal_mod!(am_wire);
pub(crate) mod command;
pub(crate) mod core;
pub(crate) mod credit;
mod ctrl;
pub(crate) mod direct;
mod dispatch;
pub(crate) mod eager_rx;
pub(crate) mod eager_tx;
pub(crate) mod ep;
pub(crate) mod keepalive;
pub(crate) mod lanes;
pub(crate) mod lazy_lanes;
pub(crate) mod peer;
pub(crate) mod probed;
pub(crate) mod rndv;
pub(crate) mod rndv_get;
pub(crate) mod rndv_put;
pub(crate) mod rndv_zcopy;
mod room;
pub mod select;
pub(crate) mod send_gate;
pub(crate) mod stream;
pub(crate) mod stream_rndv;
pub(crate) mod stream_rx;
mod sync;
#[cfg(test)]
pub(crate) mod testing;
#[cfg(test)]
mod tests;
crate::ucs::internal_mod!(wire);
mod wireup;

/// Identifies a multi-fragment message in reassembly: which iface and
/// transport source it arrives on, and the sender's message id.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) struct FragKey {
    pub(crate) iface: u16,
    pub(crate) src: u32,
    pub(crate) msg_id: u64,
}
