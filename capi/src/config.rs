//! `ucp_config_read`, `ucp_config_modify`, `ucp_config_print`,
//! `ucp_config_release`.
//!
//! A configuration is the text of each variable of the protocol layer's
//! table ([`rucx::ucp::UCP_TABLE`]), read once from the environment and
//! changed by `ucp_config_modify`; `ucp_init` parses it into a
//! [`UcpConfig`]. A variable is looked up as, in order:
//! `<prefix>_RUCX_<NAME>`, `<prefix>_UCX_<NAME>` (with an `env_prefix`),
//! `RUCX_<NAME>`, `UCX_<NAME>`. The `UCX_` names are read only for the
//! variables whose meaning and syntax are the same in UCX and rucx
//! ([`UCX_NAMES`]). The transports read their own `RUCX_*` variables.

use crate::status::{self, guard, guard_status};
use crate::types::{StatusCode, UCS_CONFIG_PRINT_CONFIG, UCS_CONFIG_PRINT_DOC};
use crate::types::{UCS_CONFIG_PRINT_COMMENT_DEFAULT, UCS_CONFIG_PRINT_HEADER};
use rucx::ucp::ucs::config::{ConfigError, ConfigField};
use rucx::ucp::{UcpConfig, UCP_TABLE};
use std::collections::{BTreeMap, BTreeSet};
use std::ffi::{c_char, c_int, CStr};
use std::fmt::Write as _;

/// Variables read under their UCX name too (`UCX_<NAME>`): those whose
/// meaning and value syntax UCX and rucx share.
pub const UCX_NAMES: &[&str] = &[
    "TLS",
    "NET_DEVICES",
    "RNDV_THRESH",
    "ZCOPY_THRESH",
    "BCOPY_THRESH",
    "RNDV_SCHEME",
    "KEEPALIVE_INTERVAL",
    "KEEPALIVE_NUM_EPS",
    "ATOMIC_MODE",
];

/// `ucp_config_t`: the text of each variable that is set.
#[derive(Debug, Default, Clone)]
pub struct Config {
    values: BTreeMap<&'static str, String>,
    /// The variables the environment set (not only `ucp_config_modify`).
    from_env: BTreeSet<&'static str>,
}

impl Config {
    /// Reads the variables through `lookup` (a full variable name to its
    /// value), under `prefix` if given.
    pub fn read(prefix: Option<&str>, lookup: impl Fn(&str) -> Option<String>) -> Config {
        let mut values = BTreeMap::new();
        for f in UCP_TABLE.fields {
            let ucx = UCX_NAMES.contains(&f.name);
            let mut names = Vec::new();
            if let Some(p) = prefix.filter(|p| !p.is_empty()) {
                names.push(format!("{p}_RUCX_{}", f.name));
                if ucx {
                    names.push(format!("{p}_UCX_{}", f.name));
                }
            }
            names.push(format!("RUCX_{}", f.name));
            if ucx {
                names.push(format!("UCX_{}", f.name));
            }
            if let Some(v) = names.iter().find_map(|n| lookup(n)) {
                values.insert(f.name, v);
            }
        }
        let from_env = values.keys().copied().collect();
        Config { values, from_env }
    }

    /// Sets variable `name` (without prefix, or with `UCX_` or `RUCX_`).
    pub fn modify(&mut self, name: &str, value: &str) -> StatusCode {
        let short = name
            .strip_prefix("RUCX_")
            .or_else(|| name.strip_prefix("UCX_"))
            .unwrap_or(name);
        let Some(f) = UCP_TABLE.field(short) else {
            return status::NO_ELEM;
        };
        if (f.validate)(value).is_err() {
            return status::INVALID_PARAM;
        }
        self.values.insert(f.name, value.to_string());
        status::OK
    }

    /// Turns the registration cache off unless the program reports the
    /// memory it unmaps (`reported`) or set `RCACHE_ENABLE` itself (in
    /// the environment or with `ucp_config_modify`). rucx installs no
    /// memory hooks: without reports a freed buffer's pages would stay
    /// registered, and a later buffer at its address would be read or
    /// written through them.
    pub fn cache_only_if_unmaps_reported(&mut self, reported: bool) {
        if !reported && !self.values.contains_key("RCACHE_ENABLE") {
            self.values.insert("RCACHE_ENABLE", "no".into());
        }
    }

    /// The configuration these values give.
    pub fn parse(&self) -> Result<UcpConfig, ConfigError> {
        UcpConfig::from_lookup(|var| self.lookup(var))
    }

    /// The value of a full `RUCX_...` variable name, if set.
    fn lookup(&self, var: &str) -> Option<String> {
        self.values.get(var.strip_prefix("RUCX_")?).cloned()
    }

