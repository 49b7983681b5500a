//! The rules one iWARP connection must follow, applied to what tshark
//! decoded of it: the MPA Request and Reply, then every FPDU in the order
//! it went on the wire. No tshark here, so the rules themselves are tested
//! on made-up sequences (`iwarp_wire.rs`).
//!
//! What is checked, per connection and direction:
//!
//! * MPA: one Request from the initiator, one Reply from the responder,
//!   same revision, no markers, not rejected; no FPDU before the Reply;
//!   the responder sends no FPDU before the initiator's first (RFC 5044
//!   §7.1.2); in peer-to-peer mode (RFC 6581) the Reply echoes A and picks
//!   one ready-to-receive type the Request offered, and the initiator's
//!   first FPDU is that message.
//! * Untagged messages (Sends, Read Requests, Terminate): the queue number
//!   fits the opcode; per queue the MSN starts at 1 and grows by one per
//!   message; the MO starts at 0 and grows by each segment's payload;
//!   segments of two messages of one queue do not interleave.
//! * Tagged messages (RDMA Write, Read Response): the tagged offset grows
//!   by each segment's payload; tagged messages do not interleave; no
//!   STag 0. A Read Response answers the oldest open Read Request of the
//!   other direction: its sink STag, from its sink offset, exactly its
//!   size. Open Read Requests never exceed the negotiated ORD/IRD.
//! * Opcodes are those rucx sends: Send, RDMA Write, Read Request and
//!   Read Response; Terminate only where the test expects one.
//! * Every FPDU fits one TCP segment (of the connection's effective MSS)
//!   and, without CRC, carries a zero CRC field.
//! * At the end no message is half sent and every Read Request has its
//!   answer.

use std::collections::{BTreeMap, VecDeque};
use std::fmt::Write as _;

/// RDMAP opcodes (RFC 5040 Appendix A).
pub(crate) const WRITE: u8 = 0;
pub(crate) const READ_REQUEST: u8 = 1;
pub(crate) const READ_RESPONSE: u8 = 2;
pub(crate) const SEND: u8 = 3;
pub(crate) const TERMINATE: u8 = 7;
/// How many opcodes RFC 5040 defines (0 to 7).
pub(crate) const OPCODES: usize = 8;

/// The name tshark gives an opcode.
pub(crate) fn opcode_name(op: u8) -> &'static str {
    match op {
        WRITE => "Write",
        READ_REQUEST => "Read Request",
        READ_RESPONSE => "Read Response",
        SEND => "Send",
        4 => "Send with Invalidate",
        5 => "Send with SE",
        6 => "Send with SE and Invalidate",
        TERMINATE => "Terminate",
        _ => "unknown opcode",
    }
}

/// The queue an untagged opcode belongs to (RFC 5040 §5.1), `None` for
/// the tagged ones.
fn queue_of(op: u8) -> Option<u32> {
    match op {
        WRITE | READ_RESPONSE => None,
        READ_REQUEST => Some(1),
        TERMINATE => Some(2),
        _ => Some(0),
    }
}

/// DDP header sizes (RFC 5041 §4.2, §4.3) and the Read Request's RDMAP
/// header (RFC 5040 §4.4).
const TAGGED_HDR: u32 = 14;
const UNTAGGED_HDR: u32 = 18;
const READ_REQUEST_HDR: u32 = 28;

/// RFC 6581's IRD/ORD word: peer-to-peer mode and the ready-to-receive
/// messages a side accepts (zero-length Send, Write, Read).
const P2P_A: u32 = 1 << 31;
const RTR_SEND: u32 = 1 << 30;
const RTR_WRITE: u32 = 1 << 15;
const RTR_READ: u32 = 1 << 14;

/// An MPA Request or Reply as tshark decoded it.
#[derive(Debug, Clone, Default)]
pub(crate) struct MpaFrame {
    pub(crate) frame: u64,
    pub(crate) rev: u8,
    pub(crate) crc: bool,
    pub(crate) markers: bool,
    pub(crate) reject: bool,
    /// RFC 6581's S bit (tshark calls it part of the reserved field).
    pub(crate) enhanced: bool,
    pub(crate) private_data: Vec<u8>,
}

impl MpaFrame {
    /// RFC 6581's IRD/ORD word, where the frame has one.
    fn word(&self) -> Option<u32> {
        if self.rev != 2 || !self.enhanced {
            return None;
        }
        let b = self.private_data.get(..4)?;
        Some(u32::from_be_bytes([b[0], b[1], b[2], b[3]]))
    }
}

