//! Loading, checking and printing a [`ConfigTable`].

use super::{ConfigError, ConfigField, ConfigTable, ConfigValue};
use std::io::{self, Write};

/// The prefix of every configuration variable.
pub const ENV_PREFIX: &str = "RUCX_";

/// Looks a variable up in the process environment.
///
/// A value that is not valid UTF-8 is converted lossily, so that it fails
/// the parser of any type but `String` instead of being ignored.
pub fn env_lookup(var: &str) -> Option<String> {
    std::env::var_os(var).map(|v| v.to_string_lossy().into_owned())
}

/// Reads one variable, `RUCX_<prefix><name>`, through `lookup`, falling back
/// to `default`; used by [`config_table!`](crate::config_table).
pub fn load_value<T: ConfigValue>(
    prefix: &str,
    name: &str,
    default: &str,
    lookup: &dyn Fn(&str) -> Option<String>,
) -> Result<T, ConfigError> {
    let short = format!("{prefix}{name}");
    match lookup(&format!("{ENV_PREFIX}{short}")) {
        Some(text) => T::parse(&text).map_err(|reason| ConfigError {
            name: short,
            value: text,
            reason,
        }),
        None => T::parse(default).map_err(|reason| ConfigError {
            name: short,
            value: default.to_string(),
            reason: format!("invalid built-in default: {reason}"),
        }),
    }
}

/// Where a printed value came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ValueSource {
    /// The table's default.
    Default,
    /// The environment (or lookup); `Err` holds why it does not parse.
    Set(Result<(), String>),
}

impl ConfigTable {
    /// The full variable name of `field`, e.g. `RUCX_TCP_NODELAY`.
    pub fn var_name(&self, field: &ConfigField) -> String {
        format!("{ENV_PREFIX}{}{}", self.prefix, field.name)
    }

    /// The field named `name` (without prefix).
    pub fn field(&self, name: &str) -> Option<&'static ConfigField> {
        self.fields.iter().find(|f| f.name == name)
    }

    /// Whether `var` (a full `RUCX_...` name) is one of this table's.
    pub fn has_var(&self, var: &str) -> bool {
        var.strip_prefix(ENV_PREFIX)
            .and_then(|v| v.strip_prefix(self.prefix))
            .is_some_and(|name| self.field(name).is_some())
    }

    /// Checks the table itself: every default parses, and names are unique
    /// and made of `A-Z`, `0-9` and `_`. Each table has a unit test calling
    /// this.
    pub fn check_defaults(&self) -> Result<(), ConfigError> {
        let fail = |f: &ConfigField, reason: String| ConfigError {
            name: format!("{}{}", self.prefix, f.name),
            value: f.default.to_string(),
            reason,
        };
        for (i, f) in self.fields.iter().enumerate() {
            (f.validate)(f.default)
                .map_err(|e| fail(f, format!("invalid built-in default: {e}")))?;
            let ok_char = |c: char| c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_';
            if f.name.is_empty() || !f.name.chars().all(ok_char) {
                return Err(fail(f, "variable name is not [A-Z0-9_]+".to_string()));
            }
            if self.fields[..i].iter().any(|g| g.name == f.name) {
                return Err(fail(f, "variable declared twice".to_string()));
            }
        }
        Ok(())
    }

    /// Checks the values `lookup` gives; one error per value that does not
    /// parse.
    pub fn check(&self, lookup: &dyn Fn(&str) -> Option<String>) -> Vec<ConfigError> {
        self.fields
            .iter()
            .filter_map(|f| {
                let text = lookup(&self.var_name(f))?;
                let reason = (f.validate)(&text).err()?;
                Some(ConfigError {
                    name: format!("{}{}", self.prefix, f.name),
                    value: text,
                    reason,
                })
            })
            .collect()
    }

    /// The text in force for `field`: the looked-up value or the default.
    pub fn value_of(
        &self,
        field: &ConfigField,
        lookup: &dyn Fn(&str) -> Option<String>,
    ) -> (String, ValueSource) {
        match lookup(&self.var_name(field)) {
            Some(text) => {
                let valid = (field.validate)(&text);
                (text, ValueSource::Set(valid))
            }
            None => (field.default.to_string(), ValueSource::Default),
        }
    }

    /// Prints every variable the way `ucx_info -cf` does: the description
    /// and syntax as `#` comments, then `RUCX_<PREFIX><NAME>=<value>` with
    /// the value from `lookup` or the default.
    pub fn print_to(
        &self,
        out: &mut dyn Write,
        lookup: &dyn Fn(&str) -> Option<String>,
    ) -> io::Result<()> {
        for f in self.fields {
            writeln!(out, "#")?;
            for line in f.doc_lines() {
                if line.is_empty() {
                    writeln!(out, "#")?;
                } else {
                    writeln!(out, "# {line}")?;
                }
            }
            writeln!(out, "#")?;
            writeln!(out, "# syntax:    {}", f.syntax)?;
            writeln!(out, "#")?;
            self.print_value(out, f, lookup)?;
            writeln!(out)?;
        }
        Ok(())
    }

    /// Prints only the `RUCX_<PREFIX><NAME>=<value>` lines, like `ucx_info -c`.
    pub fn print_values_to(
        &self,
        out: &mut dyn Write,
        lookup: &dyn Fn(&str) -> Option<String>,
    ) -> io::Result<()> {
        for f in self.fields {
            self.print_value(out, f, lookup)?;
        }
        Ok(())
    }

    fn print_value(
        &self,
        out: &mut dyn Write,
        f: &ConfigField,
        lookup: &dyn Fn(&str) -> Option<String>,
    ) -> io::Result<()> {
        let (value, source) = self.value_of(f, lookup);
        if let ValueSource::Set(Err(reason)) = source {
            writeln!(out, "# invalid value ({reason}); default: {}", f.default)?;
        }
        writeln!(out, "{}={value}", self.var_name(f))
    }
}
