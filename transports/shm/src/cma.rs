//! `cma`: zero-copy puts and gets between processes of one host through
//! cross-memory attach (`process_vm_writev` / `process_vm_readv`), in the
//! manner of UCX's `cma` transport.
//!
//! What it does:
//!
//! * One resource, transport `cma` on device `memory` (intra-node), in the
//!   `shm` memory domain, whose keys (module `md_keys`) name the owning
//!   process. Available where [`probe`] succeeds (the kernel has the calls
//!   and the Yama policy lets peers attach).
//! * An iface ([`open_iface`]) offers `put_zcopy` and `get_zcopy` only: the
//!   kernel copies between the caller's ranges and the peer's memory, the
//!   peer takes no part and is not told. There are no active messages, so
//!   a worker uses `cma` beside a transport that has them (`posix`, `tcp`).
//! * Addresses: the device address is the [`HostId`] (same boot, pid
//!   namespace and user are needed to attach), the iface address the
//!   [`ProcessId`] of the process; all ifaces of one process are the same
//!   peer for CMA, as memory belongs to processes.
//! * Operations run to completion inside the call, in segments of
//!   `RUCX_CMA_SEG_SIZE` bytes per system call, and return
//!   [`Posted::Done`](uct::Posted::Done): they block for the time of the
//!   copy (as UCX's `cma` blocks in each segment's system call). `flush`
//!   is therefore always done at once, and `pending_add` tokens come back
//!   on the next `progress`.
//! * Keys are checked by the initiator (the target cannot, see module
//!   `md_keys`): the access must lie in the key's declared range,
//!   with the right, and the key's owner must be the endpoint's peer;
//!   otherwise the operation fails with `RemoteAccess` before any byte
//!   moves.
//! * Peer death: an operation on a peer that exited fails with
//!   `EndpointFailed` and fails the endpoint; `progress` reports it with
//!   `ep_failed`, and also finds dead peers by itself, checking every
//!   [`LIVENESS_PERIOD`] that each peer still runs with its start time. An
//!   operation also checks when its peer was last seen alive longer ago
//!   than that, so that a pid reused by another process is never written.
//!
//! What it does not do: check that a key's registration is still live in
//! a peer, or that its range and rights were not widened by whoever sent
//! it (nothing can; see module `md_keys`); asynchronous or overlapped
//! copies; an event fd (nothing arrives by itself).
//!
//! Map: `config` (options and limits), `probe` (availability), `iface`
//! (addresses, endpoints, progress), `ops` (key checks and the operations),
//! `sys` (the system-call loop).

mod config;
mod iface;
mod ops;
mod probe;
mod sys;
#[cfg(test)]
mod tests;

pub use config::{CmaConfig, CMA_TABLE};
pub use iface::LIVENESS_PERIOD;
pub use probe::probe;

#[cfg(doc)]
use crate::proc_id::{HostId, ProcessId};
use uct::ucs::{Error, Result};

/// Transport name.
pub const TL_NAME: &str = "cma";
/// Device name of the one resource.
pub const DEV_NAME: &str = "memory";

/// Opens a `cma` iface with an explicit configuration.
///
/// `Unsupported` with the reason when CMA does not work here ([`probe`]),
/// `InvalidParam` for a bad configuration, an error if this process's
/// identity cannot be read from `/proc`.
pub fn open_iface(params: &uct::IfaceParams, config: &CmaConfig) -> Result<Box<dyn uct::Iface>> {
    open_checked(probe(), params, config)
}

/// [`open_iface`] with the probe's answer given.
fn open_checked(
    probed: std::result::Result<(), String>,
    params: &uct::IfaceParams,
    config: &CmaConfig,
) -> Result<Box<dyn uct::Iface>> {
    probed.map_err(Error::Unsupported)?;
    let limits = config::Limits::from_config(config)?;
    Ok(Box::new(iface::CmaIface::open(params, limits)?))
}