/// The RDMAP part of a Read Request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct ReadRequest {
    pub(crate) sink_stag: u32,
    pub(crate) sink_to: u64,
    pub(crate) size: u32,
    pub(crate) src_stag: u32,
}

/// Where a DDP segment goes.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Placement {
    Tagged {
        stag: u32,
        to: u64,
    },
    Untagged {
        qn: u32,
        msn: u32,
        mo: u32,
        /// Set on Read Requests.
        read: Option<ReadRequest>,
    },
}

/// One FPDU (one DDP segment).
#[derive(Debug, Clone)]
pub(crate) struct Fpdu {
    pub(crate) frame: u64,
    pub(crate) ulpdu_len: u32,
    pub(crate) last: bool,
    pub(crate) opcode: u8,
    pub(crate) placement: Placement,
    /// The CRC field where tshark did not check it (no CRC negotiated).
    pub(crate) unchecked_crc: Option<u32>,
}

impl Fpdu {
    /// Bytes on the wire: length field, ULPDU, pad to 4, CRC.
    pub(crate) fn wire_len(&self) -> u32 {
        (2 + self.ulpdu_len).div_ceil(4) * 4 + 4
    }

    /// Payload bytes after the DDP and RDMAP headers.
    fn payload(&self) -> Option<u32> {
        let hdr = match self.placement {
            Placement::Tagged { .. } => TAGGED_HDR,
            Placement::Untagged { read: Some(_), .. } => UNTAGGED_HDR + READ_REQUEST_HDR,
            Placement::Untagged { .. } => UNTAGGED_HDR,
        };
        self.ulpdu_len.checked_sub(hdr)
    }
}

/// Counts over all connections checked.
#[derive(Debug, Clone, Default)]
pub(crate) struct Tally {
    pub(crate) fpdus: usize,
    /// Per opcode: segments, messages, messages of more than one segment,
    /// payload bytes.
    pub(crate) segments: [usize; OPCODES],
    pub(crate) messages: [usize; OPCODES],
    pub(crate) multi: [usize; OPCODES],
    pub(crate) bytes: [u64; OPCODES],
    /// FPDUs whose CRC tshark checked (CRC negotiated).
    pub(crate) crc_fpdus: usize,
    /// Largest FPDU on the wire, and the smallest effective MSS of a
    /// connection that carried FPDUs.
    pub(crate) max_fpdu: u32,
    pub(crate) min_emss: Option<u32>,
    /// Connections per negotiated mode, e.g. "rev 2, CRC, RTR Write".
    pub(crate) modes: BTreeMap<String, usize>,
}

/// A message being received, untagged (per queue) or tagged.
#[derive(Debug, Clone, Copy)]
struct Open {
    opcode: u8,
    /// MSN (untagged) or STag (tagged).
    id: u32,
    /// Next MO or tagged offset.
    next: u64,
    segments: u32,
    bytes: u64,
}

/// A Read Request not answered completely yet.
#[derive(Debug, Clone, Copy)]
struct PendingRead {
    req: ReadRequest,
    done: u32,
}

/// What one direction of a connection has sent so far.
#[derive(Debug, Default)]
struct Side {
    /// Per queue number: the next MSN, and the message in progress.
    queues: BTreeMap<u32, (u32, Option<Open>)>,
    tagged: Option<Open>,
    /// Read Requests this side sent, oldest first.
    reads: VecDeque<PendingRead>,
    fpdus: usize,
}

const DIRS: [&str; 2] = ["initiator->responder", "responder->initiator"];

/// One TCP connection carrying iWARP, from its MPA Request on.
#[derive(Debug)]
pub(crate) struct Conn {
    stream: u32,
    request: MpaFrame,
    reply: Option<MpaFrame>,
    /// The ready-to-receive message the Reply chose (an RTR_* bit).
    rtr: Option<u32>,
    /// Most Read Requests open at once, where negotiated.
    max_reads: Option<u32>,
    emss: Option<u32>,
    terminate_ok: bool,
    sides: [Side; 2],
    errors: Vec<String>,
}

impl Conn {
    /// A connection that starts with `request` (sent by the initiator) on
    /// TCP stream `stream`; `emss` is its effective MSS, where known.
    pub(crate) fn new(stream: u32, request: MpaFrame, emss: Option<u32>) -> Conn {
        let mut c = Conn {
            stream,
            request,
            reply: None,
            rtr: None,
            max_reads: None,
            emss,
            terminate_ok: false,
            sides: Default::default(),
            errors: Vec::new(),
        };
        let r = c.request.clone();
        c.check_mpa(&r, "Request");
        c
    }

