//! The encoders checked by an independent decoder: a capture of two iWARP
//! connections built from them (MPA rev 2 without and with CRC, then
//! Sends, one of them in two segments, a three-segment RDMA Write, a Read
//! Request and its two-segment Response, a Send with Invalidate and a
//! Terminate with the offending headers) is written as a pcap file and
//! read back by tshark's MPA and DDP/RDMAP dissectors (Wireshark 4.0.17).
//! Every field is compared with what was encoded, every CRC must be good,
//! nothing malformed, and every TCP payload byte claimed by MPA.
//!
//! Wireshark picks the length of a Terminate's DDP header from the error
//! type (14 bytes for type 1) instead of the header's T bit, so the
//! Terminates here are ones for which both agree.
//!
//! Skipped (with a message) where tshark is not installed, unless
//! `RUCX_REQUIRE_ALL=1`.

mod pcap;

use std::path::{Path, PathBuf};
use std::process::Command;

use super::ddp::DdpHeader;
use super::fpdu::{encode_fpdu, fpdu_crc, mulpdu};
use super::mpa::{EnhancedWord, MpaFrame};
use super::rdmap::{Opcode, ReadRequest};
use super::term::{Layer, TermCause, Terminate};
use pcap::{Conn, Pcap};

/// One FPDU as tshark should decode it.
#[derive(Debug, Clone)]
struct Fpdu {
    ulpdu_len: usize,
    hdr: DdpHeader,
    /// The CRC in its trailer (0 without CRC).
    crc: u32,
}

/// A connection being written: FPDUs are collected, then sent as one TCP
/// segment; `packets` keeps what each segment carried.
struct Stream {
    conn: Conn,
    crc: bool,
    seg: Vec<u8>,
    pending: Vec<Fpdu>,
    /// (from the client, the FPDUs) per TCP segment after the handshake.
    packets: Vec<(bool, Vec<Fpdu>)>,
}

impl Stream {
    fn fpdu(&mut self, hdr: DdpHeader, body: &[u8]) {
        let (b, n) = hdr.to_bytes();
        assert!(n + body.len() <= mulpdu(1448));
        encode_fpdu(&mut self.seg, &[&b[..n], body], self.crc);
        let crc = if self.crc {
            fpdu_crc(&[&b[..n], body])
        } else {
            0
        };
        self.pending.push(Fpdu {
            ulpdu_len: n + body.len(),
            hdr,
            crc,
        });
    }

    fn flush(&mut self, pcap: &mut Pcap, from_client: bool) {
        self.conn
            .send(pcap, from_client, &std::mem::take(&mut self.seg));
        self.packets
            .push((from_client, std::mem::take(&mut self.pending)));
    }
}

fn untagged(opcode: Opcode, msn: u32, inv_stag: u32) -> DdpHeader {
    let qn = opcode.qn().expect("untagged opcode");
    DdpHeader::Untagged {
        last: true,
        opcode,
        inv_stag,
        qn,
        msn,
        mo: 0,
    }
}

/// The Read Request both connections carry.
const READ: ReadRequest = ReadRequest {
    sink_stag: 0x11,
    sink_to: 0x2000,
    size: 64,
    src_stag: 0x22,
    src_to: 0x3000,
};

/// The MPA frames of a connection: siw's default request (rev 2, IRD =
/// ORD = 16), and a reply with 4 more bytes of private data.
fn handshake(crc: bool) -> (MpaFrame, MpaFrame) {
    let req = MpaFrame {
        reply: false,
        markers: false,
        crc,
        reject: false,
        rev: 2,
        enhanced: Some(EnhancedWord {
            ird: 16,
            ord: 16,
            ..Default::default()
        }),
        private_data: Vec::new(),
    };
    let rep = MpaFrame {
        reply: true,
        private_data: b"rucx".to_vec(),
        ..req.clone()
    };
    (req, rep)
}

