//! The perftest library behind `rucx-perftest`, after UCX's libperf.
//!
//! * [`options`]: the command line (`ucx_perftest`'s single-dash options);
//! * [`catalog`]: the tests and their shapes;
//! * [`params`]: test parameters and the block a client sends a server;
//! * [`runner`]: the ping-pong and stream loops over a [`PerfWorker`], for
//!   tag matching and for one-sided operations (put, get, atomics);
//! * [`measure`]: counters, clock, percentile and report intervals;
//! * [`report`]: the table, CSV and `-f` output formats;
//! * [`pattern`]: the data pattern of `-V`;
//! * [`bootstrap`]: the TCP connection between client and server;
//! * [`session`]: server, client and loopback flows; [`pair`]: `--pair`;
//! * [`app`]: the whole program, given a way to create workers;
//! * [`ucp`]: the [`PerfWorker`] on rucx's protocol layer.
//!
//! The loops know nothing of sockets or of rucx's types: they drive any
//! [`PerfWorker`] and check a [`runner::Watch`] while they wait.

pub mod app;
pub mod bootstrap;
mod buffers;
pub mod catalog;
pub mod clock;
pub mod error;
pub mod measure;
#[cfg(test)]
mod mock;
pub mod options;
pub mod pair;
pub mod params;
pub mod pattern;
pub mod report;
pub mod runner;
pub mod session;
pub mod ucp;
mod wire;
mod wireup;
pub mod worker;

pub use error::{PerfError, Result};
pub use worker::{AtomicKind, Exposed, PerfWorker, Started, ThreadedWorker};
