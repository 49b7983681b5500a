//! Declarative configuration from `RUCX_*` environment variables.

/// A configuration value that could not be parsed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("RUCX_{name}={value:?}: {reason}")]
pub struct ConfigError {
    /// Variable name without the `RUCX_` prefix.
    pub name: String,
    /// The text that was given.
    pub value: String,
    /// Why it was rejected.
    pub reason: String,
}

/// One configuration variable: `RUCX_<prefix><name>`.
#[derive(Debug, Clone, Copy)]
pub struct ConfigField {
    /// Name after the table's prefix, e.g. `"NODELAY"`.
    pub name: &'static str,
    /// Default value as text.
    pub default: &'static str,
    /// One-line description.
    pub doc: &'static str,
    /// Type name for `rucx-info -c` (e.g. `"bool"`, `"memunits"`).
    pub kind: &'static str,
}

/// A component's configuration variables.
#[derive(Debug, Clone, Copy)]
pub struct ConfigTable {
    /// Component name for `rucx-info -c`.
    pub name: &'static str,
    /// Prefix after `RUCX_`, e.g. `"TCP_"` (empty for global variables).
    pub prefix: &'static str,
    /// The variables.
    pub fields: &'static [ConfigField],
}
