//! Network namespaces for the wire tests: a host of their own, so a
//! capture holds the test's traffic and nothing else, and deleted however
//! the test ends.

use super::procs::Host;
use std::process::Command;

/// Runs `ip args`; its error output when it fails.
pub(crate) fn ip(args: &[&str]) -> Result<(), String> {
    let out = Command::new("ip")
        .args(args)
        .output()
        .map_err(|e| format!("ip (iproute2) not installed: {e}"))?;
    if out.status.success() {
        Ok(())
    } else {
        let err = String::from_utf8_lossy(&out.stderr);
        Err(format!("ip {}: {}", args.join(" "), err.trim()))
    }
}

/// Deletes the namespaces of earlier test processes that are gone (killed
/// before their guards ran).
fn remove_stale() {
    let Ok(out) = Command::new("ip").args(["netns", "list"]).output() else {
        return;
    };
    for line in String::from_utf8_lossy(&out.stdout).lines() {
        let name = line.split_whitespace().next().unwrap_or_default();
        let pid = name.strip_prefix("rucx-").and_then(|r| r.split('-').next());
        let gone = pid.is_some_and(|p| {
            p.parse::<u32>().is_ok() && !std::path::Path::new("/proc").join(p).exists()
        });
        if gone {
            let _ = ip(&["netns", "delete", name]);
        }
    }
}

/// A network namespace with its loopback up, deleted on drop (with the
/// devices in it: deleting one end of a veth pair deletes the other).
#[derive(Debug)]
pub(crate) struct Netns {
    name: String,
}

impl Netns {
    /// `rucx-<pid>-<tag>`: runs of the tests on one machine do not
    /// collide. `Err(why)` where namespaces cannot be made (not root, no
    /// `ip`).
    pub(crate) fn create(tag: &str) -> Result<Netns, String> {
        remove_stale();
        let name = format!("rucx-{}-{tag}", std::process::id());
        ip(&["netns", "add", &name])?;
        let ns = Netns { name };
        ip(&["-n", &ns.name, "link", "set", "lo", "up"])?;
        Ok(ns)
    }

    pub(crate) fn name(&self) -> &str {
        &self.name
    }

    /// A host whose processes run in this namespace.
    pub(crate) fn host(&self) -> Host {
        Host::netns(&self.name)
    }
}

impl Drop for Netns {
    fn drop(&mut self) {
        if let Err(e) = ip(&["netns", "delete", &self.name]) {
            eprintln!("{e}");
        }
    }
}