    /// What `ucp_config_print` prints for `flags`, laid out as UCX 1.13
    /// lays it out (measured against Debian's build):
    ///
    /// * `UCS_CONFIG_PRINT_DOC`: first the two comment lines of a
    ///   configuration file;
    /// * `UCS_CONFIG_PRINT_HEADER`: a blank line and `#`, `# <title>`,
    ///   `#` (`(null)` without a title), a blank line;
    /// * `UCS_CONFIG_PRINT_CONFIG`: `NAME=value` per variable, with
    ///   `_DOC` after its description and syntax as `#` comments and
    ///   followed by a blank line; with `_COMMENT_DEFAULT` commented out
    ///   (`# NAME=value`) unless the environment set it (a value given
    ///   only to `ucp_config_modify` is commented out too, as UCX's);
    /// * `UCS_CONFIG_PRINT_HEADER` again: a blank line closing the table,
    ///   then the header of UCX's table of transport variables given to
    ///   `ucp_config_modify` (`# Cached UCT <title>`), which has no entries
    ///   here since rucx's transports read their own variables, and a
    ///   blank line.
    ///
    /// A variable UCX also has ([`UCX_NAMES`]) prints under its UCX name,
    /// `UCX_<NAME>`; the others, rucx's own, under `RUCX_<NAME>`.
    pub fn print(&self, title: Option<&str>, flags: c_int) -> Vec<u8> {
        let has = |bit| flags & bit != 0;
        let title = title.unwrap_or("(null)");
        let mut out = String::new();
        if has(UCS_CONFIG_PRINT_DOC) {
            out += "# UCX library configuration file\n# Uncomment to modify values\n";
        }
        if has(UCS_CONFIG_PRINT_HEADER) {
            let _ = write!(out, "\n#\n# {title}\n#\n\n");
        }
        if has(UCS_CONFIG_PRINT_CONFIG) {
            for f in UCP_TABLE.fields {
                self.print_field(&mut out, f, flags);
            }
        }
        if has(UCS_CONFIG_PRINT_HEADER) {
            let _ = write!(out, "\n\n#\n# Cached UCT {title}\n#\n\n\n");
        }
        out.into_bytes()
    }

    /// One variable of [`Config::print`].
    fn print_field(&self, out: &mut String, f: &ConfigField, flags: c_int) {
        if flags & UCS_CONFIG_PRINT_DOC != 0 {
            *out += "#\n";
            for line in f.doc_lines() {
                match line.is_empty() {
                    true => *out += "#\n",
                    false => {
                        let _ = writeln!(out, "# {line}");
                    }
                }
            }
            let _ = write!(out, "#\n# syntax:    {}\n#\n", f.syntax);
        }
        let value = self.values.get(f.name).map_or(f.default, String::as_str);
        if flags & UCS_CONFIG_PRINT_COMMENT_DEFAULT != 0 && !self.from_env.contains(f.name) {
            *out += "# ";
        }
        let _ = writeln!(out, "{}{}={value}", print_prefix(f), f.name);
        if flags & UCS_CONFIG_PRINT_DOC != 0 {
            *out += "\n";
        }
    }
}

/// The prefix `ucp_config_print` gives variable `f`: `UCX_` for one UCX
/// also has, `RUCX_` for rucx's own.
fn print_prefix(f: &ConfigField) -> &'static str {
    match UCX_NAMES.contains(&f.name) {
        true => "UCX_",
        false => "RUCX_",
    }
}

/// A C string as `&str`, `None` for NULL or bytes that are not UTF-8.
///
/// # Safety
///
/// `p` is NULL or a NUL-terminated string valid for the returned lifetime.
pub(crate) unsafe fn opt_str<'a>(p: *const c_char) -> Option<&'a str> {
    if p.is_null() {
        return None;
    }
    // SAFETY: non-NULL and NUL-terminated by this function's contract.
    unsafe { CStr::from_ptr(p) }.to_str().ok()
}

/// Writes `bytes` to C stream `stream`.
///
/// # Safety
///
/// `stream` is NULL or an open `FILE *`.
pub(crate) unsafe fn write_stream(stream: *mut libc::FILE, bytes: &[u8]) {
    if stream.is_null() || bytes.is_empty() {
        return;
    }
    // SAFETY: `stream` is an open stream (contract) and `bytes` a valid
    // slice of `bytes.len()` bytes.
    unsafe {
        libc::fwrite(bytes.as_ptr().cast(), 1, bytes.len(), stream);
    }
}

