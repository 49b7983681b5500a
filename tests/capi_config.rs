//! `ucp_config_print` of rucx's `libucp.so` against UCX 1.13's
//! (`tests/c/capi_config.c`, built against each library): for every flag
//! set the lines other than variables are the same, in the same places
//! (title header, the closing `Cached UCT` header, blank lines, the two
//! lines `UCS_CONFIG_PRINT_DOC` starts with, a variable's description
//! and syntax before it); the variables rucx shares with UCX print under
//! UCX's names (`UCX_TLS`), each one UCX prints too, and with
//! `UCS_CONFIG_PRINT_COMMENT_DEFAULT` commented out as UCX's (all but
//! those the environment set, here `UCX_RNDV_THRESH`: even `TLS`, set by
//! `ucp_config_modify`); rucx's own print as `RUCX_<NAME>`. Without UCX's library and headers
//! (`libucx-dev`) only rucx's side is checked, and the test says
//! `skipped: <why>` for the other (fails with `RUCX_REQUIRE_ALL=1`).

mod capi_common;
mod common;

use capi_common::*;
use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;

/// What the C program printed, by flag set.
fn sections(stdout: &[u8]) -> BTreeMap<i32, Vec<String>> {
    let text = String::from_utf8_lossy(stdout);
    let mut out: BTreeMap<i32, Vec<String>> = BTreeMap::new();
    let mut cur = None;
    for line in text.lines() {
        if let Some(n) = line.strip_prefix("=== flags ") {
            cur = Some(n.parse().expect("flags"));
            out.insert(cur.unwrap(), Vec::new());
        } else if let Some(c) = cur {
            out.get_mut(&c).unwrap().push(line.to_string());
        }
    }
    out
}

/// A variable line: whether commented out, the name, the value.
fn variable(line: &str) -> Option<(bool, &str, &str)> {
    let (commented, rest) = match line.strip_prefix("# ") {
        Some(r) => (true, r),
        None => (false, line),
    };
    let (name, value) = rest.split_once('=')?;
    let ok = |c: char| c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_';
    (!name.is_empty() && name.chars().all(ok)).then_some((commented, name, value))
}

/// The lines that are not variables, a run of variables as one `<vars>`
/// (for flag sets without documentation).
fn skeleton(lines: &[String]) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for l in lines {
        let v = match variable(l) {
            Some(_) => "<vars>",
            None => l.as_str(),
        };
        if !(v == "<vars>" && out.last().is_some_and(|p| p == "<vars>")) {
            out.push(v.to_string());
        }
    }
    out
}

/// Checks the layout rules of a documented listing: each variable comes
/// after `# syntax:    ...` and `#`, and before a blank line.
fn check_documented(lines: &[String], who: &str) {
    let mut vars = 0;
    for (i, l) in lines.iter().enumerate() {
        if variable(l).is_none() || i < 2 {
            continue;
        }
        vars += 1;
        assert!(lines[i - 2].starts_with("# syntax:    "), "{who}: {l}");
        assert_eq!(lines[i - 1], "#", "{who}: {l}");
        assert_eq!(lines.get(i + 1).map(String::as_str), Some(""), "{who}: {l}");
    }
    assert!(vars > 5, "{who}: {lines:?}");
}

/// Builds `tests/c/capi_config.c` against UCX's installed library and
/// headers, or says why not.
fn build_against_ucx(dir: &Path) -> Result<std::path::PathBuf, String> {
    if !Path::new("/usr/include/ucp/api/ucp.h").exists() {
        return Err("UCX's headers (libucx-dev) are not installed".into());
    }
    let exe = dir.join("capi_config_ucx");
    let o = Command::new("cc")
        .arg("-Wall")
        .arg(c_dir().join("capi_config.c"))
        .arg("-o")
        .arg(&exe)
        .args(["-lucp", "-lucs"])
        .output()
        .map_err(|e| format!("cc: {e}"))?;
    match o.status.success() {
        true => Ok(exe),
        false => Err(format!(
            "cannot link against UCX's library: {}",
            String::from_utf8_lossy(&o.stderr)
        )),
    }
}

#[test]
fn config_print_is_laid_out_as_ucx_s() {
    let (dir, exe) = match build_c_test("config", "capi_config") {
        Ok(v) => v,
        Err(e) => return common::skip_or_fail(&e),
    };
    let env = [("UCX_RNDV_THRESH", "8k")];
    let out = run(&exe, &[], &env, 60);
    assert!(out.status.success(), "{}", text(&out));
    let rucx = sections(&out.stdout);
    assert_eq!(rucx.len(), 7, "{}", text(&out));
    // rucx's side alone.
    let values = &rucx[&1];
    assert!(values.iter().any(|l| l == "UCX_TLS=tcp"), "{values:?}");
    assert!(
        values.iter().any(|l| l == "UCX_RNDV_THRESH=8k"),
        "{values:?}"
    );
    assert!(values.iter().any(|l| l.starts_with("RUCX_")), "{values:?}");
    assert!(values.iter().all(|l| variable(l).is_some()), "{values:?}");
    let commented = &rucx[&17];
    assert!(
        commented.iter().any(|l| l == "# UCX_TLS=tcp"),
        "{commented:?}"
    );
    assert!(
        commented.iter().any(|l| l == "UCX_RNDV_THRESH=8k"),
        "{commented:?}"
    );
    assert!(
        commented.iter().any(|l| l == "# UCX_NET_DEVICES=all"),
        "{commented:?}"
    );
    check_documented(&rucx[&5], "rucx");

    let ucx_exe = match build_against_ucx(&dir) {
        Ok(e) => e,
        Err(e) => return common::skip_or_fail(&e),
    };
    let out = run(&ucx_exe, &[], &env, 60);
    assert!(out.status.success(), "{}", text(&out));
    let ucx = sections(&out.stdout);
    assert_eq!(
        rucx.keys().collect::<Vec<_>>(),
        ucx.keys().collect::<Vec<_>>()
    );
    for (flags, lines) in &rucx {
        let theirs = &ucx[flags];
        if flags & 4 == 0 {
            assert_eq!(
                skeleton(lines),
                skeleton(theirs),
                "flags {flags}\n--- rucx\n{}\n--- UCX\n{}",
                lines.join("\n"),
                theirs.join("\n")
            );
        } else {
            assert_eq!(lines[..2], theirs[..2], "flags {flags}");
            if flags & 1 != 0 {
                check_documented(theirs, "UCX");
            }
        }
        // Every UCX_ variable of rucx's is one of UCX's, commented out
        // or not as UCX's.
        let ucx_vars: BTreeMap<&str, bool> = theirs
            .iter()
            .filter_map(|l| variable(l))
            .map(|(c, n, _)| (n, c))
            .collect();
        for (c, name, _) in lines.iter().filter_map(|l| variable(l)) {
            if name.starts_with("UCX_") {
                assert_eq!(ucx_vars.get(name), Some(&c), "flags {flags}: {name}");
            } else {
                assert!(name.starts_with("RUCX_"), "flags {flags}: {name}");
            }
        }
    }
    let _ = std::fs::remove_dir_all(dir);
}
