//! Reads a capture with tshark and checks every iWARP connection in it.
//!
//! An iWARP connection is a TCP stream that starts with an MPA Request
//! (tshark's MPA dissector needs the handshake anyway); other streams in
//! the capture (the perftest bootstrap, anything else on the interface)
//! are counted and left alone. On the iWARP streams:
//!
//! * every TCP payload byte belongs to an MPA frame or an FPDU
//!   (`tcp.len > 0 && !iwarp_mpa`, minus segments reassembled into a later
//!   frame and TCP retransmissions, finds nothing);
//! * nothing is malformed (`_ws.malformed`), tshark's expert finds no error
//!   and no warning but the two it raises for every RFC 6581 frame, and no
//!   segment went missing from the capture;
//! * with CRC negotiated every FPDU has a "Good CRC32" and none a bad one;
//! * the MPA frames and the FPDU sequence follow [`super::rules`], and
//!   every connection closes within the capture (nothing lost at its end).

use super::rules::{opcode_name, READ_REQUEST};
use super::rules::{Conn, Fpdu, MpaFrame, Placement, ReadRequest, Tally, OPCODES};
use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// tshark 4.0 warns about these on every RFC 6581 (rev 2) frame, which it
/// does not know.
const REV2_WARNINGS: [&str; 2] = [
    "Res field is NOT set to zero as required by RFC 5044",
    "Rev field is NOT set to one as required by RFC 5044",
];

/// What pass 1 asks tshark for, one column each.
const FIELDS: [&str; 30] = [
    "frame.number",
    "tcp.stream",
    "tcp.srcport",
    "tcp.flags.syn",
    "tcp.flags.fin",
    "tcp.flags.reset",
    "tcp.options.mss_val",
    "tcp.options.timestamp.tsval",
    "iwarp_mpa.key.req",
    "iwarp_mpa.key.rep",
    "iwarp_mpa.rev",
    "iwarp_mpa.crc_flag",
    "iwarp_mpa.marker_flag",
    "iwarp_mpa.rej_flag",
    "iwarp_mpa.res",
    "iwarp_mpa.privatedata",
    "iwarp_mpa.ulpdulength",
    "iwarp_mpa.crc",
    "iwarp_ddp.tagged_flag",
    "iwarp_ddp.last_flag",
    "iwarp_rdma.opcode",
    "iwarp_ddp.qn",
    "iwarp_ddp.msn",
    "iwarp_ddp.mo",
    "iwarp_ddp.stag",
    "iwarp_ddp.tagged_offset",
    "iwarp_rdma.sinkstag",
    "iwarp_rdma.sinkto",
    "iwarp_rdma.rdmardsz",
    "iwarp_rdma.srcstag",
];

/// tshark set up as the iWARP notes (§3.2) found it must be: the MPA
/// heuristic runs before any port's dissector, and DDP payloads are not
/// taken for RPC-over-RDMA or SMB Direct. And TCP reassembles segments
/// captured out of order: a capture on two CPUs sometimes records a
/// segment before the one sent just ahead of it, and without this tshark
/// decodes the rest of that stream as garbage ("Malformed Packet").
fn tshark_reading(file: &Path) -> Command {
    let mut cmd = Command::new("tshark");
    cmd.args(["-o", "tcp.try_heuristic_first:TRUE"])
        .args(["-o", "tcp.reassemble_out_of_order:TRUE"])
        .args(["--disable-heuristic", "rpcrdma_iwarp"])
        .args(["--disable-heuristic", "smb_direct_iwarp"])
        .arg("-r")
        .arg(file)
        .stdin(Stdio::null());
    cmd
}

/// What tshark prints for `args`; a failing tshark fails the test.
pub(crate) fn read(file: &Path, args: &[&str]) -> String {
    let out = tshark_reading(file)
        .args(args)
        .output()
        .expect("run tshark");
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    if !out.status.success() {
        let err = String::from_utf8_lossy(&out.stderr);
        panic!("tshark {args:?} failed ({}):\n{err}", out.status);
    }
    text
}

/// tshark's version line, e.g. "TShark (Wireshark) 4.0.17 (...)".
pub(crate) fn tshark_version() -> Option<String> {
    let out = Command::new("tshark").arg("--version").output().ok()?;
    let text = String::from_utf8_lossy(&out.stdout);
    out.status
        .success()
        .then(|| text.lines().next().unwrap_or_default().to_string())
}

