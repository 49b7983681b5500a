//! rucx-to-rucx iWARP traffic, captured on loopback and read back by
//! tshark's MPA and DDP/RDMAP dissectors as an independent conformance
//! oracle.
//!
//! `rc_iwarp_traffic_decodes_as_well_formed_iwarp` captures `lo` with
//! tshark while `rucx-perftest` servers and clients (`RUCX_TLS=rc_iwarp`)
//! run Sends (small eager, 64 KiB eager and rendezvous, eager with
//! segments capped to an Ethernet MSS), RDMA WRITEs (`ucp_put_bw`) and
//! RDMA READs (`ucp_get`, and the rendezvous), one run with MPA rev 1 and
//! no CRC, one with 16 KiB socket buffers (partial writes), then checks
//! the capture (see `iwarp_capture/check.rs`) and prints a summary
//! (`--nocapture` shows it). It all happens in a network
//! namespace of its own, so the capture holds nothing else that runs on
//! the machine meanwhile. Without tshark, or without root and `ip` for the
//! namespace, it prints `skipped: <why>`, or fails when
//! `RUCX_REQUIRE_ALL=1`.
//!
//! The other tests check the checker: made-up sequences that break one
//! rule each must be caught.

mod common;
mod hosts;
mod iwarp_capture;

use common::skip_or_fail;
use hosts::netns::Netns;
use hosts::procs::Scratch;
use iwarp_capture::capture::Capture;
use iwarp_capture::check::{check_with_retries, tshark_version};
use iwarp_capture::perftest::{PerfRun, CAPTURED_RUNS};
use iwarp_capture::rules::{self, Conn, Fpdu, MpaFrame, Placement, ReadRequest, Tally};

/// On loopback an FPDU carries up to ~64 KiB, so besides
/// [`CAPTURED_RUNS`] one run caps the TCP segment at an Ethernet MSS, for
/// Sends of many segments.
const SMALL_MSS: PerfRun<'static> = PerfRun::new(
    "tag_bw_eager_mss1448",
    "-t tag_bw -s 65536 -n 20 -w 2",
    &[("RUCX_RNDV_THRESH", "inf"), ("RUCX_IWARP_MSS", "1448")],
);

/// And one with 16 KiB kernel buffers, so that most writes are partial:
/// FPDUs (with CRC) must come out whole however the socket splits them.
const SMALL_BUFFERS: PerfRun<'static> = PerfRun::new(
    "tag_bw_rndv_small_buffers",
    "-t tag_bw -s 1048576 -n 10 -w 4",
    &[
        ("RUCX_IWARP_SNDBUF", "16k"),
        ("RUCX_IWARP_RCVBUF", "16k"),
        ("RUCX_IWARP_MPA_CRC", "y"),
    ],
);

#[test]
fn rc_iwarp_traffic_decodes_as_well_formed_iwarp() {
    if tshark_version().is_none() {
        return skip_or_fail("tshark not installed");
    }
    let dir = Scratch::new("iwarp-wire");
    let ns = match Netns::create("lo") {
        Ok(ns) => ns,
        Err(why) => return skip_or_fail(&format!("no network namespace for the capture: {why}")),
    };
    let lo = ns.host();
    let checked = check_with_retries(3, |n| {
        let name = format!("lo{n}");
        let capture = match Capture::start(&lo, "lo", "tcp", "127.0.0.1", &dir, &name) {
            Ok(c) => c,
            Err(why) => {
                skip_or_fail(&why);
                return None;
            }
        };
        for run in CAPTURED_RUNS.iter().chain([&SMALL_MSS, &SMALL_BUFFERS]) {
            run.run(&dir, "rc_iwarp", (&lo, "127.0.0.1"), &lo);
        }
        Some(capture.stop())
    });
    let Some(checked) = checked else {
        return;
    };
    println!("{}", checked.summary);
    checked.assert_clean("rucx-perftest over rc_iwarp on lo");

    use rules::{READ_REQUEST, READ_RESPONSE, SEND, WRITE};
    checked.assert_seen(
        &[SEND, WRITE, READ_REQUEST, READ_RESPONSE],
        &[SEND, WRITE, READ_RESPONSE],
    );
    let t = &checked.summary.tally;
    // Linux sets a loopback connection's segment size to 32768 at first
    // (half the first window) and raises it to 65483 as the window opens:
    // FPDUs must follow it up, not keep the size seen at setup.
    assert!(
        t.max_fpdu > 32768,
        "FPDUs never outgrew the segment size of a new connection:\n{}",
        checked.summary
    );
    let modes = |prefix: &str| t.modes.keys().any(|m| m.starts_with(prefix));
    assert!(
        modes("rev 2, CRC") && modes("rev 1, no CRC"),
        "expected rev 2 with CRC and rev 1 without:\n{}",
        checked.summary
    );
}

