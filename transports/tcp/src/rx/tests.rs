//! Tests of the parser: reassembly, control frames, puts.

use super::*;
use std::io::Write;
use std::os::fd::AsRawFd;
use std::os::unix::net::UnixStream;
use uct::{Access, AmId, EpId, Error, Token};

use crate::rkey::Key;
use crate::wire::CTRL_PUT;

const LIMITS: RxLimits = RxLimits {
    max_frame: 1 << 20,
    max_put: 1 << 20,
};

#[derive(Default)]
struct Msgs(Vec<(AmId, Vec<u8>)>);

impl AmSink for Msgs {
    fn am(&mut self, id: AmId, _src: SrcId, data: &[u8]) {
        self.0.push((id, data.to_vec()));
    }
    fn completed(&mut self, _: Token, _: uct::Result<()>) {}
    fn pending_ready(&mut self, _: EpId, _: Token) {}
    fn ep_failed(&mut self, _: EpId, _: Error) {}
    fn src_failed(&mut self, _: SrcId, _: Error) {}
}

fn frame(id: u8, payload: &[u8]) -> Vec<u8> {
    let mut v = wire::frame_hdr(id, payload.len() as u32).to_vec();
    v.extend_from_slice(payload);
    v
}

/// Feeds `bytes` in chunks of `step` from another thread and parses
/// until the writer closes.
fn feed(rx: &mut RxState, bytes: &[u8], step: usize) -> (Msgs, Vec<Event>) {
    let (mut a, b) = UnixStream::pair().unwrap();
    b.set_nonblocking(true).unwrap();
    let bytes = bytes.to_vec();
    let writer = std::thread::spawn(move || {
        for chunk in bytes.chunks(step) {
            a.write_all(chunk).unwrap();
        }
    });
    let mut msgs = Msgs::default();
    let mut ctrls = Vec::new();
    let mut n = 0;
    loop {
        match rx.fill(b.as_raw_fd()).unwrap() {
            Filled::Data { .. } => {
                while let Some(c) = rx.parse(SrcId(1), LIMITS, &mut msgs, &mut n).unwrap() {
                    if matches!(c, Event::Ctrl(Ctrl::Accept | Ctrl::Hello(_))) {
                        rx.data_ok = true;
                    }
                    ctrls.push(c);
                }
            }
            Filled::WouldBlock => std::thread::yield_now(),
            Filled::Eof => break,
        }
    }
    writer.join().unwrap();
    assert_eq!(n, msgs.0.len());
    (msgs, ctrls)
}

#[test]
fn frames_split_anywhere_are_reassembled() {
    let big: Vec<u8> = (0..200_000u32).map(|i| i as u8).collect();
    let mut bytes = wire::hello("127.0.0.1:9".parse().unwrap()).to_vec();
    bytes.extend(frame(1, b"a"));
    bytes.extend(frame(2, &big));
    bytes.extend(frame(3, b""));
    bytes.extend(frame(4, &big[..70_000]));
    for step in [1, 3, 4096, 65536, bytes.len()] {
        let mut rx = RxState::new(1024, true);
        let (msgs, ctrls) = feed(&mut rx, &bytes, step);
        assert_eq!(
            ctrls,
            vec![Event::Ctrl(Ctrl::Hello(wire::key(
                "127.0.0.1:9".parse().unwrap()
            )))]
        );
        let ids: Vec<_> = msgs.0.iter().map(|m| m.0).collect();
        assert_eq!(ids, vec![1, 2, 3, 4], "step {step}");
        assert!(msgs.0[1].1 == big && msgs.0[3].1 == big[..70_000]);
        assert!(rx.at_boundary());
    }
}

#[test]
fn control_frames_stop_the_parser() {
    let mut rx = RxState::new(4096, false);
    let mut bytes = frame(wire::CTRL_ACCEPT, b"");
    bytes.extend(frame(5, b"after"));
    let (msgs, ctrls) = feed(&mut rx, &bytes, bytes.len());
    assert_eq!(ctrls, vec![Event::Ctrl(Ctrl::Accept)]);
    assert_eq!(msgs.0, vec![(5, b"after".to_vec())]);
}

#[test]
fn messages_before_accept_are_refused() {
    let mut rx = RxState::new(4096, false);
    let (mut w, b) = UnixStream::pair().unwrap();
    w.write_all(&frame(1, b"x")).unwrap();
    rx.fill(b.as_raw_fd()).unwrap();
    let mut n = 0;
    let r = rx.parse(SrcId(0), LIMITS, &mut Msgs::default(), &mut n);
    assert!(matches!(r, Err(PeerMisbehaved::Invalid { .. })));
    let mut rx = RxState::new(4096, false);
    let (mut w, b) = UnixStream::pair().unwrap();
    let region = Region::new(8, Access::REMOTE_WRITE);
    w.write_all(&put_frame(1, region.addr(0), &region.key(), b"x"))
        .unwrap();
    rx.fill(b.as_raw_fd()).unwrap();
    let r = rx.parse(SrcId(0), LIMITS, &mut Msgs::default(), &mut n);
    assert!(matches!(r, Err(PeerMisbehaved::Invalid { .. })));
}

