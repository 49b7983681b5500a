//! Network namespaces: a host of their own, so a capture holds the
//! test's traffic and nothing else, or two hosts joined by a veth pair
//! whose link a test can take down; deleted however the test ends.

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

/// Two hosts: network namespaces joined by a veth pair (MTU 1500),
/// 10.<pid bits>.1 and .2 on a /24 (the pid keeps runs on one machine
/// apart).
#[derive(Debug)]
pub(crate) struct TwoHosts {
    /// Namespace, veth device and address of each host.
    hosts: Vec<(Netns, String, String)>,
}

impl TwoHosts {
    /// Namespaces `rucx-<pid>-<tag>a` and `-<tag>b`; the veth ends have
    /// one name on both hosts (as two machines with an `eth1` each) when
    /// `same_names`, else each its own. `Err(why)` where namespaces cannot
    /// be made (not root, no `ip`).
    pub(crate) fn create(tag: &str, same_names: bool) -> Result<TwoHosts, String> {
        let pid = std::process::id();
        let net = format!("10.{}.{}", (pid >> 8) & 0xff, pid & 0xff);
        let mut hosts = Vec::new();
        for (side, n) in [("a", 1), ("b", 2)] {
            let veth = format!("rx{pid}{tag}{}", if same_names { "" } else { side });
            let ns = Netns::create(&format!("{tag}{side}"))?;
            hosts.push((ns, veth, format!("{net}.{n}")));
        }
        let [(na, va, _), (nb, vb, _)] = &hosts[..] else {
            unreachable!("two hosts")
        };
        ip(&[
            "link",
            "add",
            va,
            "netns",
            na.name(),
            "mtu",
            "1500",
            "type",
            "veth",
            "peer",
            "name",
            vb,
            "netns",
            nb.name(),
            "mtu",
            "1500",
        ])?;
        for (ns, veth, addr) in &hosts {
            ip(&[
                "-n",
                ns.name(),
                "addr",
                "add",
                &format!("{addr}/24"),
                "dev",
                veth,
            ])?;
            ip(&["-n", ns.name(), "link", "set", veth, "up"])?;
        }
        Ok(TwoHosts { hosts })
    }

    /// Host `i`, whose processes use only its veth (as a tcp device and
    /// as the iWARP device `iwarp_<veth>`): the loopback devices of the
    /// two namespaces look alike but do not reach each other.
    pub(crate) fn host(&self, i: usize) -> Host {
        let (ns, veth, _) = &self.hosts[i];
        ns.host()
            .with_env("RUCX_NET_DEVICES", &format!("{veth},iwarp_{veth}"))
    }

    /// The veth's address in host `i`.
    pub(crate) fn addr(&self, i: usize) -> &str {
        &self.hosts[i].2
    }

    /// The name of host `i`'s veth end.
    pub(crate) fn veth(&self, i: usize) -> &str {
        &self.hosts[i].1
    }

    /// Takes host `i`'s veth end down (`ip link set <veth> down`): the
    /// other end loses its carrier, nothing passes either way.
    pub(crate) fn link_down(&self, i: usize) -> Result<(), String> {
        let (ns, veth, _) = &self.hosts[i];
        ip(&["-n", ns.name(), "link", "set", veth, "down"])
    }
}
