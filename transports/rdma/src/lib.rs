//! RDMA for rucx: verbs semantics behind a provider trait, and the RC
//! transport that runs on any provider.
//!
//! # What it does
//!
//! * [`verbs`]: the types of verbs semantics — protection domains, memory
//!   regions with access rights and non-zero keys, scatter/gather entries,
//!   send work requests (SEND, SEND with Invalidate or Solicited Event,
//!   RDMA WRITE, RDMA READ, atomics), receives (on a queue pair or a
//!   shared receive queue), work completions with
//!   their statuses, connection-manager events, asynchronous events.
//! * [`Provider`], [`Device`], [`Verbs`]: what a provider implements. The
//!   connection model is the connection manager's (listen, connect and
//!   accept with private data and read depths), which works for
//!   InfiniBand, RoCE and iWARP alike; nothing asks for QP numbers or
//!   PSNs.
//! * [`rc`]: the RC transport over any provider ([`RcComponent`]).
//!
//! # What it does not do
//!
//! No wire protocol and no devices of its own: the userspace iWARP engine
//! (`rucx-iwarp`) is a provider. No UD queue pairs, XRC or memory
//! windows.

pub mod provider;
pub mod rc;
pub mod verbs;

pub use provider::{Device, Provider, Verbs};
pub use rc::RcComponent;
pub use verbs::*;