/// Memory registered in the process table, reached through its pointer.
struct Region {
    ptr: *mut u8,
    len: usize,
    memh: Option<uct::MemHandle>,
}

impl Region {
    fn new(len: usize, access: Access) -> Region {
        let ptr = Box::into_raw(vec![0xeeu8; len].into_boxed_slice()).cast::<u8>();
        let memh = crate::mem::register(ptr, len, access).unwrap();
        Region {
            ptr,
            len,
            memh: Some(memh),
        }
    }

    fn addr(&self, off: usize) -> u64 {
        self.ptr.addr() as u64 + off as u64
    }

    fn key(&self) -> Key {
        let packed = crate::mem::pack(self.memh.as_ref().unwrap()).unwrap();
        crate::rkey::decode(&packed).unwrap()
    }

    fn read(&self) -> Vec<u8> {
        // SAFETY: `ptr` owns `len` bytes; nothing writes them during the
        // call (the parser runs on this thread).
        unsafe { std::slice::from_raw_parts(self.ptr, self.len) }.to_vec()
    }

    fn dereg(&mut self) {
        crate::mem::deregister(&self.memh.take().unwrap()).unwrap();
    }
}

impl Drop for Region {
    fn drop(&mut self) {
        if let Some(h) = self.memh.take() {
            let _ = crate::mem::deregister(&h);
        }
        // SAFETY: from `Box::into_raw` of a boxed slice of `len` bytes in
        // `new`, freed only here, after the registration ended.
        drop(unsafe { Box::from_raw(std::ptr::slice_from_raw_parts_mut(self.ptr, self.len)) });
    }
}

fn put_frame(seq: u64, addr: u64, key: &Key, data: &[u8]) -> Vec<u8> {
    let h = PutHdr {
        seq,
        addr,
        owner: key.owner,
        index: key.fields.index,
        generation: key.fields.generation,
        secret: key.fields.secret,
        len: data.len() as u32,
    };
    let mut v = wire::frame_hdr(CTRL_PUT, (PUT_HDR + data.len()) as u32).to_vec();
    v.extend_from_slice(&h.encode());
    v.extend_from_slice(data);
    v
}

fn pattern(len: usize, seed: u8) -> Vec<u8> {
    (0..len)
        .map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed))
        .collect()
}

#[test]
fn puts_land_in_registered_memory_however_split() {
    let len = 100_000;
    let big = pattern(len, 1);
    for (buf, step) in [
        (1024, 7),
        (1024, 4096),
        (1024, 65536),
        (65536, 1000),
        (65536, usize::MAX),
        (200_000, usize::MAX),
    ] {
        let region = Region::new(len + 10, Access::REMOTE_WRITE);
        let key = region.key();
        let mut bytes = frame(wire::CTRL_ACCEPT, b"");
        bytes.extend(frame(1, b"before"));
        bytes.extend(put_frame(10, region.addr(3), &key, &big));
        bytes.extend(put_frame(11, region.addr(len + 10), &key, b""));
        bytes.extend(frame(2, b"between"));
        bytes.extend(put_frame(12, region.addr(len + 9), &key, b"z"));
        bytes.extend(frame(3, b"after"));
        let mut rx = RxState::new(buf, false);
        let (msgs, events) = feed(&mut rx, &bytes, step.min(bytes.len()));
        assert_eq!(
            events,
            vec![
                Event::Ctrl(Ctrl::Accept),
                Event::PutDone(10, PutStatus::Ok),
                Event::PutDone(11, PutStatus::Ok),
                Event::PutDone(12, PutStatus::Ok),
            ],
            "buffer {buf}, step {step}"
        );
        let ids: Vec<_> = msgs.0.iter().map(|m| m.0).collect();
        assert_eq!(ids, vec![1, 2, 3]);
        assert_eq!(msgs.0[2].1, b"after");
        let got = region.read();
        assert_eq!(got[..3], [0xee; 3]);
        assert!(got[3..3 + len] == big[..], "buffer {buf}, step {step}");
        assert_eq!(got[len + 3..len + 9], [0xee; 6]);
        assert_eq!(got[len + 9], b'z');
        assert!(rx.at_boundary());
    }
}