// The checker, on made-up connections.

const STREAM: u32 = 7;
/// A loopback-like MSS: 65495 less the timestamp option.
const EMSS: u32 = 65483;

/// RFC 6581's word: peer-to-peer (A), RTR by zero-length Write (C) or
/// Read (D), IRD = ORD = 4.
const OFFER: u32 = (1 << 31) | (4 << 16) | (1 << 15) | (1 << 14) | 4;
/// The Reply's: A, and the zero-length Write.
const CHOICE: u32 = (1 << 31) | (4 << 16) | (1 << 15) | 4;

fn mpa(frame: u64, word: u32) -> MpaFrame {
    MpaFrame {
        frame,
        rev: 2,
        crc: true,
        enhanced: true,
        private_data: word.to_be_bytes().to_vec(),
        ..MpaFrame::default()
    }
}

fn seg(opcode: u8, len: u32, last: bool, placement: Placement) -> Fpdu {
    let hdr = if matches!(placement, Placement::Tagged { .. }) {
        14
    } else {
        18
    };
    Fpdu {
        frame: 0,
        ulpdu_len: hdr + len,
        last,
        opcode,
        placement,
        unchecked_crc: None,
    }
}

fn send(msn: u32, mo: u32, len: u32, last: bool) -> Fpdu {
    let p = Placement::Untagged {
        qn: 0,
        msn,
        mo,
        read: None,
    };
    seg(rules::SEND, len, last, p)
}

fn tagged(opcode: u8, stag: u32, to: u64, len: u32, last: bool) -> Fpdu {
    seg(opcode, len, last, Placement::Tagged { stag, to })
}

fn read_request(msn: u32, sink_stag: u32, sink_to: u64, size: u32) -> Fpdu {
    let read = ReadRequest {
        sink_stag,
        sink_to,
        size,
        src_stag: 0x99,
    };
    let p = Placement::Untagged {
        qn: 1,
        msn,
        mo: 0,
        read: Some(read),
    };
    // The RDMAP header is 28 bytes; a Read Request has no payload.
    seg(rules::READ_REQUEST, 28, true, p)
}

/// A connection that is right: the RTR Write, a Send in two segments, a
/// second Send, a Write in three segments, a Read answered in two.
fn good() -> Vec<(bool, Fpdu)> {
    vec![
        (true, tagged(rules::WRITE, 1, 0, 0, true)),
        (true, send(1, 0, 1000, false)),
        (true, send(1, 1000, 24, true)),
        (true, send(2, 0, 8, true)),
        (true, tagged(rules::WRITE, 0x100, 0x5000, 1000, false)),
        (true, tagged(rules::WRITE, 0x100, 0x53e8, 1000, false)),
        (true, tagged(rules::WRITE, 0x100, 0x57d0, 10, true)),
        (true, read_request(1, 0x200, 0x9000, 1500)),
        (true, send(3, 0, 8, true)),
        (
            false,
            tagged(rules::READ_RESPONSE, 0x200, 0x9000, 1000, false),
        ),
        (
            false,
            tagged(rules::READ_RESPONSE, 0x200, 0x93e8, 500, true),
        ),
    ]
}

/// The problems the rules find in `fpdus` (frames numbered from 10).
fn problems(fpdus: Vec<(bool, Fpdu)>) -> Vec<String> {
    let mut conn = Conn::new(STREAM, mpa(4, OFFER), Some(EMSS));
    conn.mpa(false, true, mpa(5, CHOICE));
    let mut tally = Tally::default();
    for (i, (from_initiator, mut f)) in fpdus.into_iter().enumerate() {
        f.frame = 10 + i as u64;
        conn.fpdu(from_initiator, &f, &mut tally);
    }
    conn.finish(&mut tally);
    conn.errors().to_vec()
}

#[test]
fn the_rules_accept_a_good_connection() {
    assert_eq!(problems(good()), Vec::<String>::new());
}