/// What a check found.
#[derive(Debug)]
pub(crate) struct Checked {
    pub(crate) summary: Summary,
    pub(crate) violations: Vec<String>,
}

impl Checked {
    /// tshark's columns stopped lining up in some frame: its MPA dissector
    /// lost its place in an FPDU stream (see `raw.rs`).
    pub(crate) fn tshark_lost_sync(&self) -> bool {
        self.violations.iter().any(|v| v.contains(" FPDUs but "))
    }

    /// Fails the test with the violations (at most 40) and the summary.
    pub(crate) fn assert_clean(&self, what: &str) {
        if self.violations.is_empty() {
            return;
        }
        let shown: Vec<&str> = self
            .violations
            .iter()
            .take(40)
            .map(String::as_str)
            .collect();
        panic!(
            "{what}: {} problems in the iWARP capture:\n  {}\n{}",
            self.violations.len(),
            shown.join("\n  "),
            self.summary
        );
    }
}

impl Checked {
    /// Fails unless the capture has messages of every opcode of `ops`,
    /// and messages of several segments of every opcode of `multi`.
    pub(crate) fn assert_seen(&self, ops: &[u8], multi: &[u8]) {
        let t = &self.summary.tally;
        for (list, counts, what) in [(ops, &t.messages, ""), (multi, &t.multi, "multi-segment ")] {
            for op in list {
                let name = opcode_name(*op);
                let n = counts[usize::from(*op)];
                assert!(n > 0, "no {what}{name} message:\n{}", self.summary);
            }
        }
    }
}

/// Counts for the release note.
#[derive(Debug, Default)]
pub(crate) struct Summary {
    pub(crate) tshark: String,
    pub(crate) conns: usize,
    /// TCP streams that were not iWARP (not checked).
    pub(crate) others: usize,
    pub(crate) tally: Tally,
    pub(crate) crc_good: usize,
    pub(crate) crc_bad: usize,
}

impl fmt::Display for Summary {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let t = &self.tally;
        let modes: Vec<String> = t.modes.iter().map(|(m, n)| format!("{n} {m}")).collect();
        writeln!(f, "iWARP wire check with {}", self.tshark)?;
        writeln!(
            f,
            "  connections: {} ({}); other TCP streams not checked: {}",
            self.conns,
            modes.join("; "),
            self.others
        )?;
        let mss = t.min_emss.map_or("unknown".into(), |m| m.to_string());
        writeln!(
            f,
            "  FPDUs: {}, largest {} bytes on the wire (smallest effective MSS {mss})",
            t.fpdus, t.max_fpdu
        )?;
        writeln!(
            f,
            "  CRC32c: {} good, {} bad, of {} FPDUs with CRC",
            self.crc_good, self.crc_bad, t.crc_fpdus
        )?;
        for op in 0..OPCODES {
            if t.segments[op] == 0 {
                continue;
            }
            writeln!(
                f,
                "  {:<14} {:>7} segments {:>6} messages ({} of several segments), {} payload bytes",
                opcode_name(op as u8),
                t.segments[op],
                t.messages[op],
                t.multi[op],
                t.bytes[op]
            )?;
        }
        Ok(())
    }
}

/// The comma-separated occurrences of one field in one frame.
fn values(col: &str) -> Vec<&str> {
    if col.is_empty() {
        Vec::new()
    } else {
        col.split(',').collect()
    }
}

/// A number as tshark prints it: decimal, or hex with `0x`.
fn num(s: &str) -> Option<u64> {
    match s.strip_prefix("0x") {
        Some(hex) => u64::from_str_radix(hex, 16).ok(),
        None => s.parse().ok(),
    }
}

fn unhex(s: &str) -> Vec<u8> {
    (0..s.len() / 2)
        .filter_map(|i| u8::from_str_radix(s.get(2 * i..2 * i + 2)?, 16).ok())
        .collect()
}

/// One line of pass 1.
struct Row<'a> {
    cols: Vec<&'a str>,
}