    /// Terminate messages are expected (a test of errors).
    pub(crate) fn allow_terminate(&mut self) {
        self.terminate_ok = true;
    }

    /// The problems found so far.
    pub(crate) fn errors(&self) -> &[String] {
        &self.errors
    }

    fn fail(&mut self, frame: u64, dir: usize, what: String) {
        self.errors.push(format!(
            "connection {} frame {frame} ({}): {what}",
            self.stream, DIRS[dir]
        ));
    }

    fn check_mpa(&mut self, m: &MpaFrame, what: &str) {
        let dir = usize::from(what == "Reply");
        if !(1..=2).contains(&m.rev) {
            self.fail(m.frame, dir, format!("MPA {what} of revision {}", m.rev));
        }
        if m.markers {
            self.fail(m.frame, dir, format!("MPA {what} asks for markers"));
        }
        if m.reject {
            self.fail(m.frame, dir, format!("MPA {what} has the reject bit"));
        }
        if m.enhanced && m.word().is_none() {
            self.fail(
                m.frame,
                dir,
                format!("MPA {what} sets S without an IRD/ORD word (rev {})", m.rev),
            );
        }
    }

    /// Another MPA Request or Reply on this connection.
    pub(crate) fn mpa(&mut self, from_initiator: bool, reply: bool, m: MpaFrame) {
        let dir = usize::from(!from_initiator);
        if !reply {
            self.fail(m.frame, dir, "a second MPA Request".into());
            return;
        }
        if from_initiator || self.reply.is_some() {
            self.fail(
                m.frame,
                dir,
                "an MPA Reply from the initiator or twice".into(),
            );
            return;
        }
        self.check_mpa(&m, "Reply");
        if m.rev != self.request.rev {
            let why = format!(
                "Reply rev {} to a Request of rev {}",
                m.rev, self.request.rev
            );
            self.fail(m.frame, dir, why);
        }
        if let (Some(q), Some(p)) = (self.request.word(), m.word()) {
            self.negotiate(m.frame, q, p);
        }
        self.reply = Some(m);
    }

    /// RFC 6581: peer-to-peer mode and the read depths.
    fn negotiate(&mut self, frame: u64, req: u32, rep: u32) {
        let ird = |w: u32| (w >> 16) & 0x3fff;
        let ord = |w: u32| w & 0x3fff;
        self.max_reads = Some(ord(req).min(ird(rep)));
        if req & P2P_A == 0 {
            return;
        }
        if rep & P2P_A == 0 {
            self.fail(
                frame,
                1,
                "the Reply does not echo peer-to-peer mode (A)".into(),
            );
            return;
        }
        let chosen = rep & (RTR_SEND | RTR_WRITE | RTR_READ);
        if chosen.count_ones() != 1 || chosen & req == 0 {
            let why = format!("the Reply picks RTR bits {chosen:#010x} of offered {req:#010x}");
            self.fail(frame, 1, why);
            return;
        }
        self.rtr = Some(chosen);
    }

    /// The negotiated mode, for the summary.
    pub(crate) fn mode(&self) -> String {
        let mut s = format!(
            "rev {}, {}",
            self.request.rev,
            if self.crc() { "CRC" } else { "no CRC" }
        );
        match self.rtr {
            Some(RTR_SEND) => s.push_str(", RTR Send"),
            Some(RTR_WRITE) => s.push_str(", RTR Write"),
            Some(RTR_READ) => s.push_str(", RTR Read"),
            _ => {}
        }
        s
    }

    /// Whether FPDUs carry a CRC (either side asked: RFC 5044 §7.1.1).
    pub(crate) fn crc(&self) -> bool {
        self.request.crc || self.reply.as_ref().is_some_and(|r| r.crc)
    }

