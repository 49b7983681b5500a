//! rucx services: the bottom layer, shared by transports and protocols.
//!
//! What lives here:
//! * [`status`]: UCX-compatible numeric status codes;
//! * [`error`]: the error type of ucs, uct and the transports;
//! * [`config`]: declarative `RUCX_*` configuration tables;
//! * [`log`]: `tracing` set up from `RUCX_LOG_LEVEL`;
//! * [`mpool`]: pools of fixed-size objects;
//! * [`progress`]: the progress engine (ordered callbacks, one epoll set, timers);
//! * [`slab`]: entries named by generational ids (requests, endpoints);
//! * [`sys`]: host identity and small system queries.
//!
//! What does not: anything about transports or protocols. ucs knows no
//! transport and no message format.

pub mod config;
pub mod error;
pub mod log;
pub mod mpool;
pub mod progress;
pub mod slab;
pub mod status;
pub mod sys;

pub use error::{Error, PeerMisbehaved, Result};
pub use status::Status;