impl<'a> Row<'a> {
    fn col(&self, name: &str) -> &'a str {
        let i = FIELDS
            .iter()
            .position(|f| *f == name)
            .expect("a known field");
        self.cols.get(i).copied().unwrap_or_default()
    }

    fn num(&self, name: &str) -> u64 {
        num(self.col(name).split(',').next().unwrap_or_default()).unwrap_or(0)
    }

    fn mpa_frame(&self) -> MpaFrame {
        MpaFrame {
            frame: self.num("frame.number"),
            rev: self.num("iwarp_mpa.rev") as u8,
            crc: self.num("iwarp_mpa.crc_flag") == 1,
            markers: self.num("iwarp_mpa.marker_flag") == 1,
            reject: self.num("iwarp_mpa.rej_flag") == 1,
            enhanced: self.num("iwarp_mpa.res") & 0x10 != 0,
            private_data: unhex(self.col("iwarp_mpa.privatedata")),
        }
    }

    /// The FPDUs of this frame, in order; an error where tshark's columns
    /// do not line up (a DDP header it could not decode).
    fn fpdus(&self) -> Result<Vec<Fpdu>, String> {
        let v = |name: &str| -> Vec<Option<u64>> {
            values(self.col(name)).into_iter().map(num).collect()
        };
        let frame = self.num("frame.number");
        let lens = v("iwarp_mpa.ulpdulength");
        let (tagged, last, ops) = (
            v("iwarp_ddp.tagged_flag"),
            v("iwarp_ddp.last_flag"),
            v("iwarp_rdma.opcode"),
        );
        let (qn, msn, mo) = (v("iwarp_ddp.qn"), v("iwarp_ddp.msn"), v("iwarp_ddp.mo"));
        let (stag, to) = (v("iwarp_ddp.stag"), v("iwarp_ddp.tagged_offset"));
        let rr: Vec<Vec<Option<u64>>> = [
            "iwarp_rdma.sinkstag",
            "iwarp_rdma.sinkto",
            "iwarp_rdma.rdmardsz",
            "iwarp_rdma.srcstag",
        ]
        .iter()
        .map(|f| v(f))
        .collect();
        let crcs = v("iwarp_mpa.crc");
        let n = lens.len();
        if [tagged.len(), last.len(), ops.len()] != [n; 3] {
            return Err(format!(
                "frame {frame}: {n} FPDUs but {} DDP headers and {} opcodes",
                tagged.len(),
                ops.len()
            ));
        }
        let (mut ut, mut tg, mut rd) = (0, 0, 0);
        let mut out = Vec::with_capacity(n);
        for i in 0..n {
            let missing = || format!("frame {frame}: FPDU {i} lacks DDP fields");
            let opcode = ops[i].ok_or_else(missing)? as u8;
            let placement = if tagged[i] == Some(1) {
                tg += 1;
                Placement::Tagged {
                    stag: stag.get(tg - 1).copied().flatten().ok_or_else(missing)? as u32,
                    to: to.get(tg - 1).copied().flatten().ok_or_else(missing)?,
                }
            } else {
                ut += 1;
                let at = |l: &Vec<Option<u64>>| l.get(ut - 1).copied().flatten();
                let read = if opcode == READ_REQUEST {
                    rd += 1;
                    let f: Option<Vec<u64>> = rr
                        .iter()
                        .map(|l| l.get(rd - 1).copied().flatten())
                        .collect();
                    f.map(|f| ReadRequest {
                        sink_stag: f[0] as u32,
                        sink_to: f[1],
                        size: f[2] as u32,
                        src_stag: f[3] as u32,
                    })
                } else {
                    None
                };
                Placement::Untagged {
                    qn: at(&qn).ok_or_else(missing)? as u32,
                    msn: at(&msn).ok_or_else(missing)? as u32,
                    mo: at(&mo).ok_or_else(missing)? as u32,
                    read,
                }
            };
            out.push(Fpdu {
                frame,
                ulpdu_len: lens[i].ok_or_else(missing)? as u32,
                last: last[i] == Some(1),
                opcode,
                placement,
                unchecked_crc: crcs.get(i).copied().flatten().map(|c| c as u32),
            });
        }
        Ok(out)
    }
}

/// The iWARP connections of a capture, after pass 1.
struct Streams {
    conns: BTreeMap<u32, (u16, Conn)>,
    others: usize,
    violations: Vec<String>,
}

