//! A raw peer that writes arbitrary bytes into a TCP iface over loopback,
//! and a model of what the iface must make of them.
//!
//! The model follows the wire format documented in the crate (`wire.rs`):
//! a hello (17 bytes for IPv4, 29 for IPv6), then frames of a 5-byte header and a payload. It
//! predicts, for any byte stream from one connection, which active
//! messages reach the sink, whether the source fails, which puts the iface
//! answers with which status, and what they leave in the iface's
//! registered windows (`put_model.rs`). [`Target::run`] checks the
//! prediction, and that a well-behaved endpoint into the same iface still
//! delivers afterwards.
//!
//! Shared by the `decoder_robustness` test and the `tcp_stream` fuzz
//! target, so it uses the public API only.

#![allow(dead_code)]

use std::io::{ErrorKind, Read, Write};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, Shutdown, SocketAddr, TcpStream};
use std::time::{Duration, Instant};

use rucx_tcp::COMPONENT;
use uct::{
    Access, AmId, AmSink, Component, EpId, Error, Iface, IfaceParams, Posted, SrcId, Token,
    AM_ID_MAX,
};

#[path = "put_model.rs"]
pub(crate) mod put_model;

use put_model::{acks_in, acks_match, judge, Window, CTRL_PUT, PUT_HDR};

/// First 8 bytes of a connector's hello.
pub(crate) const MAGIC: [u8; 8] = *b"rucx-tcp";
/// Wire format version.
pub(crate) const VERSION: u16 = 3;
/// Length of the hello before the address: magic, version, port, family.
pub(crate) const HELLO_HEAD: usize = 13;
/// Length of a frame header.
pub(crate) const FRAME_HDR: usize = 5;
/// Control frame ids.
pub(crate) const CTRL_ACCEPT: AmId = 0xf0;
/// Control frame id of a rejection.
pub(crate) const CTRL_REJECT: AmId = 0xf1;

/// Longest a run may take before it counts as a hang.
const HANG: Duration = Duration::from_secs(20);

/// The hello of a connector that says it listens on `addr`.
pub(crate) fn hello(addr: impl Into<SocketAddr>) -> Vec<u8> {
    let addr = addr.into();
    let mut v = MAGIC.to_vec();
    v.extend_from_slice(&VERSION.to_le_bytes());
    v.extend_from_slice(&addr.port().to_be_bytes());
    match addr.ip() {
        IpAddr::V4(a) => {
            v.push(4);
            v.extend_from_slice(&a.octets());
        }
        IpAddr::V6(a) => {
            v.push(6);
            v.extend_from_slice(&a.octets());
        }
    }
    v
}

/// The address a complete, valid hello at the start of `bytes` names,
/// and the bytes after it.
fn split_hello(bytes: &[u8]) -> Option<(SocketAddr, &[u8])> {
    let (h, rest) = bytes.split_first_chunk::<HELLO_HEAD>()?;
    let version = u16::from_le_bytes([h[8], h[9]]);
    if h[..8] != MAGIC || version != VERSION {
        return None;
    }
    let port = u16::from_be_bytes([h[10], h[11]]);
    let (ip, rest): (IpAddr, &[u8]) = match h[12] {
        4 => {
            let (a, rest) = rest.split_first_chunk::<4>()?;
            (Ipv4Addr::from(*a).into(), rest)
        }
        6 => {
            let (a, rest) = rest.split_first_chunk::<16>()?;
            (Ipv6Addr::from(*a).into(), rest)
        }
        _ => return None,
    };
    Some((SocketAddr::new(ip, port), rest))
}

/// A frame header announcing `len` payload bytes.
pub(crate) fn frame_hdr(id: AmId, len: u32) -> [u8; FRAME_HDR] {
    let l = len.to_le_bytes();
    [id, l[0], l[1], l[2], l[3]]
}

/// A whole frame.
pub(crate) fn frame(id: AmId, payload: &[u8]) -> Vec<u8> {
    let mut v = frame_hdr(id, payload.len() as u32).to_vec();
    v.extend_from_slice(payload);
    v
}

/// What the iface must report for one connection's bytes.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub(crate) struct Outcome {
    /// Active messages delivered, in order.
    pub(crate) ams: Vec<(AmId, Vec<u8>)>,
    /// Whether the source was reported failed.
    pub(crate) src_failed: bool,
    /// Puts answered: seq and status.
    pub(crate) acks: Vec<(u64, u32)>,
    /// The contents of the windows afterwards.
    pub(crate) memory: Vec<Vec<u8>>,
}

