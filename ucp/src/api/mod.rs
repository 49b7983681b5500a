//! The four ways to post tag operations, sharing one request engine.
//!
//! | tier | buffer | for |
//! |---|---|---|
//! | blocking ([`Worker::tag_send_blocking`]) | borrowed for the call | tools, tests |
//! | scoped ([`Worker::scope`]) | borrowed until the scope ends | MPI-style post-all, wait-all |
//! | owned ([`Worker::tag_send`]) | moved into the worker, handed back | fire-and-forget, async |
//! | raw ([`Worker::tag_send_raw`]) | `unsafe`: caller keeps it valid | C API, experts |
//!
//! Safe tiers stay sound when a request handle is dropped or leaked: a
//! leaked scoped token leaves its buffer borrowed until the scope has
//! drained; a dropped owned request leaves its buffer with the worker.
//!
//! [`Worker::tag_send_blocking`]: crate::Worker::tag_send_blocking
//! [`Worker::scope`]: crate::Worker::scope
//! [`Worker::tag_send`]: crate::Worker::tag_send
//! [`Worker::tag_send_raw`]: crate::Worker::tag_send_raw

mod blocking;
pub(crate) mod dt;
mod message;
mod owned;
mod raw;
mod scope;
mod worker_mut;

pub use message::Message;
pub use owned::OpError;
pub use scope::{Pending, Scope};
pub use worker_mut::WorkerMut;
