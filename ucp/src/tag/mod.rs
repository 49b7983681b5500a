//! Tag-matched messaging.
//!
//! * [`matcher`]: the sans-IO tag matcher — posted receives (expected queue)
//!   and early messages (unexpected queue) with MPI matching order.

pub mod matcher;

mod arena;
mod expected;
mod unexpected;

pub use matcher::{PostId, PostOutcome, TagMatcher, UnexpId};
