//! ucs's own variables, and the check for variables nobody reads.

use super::{env_lookup, ConfigTable, ENV_PREFIX};
use crate::log::LogLevel;

crate::config_table! {
    /// Options of ucs itself: logging and environment checks.
    pub struct GlobalConfig in GLOBAL_TABLE ("global", "") {
        /// Logging level: fatal, error, warn, diag, info, debug, trace, req,
        /// data, async, func or poll.
        LOG_LEVEL log_level: LogLevel = "warn",
        /// File to write log messages to, instead of stderr. `%p` becomes the
        /// process id and `%h` the host name. Empty: stderr.
        LOG_FILE log_file: String = "",
        /// Warn about RUCX_* environment variables that no component reads.
        WARN_UNUSED_ENV_VARS warn_unused_env_vars: bool = "y",
    }
}

/// `RUCX_*` variables that are not configuration of any component and are
/// never reported as unknown.
pub const NOT_CONFIG_VARS: &[&str] = &[
    // Makes tests that need a system package fail instead of skipping.
    "RUCX_REQUIRE_ALL",
];

/// The `RUCX_*` names among `vars` that no table in `tables` (nor
/// [`GLOBAL_TABLE`]) declares, each with the closest known name if one is
/// near (a likely typo).
pub fn unknown_vars<'a>(
    tables: &[&ConfigTable],
    vars: impl IntoIterator<Item = &'a str>,
) -> Vec<(String, Option<String>)> {
    let all: Vec<&ConfigTable> = tables
        .iter()
        .copied()
        .chain(std::iter::once(&GLOBAL_TABLE))
        .collect();
    let mut unknown = Vec::new();
    for var in vars {
        if !var.starts_with(ENV_PREFIX)
            || NOT_CONFIG_VARS.contains(&var)
            || all.iter().any(|t| t.has_var(var))
        {
            continue;
        }
        let nearest = all
            .iter()
            .flat_map(|t| t.fields.iter().map(|f| t.var_name(f)))
            .map(|known| (edit_distance(var, &known), known))
            .filter(|(d, _)| *d <= 3)
            .min_by_key(|(d, _)| *d)
            .map(|(_, known)| known);
        unknown.push((var.to_string(), nearest));
    }
    unknown
}

/// Logs a warning for each `RUCX_*` variable in the environment that no
/// table in `tables` (nor [`GLOBAL_TABLE`]) declares, as UCX does, unless
/// `RUCX_WARN_UNUSED_ENV_VARS=n`. Returns the unknown names.
pub fn warn_unknown(tables: &[&ConfigTable]) -> Vec<String> {
    let vars: Vec<String> = std::env::vars_os()
        .filter_map(|(k, _)| k.into_string().ok())
        .collect();
    let unknown = unknown_vars(tables, vars.iter().map(String::as_str));
    let enabled = super::load_value::<bool>(
        GLOBAL_TABLE.prefix,
        "WARN_UNUSED_ENV_VARS",
        "y",
        &env_lookup,
    )
    .unwrap_or(true);
    if enabled {
        for (var, nearest) in &unknown {
            match nearest {
                Some(n) => tracing::warn!(
                    "unused environment variable: {var} (maybe: {n}?) \
                     (set RUCX_WARN_UNUSED_ENV_VARS=n to suppress this warning)"
                ),
                None => tracing::warn!(
                    "unused environment variable: {var} \
                     (set RUCX_WARN_UNUSED_ENV_VARS=n to suppress this warning)"
                ),
            }
        }
    }
    unknown.into_iter().map(|(var, _)| var).collect()
}

/// Levenshtein distance over bytes (names are ASCII).
fn edit_distance(a: &str, b: &str) -> usize {
    let (a, b) = (a.as_bytes(), b.as_bytes());
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    let mut cur = vec![0; b.len() + 1];
    for (i, &ca) in a.iter().enumerate() {
        cur[0] = i + 1;
        for (j, &cb) in b.iter().enumerate() {
            let subst = prev[j] + usize::from(ca != cb);
            cur[j + 1] = subst.min(prev[j + 1] + 1).min(cur[j] + 1);
        }
        std::mem::swap(&mut prev, &mut cur);
    }
    prev[b.len()]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn global_defaults_parse() {
        GLOBAL_TABLE.check_defaults().unwrap();
        let g = GlobalConfig::default();
        assert_eq!(g.log_level, LogLevel::Warn);
        assert_eq!(g.log_file, "");
        assert!(g.warn_unused_env_vars);
    }

    #[test]
    fn edit_distances() {
        assert_eq!(edit_distance("", ""), 0);
        assert_eq!(edit_distance("abc", "abc"), 0);
        assert_eq!(edit_distance("abc", "abd"), 1);
        assert_eq!(edit_distance("abc", ""), 3);
        assert_eq!(edit_distance("kitten", "sitting"), 3);
    }

    #[test]
    fn unknown_variables_found() {
        let vars = [
            "RUCX_LOG_LEVEL",
            "RUCX_LOG_LEVLE",
            "RUCX_NO_SUCH_THING_AT_ALL",
            "RUCX_REQUIRE_ALL",
            "PATH",
            "UCX_TLS",
        ];
        let unknown = unknown_vars(&[], vars);
        assert_eq!(
            unknown,
            vec![
                (
                    "RUCX_LOG_LEVLE".to_string(),
                    Some("RUCX_LOG_LEVEL".to_string())
                ),
                ("RUCX_NO_SUCH_THING_AT_ALL".to_string(), None),
            ]
        );
    }
}
