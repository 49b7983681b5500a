//! The transports this build knows: one line per transport crate.

use crate::uct::Registry;

/// The registry of built-in transports, in order of preference for ties.
pub fn registry() -> Registry {
    Registry::new()
        .with(&crate::uct::self_tl::COMPONENT)
        .with(&rucx_shm::COMPONENT)
        .with(&rucx_tcp::COMPONENT)
        .with(&rucx_iwarp::COMPONENT)
}