/// `ucp_config_read`: reads the configuration from the environment.
/// `filename` is ignored (UCX reads no file either unless built to).
///
/// # Safety
///
/// `env_prefix` is NULL or a C string; `config_p` points to writable
/// memory for one pointer.
#[no_mangle]
pub unsafe extern "C" fn ucp_config_read(
    env_prefix: *const c_char,
    _filename: *const c_char,
    config_p: *mut *mut Config,
) -> StatusCode {
    guard_status(|| {
        if config_p.is_null() {
            return status::INVALID_PARAM;
        }
        // SAFETY: a C string or NULL by this function's contract.
        let prefix = unsafe { opt_str(env_prefix) };
        let cfg = Config::read(prefix, rucx::ucp::ucs::config::env_lookup);
        if let Err(e) = cfg.parse() {
            eprintln!("rucx: {e}");
            return status::INVALID_PARAM;
        }
        // SAFETY: `config_p` is writable (contract, checked non-NULL).
        unsafe { *config_p = Box::into_raw(Box::new(cfg)) };
        status::OK
    })
}

/// `ucp_config_release`.
///
/// # Safety
///
/// `config` is NULL or came from `ucp_config_read` and is not used after.
#[no_mangle]
pub unsafe extern "C" fn ucp_config_release(config: *mut Config) {
    guard((), || {
        if !config.is_null() {
            // SAFETY: made by Box::into_raw in ucp_config_read, released once.
            drop(unsafe { Box::from_raw(config) });
        }
    })
}

/// `ucp_config_modify`: `UCS_ERR_NO_ELEM` for a variable rucx does not
/// have, `UCS_ERR_INVALID_PARAM` for a value that does not parse.
///
/// # Safety
///
/// `config` came from `ucp_config_read`; `name` and `value` are C strings.
#[no_mangle]
pub unsafe extern "C" fn ucp_config_modify(
    config: *mut Config,
    name: *const c_char,
    value: *const c_char,
) -> StatusCode {
    guard_status(|| {
        // SAFETY: C strings or NULL by this function's contract.
        let (name, value) = unsafe { (opt_str(name), opt_str(value)) };
        // SAFETY: NULL or a live configuration (contract).
        let (Some(cfg), Some(name), Some(value)) = (unsafe { config.as_mut() }, name, value) else {
            return status::INVALID_PARAM;
        };
        cfg.modify(name, value)
    })
}

