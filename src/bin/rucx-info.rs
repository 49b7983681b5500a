//! `rucx-info`: what rucx finds on this host and how it is configured, in
//! the manner of UCX's `ucx_info`.
//!
//! * `-v`: version;
//! * `-d`: every transport resource with its capabilities, limits and
//!   performance model, grouped by memory domain;
//! * `-c`: every `RUCX_*` variable with its description, syntax and the
//!   value in force (default or environment); `-f` is accepted for
//!   `ucx_info -cf` compatibility;
//! * `-e`: the protocol selection tables (size range -> protocol -> lanes)
//!   of an endpoint between two workers of this process, for the
//!   transports `RUCX_TLS` allows (like `ucx_info -e`);
//! * `-h`: usage.

use rucx::perf::options::UsageError;
use rucx_uct::{AtomicCaps, AtomicOp, Caps, Component, IfaceAttr, IfaceParams, TlResource};
use std::ffi::OsString;
use std::io::{self, Write};

const PROGRAM: &str = "rucx-info";

/// What to print.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
struct Show {
    version: bool,
    devices: bool,
    config: bool,
    endpoint: bool,
}

fn parse(args: impl IntoIterator<Item = OsString>) -> Result<Option<Show>, UsageError> {
    let mut show = Show::default();
    for arg in args {
        let arg = arg
            .into_string()
            .map_err(|a| UsageError(format!("argument {a:?} is not valid UTF-8")))?;
        if arg == "--help" {
            return Ok(None);
        }
        let letters = arg
            .strip_prefix('-')
            .filter(|l| !l.is_empty() && !l.starts_with('-'))
            .ok_or_else(|| UsageError(format!("unexpected argument '{arg}'")))?;
        for c in letters.chars() {
            match c {
                'v' => show.version = true,
                'd' => show.devices = true,
                'c' => show.config = true,
                'e' => show.endpoint = true,
                'f' => {}
                'h' => return Ok(None),
                _ => return Err(UsageError(format!("invalid option -- '{c}'"))),
            }
        }
    }
    if show == Show::default() {
        return Err(UsageError("nothing to print: give -v, -d, -c or -e".into()));
    }
    Ok(Some(show))
}

fn usage() -> String {
    format!(
        "  Usage: {PROGRAM} [options]\n\
         \n\
         \x20    -v             print the version\n\
         \x20    -d             print transport resources: capabilities, limits and\n\
         \x20                   performance model\n\
         \x20    -c             print every RUCX_* configuration variable with its\n\
         \x20                   description, syntax and current value\n\
         \x20    -f             accepted with -c for ucx_info compatibility\n\
         \x20    -h, --help     show this help message\n"
    )
}

/// A size the way UCX prints memory units: `8K`, `64K`, `1M`, `unlimited`.
fn memunits(n: usize) -> String {
    if n >= isize::MAX as usize {
        return "unlimited".into();
    }
    for (shift, suffix) in [(40, "T"), (30, "G"), (20, "M"), (10, "K")] {
        let unit = 1usize << shift;
        if n >= unit && n % unit == 0 {
            return format!("{}{suffix}", n / unit);
        }
    }
    n.to_string()
}

/// The `-d` block of one transport resource.
/// What `-d` prints of an open iface: its attributes, address lengths
/// and the atomics its device executes.
type IfaceFacts<'a> = (&'a IfaceAttr, usize, usize, AtomicCaps);

/// The atomic lines of `-d`, as UCX prints them (`atomic_fadd: 64 bit`):
/// one per operation the device executes, with its widths.
fn atomic_lines(atomics: AtomicCaps) -> Vec<(String, String)> {
    let mut v = Vec::new();
    for (op, fetch) in AtomicOp::FORMS {
        let widths: Vec<&str> = [(4, "32"), (8, "64")]
            .into_iter()
            .filter(|&(w, _)| atomics.contains(AtomicCaps::of(op, fetch, w)))
            .map(|(_, n)| n)
            .collect();
        if !widths.is_empty() {
            let label = format!("atomic_{}", op.name(fetch));
            v.push((label, format!("{} bit", widths.join(", "))));
        }
    }
    v
}