impl Outcome {
    /// Ids and lengths, short enough for a failure message.
    pub(crate) fn summary(&self) -> String {
        let ams: Vec<(AmId, usize)> = self.ams.iter().map(|(id, d)| (*id, d.len())).collect();
        format!(
            "ams (id, len) {ams:?}, src_failed {}, acks {:?}, memory hash {:x?}",
            self.src_failed,
            self.acks,
            self.memory
                .iter()
                .map(|m| m.iter().fold(0u32, |h, &b| h.rotate_left(5) ^ u32::from(b)))
                .collect::<Vec<_>>()
        )
    }

    /// Whether an outcome `got` from the iface is the predicted one.
    pub(crate) fn allows(&self, got: &Outcome) -> bool {
        self.ams == got.ams
            && self.src_failed == got.src_failed
            && acks_match(&got.acks, &self.acks)
            && self.memory == got.memory
    }
}

/// What the model knows of the iface under test.
#[derive(Debug, Clone, Default)]
pub(crate) struct Wire {
    /// Largest user message payload it accepts.
    pub(crate) max_frame: usize,
    /// Largest put it accepts.
    pub(crate) max_put: usize,
    /// Its registered windows (the first names the process).
    pub(crate) windows: Vec<Window>,
    /// Their contents before the connection.
    pub(crate) before: Vec<Vec<u8>>,
}

/// Predicts the outcome of a connection that sends `bytes` and then
/// closes. A hello naming `open_peer` (the iface whose connection is
/// already open) is rejected.
pub(crate) fn expect(bytes: &[u8], wire: &Wire, open_peer: SocketAddr) -> Outcome {
    let max_frame = wire.max_frame;
    let mut out = Outcome {
        memory: wire.before.clone(),
        ..Outcome::default()
    };
    let Some((from, mut rest)) = split_hello(bytes) else {
        // Closed before a whole hello, or a bad one: dropped silently.
        return out;
    };
    if from == open_peer {
        return out;
    }
    // Accepted: frames until an error or the end.
    while let Some((hdr, after)) = rest.split_first_chunk::<FRAME_HDR>() {
        let id = hdr[0];
        let len = u32::from_le_bytes([hdr[1], hdr[2], hdr[3], hdr[4]]) as usize;
        if id == CTRL_PUT {
            if len < PUT_HDR || len - PUT_HDR > wire.max_put || after.len() < PUT_HDR {
                break;
            }
            let h = &after[..PUT_HDR];
            let declared = u32::from_le_bytes([h[52], h[53], h[54], h[55]]) as usize;
            if declared != len - PUT_HDR {
                break;
            }
            let (status, dest) = judge(h, &wire.windows);
            // Data is written as it comes, also when the stream ends
            // before the frame does.
            let data = &after[PUT_HDR..len.min(after.len())];
            if let Some((w, off)) = dest {
                out.memory[w][off..off + data.len()].copy_from_slice(data);
            }
            if after.len() < len {
                break;
            }
            let seq = u64::from_le_bytes(h[..8].try_into().unwrap_or_default());
            out.acks.push((seq, status));
            rest = &after[len..];
            continue;
        }
        if id >= AM_ID_MAX {
            // Unknown id, a control frame after the acceptance, or an
            // acknowledgement though the raw peer made no put: all break
            // the protocol.
            break;
        }
        if len > max_frame {
            break;
        }
        if after.len() < len {
            // Closed in the middle of a frame.
            break;
        }
        out.ams.push((id, after[..len].to_vec()));
        rest = &after[len..];
    }
    // A source that delivered anything is reported when it goes away,
    // whether it broke the protocol or closed cleanly between messages.
    out.src_failed = !out.ams.is_empty();
    out
}

/// Everything a sink was told.
#[derive(Debug, Default)]
pub(crate) struct Recorder {
    /// Active messages.
    pub(crate) ams: Vec<(AmId, SrcId, Vec<u8>)>,
    /// Failed sources.
    pub(crate) src_failed: Vec<SrcId>,
    /// Failed endpoints.
    pub(crate) ep_failed: Vec<(EpId, String)>,
    /// Completions.
    pub(crate) completed: Vec<Token>,
    /// Pending tokens handed back.
    pub(crate) ready: Vec<Token>,
}

impl AmSink for Recorder {
    fn am(&mut self, id: AmId, src: SrcId, data: &[u8]) {
        self.ams.push((id, src, data.to_vec()));
    }
    fn completed(&mut self, token: Token, _result: uct::Result<()>) {
        self.completed.push(token);
    }
    fn pending_ready(&mut self, _ep: EpId, token: Token) {
        self.ready.push(token);
    }
    fn ep_failed(&mut self, ep: EpId, error: Error) {
        self.ep_failed.push((ep, error.to_string()));
    }
    fn src_failed(&mut self, src: SrcId, _error: Error) {
        self.src_failed.push(src);
    }
}