/// `ucp_config_print`: prints rucx's protocol-layer table with the
/// values of `config`, in UCX's layout: the variables UCX also has under
/// their `UCX_` names, rucx's own under `RUCX_` (see [`Config::print`]).
///
/// # Safety
///
/// `config` came from `ucp_config_read`; `stream` is an open `FILE *`;
/// `title` is NULL or a C string.
#[no_mangle]
pub unsafe extern "C" fn ucp_config_print(
    config: *const Config,
    stream: *mut libc::FILE,
    title: *const c_char,
    print_flags: c_int,
) {
    guard((), || {
        // SAFETY: NULL or a live configuration (contract).
        let default = Config::default();
        let cfg = unsafe { config.as_ref() }.unwrap_or(&default);
        // SAFETY: a C string or NULL (contract).
        let text = cfg.print(unsafe { opt_str(title) }, print_flags);
        // SAFETY: an open stream (contract).
        unsafe { write_stream(stream, &text) };
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(vars: &'static [(&'static str, &'static str)]) -> impl Fn(&str) -> Option<String> {
        move |k| {
            vars.iter()
                .find(|(n, _)| *n == k)
                .map(|(_, v)| v.to_string())
        }
    }

    #[test]
    fn the_registration_cache_is_off_unless_unmaps_are_reported_or_it_is_set() {
        use rucx::ucp::RcacheMode;
        let mode = |vars: &'static [(&'static str, &'static str)], reported: bool| {
            let mut c = Config::read(None, env(vars));
            c.cache_only_if_unmaps_reported(reported);
            c.parse().unwrap().rcache_enable
        };
        assert_eq!(mode(&[], false), RcacheMode::No);
        assert_eq!(mode(&[], true), RcacheMode::Auto);
        assert_eq!(
            mode(&[("RUCX_RCACHE_ENABLE", "auto")], false),
            RcacheMode::Auto
        );
        assert_eq!(
            mode(&[("RUCX_RCACHE_ENABLE", "yes")], false),
            RcacheMode::Yes
        );
        // Set with ucp_config_modify before ucp_init.
        let mut c = Config::read(None, env(&[]));
        assert_eq!(c.modify("RCACHE_ENABLE", "yes"), status::OK);
        c.cache_only_if_unmaps_reported(false);
        assert_eq!(c.parse().unwrap().rcache_enable, RcacheMode::Yes);
    }

    #[test]
    fn ucx_names_are_read_where_rucx_s_are_not_set() {
        let c = Config::read(
            None,
            env(&[("UCX_TLS", "tcp"), ("UCX_MAX_EAGER_LANES", "2")]),
        );
        let cfg = c.parse().unwrap();
        assert_eq!(cfg.tls.items(), ["tcp"]);
        let c = Config::read(None, env(&[("UCX_TLS", "tcp"), ("RUCX_TLS", "self")]));
        assert_eq!(c.parse().unwrap().tls.items(), ["self"]);
        let c = Config::read(
            Some("APP"),
            env(&[("APP_UCX_NET_DEVICES", "lo"), ("UCX_NET_DEVICES", "eth0")]),
        );
        assert_eq!(c.parse().unwrap().net_devices.items(), ["lo"]);
        let c = Config::read(None, env(&[("UCX_ATOMIC_MODE", "cpu")]));
        let mode = c.parse().unwrap().atomic_mode;
        assert_eq!(mode, rucx::ucp::AtomicMode::Cpu);
        // Not a shared name: UCX_PROTO_INFO is not read.
        let c = Config::read(None, env(&[("UCX_PROTO_INFO", "y")]));
        assert!(!c.parse().unwrap().proto_info);
    }

    #[test]
    fn modify_checks_names_and_values() {
        let mut c = Config::default();
        assert_eq!(c.modify("TLS", "self"), status::OK);
        assert_eq!(c.modify("UCX_NET_DEVICES", "lo"), status::OK);
        assert_eq!(c.modify("NO_SUCH_THING", "1"), status::NO_ELEM);
        assert_eq!(c.modify("RNDV_THRESH", "lots"), status::INVALID_PARAM);
        let cfg = c.parse().unwrap();
        assert_eq!(cfg.tls.items(), ["self"]);
        let text = String::from_utf8(c.print(Some("t"), 3)).unwrap();
        assert!(text.starts_with("\n#\n# t\n#\n\nUCX_TLS=self\n"), "{text}");
    }

    /// The layouts of UCX 1.13 (Debian's), flag by flag.
    #[test]
    fn print_is_laid_out_as_ucx_s() {
        let mut c = Config::default();
        assert_eq!(c.modify("UCX_RNDV_THRESH", "8k"), status::OK);
        let print = |flags| String::from_utf8(c.print(Some("title"), flags)).unwrap();
        let header = "\n#\n# title\n#\n\n";
        let cached = "\n\n#\n# Cached UCT title\n#\n\n\n";
        assert_eq!(print(UCS_CONFIG_PRINT_HEADER), format!("{header}{cached}"));
        let values = print(UCS_CONFIG_PRINT_CONFIG);
        let lines: Vec<&str> = values.lines().collect();
        assert_eq!(lines.len(), UCP_TABLE.fields.len(), "{values}");
        assert_eq!(lines[0], "UCX_TLS=all");
        assert!(lines.contains(&"UCX_RNDV_THRESH=8k"), "{values}");
        assert!(lines.contains(&"UCX_KEEPALIVE_NUM_EPS=128"), "{values}");
        assert!(lines.contains(&"RUCX_UNEXPECTED_MAX=64m"), "{values}");
        assert_eq!(
            print(UCS_CONFIG_PRINT_CONFIG | UCS_CONFIG_PRINT_HEADER),
            format!("{header}{values}{cached}")
        );
        let comment = UCS_CONFIG_PRINT_CONFIG | UCS_CONFIG_PRINT_COMMENT_DEFAULT;
        let commented = print(comment);
        assert!(commented.starts_with("# UCX_TLS=all\n"), "{commented}");
        assert!(
            commented.contains("\n# UCX_RNDV_THRESH=8k\n"),
            "{commented}"
        );
        let from_env = Config::read(None, env(&[("UCX_RNDV_THRESH", "8k")]));
        let text = String::from_utf8(from_env.print(None, comment)).unwrap();
        assert!(text.contains("\nUCX_RNDV_THRESH=8k\n"), "{text}");
        assert!(text.contains("\n# UCX_BCOPY_THRESH=auto\n"), "{text}");
        let doc = print(UCS_CONFIG_PRINT_DOC);
        assert_eq!(
            doc,
            "# UCX library configuration file\n# Uncomment to modify values\n"
        );
        let full = print(UCS_CONFIG_PRINT_DOC | UCS_CONFIG_PRINT_CONFIG);
        assert!(full.starts_with(&doc), "{full}");
        let first = &full[doc.len()..];
        assert!(
            first.starts_with("#\n# Comma-separated list of transports"),
            "{full}"
        );
        assert!(first.contains("#\n# syntax:    "), "{full}");
        assert!(first.contains("#\nUCX_TLS=all\n\n#\n"), "{full}");
        assert!(full.ends_with("RUCX_UNEXPECTED_MAX=64m\n\n"), "{full}");
        let untitled = String::from_utf8(c.print(None, UCS_CONFIG_PRINT_HEADER)).unwrap();
        assert!(untitled.starts_with("\n#\n# (null)\n#\n"), "{untitled}");
    }
}