/// Pass 1: MPA frames and FPDUs, in frame order, through the rules.
fn sequences(file: &Path, terminate_ok: bool, tally: &mut Tally) -> Streams {
    let filter = "iwarp_mpa || tcp.flags.syn == 1 || tcp.flags.fin == 1 || tcp.flags.reset == 1";
    let mut args = vec!["-Y", filter, "-T", "fields"];
    args.extend([
        "-E",
        "separator=/t",
        "-E",
        "occurrence=a",
        "-E",
        "aggregator=,",
    ]);
    for f in FIELDS {
        args.extend(["-e", f]);
    }
    let text = read(file, &args);
    let mut syns: BTreeMap<u32, Vec<(u64, bool)>> = BTreeMap::new();
    let mut closed = BTreeSet::new();
    let mut s = Streams {
        conns: BTreeMap::new(),
        others: 0,
        violations: Vec::new(),
    };
    for line in text.lines() {
        let row = Row {
            cols: line.split('\t').collect(),
        };
        let stream = row.num("tcp.stream") as u32;
        let port = row.num("tcp.srcport") as u16;
        if row.num("tcp.flags.syn") == 1 {
            let ts = !row.col("tcp.options.timestamp.tsval").is_empty();
            syns.entry(stream)
                .or_default()
                .push((row.num("tcp.options.mss_val"), ts));
            continue;
        }
        if row.num("tcp.flags.fin") == 1 || row.num("tcp.flags.reset") == 1 {
            closed.insert(stream);
        }
        let (req, rep) = (
            !row.col("iwarp_mpa.key.req").is_empty(),
            !row.col("iwarp_mpa.key.rep").is_empty(),
        );
        if req && !s.conns.contains_key(&stream) {
            let emss = effective_mss(syns.get(&stream).map(Vec::as_slice).unwrap_or(&[]));
            let mut conn = Conn::new(stream, row.mpa_frame(), emss);
            if terminate_ok {
                conn.allow_terminate();
            }
            s.conns.insert(stream, (port, conn));
        } else if req || rep {
            match s.conns.get_mut(&stream) {
                Some((init, conn)) => conn.mpa(port == *init, rep, row.mpa_frame()),
                None => s.violations.push(format!(
                    "stream {stream} frame {}: an MPA Reply without a Request",
                    row.num("frame.number")
                )),
            }
        }
        let Some((init, conn)) = s.conns.get_mut(&stream) else {
            continue;
        };
        match row.fpdus() {
            Ok(fpdus) => {
                for f in &fpdus {
                    conn.fpdu(port == *init, f, tally);
                }
            }
            Err(e) => s.violations.push(e),
        }
    }
    s.others = syns.keys().filter(|k| !s.conns.contains_key(k)).count();
    for (stream, (_, conn)) in s.conns.iter_mut() {
        if !closed.contains(stream) {
            s.violations.push(format!(
                "connection {stream}: the capture ends before it closes (packets missing at the end?)"
            ));
        }
        conn.finish(tally);
        s.violations.extend_from_slice(conn.errors());
    }
    s
}

/// The largest segment payload both SYNs allow, less the timestamp
/// option every segment then carries.
fn effective_mss(syns: &[(u64, bool)]) -> Option<u32> {
    let mss = syns.iter().map(|s| s.0).filter(|m| *m > 0).min()? as u32;
    let ts = !syns.is_empty() && syns.iter().all(|s| s.1);
    Some(if ts { mss - 12 } else { mss })
}

/// The rows of tshark's expert summary (`-z expert`) that are problems:
/// errors, and iWARP warnings but the two of rev 2. TCP's warnings are
/// not (a full window is no fault; a segment the capture missed leaves
/// bytes outside FPDUs or a gap in the sequences, found elsewhere).
fn expert_problems(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut errors = false;
    for line in text.lines() {
        let t: Vec<&str> = line.split_whitespace().collect();
        if let Some(first) = t.first() {
            if line.ends_with(')') && t.len() == 2 {
                errors = *first == "Errors";
                continue;
            }
            if t.len() < 4 || first.parse::<u64>().is_err() {
                continue;
            }
        } else {
            continue;
        }
        let (proto, summary) = (t[2], t[3..].join(" "));
        let iwarp_ok = !proto.starts_with("IWARP") || REV2_WARNINGS.contains(&summary.as_str());
        if errors || !iwarp_ok {
            out.push(format!("tshark expert: {}", line.trim()));
        }
    }
    out
}

