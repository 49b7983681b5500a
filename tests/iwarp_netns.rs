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
mod hosts;
mod iwarp_capture;

use common::skip_or_fail;
use hosts::netns::TwoHosts;
use hosts::procs::Scratch;
use iwarp_capture::capture::Capture;
use iwarp_capture::check::{check_with_retries, Checked};
use iwarp_capture::perftest::{PerfRun, CAPTURED_RUNS};
use iwarp_capture::rules::{READ_REQUEST, READ_RESPONSE, SEND, WRITE};

/// Runs `runs` with the server on host 0 and the client on host 1,
/// captured on host 0's veth; `None` where tshark cannot capture (the
/// test then skips).
fn capture(two: &TwoHosts, runs: &[PerfRun<'_>], dir: &Scratch) -> Option<Checked> {
    let (a, b) = (two.host(0), two.host(1));
    let veth = two.veth(0);
    let checked = check_with_retries(3, |n| {
        let name = format!("veth{n}");
        let capture = match Capture::start(&a, veth, "tcp", two.addr(1), dir, &name) {
            Ok(c) => c,
            Err(why) => {
                skip_or_fail(&why);
                return None;
            }
        };
        for run in runs {
            run.run(dir, TLS, (&a, two.addr(0)), &b);
        }
        Some(capture.stop())
    })?;
    println!("{}", checked.summary);
    checked.assert_clean("rucx-perftest over rc_iwarp between namespaces");
    Some(checked)
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
    let dev = format!("iwarp_{}", two.veth(0));
    assert!(
        info.contains(&format!("Device: {dev}\n")),
        "rucx-info -d in {a:?} lists no {dev}:\n{info}"
    );

    for run in &RUNS {
        let row = run.run(&dir, TLS, (&a, two.addr(0)), &b);
        println!("{} over {TLS} between namespaces: {row:?}", run.label);
    }

    let Some(checked) = capture(&two, &CAPTURED_RUNS, &dir) else {
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
    if let Some(checked) = capture(&two, &rma, &dir) {
        checked.assert_seen(&[WRITE, READ_REQUEST], &[WRITE, READ_RESPONSE]);
    }
}
