//! One `rucx-perftest` run as scripts start it: a server on one host that
//! picks its bootstrap port (`-p 0`), then a client on another host (or
//! the same) that connects to it.

use crate::common::wait_exit;
use crate::hosts::procs::{Host, Logged, Scratch};

const EXE: &str = env!("CARGO_BIN_EXE_rucx-perftest");
/// Generous: debug builds on a loaded machine.
const RUN_SECS: u64 = 120;

/// A test to run: a label for file names and messages, the client's
/// options (`-t tag_bw -s 65536 -n 40`, split at spaces) and extra
/// environment for both sides.
#[derive(Debug, Clone, Copy)]
pub(crate) struct PerfRun<'a> {
    pub(crate) label: &'a str,
    pub(crate) args: &'a str,
    pub(crate) env: &'a [(&'a str, &'a str)],
}

/// CRC32c on (the default is off, as in siw), so that tshark checks it.
const CRC: (&str, &str) = ("RUCX_IWARP_MPA_CRC", "y");

/// Short runs that between them put every iWARP message rucx sends on
/// the wire, for a capture: small eager Sends, 64 KiB messages eager
/// (Sends) and by rendezvous (READs), RDMA WRITEs and READs of 200000
/// bytes, all with CRC, and a connection of MPA rev 1 without CRC.
pub(crate) const CAPTURED_RUNS: [PerfRun<'static>; 6] = [
    PerfRun::new("tag_lat", "-t tag_lat -s 8 -n 200 -w 10", &[CRC]),
    PerfRun::new("tag_bw_rndv", "-t tag_bw -s 65536 -n 40 -w 4", &[CRC]),
    PerfRun::new(
        "tag_bw_eager",
        "-t tag_bw -s 65536 -n 40 -w 4",
        &[("RUCX_RNDV_THRESH", "inf"), CRC],
    ),
    PerfRun::new("put_bw", "-t ucp_put_bw -s 200000 -n 20 -w 2", &[CRC]),
    PerfRun::new("get", "-t ucp_get -s 200000 -n 20 -w 2", &[CRC]),
    PerfRun::new(
        "tag_lat_rev1",
        "-t tag_lat -s 8 -n 100 -w 10",
        &[("RUCX_IWARP_MPA_REV", "1"), ("RUCX_IWARP_MPA_CRC", "n")],
    ),
];

impl<'a> PerfRun<'a> {
    pub(crate) const fn new(label: &'a str, args: &'a str, env: &'a [(&'a str, &'a str)]) -> Self {
        PerfRun { label, args, env }
    }

    /// The value of `-n`.
    fn iterations(&self) -> &str {
        let mut args = self.args.split_whitespace();
        args.find(|a| *a == "-n");
        args.next().unwrap_or_default()
    }

    fn command(&self, host: &Host, tls: &str) -> std::process::Command {
        let mut cmd = host.command(EXE);
        cmd.env("RUCX_TLS", tls);
        for (k, v) in self.env {
            cmd.env(k, v);
        }
        cmd
    }

    /// Runs the server on `server`, the client on `client` connecting to
    /// `server_addr`, both with `RUCX_TLS=tls`; fails unless both exit 0
    /// and the server prints the test box and the client a `Final:` row
    /// of eight numbers that starts with the iteration count. Returns that
    /// row.
    pub(crate) fn run(
        &self,
        dir: &Scratch,
        tls: &str,
        (server, server_addr): (&Host, &str),
        client: &Host,
    ) -> Vec<f64> {
        let mut srv = self.command(server, tls);
        srv.args(["-p", "0"]);
        let mut srv = Logged::spawn(srv, dir, &format!("{}.server", self.label));
        let port = srv
            .wait_line(false, 30, |l| {
                l.strip_prefix("Listening on port ")
                    .map(|p| p.trim().to_string())
            })
            .unwrap_or_else(|e| panic!("{}: the server did not listen: {e}", self.label));
        let mut cli = self.command(client, tls);
        cli.args([server_addr, "-p", &port])
            .args(self.args.split_whitespace());
        let mut cli = Logged::spawn(cli, dir, &format!("{}.client", self.label));
        let status = wait_exit(&mut cli.child, RUN_SECS);
        let (out, err) = (cli.stdout(), cli.stderr());
        let what = format!("{} (RUCX_TLS={tls} {:?})", self.label, self.args);
        assert!(
            status.success(),
            "{what}: client {status}\n{out}\n{err}\nserver:\n{}{}",
            srv.stdout(),
            srv.stderr()
        );
        let status = wait_exit(&mut srv.child, 30);
        assert!(
            status.success(),
            "{what}: server {status}\n{}",
            srv.stderr()
        );
        let box_ = srv.stdout();
        assert!(box_.contains("| Test:"), "{what}: no test box in\n{box_}");
        let row = out.lines().rev().find_map(|l| {
            let nums: Option<Vec<f64>> = l
                .strip_prefix("Final:")?
                .split_whitespace()
                .map(|n| n.parse().ok())
                .collect();
            nums.filter(|n| n.len() == 8)
        });
        let row = row.unwrap_or_else(|| panic!("{what}: no final row in\n{out}"));
        assert_eq!(row[0].to_string(), self.iterations(), "{what}: {out}");
        assert!(
            row.iter().all(|n| n.is_finite() && *n >= 0.0),
            "{what}: {out}"
        );
        row
    }
}
