//! Access to the bytes of a FIFO region.
//!
//! Normally this is raw memory (an owned aligned buffer or a mapping); in
//! loom tests (`cfg(loom)`) it is a model-checked stand-in with the same
//! methods, so the protocol in `fifo` is the code loom explores.

#[cfg(all(loom, test))]
mod model;
#[cfg(not(all(loom, test)))]
mod raw;

#[cfg(all(loom, test))]
pub(crate) use model::Region;
#[cfg(not(all(loom, test)))]
pub(crate) use raw::Region;
