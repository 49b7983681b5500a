//! Atomics used by the FIFO: std normally, loom's model-checked ones in this
//! crate's own tests under `cfg(loom)`. Everything lock-free in this crate
//! goes through here. loom is only a dev-dependency, so a `--cfg loom` build
//! of another crate that depends on this one still gets std atomics.

#[cfg(all(loom, test))]
pub(crate) use loom::sync::atomic::{AtomicBool, AtomicU64, Ordering};
#[cfg(not(all(loom, test)))]
pub(crate) use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
