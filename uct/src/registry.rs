//! The list of transport components that a program can use.

use crate::component::Component;

/// Transport components, in order of preference for ties.
///
/// uct knows no transport crate; the layer above builds the registry with
/// one `with` per transport.
#[derive(Debug, Clone, Default)]
pub struct Registry {
    components: Vec<&'static dyn Component>,
}

impl Registry {
    /// An empty registry.
    pub fn new() -> Registry {
        Registry::default()
    }

    /// Adds a component.
    pub fn with(mut self, c: &'static dyn Component) -> Registry {
        self.components.push(c);
        self
    }

    /// The components, in the order added.
    pub fn components(&self) -> &[&'static dyn Component] {
        &self.components
    }
}