/// Checks every iWARP connection in the capture `file`; Terminate
/// messages are problems unless `terminate_ok`.
pub(crate) fn check_capture(file: &Path, terminate_ok: bool) -> Checked {
    let mut summary = Summary {
        tshark: tshark_version().unwrap_or_default(),
        ..Summary::default()
    };
    let streams = sequences(file, terminate_ok, &mut summary.tally);
    summary.conns = streams.conns.len();
    summary.others = streams.others;
    let mut violations = streams.violations;
    if streams.conns.is_empty() {
        violations.push("no iWARP connection in the capture".into());
        return Checked {
            summary,
            violations,
        };
    }
    let ids: Vec<String> = streams.conns.keys().map(u32::to_string).collect();
    let ours = format!("tcp.stream in {{{}}}", ids.join(", "));

    // Segments reassembled into a later frame are claimed there; TCP
    // retransmissions repeat bytes claimed before. So do the kernel's
    // probes after a zero window, which tshark calls out of order (they
    // come on a busy machine, when a receiver reads slowly).
    let unclaimed = format!(
        "{ours} && tcp.len > 0 && !iwarp_mpa && !tcp.reassembled_in \
         && !tcp.analysis.retransmission && !tcp.analysis.out_of_order"
    );
    let malformed = format!("{ours} && _ws.malformed");
    let expert = format!("expert,warn,{ours}");
    let with_fpdus = format!("{ours} && iwarp_mpa.fpdu");
    let fields = "-T fields -e frame.number -e tcp.stream -e tcp.len";
    let passes: [Vec<&str>; 4] = [
        ["-2", "-Y", &unclaimed]
            .into_iter()
            .chain(fields.split(' '))
            .collect(),
        vec!["-Y", &malformed],
        vec!["-q", "-z", &expert],
        vec!["-Y", &with_fpdus, "-V", "-O", "iwarp_mpa"],
    ];
    // Each pass reads the whole capture: run them side by side.
    let [unclaimed, malformed, expert, detail] = std::thread::scope(|s| {
        let running = passes.map(|args| s.spawn(move || read(file, &args)));
        running.map(|t| t.join().unwrap_or_else(|e| std::panic::resume_unwind(e)))
    });
    for l in unclaimed.lines() {
        let why = format!("payload outside MPA frames and FPDUs (frame, stream, bytes): {l}");
        violations.push(why);
    }
    violations.extend(malformed.lines().map(|l| format!("malformed: {l}")));
    violations.extend(expert_problems(&expert));
    summary.crc_good = detail.matches("(Good CRC32)").count();
    summary.crc_bad = detail.matches("Bad CRC32").count();
    for l in detail.lines().filter(|l| l.contains("Bad CRC32")).take(10) {
        violations.push(format!("CRC: {}", l.trim()));
    }
    if summary.crc_good != summary.tally.crc_fpdus {
        violations.push(format!(
            "{} FPDUs with a good CRC, {} with CRC negotiated",
            summary.crc_good, summary.tally.crc_fpdus
        ));
    }
    Checked {
        summary,
        violations,
    }
}

/// Checks the capture `attempt(n)` makes (it runs the traffic; `None`:
/// no capture, the test skips), up to `tries` times: a capture is made
/// again only when tshark lost its place in an FPDU stream while the raw
/// bytes frame correctly, and fails at once when they do not.
pub(crate) fn check_with_retries(
    tries: u32,
    mut attempt: impl FnMut(u32) -> Option<PathBuf>,
) -> Option<Checked> {
    let mut n = 1;
    loop {
        let file = attempt(n)?;
        let checked = check_capture(&file, false);
        if checked.violations.is_empty() || !checked.tshark_lost_sync() || n >= tries {
            return Some(checked);
        }
        match super::raw::raw_framing(&file) {
            Ok(fpdus) => println!(
                "capture {n}: tshark lost its place in an FPDU stream (a TCP segment \
                 ending inside an FPDU header); the raw bytes frame correctly \
                 ({fpdus} FPDUs); capturing again"
            ),
            Err(e) => panic!(
                "capture {n}: FPDU framing broken in the raw bytes: {e}\n{}",
                checked.summary
            ),
        }
        n += 1;
    }
}
