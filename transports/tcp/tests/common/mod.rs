//! Helpers shared by the integration tests: a recording sink and a pair of
//! ifaces on the loopback device.

#![allow(dead_code)]

use std::time::{Duration, Instant};

use rucx_tcp::{open_iface, TcpConfig};
use uct::{AmId, AmSink, EpId, Error, Iface, IfaceParams, SrcId, Token};

/// Everything a sink was told.
#[derive(Debug, Default)]
pub(crate) struct Recorder {
    pub(crate) ams: Vec<(AmId, SrcId, Vec<u8>)>,
    pub(crate) completed: Vec<(Token, Result<(), String>)>,
    pub(crate) ready: Vec<(EpId, Token)>,
    pub(crate) ep_failed: Vec<(EpId, String)>,
    pub(crate) src_failed: Vec<(SrcId, Error)>,
    /// Messages of this id are placed (`am_begin`) into buffers of this
    /// many bytes, taking this many bytes of header.
    pub(crate) place: Option<(AmId, usize, usize)>,
    /// The buffers given out, with the head each message began with.
    pub(crate) placed: Vec<(Vec<u8>, Vec<u8>)>,
    /// What `am_end` reported, by buffer index; `src_failed` records the
    /// count of these at the time it came (to check the order).
    pub(crate) ended: Vec<(u64, Result<(), String>)>,
    pub(crate) ended_before_src_failed: Vec<usize>,
}

impl AmSink for Recorder {
    fn am(&mut self, id: AmId, src: SrcId, data: &[u8]) {
        self.ams.push((id, src, data.to_vec()));
    }

    fn completed(&mut self, token: Token, result: uct::Result<()>) {
        self.completed
            .push((token, result.map_err(|e| e.to_string())));
    }

    fn pending_ready(&mut self, ep: EpId, token: Token) {
        self.ready.push((ep, token));
    }

    fn ep_failed(&mut self, ep: EpId, error: Error) {
        self.ep_failed.push((ep, error.to_string()));
    }

    fn src_failed(&mut self, src: SrcId, error: Error) {
        self.ended_before_src_failed.push(self.ended.len());
        self.src_failed.push((src, error));
    }

    fn am_begin(&mut self, id: AmId, _: SrcId, head: &[u8], _: usize) -> Option<uct::AmDest> {
        let (want, hdr, cap) = self.place?;
        if id != want {
            return None;
        }
        let mut buf = vec![0u8; cap];
        let ptr = buf.as_mut_ptr();
        let token = Token(self.placed.len() as u64);
        // The heap buffer stays put when the Vec moves into `placed`,
        // which keeps it (unchanged in size) for the rest of the test.
        self.placed
            .push((buf, head[..hdr.min(head.len())].to_vec()));
        // SAFETY: `cap` bytes at `ptr` live as long as the recorder, which
        // outlives the iface's use of them (the tests drop it last).
        Some(unsafe { uct::AmDest::new(hdr, ptr, cap, token) })
    }

    fn am_end(&mut self, token: Token, result: uct::Result<()>) {
        self.ended
            .push((token.0, result.map_err(|e| e.to_string())));
    }
}

/// Opens an iface on "lo".
pub(crate) fn lo(config: &TcpConfig) -> Box<dyn Iface> {
    open_iface("lo", &IfaceParams::default(), config).expect("open tcp iface on lo")
}

/// Creates an endpoint from `a` to `b`.
pub(crate) fn connect(a: &mut dyn Iface, b: &dyn Iface) -> EpId {
    a.ep_create(b.device_addr(), b.iface_addr())
        .expect("ep_create")
}

/// The port `iface` listens on.
pub(crate) fn port(iface: &dyn Iface) -> u16 {
    let a = iface.iface_addr();
    u16::from_be_bytes([a[0], a[1]])
}

/// Progresses every iface with its sink until `done` holds; panics after
/// 20 s (a hang is a failure, not a timing assertion).
pub(crate) fn drive(
    ifaces: &mut [(&mut dyn Iface, &mut Recorder)],
    mut done: impl FnMut(&mut [(&mut dyn Iface, &mut Recorder)]) -> bool,
) {
    let start = Instant::now();
    while !done(ifaces) {
        for (iface, sink) in ifaces.iter_mut() {
            iface.progress(*sink);
        }
        if start.elapsed() > Duration::from_secs(20) {
            for (i, (_, sink)) in ifaces.iter().enumerate() {
                eprintln!(
                    "iface {i}: {} ams, completed {:?}, ready {:?}, ep_failed {:?}, src_failed {:?}",
                    sink.ams.len(),
                    sink.completed,
                    sink.ready,
                    sink.ep_failed,
                    sink.src_failed
                );
            }
            panic!("condition not reached in 20 s");
        }
    }
}

/// Progresses every iface for a while (to see that nothing more happens).
pub(crate) fn settle(ifaces: &mut [(&mut dyn Iface, &mut Recorder)], time: Duration) {
    let start = Instant::now();
    while start.elapsed() < time {
        for (iface, sink) in ifaces.iter_mut() {
            iface.progress(*sink);
        }
        std::thread::sleep(Duration::from_micros(200));
    }
}

/// A test pattern of `len` bytes, different for every `seed`.
pub(crate) fn pattern(len: usize, seed: u64) -> Vec<u8> {
    let mut x = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect()
}

/// Posts an `am_short` on `ep` of the first iface, progressing all of them
/// while it is `NoResource` (as before the peer accepts the connection).
pub(crate) fn short_when_open(
    ifaces: &mut [(&mut dyn Iface, &mut Recorder)],
    ep: EpId,
    id: AmId,
    hdr: u64,
    data: &[u8],
) -> uct::Result<uct::Posted> {
    let start = Instant::now();
    loop {
        match ifaces[0].0.am().unwrap().am_short(ep, id, hdr, data) {
            Ok(uct::Posted::NoResource) => {
                for (iface, sink) in ifaces.iter_mut() {
                    iface.progress(*sink);
                }
                assert!(start.elapsed() < Duration::from_secs(20), "never open");
            }
            other => return other,
        }
    }
}

/// Creates an endpoint from `a` to `b` and waits until its connection is
/// established (a probe message got through; it is removed from `sb`).
pub(crate) fn connect_ready(
    a: &mut dyn Iface,
    sa: &mut Recorder,
    b: &mut dyn Iface,
    sb: &mut Recorder,
) -> EpId {
    let ep = connect(a, b);
    let before = sb.ams.len();
    let posted = short_when_open(&mut [(a, sa), (b, sb)], ep, 31, u64::MAX, b"probe");
    assert_eq!(posted.unwrap(), uct::Posted::Done);
    drive(&mut [(a, sa), (b, sb)], |x| x[1].1.ams.len() > before);
    let probe = sb.ams.pop().unwrap();
    assert_eq!((probe.0, &probe.2[8..]), (31, &b"probe"[..]));
    drive(&mut [(a, sa), (b, sb)], |x| {
        x[0].0.flush(Some(ep), Token(u64::MAX)).ok() == Some(uct::Posted::Done)
    });
    sa.completed.retain(|(t, _)| *t != Token(u64::MAX));
    ep
}