#[test]
fn refused_puts_are_dropped_and_answered() {
    let mut region = Region::new(64, Access::REMOTE_WRITE);
    let ro = Region::new(64, Access::REMOTE_READ);
    let key = region.key();
    let mut foreign = key;
    foreign.owner.nonce ^= 1;
    // The genuine key with its secret altered, and a key of `ro` guessed
    // from `region`'s: refused as if no registration were there, before
    // range or rights are looked at.
    let mut forged = key;
    forged.fields.secret ^= 1 << 40;
    let mut guessed = ro.key();
    guessed.fields.secret = key.fields.secret;
    let mut dead = Region::new(64, Access::REMOTE_WRITE);
    let dead_key = dead.key();
    dead.dereg();
    let data = pattern(64, 9);
    let mut bytes = frame(wire::CTRL_ACCEPT, b"");
    bytes.extend(put_frame(1, region.addr(0), &foreign, &data));
    bytes.extend(put_frame(2, dead.addr(0), &dead_key, &data));
    bytes.extend(put_frame(3, region.addr(1), &key, &data));
    bytes.extend(put_frame(4, region.addr(0) - 1, &key, &data[..1]));
    bytes.extend(put_frame(5, ro.addr(0), &ro.key(), &data));
    bytes.extend(put_frame(6, u64::MAX, &key, &data));
    bytes.extend(put_frame(8, region.addr(0), &forged, &data));
    bytes.extend(put_frame(9, ro.addr(0), &guessed, &data));
    bytes.extend(frame(7, b"still parsing"));
    for (buf, step) in [(1024, 3), (1024, usize::MAX), (64, 50)] {
        let mut rx = RxState::new(buf, false);
        let (msgs, events) = feed(&mut rx, &bytes, step.min(bytes.len()));
        let statuses: Vec<_> = events[1..].to_vec();
        assert_eq!(
            statuses,
            vec![
                Event::PutDone(1, PutStatus::Foreign),
                Event::PutDone(2, PutStatus::NoRegistration),
                Event::PutDone(3, PutStatus::Access),
                Event::PutDone(4, PutStatus::Access),
                Event::PutDone(5, PutStatus::Access),
                Event::PutDone(6, PutStatus::Access),
                Event::PutDone(8, PutStatus::NoRegistration),
                Event::PutDone(9, PutStatus::NoRegistration),
            ]
        );
        assert_eq!(msgs.0, vec![(7, b"still parsing".to_vec())]);
        assert_eq!(region.read(), vec![0xee; 64]);
        assert_eq!(ro.read(), vec![0xee; 64]);
    }
    region.dereg();
}

#[test]
fn deregistration_midway_stops_the_writes() {
    let mut region = Region::new(10_000, Access::REMOTE_WRITE);
    let data = pattern(10_000, 5);
    let mut bytes = frame(wire::CTRL_ACCEPT, b"");
    bytes.extend(put_frame(1, region.addr(0), &region.key(), &data));
    bytes.extend(frame(4, b"next"));
    let split = FRAME_HDR + FRAME_HDR + PUT_HDR + 3000;
    let (mut w, r) = UnixStream::pair().unwrap();
    r.set_nonblocking(true).unwrap();
    let mut rx = RxState::new(1024, false);
    let mut msgs = Msgs::default();
    let mut events = Vec::new();
    let mut n = 0;
    let mut pump = |rx: &mut RxState, msgs: &mut Msgs, events: &mut Vec<Event>| loop {
        match rx.fill(r.as_raw_fd()).unwrap() {
            Filled::Data { .. } => {
                while let Some(e) = rx.parse(SrcId(1), LIMITS, msgs, &mut n).unwrap() {
                    rx.data_ok = true;
                    events.push(e);
                }
            }
            Filled::WouldBlock => break,
            Filled::Eof => unreachable!(),
        }
    };
    w.write_all(&bytes[..split]).unwrap();
    pump(&mut rx, &mut msgs, &mut events);
    region.dereg();
    w.write_all(&bytes[split..]).unwrap();
    pump(&mut rx, &mut msgs, &mut events);
    assert_eq!(
        events,
        vec![
            Event::Ctrl(Ctrl::Accept),
            Event::PutDone(1, PutStatus::NoRegistration)
        ]
    );
    assert_eq!(msgs.0, vec![(4, b"next".to_vec())]);
    let got = region.read();
    assert!(got[..3000] == data[..3000], "written while registered");
    assert_eq!(got[3000..], vec![0xee; 7000], "nothing after mem_dereg");
}