    /// The next FPDU in one direction.
    pub(crate) fn fpdu(&mut self, from_initiator: bool, f: &Fpdu, tally: &mut Tally) {
        let dir = usize::from(!from_initiator);
        let fail = |c: &mut Conn, what: String| c.fail(f.frame, dir, what);
        if self.reply.is_none() {
            fail(self, "an FPDU before the MPA Reply".into());
        }
        if dir == 1 && self.sides[0].fpdus == 0 {
            fail(
                self,
                "the responder sends before the initiator's first FPDU".into(),
            );
        }
        if dir == 0 && self.sides[0].fpdus == 0 {
            if let Some(rtr) = self.rtr {
                self.check_rtr(rtr, f);
            }
        }
        self.sides[dir].fpdus += 1;
        tally.fpdus += 1;
        tally.max_fpdu = tally.max_fpdu.max(f.wire_len());
        if let Some(emss) = self.emss {
            tally.min_emss = Some(tally.min_emss.map_or(emss, |m| m.min(emss)));
            if f.wire_len() > emss {
                let why = format!("an FPDU of {} bytes, MSS {emss}", f.wire_len());
                fail(self, why);
            }
        }
        match (self.crc(), f.unchecked_crc) {
            (true, None) => tally.crc_fpdus += 1,
            (true, Some(_)) => fail(self, "CRC negotiated but not checked by tshark".into()),
            (false, Some(0)) => {}
            (false, crc) => fail(self, format!("no CRC negotiated, CRC field {crc:x?}")),
        }
        let op = f.opcode;
        if usize::from(op) >= OPCODES {
            fail(self, format!("opcode {op}"));
            return;
        }
        let expected = match op {
            WRITE | READ_REQUEST | READ_RESPONSE | SEND => true,
            TERMINATE => self.terminate_ok,
            _ => false,
        };
        if !expected {
            fail(self, format!("a {} message", opcode_name(op)));
        }
        let Some(payload) = f.payload() else {
            fail(
                self,
                format!(
                    "a ULPDU of {} bytes is shorter than its headers",
                    f.ulpdu_len
                ),
            );
            return;
        };
        tally.segments[usize::from(op)] += 1;
        tally.bytes[usize::from(op)] += u64::from(payload);
        let done = match f.placement {
            Placement::Untagged { qn, msn, mo, read } => {
                self.untagged(dir, f, (qn, msn, mo), read, payload)
            }
            Placement::Tagged { stag, to } => self.tagged(dir, f, stag, to, payload),
        };
        if let Some(open) = done {
            tally.messages[usize::from(op)] += 1;
            tally.multi[usize::from(op)] += usize::from(open.segments > 1);
        }
    }

    /// The initiator's first FPDU must be the chosen ready-to-receive one.
    fn check_rtr(&mut self, rtr: u32, f: &Fpdu) {
        let ok = f.last
            && match (rtr, f.opcode, f.placement) {
                (RTR_SEND, SEND, _) => f.payload() == Some(0),
                (RTR_WRITE, WRITE, _) => f.payload() == Some(0),
                (RTR_READ, READ_REQUEST, Placement::Untagged { read: Some(r), .. }) => r.size == 0,
                _ => false,
            };
        if !ok {
            let why = format!(
                "the first FPDU is a {} of {} bytes, not the zero-length RTR {}",
                opcode_name(f.opcode),
                f.ulpdu_len,
                self.mode()
            );
            self.fail(f.frame, 0, why);
        }
    }

    /// An untagged segment: returns the message it ends, if it ends one.
    fn untagged(
        &mut self,
        dir: usize,
        f: &Fpdu,
        (qn, msn, mo): (u32, u32, u32),
        read: Option<ReadRequest>,
        payload: u32,
    ) -> Option<Open> {
        let mut errs = Vec::new();
        if queue_of(f.opcode) != Some(qn) {
            errs.push(format!("{} on queue {qn}", opcode_name(f.opcode)));
        }
        let (next_msn, open) = self.sides[dir].queues.entry(qn).or_insert((1, None));
        let mut cur = match open.take() {
            Some(o) => {
                if (o.id, o.opcode, o.next) != (msn, f.opcode, u64::from(mo)) {
                    errs.push(format!(
                        "{} MSN {msn} MO {mo} inside {} MSN {} (next MO {})",
                        opcode_name(f.opcode),
                        opcode_name(o.opcode),
                        o.id,
                        o.next
                    ));
                }
                o
            }
            None => {
                if (msn, mo) != (*next_msn, 0) {
                    errs.push(format!(
                        "{} starts with MSN {msn} MO {mo}, expected MSN {next_msn} MO 0",
                        opcode_name(f.opcode)
                    ));
                }
                Open {
                    opcode: f.opcode,
                    id: msn,
                    next: 0,
                    segments: 0,
                    bytes: 0,
                }
            }
        };
        cur.next = u64::from(mo) + u64::from(payload);
        cur.segments += 1;
        cur.bytes += u64::from(payload);
        let ended = if f.last {
            *next_msn = cur.id.wrapping_add(1);
            Some(cur)
        } else {
            *open = Some(cur);
            None
        };
        match (f.opcode, read) {
            (READ_REQUEST, Some(req)) => {
                if cur.segments != 1 || !f.last || payload != 0 {
                    errs.push("a Read Request that is not one segment of 28 bytes".into());
                }
                if req.size > 0 && (req.src_stag == 0 || req.sink_stag == 0) {
                    errs.push(format!("a Read Request of {} bytes with STag 0", req.size));
                }
                let side = &mut self.sides[dir];
                side.reads.push_back(PendingRead { req, done: 0 });
                let open_reads = side.reads.len() as u32;
                if self.max_reads.is_some_and(|m| open_reads > m) {
                    errs.push(format!(
                        "{open_reads} Read Requests open, ORD/IRD {:?}",
                        self.max_reads
                    ));
                }
            }
            (READ_REQUEST, None) => errs.push("a Read Request without its RDMAP header".into()),
            _ => {}
        }
        for e in errs {
            self.fail(f.frame, dir, e);
        }
        ended
    }

