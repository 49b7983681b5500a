//! Logging: `tracing`, set up from `RUCX_LOG_LEVEL` and `RUCX_LOG_FILE`.
//!
//! rucx logs through the `tracing` macros. [`init`] installs a plain `fmt`
//! subscriber at the level of `RUCX_LOG_LEVEL`, unless the program has
//! installed its own subscriber, which then receives rucx's events instead.
//! A disabled level costs a branch on a cached value: the message is never
//! formatted.
//!
//! UCX's levels map onto tracing's five (see [`LogLevel::filter`]):
//!
//! | `RUCX_LOG_LEVEL` | tracing level |
//! |---|---|
//! | `fatal`, `error` | ERROR |
//! | `warn`, `warning` | WARN |
//! | `diag`, `info` | INFO |
//! | `debug` | DEBUG |
//! | `trace`, `req`, `data`, `async`, `func`, `poll` | TRACE |
//!
//! `diag` (between warn and info in UCX) maps to INFO, so nothing UCX would
//! show at `diag` is hidden; rucx code logs diagnostics with `info!`.

use crate::config::{env_lookup, ConfigValue};
use std::io::IsTerminal;
use std::sync::{Mutex, OnceLock};
use tracing::level_filters::LevelFilter;
use tracing_subscriber::fmt::writer::BoxMakeWriter;

/// A value of `RUCX_LOG_LEVEL`, in UCX's words.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum LogLevel {
    /// Only fatal errors (shown as errors).
    Fatal,
    /// Errors.
    Error,
    /// Warnings (the default).
    Warn,
    /// Diagnostics.
    Diag,
    /// Information.
    Info,
    /// Debugging.
    Debug,
    /// Tracing.
    Trace,
    /// Tracing of requests.
    Req,
    /// Tracing of data.
    Data,
    /// Tracing of asynchronous events.
    Async,
    /// Tracing of function calls.
    Func,
    /// Tracing of polling.
    Poll,
}

/// Words and their levels; `warning` is an alias of `warn`.
const WORDS: [(&str, LogLevel); 13] = [
    ("fatal", LogLevel::Fatal),
    ("error", LogLevel::Error),
    ("warn", LogLevel::Warn),
    ("warning", LogLevel::Warn),
    ("diag", LogLevel::Diag),
    ("info", LogLevel::Info),
    ("debug", LogLevel::Debug),
    ("trace", LogLevel::Trace),
    ("req", LogLevel::Req),
    ("data", LogLevel::Data),
    ("async", LogLevel::Async),
    ("func", LogLevel::Func),
    ("poll", LogLevel::Poll),
];

impl LogLevel {
    /// The tracing filter this level enables.
    pub fn filter(self) -> LevelFilter {
        match self {
            LogLevel::Fatal | LogLevel::Error => LevelFilter::ERROR,
            LogLevel::Warn => LevelFilter::WARN,
            LogLevel::Diag | LogLevel::Info => LevelFilter::INFO,
            LogLevel::Debug => LevelFilter::DEBUG,
            LogLevel::Trace
            | LogLevel::Req
            | LogLevel::Data
            | LogLevel::Async
            | LogLevel::Func
            | LogLevel::Poll => LevelFilter::TRACE,
        }
    }

    /// The canonical word.
    pub fn as_str(self) -> &'static str {
        WORDS
            .iter()
            .find(|(_, l)| *l == self)
            .map_or("warn", |(w, _)| w)
    }
}

impl ConfigValue for LogLevel {
    const KIND: &'static str = "log-level";
    const SYNTAX: &'static str =
        "[fatal|error|warn|diag|info|debug|trace|req|data|async|func|poll]";

    fn parse(text: &str) -> Result<Self, String> {
        let t = text.trim();
        WORDS
            .iter()
            .find(|(w, _)| t.eq_ignore_ascii_case(w))
            .map(|(_, l)| *l)
            .ok_or_else(|| format!("expected one of {}", Self::SYNTAX))
    }

    fn to_text(&self) -> String {
        self.as_str().to_string()
    }
}

static LEVEL: OnceLock<LogLevel> = OnceLock::new();

/// Sets up logging once per process; later calls do nothing.
///
/// Reads `RUCX_LOG_LEVEL` (an invalid value gives a warning and `warn`) and
/// `RUCX_LOG_FILE` (empty or unset: stderr; a file that cannot be opened
/// gives a warning and stderr). If the program already installed a global
/// `tracing` subscriber, that one stays and rucx's events go to it.
pub fn init() {
    LEVEL.get_or_init(init_once);
}