fn device_block(res: &TlResource, iface: Result<IfaceFacts<'_>, String>) -> String {
    let mut s = String::new();
    let mut line = |label: &str, value: &str| s.push_str(&format!("#{label:>21}: {value}\n"));
    line("Transport", &res.tl_name);
    line("Device", &res.dev_name);
    line("Type", res.dev_type.as_str());
    let (attr, dev_addr, iface_addr, atomics) = match iface {
        Ok(x) => x,
        Err(e) => {
            s.push_str(&format!("#   < failed to open interface: {e} >\n#\n"));
            return s;
        }
    };
    s.push_str("#\n#      capabilities:\n");
    let mut cap = |label: &str, value: String| s.push_str(&format!("#{label:>21}: {value}\n"));
    let m = &attr.model;
    cap(
        "bandwidth",
        format!("{:.2} MB/sec", m.bandwidth / (1024.0 * 1024.0)),
    );
    cap("latency", format!("{:.0} nsec", m.latency * 1e9));
    cap("overhead", format!("{:.0} nsec", m.overhead * 1e9));
    let caps = attr.caps;
    if caps.contains(Caps::AM_SHORT) {
        cap("am_short", format!("<= {}", memunits(attr.max_short)));
    }
    if caps.contains(Caps::AM_BCOPY) {
        cap("am_bcopy", format!("<= {}", memunits(attr.max_bcopy)));
    }
    if caps.contains(Caps::AM_ZCOPY) {
        cap(
            "am_zcopy",
            format!(
                "<= {}, up to {} iov",
                memunits(attr.max_zcopy),
                attr.max_iov
            ),
        );
        cap("am header", format!("<= {}", memunits(attr.max_hdr)));
    }
    // UCX prints these as "put_zcopy: <= N, up to K iov".
    for (bit, label, max) in [
        (Caps::PUT_ZCOPY, "put_zcopy", attr.max_put_zcopy),
        (Caps::GET_ZCOPY, "get_zcopy", attr.max_get_zcopy),
    ] {
        if caps.contains(bit) {
            cap(
                label,
                format!("<= {}, up to {} iov", memunits(max), attr.max_iov),
            );
        }
    }
    for (label, widths) in atomic_lines(atomics) {
        cap(&label, widths);
    }
    cap(
        "device atomics",
        if atomics.is_empty() {
            "none (emulated by the target's CPU)".into()
        } else {
            atomics.names()
        },
    );
    let mut conn = Vec::new();
    if caps.contains(Caps::CONNECT_TO_IFACE) {
        conn.push("to iface");
    }
    cap(
        "connection",
        if conn.is_empty() {
            "none".into()
        } else {
            conn.join(", ")
        },
    );
    cap("device address", format!("{dev_addr} bytes"));
    cap("iface address", format!("{iface_addr} bytes"));
    let yes_no = |b: bool| if b { "yes" } else { "no" }.to_string();
    cap("pending", yes_no(caps.contains(Caps::PENDING)));
    cap("event fd", yes_no(caps.contains(Caps::EVENT_FD)));
    cap(
        "error handling",
        if caps.contains(Caps::PEER_FAILURE) {
            "peer failure".into()
        } else {
            "none".into()
        },
    );
    s.push_str("#\n");
    s
}

