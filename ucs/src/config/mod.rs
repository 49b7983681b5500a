//! Declarative configuration from `RUCX_*` environment variables.
//!
//! Every tunable of a component is one line of a table declared with
//! [`config_table!`](crate::config_table): the variable name, the field of
//! the typed struct it fills, the field's type and its default as text, with
//! the doc comment as the description. The macro produces the struct, a
//! [`ConfigTable`] that `rucx-info -c` prints, and the constructors
//! `from_env()` / `from_lookup()`.
//!
//! Map:
//! * [`value`]: the [`ConfigValue`] trait (parse and print one value) and its
//!   implementations for `bool`, integers, `f64` and `String`;
//! * [`units`]: [`MemUnits`] (`8k`, `1m`, `inf`, `auto`) and [`Time`]
//!   (`10ms`, `1.5s`, `inf`);
//! * [`list`]: [`AllowList`] (`tcp,self`, `^tcp`, `all`);
//! * `macros`: [`config_table!`](crate::config_table) and
//!   [`config_enum!`](crate::config_enum);
//! * `table`: loading, checking and printing a [`ConfigTable`];
//! * [`global`]: ucs's own table ([`GLOBAL_TABLE`]) and [`warn_unknown`].
//!
//! Invariants: a value from the environment that does not parse is a
//! [`ConfigError`], never a panic; defaults are parsed by the same parser, and
//! every table has a unit test calling [`ConfigTable::check_defaults`].

pub mod global;
pub mod list;
mod macros;
mod table;
pub mod units;
pub mod value;

pub use global::{unknown_vars, warn_unknown, GlobalConfig, GLOBAL_TABLE};
pub use list::AllowList;
pub use table::{env_lookup, load_value, ValueSource, ENV_PREFIX};
pub use units::{MemUnits, Time};
pub use value::ConfigValue;

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
    /// Description, trimmed; lines separated by `'\n'` (see
    /// [`ConfigField::doc_lines`]).
    pub doc: &'static str,
    /// Type name for `rucx-info -c` (e.g. `"bool"`, `"memunits"`).
    pub kind: &'static str,
    /// What the parser accepts, for the `# syntax:` line of `rucx-info -c`.
    pub syntax: &'static str,
    /// Checks a text with the field type's parser, without keeping the value.
    pub validate: fn(&str) -> Result<(), String>,
}

impl ConfigField {
    /// The description, one trimmed line at a time.
    pub fn doc_lines(&self) -> impl Iterator<Item = &'static str> {
        self.doc.lines().map(str::trim)
    }

    /// The first line of the description.
    pub fn summary(&self) -> &'static str {
        self.doc_lines().next().unwrap_or("")
    }
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

/// Checks `text` with `T`'s parser; the `validate` entry of a [`ConfigField`].
pub fn validate<T: ConfigValue>(text: &str) -> Result<(), String> {
    T::parse(text).map(drop)
}

/// Trims a doc text at compile time (used by [`config_table!`](crate::config_table)).
#[doc(hidden)]
pub const fn __trim_doc(text: &'static str) -> &'static str {
    text.trim_ascii()
}

#[cfg(test)]
mod tests;
