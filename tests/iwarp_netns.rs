//! rc_iwarp between two hosts: two network namespaces joined by a veth
//! pair (MTU 1500), a `rucx-perftest` server in one and its client in the
//! other, over the veth's addresses.
//!
//! `rc_iwarp_between_two_namespaces` runs tag_lat, tag_bw with 1 MiB
//! messages, ucp_put_bw and ucp_get and checks each run's output, then
//! captures a shorter set of runs on the veth with tshark and checks the
//! capture as `iwarp_wire.rs` does: here the FPDUs are cut to an Ethernet
//! MSS, so Sends, WRITEs and READ responses take many segments. Its veth
//! ends have one name on both hosts;
//! `rma_between_hosts_whose_devices_differ_in_name` names them apart and
//! checks that put and get still go as RDMA WRITE and READ.
//!
//! Needs root and `ip` (iproute2), and tshark for the capture; without
//! them it prints `skipped: <why>`, or fails when `RUCX_REQUIRE_ALL=1`.
//! The namespaces are deleted when the test ends, also when it fails.

mod common;
mod iwarp_capture;

use common::skip_or_fail;
use iwarp_capture::capture::Capture;
use iwarp_capture::check::{check_with_retries, Checked};
use iwarp_capture::netns::{ip, Netns};
use iwarp_capture::perftest::{PerfRun, CAPTURED_RUNS};
use iwarp_capture::procs::{Host, Scratch};
use iwarp_capture::rules::{READ_REQUEST, READ_RESPONSE, SEND, WRITE};

/// Two hosts: network namespaces joined by a veth pair, 10.<pid bits>.1
/// and .2 on a /24 (the pid keeps runs on one machine apart).
struct TwoHosts {
    /// Namespace, veth device and address of each host.
    hosts: Vec<(Netns, String, String)>,
}

impl TwoHosts {
    /// Namespaces `rucx-<pid>-<tag>a` and `-<tag>b`; the veth ends have
    /// one name on both hosts (as two machines with an `eth1` each) when
    /// `same_names`, else each its own.
    fn create(tag: &str, same_names: bool) -> Result<TwoHosts, String> {
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

    /// Host `i`, whose processes use only its veth: the loopback devices
    /// of the two namespaces look alike but do not reach each other.
    fn host(&self, i: usize) -> Host {
        let (ns, veth, _) = &self.hosts[i];
        ns.host()
            .with_env("RUCX_NET_DEVICES", &format!("{veth},iwarp_{veth}"))
    }

    /// The veth's address in host `i`.
    fn addr(&self, i: usize) -> &str {
        &self.hosts[i].2
    }

    /// Runs `runs` with the server on host 0 and the client on host 1,
    /// captured on host 0's veth; `None` where tshark cannot capture (the
    /// test then skips).
    fn capture(&self, runs: &[PerfRun<'_>], dir: &Scratch) -> Option<Checked> {
        let (a, b) = (self.host(0), self.host(1));
        let veth = &self.hosts[0].1;
        let checked = check_with_retries(3, |n| {
            let name = format!("veth{n}");
            let capture = match Capture::start(&a, veth, "tcp", self.addr(1), dir, &name) {
                Ok(c) => c,
                Err(why) => {
                    skip_or_fail(&why);
                    return None;
                }
            };
            for run in runs {
                run.run(dir, TLS, (&a, self.addr(0)), &b);
            }
            Some(capture.stop())
        })?;
        println!("{}", checked.summary);
        checked.assert_clean("rucx-perftest over rc_iwarp between namespaces");
        Some(checked)
    }
}

/// The runs whose output is checked; the bandwidth ones move 200 MiB
/// and 50 MiB.
const RUNS: [PerfRun<'static>; 4] = [
    PerfRun::new("tag_lat", "-t tag_lat -s 8 -n 1000 -w 100", &[]),
    PerfRun::new("tag_bw", "-t tag_bw -s 1048576 -n 200 -w 10", &[]),
    PerfRun::new("put_bw", "-t ucp_put_bw -s 1048576 -n 50 -w 5", &[]),
    PerfRun::new("get", "-t ucp_get -s 1048576 -n 50 -w 5", &[]),
];

const TLS: &str = "rc_iwarp";

#[test]
fn rc_iwarp_between_two_namespaces() {
    let dir = Scratch::new("iwarp-netns");
    let two = match TwoHosts::create("s", true) {
        Ok(t) => t,
        Err(why) => return skip_or_fail(&format!("no network namespaces: {why}")),
    };
    let (a, b) = (two.host(0), two.host(1));
    let info = a
        .command(env!("CARGO_BIN_EXE_rucx-info"))
        .arg("-d")
        .output()
        .expect("run rucx-info -d");
    let info = String::from_utf8_lossy(&info.stdout);
    let dev = format!("iwarp_{}", two.hosts[0].1);
    assert!(
        info.contains(&format!("Device: {dev}\n")),
        "rucx-info -d in {a:?} lists no {dev}:\n{info}"
    );

    for run in &RUNS {
        let row = run.run(&dir, TLS, (&a, two.addr(0)), &b);
        println!("{} over {TLS} between namespaces: {row:?}", run.label);
    }

    let Some(checked) = two.capture(&CAPTURED_RUNS, &dir) else {
        return;
    };
    let t = &checked.summary.tally;
    assert!(
        t.max_fpdu >= 1000 && t.min_emss.is_some_and(|m| m <= 1460),
        "expected FPDUs cut to an Ethernet MSS:\n{}",
        checked.summary
    );
    checked.assert_seen(
        &[SEND, WRITE, READ_REQUEST, READ_RESPONSE],
        &[SEND, WRITE, READ_RESPONSE],
    );
}

/// Two hosts whose interfaces have different names: RMA must still go
/// as RDMA WRITE and READ. rc_iwarp names its memory domains after the
/// device (`iwarp_<netdev>`), so the domain under which the server packs
/// its keys has no namesake on the client; the client finds the entry
/// through the domain name the server's address gives for the lane's
/// remote iface.
#[test]
fn rma_between_hosts_whose_devices_differ_in_name() {
    let dir = Scratch::new("iwarp-netns-names");
    let two = match TwoHosts::create("d", false) {
        Ok(t) => t,
        Err(why) => return skip_or_fail(&format!("no network namespaces: {why}")),
    };
    let rma = [
        PerfRun::new("put_bw", "-t ucp_put_bw -s 200000 -n 10 -w 1", &[]),
        PerfRun::new("get", "-t ucp_get -s 200000 -n 10 -w 1", &[]),
    ];
    if let Some(checked) = two.capture(&rma, &dir) {
        checked.assert_seen(&[WRITE, READ_REQUEST], &[WRITE, READ_RESPONSE]);
    }
}