/// The level [`init`] chose, once it has run.
pub fn configured_level() -> Option<LogLevel> {
    LEVEL.get().copied()
}

fn init_once() -> LogLevel {
    let mut problems = Vec::new();
    let level = match env_lookup("RUCX_LOG_LEVEL") {
        None => LogLevel::Warn,
        Some(text) => LogLevel::parse(&text).unwrap_or_else(|e| {
            problems.push(format!("RUCX_LOG_LEVEL={text:?}: {e}; using warn"));
            LogLevel::Warn
        }),
    };
    let mut ansi = std::io::stderr().is_terminal();
    let mut writer = BoxMakeWriter::new(std::io::stderr);
    if let Some(pattern) = env_lookup("RUCX_LOG_FILE").filter(|p| !p.is_empty()) {
        let path = expand_log_file(&pattern, std::process::id(), &crate::sys::hostname());
        match std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&path)
        {
            Ok(file) => {
                writer = BoxMakeWriter::new(Mutex::new(file));
                ansi = false;
            }
            Err(e) => problems.push(format!(
                "RUCX_LOG_FILE: cannot open {path:?}: {e}; logging to stderr"
            )),
        }
    }
    // Fails only if a global subscriber exists already; that one is kept.
    let _ = tracing_subscriber::fmt()
        .with_max_level(level.filter())
        .with_writer(writer)
        .with_ansi(ansi)
        .try_init();
    for p in problems {
        tracing::warn!("{p}");
    }
    level
}

/// `RUCX_LOG_FILE` with `%p` replaced by `pid`, `%h` by `host` and `%%` by
/// `%`; other `%` sequences are kept as they are.
pub fn expand_log_file(pattern: &str, pid: u32, host: &str) -> String {
    let mut out = String::with_capacity(pattern.len() + 16);
    let mut chars = pattern.chars();
    while let Some(c) = chars.next() {
        if c != '%' {
            out.push(c);
            continue;
        }
        match chars.next() {
            Some('p') => out.push_str(&pid.to_string()),
            Some('h') => out.push_str(host),
            Some('%') => out.push('%'),
            Some(other) => {
                out.push('%');
                out.push(other);
            }
            None => out.push('%'),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn level_words() {
        assert_eq!(LogLevel::parse("WARN"), Ok(LogLevel::Warn));
        assert_eq!(LogLevel::parse("warning"), Ok(LogLevel::Warn));
        assert_eq!(LogLevel::parse(" Debug "), Ok(LogLevel::Debug));
        assert_eq!(LogLevel::parse("poll"), Ok(LogLevel::Poll));
        for t in ["", "verbose", "warnings", "5"] {
            assert!(LogLevel::parse(t).is_err(), "{t:?}");
        }
        for (_, l) in WORDS {
            assert_eq!(LogLevel::parse(&l.to_text()), Ok(l));
        }
        assert_eq!(LogLevel::Warn.as_str(), "warn");
    }

    #[test]
    fn level_filters() {
        assert_eq!(LogLevel::Fatal.filter(), LevelFilter::ERROR);
        assert_eq!(LogLevel::Error.filter(), LevelFilter::ERROR);
        assert_eq!(LogLevel::Warn.filter(), LevelFilter::WARN);
        assert_eq!(LogLevel::Diag.filter(), LevelFilter::INFO);
        assert_eq!(LogLevel::Info.filter(), LevelFilter::INFO);
        assert_eq!(LogLevel::Debug.filter(), LevelFilter::DEBUG);
        assert_eq!(LogLevel::Data.filter(), LevelFilter::TRACE);
        assert_eq!(LogLevel::Poll.filter(), LevelFilter::TRACE);
    }

    #[test]
    fn log_file_pattern() {
        assert_eq!(
            expand_log_file("/tmp/rucx_%h_%p.log", 42, "node1"),
            "/tmp/rucx_node1_42.log"
        );
        assert_eq!(expand_log_file("a%%p%x%", 1, "h"), "a%p%x%");
        assert_eq!(expand_log_file("plain", 1, "h"), "plain");
    }

    #[test]
    fn init_is_idempotent() {
        init();
        let first = configured_level();
        assert!(first.is_some());
        init();
        assert_eq!(configured_level(), first);
    }
}
