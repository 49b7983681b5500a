//! rucx services: the bottom layer, shared by transports and protocols.
//!
//! What lives here:
//! * [`status`]: UCX-compatible numeric status codes;
//! * [`error`]: the error type of ucs, uct and the transports;
//! * [`config`]: declarative `RUCX_*` configuration tables
//!   ([`config_table!`], [`config_enum!`]) and their value types;
//! * [`log`]: `tracing` set up from `RUCX_LOG_LEVEL` and `RUCX_LOG_FILE`;
//! * [`netif`]: the network interfaces that are up with their IPv4 and IPv6
//!   addresses, address family preferences, and link speeds;
//! * [`progress`]: the progress engine's parts (one epoll set, eventfd
//!   wakeups, timers);
//! * [`rcache`]: the registration cache (address ranges to registrations,
//!   merged, LRU-evicted, invalidated on request);
//! * [`slab`]: entries named by generational ids (requests, endpoints);
//! * [`sys`]: host identity, host name, page size, monotonic clock.
//!
//! What does not: anything about transports or protocols. ucs knows no
//! transport and no message format.

pub mod config;
pub mod copy;
pub mod error;
pub mod hash;
pub mod internal;
pub mod local;
pub mod log;
pub mod netif;
pub mod progress;
pub mod rcache;
pub mod slab;
pub mod sock;
pub mod status;
pub mod sys;

pub use error::{AccessDenied, EndpointCause, Error, PeerMisbehaved, Result};
pub use status::Status;