/// Writes connection `n` into `pcap`, ending with `terminate` from the
/// server.
fn connection(pcap: &mut Pcap, n: u8, crc: bool, terminate: &Terminate) -> Stream {
    let mut conn = Conn::open(pcap, n);
    let (req, rep) = handshake(crc);
    conn.send(pcap, true, &req.encode());
    conn.send(pcap, false, &rep.encode());
    let mut s = Stream {
        conn,
        crc,
        seg: Vec::new(),
        pending: Vec::new(),
        packets: Vec::new(),
    };

    s.fpdu(untagged(Opcode::Send, 1, 0), b"hello, iwarp");
    s.flush(pcap, true);
    // An RDMA Write of 100 bytes in three segments, the first two in one
    // TCP segment.
    let data: Vec<u8> = (0..100u8).collect();
    for (i, part) in data.chunks(40).enumerate() {
        let to = 0x1_0000_1000 + 40 * i as u64;
        s.fpdu(
            DdpHeader::Tagged {
                last: i == 2,
                opcode: Opcode::Write,
                stag: 0x1234_5678,
                to,
            },
            part,
        );
        if i >= 1 {
            s.flush(pcap, true);
        }
    }
    // A Read Request, answered in two segments.
    s.fpdu(untagged(Opcode::ReadRequest, 1, 0), &READ.encode());
    s.flush(pcap, true);
    let data: Vec<u8> = (0..READ.size as u8).map(|b| !b).collect();
    for (i, part) in data.chunks(32).enumerate() {
        let to = READ.sink_to + 32 * i as u64;
        let stag = READ.sink_stag;
        s.fpdu(
            DdpHeader::Tagged {
                last: i == 1,
                opcode: Opcode::ReadResponse,
                stag,
                to,
            },
            part,
        );
        s.flush(pcap, false);
    }
    // A Send with Invalidate and a Send with Solicited Event, together.
    s.fpdu(untagged(Opcode::SendInv, 2, 0xabcd), b"inv");
    s.fpdu(untagged(Opcode::SendSe, 3, 0), b"se!");
    s.flush(pcap, true);
    // A Send in two segments (MO 0 and 21).
    let halves: [&[u8]; 2] = [b"first half of a Send.", b"second half, offset 21"];
    let mut mo = 0;
    for (i, part) in halves.into_iter().enumerate() {
        let last = i == 1;
        s.fpdu(
            DdpHeader::Untagged {
                last,
                opcode: Opcode::Send,
                inv_stag: 0,
                qn: 0,
                msn: 4,
                mo,
            },
            part,
        );
        s.flush(pcap, true);
        mo += part.len() as u32;
    }
    // The server ends the connection.
    s.fpdu(Terminate::ddp_header(), &terminate.encode());
    s.flush(pcap, false);
    s
}