/// `good()` with one change must give one problem that says `what`.
fn caught(change: impl FnOnce(&mut Vec<(bool, Fpdu)>), what: &str) {
    let mut fpdus = good();
    change(&mut fpdus);
    let found = problems(fpdus);
    assert!(
        found.iter().any(|p| p.contains(what)),
        "expected a problem with {what:?}, found {found:#?}"
    );
}

fn write(stag: u32, to: u64, len: u32, last: bool) -> Fpdu {
    tagged(rules::WRITE, stag, to, len, last)
}

fn response(stag: u32, to: u64, len: u32, last: bool) -> Fpdu {
    tagged(rules::READ_RESPONSE, stag, to, len, last)
}

/// A change to `good()`, and what the problem it makes says.
type Case = (fn(&mut Vec<(bool, Fpdu)>), &'static str);

const BROKEN: [Case; 14] = [
    (|f| f[3].1 = send(3, 0, 8, true), "expected MSN 2 MO 0"),
    (|f| f[2].1 = send(1, 999, 25, true), "next MO 1000"),
    (|f| f.swap(2, 3), "inside Send MSN 1"),
    (
        |f| f[5].1 = write(0x100, 0x53e9, 1000, false),
        "inside Write to STag 0x100",
    ),
    (
        |f| f[4].1 = write(0, 0x5000, 1000, false),
        "Write to STag 0",
    ),
    (
        |f| f[9].1 = response(0x201, 0x9000, 1000, false),
        "asked for STag 0x200",
    ),
    (
        |f| f[10].1 = response(0x200, 0x93e8, 400, true),
        "for a Read Request of 1500",
    ),
    (|f| f.truncate(9), "1 Read Requests unanswered"),
    (|f| f.truncate(10), "unfinished Read Response"),
    (
        |f| f.insert(0, (false, send(1, 0, 8, true))),
        "responder sends before",
    ),
    (|f| _ = f.remove(0), "not the zero-length RTR"),
    (|f| f[3].1 = send(2, 0, EMSS, true), "MSS 65483"),
    (|f| f[3].1 = send_on_queue(1), "Send on queue 1"),
    (
        |f| f.extend((2..7).map(|m| (true, read_request(m, 0x300 + m, 0, 8)))),
        "5 Read Requests open",
    ),
];

/// A Send of 8 bytes, MSN 2, on queue `qn`.
fn send_on_queue(qn: u32) -> Fpdu {
    let mut s = send(2, 0, 8, true);
    s.placement = Placement::Untagged {
        qn,
        msn: 2,
        mo: 0,
        read: None,
    };
    s
}

#[test]
fn the_rules_catch_broken_sequences() {
    for (change, what) in BROKEN {
        caught(change, what);
    }
}

#[test]
fn the_rules_check_the_mpa_exchange() {
    let mut conn = Conn::new(STREAM, mpa(4, OFFER), None);
    let mut reply = mpa(5, OFFER);
    reply.rev = 1;
    reply.markers = true;
    conn.mpa(false, true, reply);
    let e = conn.errors().join("\n");
    assert!(e.contains("asks for markers"), "{e}");
    assert!(e.contains("Reply rev 1 to a Request of rev 2"), "{e}");

    let mut conn = Conn::new(STREAM, mpa(4, OFFER), None);
    conn.fpdu(true, &send(1, 0, 8, true), &mut Tally::default());
    assert!(
        conn.errors()
            .iter()
            .any(|e| e.contains("before the MPA Reply")),
        "{:?}",
        conn.errors()
    );

    // Both RTR types at once, and without CRC a non-zero CRC field.
    let mut conn = Conn::new(STREAM, mpa(4, OFFER), None);
    conn.mpa(false, true, mpa(5, OFFER));
    assert!(
        conn.errors()[0].contains("picks RTR bits"),
        "{:?}",
        conn.errors()
    );
    let mut conn = Conn::new(
        STREAM,
        MpaFrame {
            rev: 1,
            ..MpaFrame::default()
        },
        None,
    );
    conn.mpa(
        false,
        true,
        MpaFrame {
            rev: 1,
            ..MpaFrame::default()
        },
    );
    let mut f = send(1, 0, 8, true);
    f.unchecked_crc = Some(0x1234);
    conn.fpdu(true, &f, &mut Tally::default());
    assert!(
        conn.errors()[0].contains("CRC field"),
        "{:?}",
        conn.errors()
    );
}