#[test]
fn malformed_puts_and_acks_fail_the_parse() {
    let region = Region::new(8, Access::REMOTE_WRITE);
    let mut bad_len = put_frame(1, region.addr(0), &region.key(), b"abc");
    bad_len[FRAME_HDR + 52] = 4;
    let mut bad_status = wire::ack_frame(3, PutStatus::Ok).to_vec();
    bad_status[FRAME_HDR + 8] = 9;
    let too_long = wire::frame_hdr(CTRL_PUT, (PUT_HDR + (1 << 20) + 1) as u32).to_vec();
    let short = wire::frame_hdr(CTRL_PUT, (PUT_HDR - 1) as u32).to_vec();
    for bytes in [bad_len, bad_status, too_long, short] {
        let mut rx = RxState::new(1024, false);
        rx.data_ok = true;
        let (mut w, r) = UnixStream::pair().unwrap();
        w.write_all(&bytes).unwrap();
        w.write_all(&[0; PUT_HDR + 8]).unwrap();
        rx.fill(r.as_raw_fd()).unwrap();
        let mut n = 0;
        let res = rx.parse(SrcId(0), LIMITS, &mut Msgs::default(), &mut n);
        assert!(res.is_err(), "{bytes:?} gave {res:?}");
    }
    assert_eq!(region.read(), vec![0xee; 8]);
    let mut rx = RxState::new(1024, false);
    rx.data_ok = true;
    let (mut w, r) = UnixStream::pair().unwrap();
    w.write_all(&wire::ack_frame(3, PutStatus::Access)).unwrap();
    rx.fill(r.as_raw_fd()).unwrap();
    let mut n = 0;
    let res = rx.parse(SrcId(0), LIMITS, &mut Msgs::default(), &mut n);
    assert_eq!(res, Ok(Some(Event::PutAck(3, PutStatus::Access))));
}

#[test]
fn the_buffer_is_allocated_on_demand_and_given_back() {
    let mut rx = RxState::new(4096, false);
    rx.data_ok = true;
    assert_eq!(rx.held(), 0, "nothing before data");
    // Past its young drains (see the next test), a connection keeps it
    // between messages.
    rx.age();
    let (msgs, _) = feed(&mut rx, &frame(1, b"hi"), 64);
    assert_eq!(msgs.0.len(), 1);
    assert_eq!(rx.held(), RX_FIRST, "a small first allocation");
    assert!(rx.release());
    assert_eq!(rx.held(), 0);
    // A stream of data grows it to the segment, a large frame past it.
    let big = vec![5u8; 20_000];
    let (msgs, _) = feed(&mut rx, &frame(2, &big), big.len() + FRAME_HDR);
    assert_eq!(msgs.0, vec![(2, big)]);
    assert!(rx.grown());
    assert!(rx.held() <= 20_000 + FRAME_HDR + 4096);
    assert!(rx.release());
    assert_eq!(rx.held(), 0);
}

#[test]
fn a_young_connection_gives_its_buffer_back_each_time_it_empties() {
    let mut rx = RxState::new(4096, false);
    rx.data_ok = true;
    let (a, b) = UnixStream::pair().unwrap();
    b.set_nonblocking(true).unwrap();
    let mut msgs = Msgs::default();
    let mut n = 0;
    let mut freed = 0;
    for k in 0..2 * usize::from(YOUNG_DRAINS) {
        (&a).write_all(&frame(1, &k.to_le_bytes())).unwrap();
        assert!(matches!(
            rx.fill(b.as_raw_fd()).unwrap(),
            Filled::Data { .. }
        ));
        assert_eq!(rx.parse(SrcId(1), LIMITS, &mut msgs, &mut n).unwrap(), None);
        if rx.held() == 0 {
            freed += 1;
        }
    }
    assert_eq!(msgs.0.len(), 2 * usize::from(YOUNG_DRAINS));
    assert_eq!(freed, usize::from(YOUNG_DRAINS));
    // Busy now: the buffer stays.
    assert_eq!(rx.held(), RX_FIRST);
}

#[test]
fn a_partial_frame_keeps_the_buffer() {
    let mut rx = RxState::new(4096, false);
    rx.data_ok = true;
    let (a, b) = UnixStream::pair().unwrap();
    b.set_nonblocking(true).unwrap();
    (&a).write_all(&frame(1, b"hello")[..4]).unwrap();
    let mut msgs = Msgs::default();
    let mut n = 0;
    assert!(matches!(
        rx.fill(b.as_raw_fd()).unwrap(),
        Filled::Data { .. }
    ));
    assert_eq!(rx.parse(SrcId(1), LIMITS, &mut msgs, &mut n).unwrap(), None);
    assert!(!rx.release(), "four bytes wait in it");
    (&a).write_all(&frame(1, b"hello")[4..]).unwrap();
    assert!(matches!(
        rx.fill(b.as_raw_fd()).unwrap(),
        Filled::Data { .. }
    ));
    assert_eq!(rx.parse(SrcId(1), LIMITS, &mut msgs, &mut n).unwrap(), None);
    assert_eq!(msgs.0, vec![(1, b"hello".to_vec())]);
    assert!(rx.release());
}