fn print_devices(out: &mut dyn Write) -> io::Result<()> {
    let registry = rucx::registry();
    let comps: &[&'static dyn Component] = registry.components();
    let params = IfaceParams::default();
    for comp in comps {
        let mds = match comp.md_open() {
            Ok(mds) => mds,
            Err(e) => {
                writeln!(
                    out,
                    "#\n# Component: {}\n#   < unavailable: {e} >",
                    comp.name()
                )?;
                continue;
            }
        };
        for md in mds {
            writeln!(out, "#")?;
            writeln!(out, "# Memory domain: {}", md.name())?;
            writeln!(out, "#     Component: {}", comp.name())?;
            for (k, v) in md.device_info() {
                writeln!(out, "#{k:>26}: {v}")?;
            }
            writeln!(out, "#")?;
            let resources = match md.resources() {
                Ok(r) => r,
                Err(e) => {
                    writeln!(out, "#   < no resources: {e} >")?;
                    continue;
                }
            };
            if resources.is_empty() {
                writeln!(out, "#   < no supported devices found >")?;
            }
            for res in &resources {
                let block = match md.iface_open(res, &params) {
                    Ok(mut iface) => {
                        let atomics = iface
                            .atomic()
                            .map_or(AtomicCaps::empty(), |a| a.atomic_caps());
                        device_block(
                            res,
                            Ok((
                                iface.attr(),
                                iface.device_addr().len(),
                                iface.iface_addr().len(),
                                atomics,
                            )),
                        )
                    }
                    Err(e) => device_block(res, Err(e.to_string())),
                };
                out.write_all(block.as_bytes())?;
            }
        }
    }
    Ok(())
}

fn print_config(out: &mut dyn Write) -> io::Result<()> {
    let lookup = |var: &str| rucx_ucp::ucs::config::env_lookup(var);
    for table in rucx::config_tables() {
        writeln!(out, "#")?;
        writeln!(
            out,
            "# {} configuration (RUCX_{}*)",
            table.name, table.prefix
        )?;
        table.print_to(out, &lookup)?;
    }
    Ok(())
}

fn print_version(out: &mut dyn Write) -> io::Result<()> {
    let names: Vec<&str> = rucx::registry()
        .components()
        .iter()
        .map(|c| c.name())
        .collect();
    writeln!(out, "# Library version: {}", env!("CARGO_PKG_VERSION"))?;
    writeln!(out, "# Transports built in: {}", names.join(", "))
}

/// Protocol tables of an endpoint between two workers of this process.
fn print_endpoint(out: &mut dyn Write) -> io::Result<()> {
    let fail = |e: rucx::Error| io::Error::other(e.to_string());
    let ctx = rucx::Context::new().map_err(fail)?;
    let mut a = ctx.create_worker().map_err(fail)?;
    let b = ctx.create_worker().map_err(fail)?;
    let ep = a.connect(&b.address()).map_err(fail)?;
    writeln!(out, "#\n# Endpoint between two workers of this process\n#")?;
    for table in a.ep_protocols(ep).map_err(fail)? {
        writeln!(out, "{table}")?;
    }
    if let Some(n) = a.ep_rndv_split(ep).map_err(fail)? {
        writeln!(
            out,
            "# rendezvous by get from {}: the receiver reads one half, \
             the sender writes the other (RUCX_RNDV_SPLIT_THRESH)",
            memunits(n)
        )?;
    }
    let rma = a.ep_rma_protocols(ep).map_err(fail)?;
    let width = rma
        .iter()
        .map(|p| p.protocol.len() + p.lane.len() + 3)
        .max()
        .unwrap_or(0);
    let rule = format!("+----------------+{}+", "-".repeat(width + 2));
    writeln!(out, "{rule}")?;
    writeln!(
        out,
        "| {:<14} | {:<width$} |",
        "one-sided", "memory mapped by the peer"
    )?;
    writeln!(out, "{rule}")?;
    for p in &rma {
        let gap = width - p.protocol.len();
        writeln!(out, "| {:<14} | {}{:>gap$} |", p.op, p.protocol, p.lane)?;
    }
    writeln!(out, "{rule}")?;
    Ok(())
}

fn main() {
    let show = match parse(std::env::args_os().skip(1)) {
        Ok(Some(show)) => show,
        Ok(None) => {
            print!("{}", usage());
            return;
        }
        Err(e) => {
            eprintln!("{PROGRAM}: {e}");
            eprint!("{}", usage());
            std::process::exit(2);
        }
    };
    let stdout = io::stdout();
    let mut out = stdout.lock();
    let mut result = Ok(());
    if show.version {
        result = result.and_then(|()| print_version(&mut out));
    }
    if show.config {
        result = result.and_then(|()| print_config(&mut out));
    }
    if show.devices {
        result = result.and_then(|()| print_devices(&mut out));
    }
    if show.endpoint {
        result = result.and_then(|()| print_endpoint(&mut out));
    }
    if let Err(e) = result.and_then(|()| out.flush()) {
        if e.kind() != io::ErrorKind::BrokenPipe {
            eprintln!("{PROGRAM}: error: {e}");
            std::process::exit(1);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rucx_uct::{ConnectMode, DeviceType, PerfModel};

    fn args(line: &str) -> Vec<OsString> {
        line.split_whitespace().map(OsString::from).collect()
    }

    #[test]
    fn options() {
        let all = Show {
            version: true,
            devices: true,
            config: true,
            endpoint: true,
        };
        assert_eq!(parse(args("-v -d -c -e")), Ok(Some(all)));
        assert_eq!(parse(args("-vdce")), Ok(Some(all)));
        assert_eq!(
            parse(args("-cf")),
            Ok(Some(Show {
                config: true,
                ..Show::default()
            }))
        );
        assert_eq!(parse(args("-h")), Ok(None));
        assert_eq!(parse(args("--help")), Ok(None));
        for bad in ["", "-x", "-dx", "--devices", "d", "-"] {
            assert!(parse(args(bad)).is_err(), "{bad:?}");
        }
        assert!(usage().contains("-d"));
    }

    #[test]
    fn memory_units() {
        assert_eq!(memunits(0), "0");
        assert_eq!(memunits(100), "100");
        assert_eq!(memunits(8192), "8K");
        assert_eq!(memunits(65536), "64K");
        assert_eq!(memunits(1 << 20), "1M");
        assert_eq!(memunits(1500), "1500");
        assert_eq!(memunits(usize::MAX), "unlimited");
    }

    #[test]
    fn device_block_lists_capabilities() {
        let res = TlResource {
            tl_name: "tcp".into(),
            dev_name: "lo".into(),
            dev_type: DeviceType::Net,
        };
        let attr = IfaceAttr {
            caps: Caps::AM_SHORT | Caps::AM_BCOPY | Caps::AM_ZCOPY | Caps::PEER_FAILURE,
            max_short: 8192,
            max_bcopy: 65536,
            max_zcopy: 1 << 20,
            max_hdr: 128,
            max_iov: 6,
            max_put_zcopy: 0,
            max_get_zcopy: 0,
            model: PerfModel {
                latency: 10e-6,
                overhead: 50e-9,
                bandwidth: 100.0 * 1024.0 * 1024.0,
            },
            connect: ConnectMode::ToIface,
        };
        let b = device_block(&res, Ok((&attr, 6, 2, AtomicCaps::empty())));
        for needle in [
            "#            Transport: tcp\n",
            "#               Device: lo\n",
            "#                 Type: network\n",
            "#            bandwidth: 100.00 MB/sec\n",
            "#              latency: 10000 nsec\n",
            "#             overhead: 50 nsec\n",
            "#             am_short: <= 8K\n",
            "#             am_bcopy: <= 64K\n",
            "#             am_zcopy: <= 1M, up to 6 iov\n",
            "#       device address: 6 bytes\n",
            "#       error handling: peer failure\n",
            "#           connection: none\n",
            "#       device atomics: none (emulated by the target's CPU)\n",
        ] {
            assert!(b.contains(needle), "missing {needle:?} in\n{b}");
        }
        assert!(!b.contains("atomic_"), "{b}");
        let rc = AtomicCaps::ADD64 | AtomicCaps::FADD64 | AtomicCaps::CSWAP64;
        let b = device_block(&res, Ok((&attr, 6, 2, rc | AtomicCaps::FADD32)));
        for needle in [
            "#           atomic_add: 64 bit\n",
            "#          atomic_fadd: 32, 64 bit\n",
            "#         atomic_cswap: 64 bit\n",
            "#       device atomics: fadd32 add64 fadd64 cswap64\n",
        ] {
            assert!(b.contains(needle), "missing {needle:?} in\n{b}");
        }
        assert!(!b.contains("atomic_swap"), "{b}");
        let failed = device_block(&res, Err("boom".into()));
        assert!(failed.contains("< failed to open interface: boom >"));
    }
}