/// Opens an iface on the loopback device through the component, as the
/// protocol layer does.
pub(crate) fn open_lo() -> Box<dyn Iface> {
    let mds = COMPONENT.md_open().expect("open the tcp memory domain");
    for md in &mds {
        let res = md.resources().expect("list tcp resources");
        if let Some(lo) = res.iter().find(|r| r.dev_name == "lo") {
            return md
                .iface_open(lo, &IfaceParams::default())
                .expect("open the tcp iface on lo");
        }
    }
    panic!("no tcp resource on lo");
}

/// The listening address of a loopback iface, from its documented
/// addresses (device: family byte 4 or 6, the address, the host id;
/// iface: port, big-endian).
pub(crate) fn listen_addr(iface: &dyn Iface) -> SocketAddr {
    let d = iface.device_addr();
    let p = iface.iface_addr();
    assert!(p.len() == 2, "tcp address layout");
    let port = u16::from_be_bytes([p[0], p[1]]);
    let ip: IpAddr = match (d.first(), d.len()) {
        (Some(4), 13) => Ipv4Addr::new(d[1], d[2], d[3], d[4]).into(),
        (Some(6), 25) => {
            let mut a = [0u8; 16];
            a.copy_from_slice(&d[1..17]);
            Ipv6Addr::from(a).into()
        }
        _ => panic!("tcp device address layout: {d:?}"),
    };
    SocketAddr::new(ip, port)
}

/// The iface under attack (`a`) and a well-behaved peer (`b`) with an
/// endpoint into it; windows of `a`'s process that puts may write.
#[derive(Debug)]
pub(crate) struct Target {
    /// What the model knows of `a`.
    pub(crate) wire: Wire,
    a: Box<dyn Iface>,
    sa: Recorder,
    b: Box<dyn Iface>,
    sb: Recorder,
    ep: EpId,
    good_src: SrcId,
    seq: u64,
    /// Largest frame payload `a` accepts.
    pub(crate) max_frame: usize,
}

impl Target {
    /// Opens both ifaces and checks the good endpoint works.
    pub(crate) fn open() -> Target {
        let a = open_lo();
        let mut b = open_lo();
        let ep = b
            .ep_create(a.device_addr(), a.iface_addr())
            .expect("ep_create");
        let at = a.attr();
        // The largest frame a sender with these limits can produce: a
        // receiver accepts exactly these.
        let max_frame = at
            .max_bcopy
            .max(at.max_short + 8)
            .max(at.max_hdr + at.max_zcopy);
        let max_put = at.max_put_zcopy;
        let md = COMPONENT
            .md_open()
            .expect("open the tcp memory domain")
            .pop()
            .expect("one memory domain");
        // A writable window, a read-only one, and one already ended.
        let windows = vec![
            put_model::window(&*md, &[0; 256], Access::REMOTE_WRITE, true),
            put_model::window(&*md, &[0; 64], Access::REMOTE_READ, true),
            put_model::window(&*md, &[0; 64], Access::REMOTE_WRITE, false),
        ];
        let before = windows
            .iter()
            .enumerate()
            .map(|(i, w)| (0..w.len).map(|k| (k as u8) ^ (i as u8 * 0x55)).collect())
            .collect();
        let mut t = Target {
            wire: Wire {
                max_frame,
                max_put,
                windows,
                before,
            },
            a,
            sa: Recorder::default(),
            b,
            sb: Recorder::default(),
            ep,
            good_src: SrcId(u32::MAX),
            seq: 0,
            max_frame,
        };
        t.good_src = t.still_works();
        t
    }

    /// The address of the peer whose connection into `a` is open.
    pub(crate) fn peer_addr(&self) -> SocketAddr {
        listen_addr(self.b.as_ref())
    }

    /// The address `a` listens on.
    pub(crate) fn own_addr(&self) -> SocketAddr {
        listen_addr(self.a.as_ref())
    }

    fn progress(&mut self) {
        self.a.progress(&mut self.sa);
        self.b.progress(&mut self.sb);
    }

