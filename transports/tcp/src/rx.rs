//! The receiving half of a connection: its buffer and frame parser.
//!
//! Bytes are read into the connection's buffer as they come; the hello (on
//! accepted connections) and control frames are returned to the iface, and
//! every complete message is handed to the sink straight from the buffer. A
//! partial frame stays; the buffer is compacted when the frame would not fit
//! behind it, and grows (once, up to the largest frame) when the frame is
//! larger than the buffer.

use std::io;
use std::os::fd::RawFd;

use uct::ucs::PeerMisbehaved;
use uct::{AmSink, SrcId};

use crate::sys::{self, Recv};
use crate::wire::{self, Ctrl, Frame, FRAME_HDR, HELLO_LEN};

/// What one `recv` found.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Filled {
    /// Bytes arrived; `more` when they filled the free space (more may wait).
    Data {
        more: bool,
    },
    WouldBlock,
    Eof,
}

/// The receive state of a connection.
#[derive(Debug)]
pub(crate) struct RxState {
    /// The next bytes are a hello (accepted connections).
    expect_hello: bool,
    /// Messages may arrive (the connection was accepted).
    pub(crate) data_ok: bool,
    /// Whether a message from it reached the sink.
    pub(crate) announced: bool,
    /// Received bytes not yet consumed are `buf[start..end]`.
    buf: Vec<u8>,
    /// The initial buffer size.
    seg: usize,
    start: usize,
    end: usize,
}

impl RxState {
    pub(crate) fn new(buf_size: usize, expect_hello: bool) -> RxState {
        RxState {
            expect_hello,
            data_ok: false,
            announced: false,
            buf: vec![0; buf_size.max(HELLO_LEN + FRAME_HDR)],
            seg: buf_size.max(HELLO_LEN + FRAME_HDR),
            start: 0,
            end: 0,
        }
    }

    /// Whether no partial frame is held.
    pub(crate) fn at_boundary(&self) -> bool {
        self.start == self.end
    }

    /// Reads once from `fd` into the free space.
    pub(crate) fn fill(&mut self, fd: RawFd) -> io::Result<Filled> {
        if self.end == self.buf.len() {
            // Only a partial header can sit at the very end (make_room keeps
            // a known frame in reach); move it to the front.
            self.compact();
        }
        if self.end == self.buf.len() {
            // Cannot happen (see above); never read into nothing, which
            // would look like the end of the stream.
            self.buf.resize(self.buf.len() + self.seg, 0);
        }
        let want = self.buf.len() - self.end;
        Ok(match sys::recv(fd, &mut self.buf[self.end..])? {
            Recv::Data(n) => {
                self.end += n;
                Filled::Data { more: n == want }
            }
            Recv::WouldBlock => Filled::WouldBlock,
            Recv::Eof => Filled::Eof,
        })
    }

    /// Consumes buffered bytes: delivers complete messages to `sink` as
    /// coming from `src` and stops after a control frame or the hello,
    /// which it returns, or when the rest is incomplete.
    pub(crate) fn parse(
        &mut self,
        src: SrcId,
        max_frame: usize,
        sink: &mut dyn AmSink,
        delivered: &mut usize,
    ) -> Result<Option<Ctrl>, PeerMisbehaved> {
        let out = self.parse_inner(src, max_frame, sink, delivered);
        if self.start == self.end {
            self.start = 0;
            self.end = 0;
        }
        out
    }

    fn parse_inner(
        &mut self,
        src: SrcId,
        max_frame: usize,
        sink: &mut dyn AmSink,
        delivered: &mut usize,
    ) -> Result<Option<Ctrl>, PeerMisbehaved> {
        if self.expect_hello {
            if self.end - self.start < HELLO_LEN {
                return Ok(None);
            }
            let mut hello = [0u8; HELLO_LEN];
            hello.copy_from_slice(&self.buf[self.start..self.start + HELLO_LEN]);
            let from = wire::parse_hello(&hello)?;
            self.start += HELLO_LEN;
            self.expect_hello = false;
            return Ok(Some(Ctrl::Hello(wire::key(from))));
        }
        while self.end - self.start >= FRAME_HDR {
            let mut hdr = [0u8; FRAME_HDR];
            hdr.copy_from_slice(&self.buf[self.start..self.start + FRAME_HDR]);
            let (id, len) = match wire::parse_frame_hdr(&hdr, max_frame)? {
                Frame::Ctrl(c) => {
                    self.start += FRAME_HDR;
                    return Ok(Some(c));
                }
                Frame::Am(id, len) => (id, len),
            };
            if !self.data_ok {
                return Err(PeerMisbehaved::Invalid {
                    what: "frame",
                    detail: "a message before the connection was accepted".into(),
                });
            }
            let frame = FRAME_HDR + len;
            if self.end - self.start < frame {
                self.make_room(frame);
                break;
            }
            sink.am(
                id,
                src,
                &self.buf[self.start + FRAME_HDR..self.start + frame],
            );
            *delivered += 1;
            self.announced = true;
            self.start += frame;
        }
        Ok(None)
    }

    /// Makes sure a frame of `frame` bytes starting at `start` fits.
    fn make_room(&mut self, frame: usize) {
        if self.buf.len() < frame {
            // Room for the next frame's start too, so that one read can
            // span the boundary.
            let mut bigger = vec![0; frame + self.seg];
            bigger[..self.end - self.start].copy_from_slice(&self.buf[self.start..self.end]);
            self.buf = bigger;
            self.end -= self.start;
            self.start = 0;
        } else if self.buf.len() - self.start < frame {
            self.compact();
        }
    }

    fn compact(&mut self) {
        if self.start > 0 {
            self.buf.copy_within(self.start..self.end, 0);
            self.end -= self.start;
            self.start = 0;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;
    use std::os::fd::AsRawFd;
    use std::os::unix::net::UnixStream;
    use uct::{AmId, EpId, Error, Token};

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
    fn feed(rx: &mut RxState, bytes: &[u8], step: usize) -> (Msgs, Vec<Ctrl>) {
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
                    while let Some(c) = rx.parse(SrcId(1), 1 << 20, &mut msgs, &mut n).unwrap() {
                        if matches!(c, Ctrl::Accept | Ctrl::Hello(_)) {
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
                vec![Ctrl::Hello(wire::key("127.0.0.1:9".parse().unwrap()))]
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
        assert_eq!(ctrls, vec![Ctrl::Accept]);
        assert_eq!(msgs.0, vec![(5, b"after".to_vec())]);
    }

    #[test]
    fn messages_before_accept_are_refused() {
        let mut rx = RxState::new(4096, false);
        let (mut w, b) = UnixStream::pair().unwrap();
        w.write_all(&frame(1, b"x")).unwrap();
        rx.fill(b.as_raw_fd()).unwrap();
        let mut n = 0;
        let r = rx.parse(SrcId(0), 100, &mut Msgs::default(), &mut n);
        assert!(matches!(r, Err(PeerMisbehaved::Invalid { .. })));
    }
}