/// The DDP header of the Read Request above, as a Terminate echoes it.
fn read_request_header() -> Vec<u8> {
    let (b, n) = untagged(Opcode::ReadRequest, 1, 0).to_bytes();
    b[..n].to_vec()
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

/// Joins the values of one field over the FPDUs of a TCP segment the way
/// `tshark -T fields` does (FPDUs without the field add nothing).
fn join<T>(fpdus: &[Fpdu], f: impl Fn(&Fpdu) -> Option<T>) -> String
where
    T: std::fmt::Display,
{
    let v: Vec<String> = fpdus
        .iter()
        .filter_map(|x| f(x).map(|v| v.to_string()))
        .collect();
    v.join(",")
}

fn tshark(file: &Path, args: &[&str]) -> String {
    let out = Command::new("tshark")
        .args(["-o", "tcp.try_heuristic_first:TRUE"])
        .args(["--disable-heuristic", "rpcrdma_iwarp"])
        .args(["--disable-heuristic", "smb_direct_iwarp"])
        .arg("-r")
        .arg(file)
        .args(args)
        .output()
        .expect("run tshark");
    assert!(
        out.status.success(),
        "tshark failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).expect("tshark output is UTF-8")
}

fn tshark_installed() -> bool {
    match Command::new("tshark").arg("--version").output() {
        Ok(o) => o.status.success(),
        Err(_) => false,
    }
}

struct TempFile(PathBuf);

impl Drop for TempFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

#[test]
fn tshark_decodes_the_encoders() {
    if !tshark_installed() {
        if std::env::var("RUCX_REQUIRE_ALL").as_deref() == Ok("1") {
            panic!("tshark not installed and RUCX_REQUIRE_ALL=1");
        }
        eprintln!("skipped: tshark not installed");
        return;
    }
    // Without CRC, the Terminate siw sends for a Read Request beyond IRD;
    // with CRC, the one for a Write to an unknown STag.
    let read_ird = Terminate {
        cause: TermCause::RDMAP_CATASTROPHIC_STREAM,
        ddp_seg_len: Some(46),
        ddp_hdr: Some(read_request_header()),
        rdmap_hdr: Some(READ.encode().to_vec()),
    };
    let (write_hdr, wn) = DdpHeader::Tagged {
        last: true,
        opcode: Opcode::Write,
        stag: 0x0bad_0001,
        to: 0x1000,
    }
    .to_bytes();
    let bad_write = Terminate {
        cause: TermCause::DDP_TAGGED_INVALID_STAG,
        ddp_seg_len: Some(24),
        ddp_hdr: Some(write_hdr[..wn].to_vec()),
        rdmap_hdr: None,
    };
    let mut pcap = Pcap::new();
    let plain = connection(&mut pcap, 1, false, &read_ird);
    let with_crc = connection(&mut pcap, 2, true, &bad_write);
    let file =
        TempFile(std::env::temp_dir().join(format!("rucx-iwarp-{}.pcap", std::process::id())));
    std::fs::write(&file.0, &pcap.bytes).expect("write pcap");

    let v = tshark(&file.0, &["-V"]);
    let fpdus = |s: &Stream| s.packets.iter().map(|p| p.1.len()).sum::<usize>();
    assert_eq!(v.matches("(Good CRC32)").count(), fpdus(&with_crc));
    assert!(!v.contains("Bad CRC32"));
    for s in [&plain, &with_crc] {
        check_mpa(&file.0, s);
        check_fields(&file.0, s);
        check_crcs(&file.0, s);
    }
    check_terminate(&file.0, &plain, &read_ird);
    check_terminate(&file.0, &with_crc, &bad_write);
    let malformed = tshark(&file.0, &["-Y", "_ws.malformed"]);
    assert!(
        malformed.trim().is_empty(),
        "malformed packets:\n{malformed}"
    );
    let unclaimed = tshark(&file.0, &["-Y", "tcp.len > 0 && !iwarp_mpa"]);
    assert!(
        unclaimed.trim().is_empty(),
        "TCP payload not decoded as MPA:\n{unclaimed}"
    );
}

/// `tshark -T fields` for the packets of stream `s` matching `filter`.
fn fields(file: &Path, s: &Stream, filter: &str, fields: &[&str]) -> Vec<String> {
    let mut args = vec![
        "-Y".to_string(),
        format!("tcp.port == {} && ({filter})", s.conn.client.port),
        "-T".to_string(),
        "fields".to_string(),
    ];
    for f in fields {
        args.push("-e".to_string());
        args.push(f.to_string());
    }
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    tshark(file, &args).lines().map(str::to_string).collect()
}

fn check_mpa(file: &Path, s: &Stream) {
    let got = fields(
        file,
        s,
        "iwarp_mpa.key.req || iwarp_mpa.key.rep",
        &[
            "tcp.srcport",
            "iwarp_mpa.key.req",
            "iwarp_mpa.key.rep",
            "iwarp_mpa.rev",
            "iwarp_mpa.marker_flag",
            "iwarp_mpa.crc_flag",
            "iwarp_mpa.rej_flag",
            "iwarp_mpa.pdlength",
            "iwarp_mpa.privatedata",
        ],
    );
    let (req, rep) = handshake(s.crc);
    let want: Vec<String> = [(s.conn.client.port, req), (s.conn.server.port, rep)]
        .into_iter()
        .map(|(port, f)| {
            let b = f.encode();
            let (key_req, key_rep) = if f.reply {
                (String::new(), hex(&b[..16]))
            } else {
                (hex(&b[..16]), String::new())
            };
            let flag = |x: bool| u8::from(x);
            format!(
                "{port}\t{key_req}\t{key_rep}\t{}\t{}\t{}\t{}\t{}\t{}",
                f.rev,
                flag(f.markers),
                flag(f.crc),
                flag(f.reject),
                b.len() - 20,
                hex(&b[20..]),
            )
        })
        .collect();
    assert_eq!(got, want, "MPA frames as tshark reads them");
}

fn check_fields(file: &Path, s: &Stream) {
    let got = fields(
        file,
        s,
        "iwarp_ddp_rdmap",
        &[
            "tcp.srcport",
            "iwarp_mpa.ulpdulength",
            "iwarp_rdma.opcode",
            "iwarp_ddp.qn",
            "iwarp_ddp.msn",
            "iwarp_ddp.mo",
            "iwarp_ddp.stag",
            "iwarp_ddp.tagged_offset",
            "iwarp_ddp.last_flag",
            "iwarp_rdma.inval_stag",
            "iwarp_rdma.sinkstag",
            "iwarp_rdma.sinkto",
            "iwarp_rdma.rdmardsz",
            "iwarp_rdma.srcstag",
            "iwarp_rdma.srcto",
        ],
    );
    let want: Vec<String> = s
        .packets
        .iter()
        .map(|(from_client, f)| {
            let port = if *from_client {
                s.conn.client.port
            } else {
                s.conn.server.port
            };
            let untagged = |x: &Fpdu| match x.hdr {
                DdpHeader::Untagged {
                    qn,
                    msn,
                    mo,
                    inv_stag,
                    ..
                } => Some((qn, msn, mo, inv_stag)),
                DdpHeader::Tagged { .. } => None,
            };
            let tagged = |x: &Fpdu| match x.hdr {
                DdpHeader::Tagged { stag, to, .. } => Some((stag, to)),
                DdpHeader::Untagged { .. } => None,
            };
            let read = |x: &Fpdu| (x.hdr.opcode() == Opcode::ReadRequest).then_some(READ);
            [
                port.to_string(),
                join(f, |x| Some(x.ulpdu_len)),
                join(f, |x| Some(format!("{:#04x}", x.hdr.opcode() as u8))),
                join(f, |x| untagged(x).map(|u| u.0)),
                join(f, |x| untagged(x).map(|u| u.1)),
                join(f, |x| untagged(x).map(|u| u.2)),
                join(f, |x| tagged(x).map(|t| format!("{:#010x}", t.0))),
                join(f, |x| tagged(x).map(|t| format!("{:#018x}", t.1))),
                join(f, |x| Some(u8::from(x.hdr.last()))),
                join(f, |x| {
                    untagged(x)
                        .filter(|_| x.hdr.opcode().invalidates())
                        .map(|u| u.3)
                }),
                join(f, |x| read(x).map(|r| format!("{:#010x}", r.sink_stag))),
                join(f, |x| read(x).map(|r| format!("{:#018x}", r.sink_to))),
                join(f, |x| read(x).map(|r| r.size)),
                join(f, |x| read(x).map(|r| format!("{:#010x}", r.src_stag))),
                join(f, |x| read(x).map(|r| format!("{:#018x}", r.src_to))),
            ]
            .join("\t")
        })
        .collect();
    assert_eq!(got, want, "DDP/RDMAP fields as tshark reads them");
}

/// Every FPDU's CRC field: 0 without CRC, else our CRC. tshark shows the
/// trailer's four bytes in wire order, so the CRC sent least significant
/// byte first reads byte-swapped; `-V` says whether it is good.
fn check_crcs(file: &Path, s: &Stream) {
    let field = if s.crc {
        "iwarp_mpa.crc_check"
    } else {
        "iwarp_mpa.crc"
    };
    let got = fields(file, s, "iwarp_ddp_rdmap", &[field]);
    let want: Vec<String> = s
        .packets
        .iter()
        .map(|(_, f)| join(f, |x| Some(format!("0x{}", hex(&x.crc.to_le_bytes())))))
        .collect();
    assert_eq!(got, want, "{field}");
}

fn check_terminate(file: &Path, s: &Stream, t: &Terminate) {
    let got = fields(
        file,
        s,
        "iwarp_rdma.term_layer",
        &[
            "iwarp_rdma.term_layer",
            "iwarp_rdma.term_etype_rdma",
            "iwarp_rdma.term_etype_ddp",
            "iwarp_rdma.term_errcode_rdma",
            "iwarp_rdma.term_errcode_ddp_tagged",
            "iwarp_rdma.term_hdrct_m",
            "iwarp_rdma.hdrct_d",
            "iwarp_rdma.hdrct_r",
            "iwarp_rdma.term_ddp_seg_len",
            "iwarp_rdma.term_ddp_h",
            "iwarp_rdma.term_rdma_h",
        ],
    );
    let c = t.cause;
    let byte = |v: u8| format!("{v:#04x}");
    let (rdma, ddp) = match c.layer {
        Layer::Rdmap => (
            (byte(c.etype), byte(c.code)),
            (String::new(), String::new()),
        ),
        Layer::Ddp => (
            (String::new(), String::new()),
            (byte(c.etype), byte(c.code)),
        ),
        Layer::Llp => unreachable!("not in this capture"),
    };
    let want = [
        byte(c.layer as u8),
        rdma.0,
        ddp.0,
        rdma.1,
        ddp.1,
        u8::from(t.ddp_seg_len.is_some()).to_string(),
        u8::from(t.ddp_hdr.is_some()).to_string(),
        u8::from(t.rdmap_hdr.is_some()).to_string(),
        format!("{:04x}", t.ddp_seg_len.unwrap_or(0)),
        hex(t.ddp_hdr.as_deref().unwrap_or_default()),
        hex(t.rdmap_hdr.as_deref().unwrap_or_default()),
    ]
    .join("\t");
    assert_eq!(got, [want], "Terminate as tshark reads it");
}