    /// Sends one message on the good endpoint and waits for it; returns
    /// its source.
    fn still_works(&mut self) -> SrcId {
        self.seq += 1;
        let seq = self.seq;
        let before = self.sa.ams.len();
        // `NoResource` only until `a` accepts the connection.
        let start = Instant::now();
        loop {
            let posted = self
                .b
                .am()
                .unwrap()
                .am_short(self.ep, 7, seq, b"still here");
            match posted {
                Ok(Posted::Done) => break,
                Ok(Posted::NoResource) => self.progress(),
                _ => panic!("good endpoint refused a send: {posted:?}"),
            }
            assert!(start.elapsed() < HANG, "good endpoint never opened");
        }
        let start = Instant::now();
        while self.sa.ams.len() == before {
            self.progress();
            assert!(start.elapsed() < HANG, "good message never arrived");
        }
        let (id, src, data) = &self.sa.ams[before];
        let mut want = seq.to_le_bytes().to_vec();
        want.extend_from_slice(b"still here");
        assert_eq!((*id, data), (7, &want), "good message corrupted");
        assert!(self.sb.ep_failed.is_empty(), "{:?}", self.sb.ep_failed);
        *src
    }

    /// Connects a raw socket to `a`, writes `bytes` in pieces of the given
    /// sizes (cycled; progressing between pieces), closes the writing
    /// side, and waits until `a` closes the connection. Returns what `a`
    /// reported for it, after checking the good endpoint still works.
    pub(crate) fn run(&mut self, bytes: &[u8], pieces: &[usize]) -> Outcome {
        self.sa.ams.clear();
        self.sa.src_failed.clear();
        for (w, init) in self.wire.windows.iter().zip(&self.wire.before) {
            w.reset(init);
        }
        let mut s = TcpStream::connect(self.own_addr()).expect("connect a raw socket to the iface");
        let _ = s.set_nodelay(true);
        let mut at = 0;
        let mut sizes = pieces.iter().copied().filter(|&n| n > 0).cycle();
        while at < bytes.len() {
            let n = sizes.next().unwrap_or(bytes.len()).min(bytes.len() - at);
            // The iface may already have closed on an earlier error.
            if s.write_all(&bytes[at..at + n]).is_err() {
                break;
            }
            at += n;
            self.progress();
        }
        let _ = s.shutdown(Shutdown::Write);
        s.set_nonblocking(true).expect("nonblocking");
        let start = Instant::now();
        let mut b = [0u8; 256];
        let mut back = Vec::new();
        loop {
            match s.read(&mut b) {
                Ok(0) => break,
                Ok(n) => back.extend_from_slice(&b[..n]),
                Err(e) if e.kind() == ErrorKind::WouldBlock => {}
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(_) => break,
            }
            self.progress();
            assert!(start.elapsed() < HANG, "iface never closed the connection");
        }
        let good = self.good_src;
        let out = Outcome {
            ams: self
                .sa
                .ams
                .iter()
                .filter(|m| m.1 != good)
                .map(|(id, _, d)| (*id, d.clone()))
                .collect(),
            src_failed: self.sa.src_failed.iter().any(|&s| s != good),
            acks: acks_in(&back),
            memory: self.wire.windows.iter().map(Window::read).collect(),
        };
        assert!(
            !self.sa.src_failed.contains(&good),
            "the good source failed"
        );
        let src = self.still_works();
        assert_eq!(src, good, "the good connection was replaced");
        out
    }

    /// A PUT frame into window `w % 6` of `a`, `off` bytes from its start:
    /// 0 writable, 1 read-only, 2 ended, 3 as if packed by another
    /// process, 4 a slot that does not exist, 5 the writable window with
    /// a wrong secret.
    pub(crate) fn put_frame(&self, w: u8, seq: u64, off: i64, data: &[u8]) -> Vec<u8> {
        let windows = &self.wire.windows;
        let mut win = windows[usize::from(w % 6) % windows.len()].clone();
        match w % 6 {
            3 => win.owner[8] ^= 1,
            4 => win.index = u32::MAX - 1,
            5 => {
                win = windows[0].clone();
                win.secret ^= 1 << 17;
            }
            _ => {}
        }
        win.put(seq, off, data)
    }

    /// Runs `bytes` and asserts the outcome matches the model.
    pub(crate) fn check(&mut self, bytes: &[u8], pieces: &[usize]) {
        let want = expect(bytes, &self.wire, self.peer_addr());
        let got = self.run(bytes, pieces);
        if !want.allows(&got) {
            let shown = &bytes[..bytes.len().min(256)];
            panic!(
                "iface disagrees with the model on {} bytes starting {shown:02x?}\n\
                 got:  {}\nwant: {}",
                bytes.len(),
                got.summary(),
                want.summary()
            );
        }
    }
}