    /// A tagged segment: returns the message it ends, if it ends one.
    fn tagged(&mut self, dir: usize, f: &Fpdu, stag: u32, to: u64, payload: u32) -> Option<Open> {
        let mut errs = Vec::new();
        if stag == 0 {
            errs.push(format!("{} to STag 0", opcode_name(f.opcode)));
        }
        let cur = match self.sides[dir].tagged.take() {
            Some(o) => {
                if (o.opcode, o.id, o.next) != (f.opcode, stag, to) {
                    errs.push(format!(
                        "{} to STag {stag:#x} TO {to:#x} inside {} to STag {:#x} (next TO {:#x})",
                        opcode_name(f.opcode),
                        opcode_name(o.opcode),
                        o.id,
                        o.next
                    ));
                }
                o
            }
            None => Open {
                opcode: f.opcode,
                id: stag,
                next: to,
                segments: 0,
                bytes: 0,
            },
        };
        let mut cur = cur;
        cur.next = to.wrapping_add(u64::from(payload));
        cur.segments += 1;
        cur.bytes += u64::from(payload);
        match f.opcode {
            WRITE => {}
            READ_RESPONSE => self.read_response(dir, f, stag, to, payload, &mut errs),
            op => errs.push(format!("{} in a tagged segment", opcode_name(op))),
        }
        for e in errs {
            self.fail(f.frame, dir, e);
        }
        if f.last {
            Some(cur)
        } else {
            self.sides[dir].tagged = Some(cur);
            None
        }
    }

    /// A Read Response segment against the other side's oldest Read
    /// Request.
    fn read_response(
        &mut self,
        dir: usize,
        f: &Fpdu,
        stag: u32,
        to: u64,
        payload: u32,
        errs: &mut Vec<String>,
    ) {
        let reads = &mut self.sides[1 - dir].reads;
        let Some(p) = reads.front_mut() else {
            errs.push("a Read Response without a Read Request".into());
            return;
        };
        let want_to = p.req.sink_to.wrapping_add(u64::from(p.done));
        if stag != p.req.sink_stag || to != want_to {
            errs.push(format!(
                "Read Response to STag {stag:#x} TO {to:#x}, the Read Request asked for STag {:#x} TO {want_to:#x}",
                p.req.sink_stag
            ));
        }
        p.done = p.done.saturating_add(payload);
        if p.done > p.req.size || (f.last && p.done != p.req.size) {
            errs.push(format!(
                "Read Response of {} bytes{} for a Read Request of {}",
                p.done,
                if f.last { "" } else { " so far" },
                p.req.size
            ));
        }
        if f.last {
            reads.pop_front();
        }
    }

    /// The end of the capture: nothing may be left half done.
    pub(crate) fn finish(&mut self, tally: &mut Tally) {
        *tally.modes.entry(self.mode()).or_default() += 1;
        let mut errs = Vec::new();
        if self.reply.is_none() {
            errs.push("no MPA Reply".to_string());
        }
        for (dir, side) in self.sides.iter().enumerate() {
            let mut e = String::new();
            for (qn, (_, open)) in &side.queues {
                if let Some(o) = open {
                    let _ = write!(e, " {} MSN {} of queue {qn};", opcode_name(o.opcode), o.id);
                }
            }
            if let Some(o) = side.tagged {
                let _ = write!(e, " {} to STag {:#x};", opcode_name(o.opcode), o.id);
            }
            if !e.is_empty() {
                errs.push(format!("{}: unfinished{e}", DIRS[dir]));
            }
            if !side.reads.is_empty() {
                let why = format!(
                    "{}: {} Read Requests unanswered",
                    DIRS[dir],
                    side.reads.len()
                );
                errs.push(why);
            }
        }
        for e in errs {
            self.errors.push(format!("connection {}: {e}", self.stream));
        }
    }
}
