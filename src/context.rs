//! The built-in transports and a context over them.

use crate::ucp::ucs::config::ConfigTable;
use crate::ucp::uct::{Component, Registry};
use crate::ucp::{Result, UcpConfig};

/// Transports behind cargo features, after the built-in ones.
const OPTIONAL: &[&dyn Component] = &[
    #[cfg(feature = "verbs")]
    &rucx_verbs::COMPONENT,
];

/// The registry of built-in transports, in order of preference for ties:
/// `self`, shared memory (`posix`, `cma`), `tcp`, RDMA over iWARP
/// (`rc_iwarp`), then RDMA NICs through libibverbs (`rc_verbs`, with the
/// `verbs` feature). One line per transport crate.
pub fn registry() -> Registry {
    let builtin = Registry::new()
        .with(&crate::ucp::uct::self_tl::COMPONENT)
        .with(&rucx_shm::COMPONENT)
        .with(&rucx_tcp::COMPONENT)
        .with(&rucx_iwarp::COMPONENT);
    OPTIONAL.iter().fold(builtin, |r, c| r.with(*c))
}

/// Every configuration table of rucx with the built-in transports: global,
/// protocol layer, transports (what `rucx-info -c` prints).
pub fn config_tables() -> Vec<&'static ConfigTable> {
    crate::ucp::config_tables(&registry())
}

/// A [`ucp::Context`](crate::ucp::Context) over the built-in transports
/// ([`registry`]). It dereferences to the protocol layer's context, whose
/// methods (`create_worker`, `mem_alloc`, ...) are the API; cheap to clone.
///
/// For other transports (a virtual network, a transport of the
/// application's own), build a `ucp::Context` with
/// [`ucp::Context::with_registry`](crate::ucp::Context::with_registry).
#[derive(Clone, Debug)]
pub struct Context(crate::ucp::Context);

impl Context {
    /// A context configured from the environment (`RUCX_*`).
    pub fn new() -> Result<Context> {
        crate::ucp::Context::from_env(&registry()).map(Context)
    }

    /// A context with the given configuration.
    pub fn with_config(config: UcpConfig) -> Result<Context> {
        crate::ucp::Context::with_registry(config, &registry()).map(Context)
    }

    /// The protocol layer's context.
    pub fn into_inner(self) -> crate::ucp::Context {
        self.0
    }
}

impl std::ops::Deref for Context {
    type Target = crate::ucp::Context;

    fn deref(&self) -> &crate::ucp::Context {
        &self.0
    }
}

impl AsRef<crate::ucp::Context> for Context {
    fn as_ref(&self) -> &crate::ucp::Context {
        &self.0
    }
}

impl From<Context> for crate::ucp::Context {
    fn from(c: Context) -> crate::ucp::Context {
        c.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn registry_lists_the_built_in_components() {
        let names: Vec<&str> = registry().components().iter().map(|c| c.name()).collect();
        let mut expected = vec!["self", "shm", "tcp", "rc"];
        if cfg!(feature = "verbs") {
            expected.push("rc");
        }
        assert_eq!(names, expected);
        let tables = config_tables();
        assert!(tables.len() > 2, "global, ucp and the transports' tables");
    }
}
