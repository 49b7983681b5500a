//! The receiving half of a connection: its buffer and frame parser.
//!
//! Bytes are read into the connection's buffer as they come; the hello (on
//! accepted connections), control frames and the end of a put are returned
//! to the iface, and every complete message is handed to the sink straight
//! from the buffer. A partial frame stays; the buffer is compacted when the
//! frame would not fit behind it, and grows (up to the largest frame) when
//! the frame is larger than the buffer.
//!
//! The buffer costs what is used: a connection starts with none; the first
//! read allocates [`RX_FIRST`] bytes (enough for the handshake), a read that
//! fills them grows it to the configured segment, and nothing is ever zeroed
//! (reads go into the vector's spare capacity). [`RxState::release`] gives
//! an empty buffer back; the iface calls it once the handshake is done and
//! when the connection has been quiet for a while, never between the
//! messages of a busy one. A young connection gives it back each time it
//! empties, the first [`YOUNG_DRAINS`] times.
//!
//! The data of a PUT frame is not buffered whole: once its header is in,
//! what the buffer holds of the data is written to the destination, and
//! the rest is received straight from the socket into it (`rx_put.rs`).

use std::io;
use std::os::fd::RawFd;

use uct::ucs::PeerMisbehaved;
use uct::{AmSink, SrcId};

use crate::idle::YOUNG_DRAINS;
use crate::rx_am::{AmRx, DIRECT_MIN};
use crate::rx_put::PutRx;
use crate::sys::{self, Recv};
use crate::wire::{self, Ctrl, Frame, PutHdr, PutStatus, ACK_LEN, FRAME_HDR, HELLO_MAX, PUT_HDR};

/// The first allocation of a connection's buffer: room for a hello, control
/// frames, an acknowledgement or a few small messages.
pub(crate) const RX_FIRST: usize = 512;

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

/// Something the parser stopped at, for the iface to handle.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Event {
    /// The hello or a control frame.
    Ctrl(Ctrl),
    /// The data of a peer's put is all in (or dropped): answer it.
    PutDone(u64, PutStatus),
    /// The peer answered one of our puts.
    PutAck(u64, PutStatus),
}

/// What follows a frame header that the parser handles itself.
#[derive(Debug, Clone, Copy)]
enum Body {
    Am(uct::AmId),
    PutAck,
    /// A put with this payload length.
    Put(usize),
}

/// The largest frames a connection accepts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct RxLimits {
    /// Payload of a user message.
    pub(crate) max_frame: usize,
    /// Data of a put.
    pub(crate) max_put: usize,
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
    /// Received bytes not yet consumed are `buf[start..]`; the spare
    /// capacity is where the next read goes. Empty and unallocated while
    /// nothing is buffered on a quiet connection.
    buf: Vec<u8>,
    /// The size the buffer grows to once a read fills [`RX_FIRST`].
    seg: u32,
    start: usize,
    /// Frames whose data goes straight to its destination; boxed (most
    /// connections never receive one) and kept while the buffer is.
    direct: Option<Box<Direct>>,
    /// Times the buffer emptied, counted up to [`YOUNG_DRAINS`].
    drains: u8,
}

/// The frame whose data is arriving into its destination: at most one of
/// the two at a time.
#[derive(Debug, Default)]
struct Direct {
    /// The put whose data is arriving.
    put: Option<PutRx>,
    /// The active message whose data is arriving into the sink's
    /// destination.
    am: Option<AmRx>,
}

impl Direct {
    fn is_idle(&self) -> bool {
        self.put.is_none() && self.am.is_none()
    }
}

impl RxState {
    pub(crate) fn new(buf_size: usize, expect_hello: bool) -> RxState {
        RxState {
            expect_hello,
            data_ok: false,
            announced: false,
            buf: Vec::new(),
            seg: u32::try_from(buf_size.max(HELLO_MAX + FRAME_HDR + PUT_HDR)).unwrap_or(u32::MAX),
            start: 0,
            direct: None,
            drains: 0,
        }
    }

    /// The segment size.
    fn seg(&self) -> usize {
        self.seg as usize
    }

    /// Whether no partial frame is held.
    pub(crate) fn at_boundary(&self) -> bool {
        self.is_empty() && self.direct.as_ref().is_none_or(|d| d.is_idle())
    }

    /// Whether no received byte waits in the buffer.
    fn is_empty(&self) -> bool {
        self.start == self.buf.len()
    }

    /// Bytes of heap memory the buffer (and the box of direct frames)
    /// holds.
    pub(crate) fn held(&self) -> usize {
        let direct = self.direct.as_ref().map_or(0, |_| size_of::<Direct>());
        self.buf.capacity() + direct
    }

    /// Whether the buffer grew past its segment (for a large frame).
    pub(crate) fn grown(&self) -> bool {
        self.buf.capacity() > self.seg()
    }

    /// Frees the buffer if nothing waits in it (the data of a put or of a
    /// message received in place does not need it), and the box of direct
    /// frames if none is arriving. Returns whether the connection now
    /// holds no receive memory.
    pub(crate) fn release(&mut self) -> bool {
        if self.is_empty() {
            self.buf = Vec::new();
            self.start = 0;
        }
        if self.direct.as_ref().is_some_and(|d| d.is_idle()) {
            self.direct = None;
        }
        self.held() == 0
    }

    /// Counts it past its young drains, as if it had been busy.
    #[cfg(test)]
    pub(crate) fn age(&mut self) {
        self.drains = YOUNG_DRAINS;
    }

    /// The token of the active message being received into a sink's
    /// destination, if any: the connection failing ends it.
    pub(crate) fn take_direct(&mut self) -> Option<uct::Token> {
        self.direct.as_mut()?.am.take().map(|a| a.token())
    }

    /// The box of direct frames, allocated on first use.
    fn direct(&mut self) -> &mut Direct {
        self.direct.get_or_insert_with(Box::default)
    }

    /// Reads once from `fd`: into the free space, or, while the data of a
    /// put is arriving and nothing is buffered, straight into its
    /// destination.
    pub(crate) fn fill(&mut self, fd: RawFd) -> io::Result<Filled> {
        let empty = self.is_empty();
        if let Some(am) = self.direct.as_mut().and_then(|d| d.am.as_mut()) {
            if empty && am.left() > 0 {
                let want = am.left();
                return Ok(match am.recv(fd)? {
                    Recv::Data(n) => Filled::Data { more: n == want },
                    Recv::WouldBlock => Filled::WouldBlock,
                    Recv::Eof => Filled::Eof,
                });
            }
        }
        if let Some(put) = self.direct.as_mut().and_then(|d| d.put.as_mut()) {
            if empty && put.left() > 0 {
                let want = put.left();
                return Ok(match put.recv(fd)? {
                    Recv::Data(n) => Filled::Data { more: n == want },
                    Recv::WouldBlock => Filled::WouldBlock,
                    Recv::Eof => Filled::Eof,
                });
            }
        }
        if self.buf.capacity() == 0 {
            self.buf.reserve_exact(RX_FIRST.min(self.seg()));
        }
        if self.buf.len() == self.buf.capacity() {
            // Only a partial header can sit at the very end (make_room keeps
            // a known frame in reach); move it to the front.
            self.compact();
        }
        if self.buf.len() == self.buf.capacity() {
            // Cannot happen (see above); never read into nothing, which
            // would look like the end of the stream.
            self.buf.reserve_exact(self.seg());
        }
        let spare = self.buf.spare_capacity_mut();
        let want = spare.len();
        // SAFETY: the spare capacity of `buf`, `want` (not 0) bytes valid
        // for writes; `recv` only writes into them.
        let got = unsafe { sys::recv_raw(fd, spare.as_mut_ptr().cast(), want) }?;
        Ok(match got {
            Recv::Data(n) => {
                let len = self.buf.len() + n;
                // SAFETY: `recv` initialized the `n <= want` bytes after
                // the old length, which stays within the capacity.
                unsafe { self.buf.set_len(len) };
                let more = n == want;
                if more && self.buf.capacity() < self.seg() {
                    // A busy connection: read a segment at a time from now on.
                    self.buf.reserve_exact(self.seg() - self.buf.len());
                }
                Filled::Data { more }
            }
            Recv::WouldBlock => Filled::WouldBlock,
            Recv::Eof => Filled::Eof,
        })
    }

    /// Consumes buffered bytes: delivers complete messages to `sink` as
    /// coming from `src`, writes put data, and stops at an [`Event`],
    /// which it returns, or when the rest is incomplete.
    pub(crate) fn parse(
        &mut self,
        src: SrcId,
        limits: RxLimits,
        sink: &mut dyn AmSink,
        delivered: &mut usize,
    ) -> Result<Option<Event>, PeerMisbehaved> {
        let out = self.parse_inner(src, limits, sink, delivered);
        if self.is_empty() {
            self.start = 0;
            if self.drains < YOUNG_DRAINS && self.buf.capacity() > 0 {
                // Young: the buffer goes back at once.
                self.drains += 1;
                self.buf = Vec::new();
            } else {
                // Keeps the capacity: a busy connection reuses it.
                self.buf.clear();
            }
        }
        out
    }

    fn parse_inner(
        &mut self,
        src: SrcId,
        limits: RxLimits,
        sink: &mut dyn AmSink,
        delivered: &mut usize,
    ) -> Result<Option<Event>, PeerMisbehaved> {
        if self.expect_hello {
            let Some((from, len)) = wire::parse_hello(&self.buf[self.start..])? else {
                return Ok(None);
            };
            self.start += len;
            self.expect_hello = false;
            return Ok(Some(Event::Ctrl(Ctrl::Hello(wire::key(from)))));
        }
        loop {
            if let Some(am) = self.direct.as_mut().and_then(|d| d.am.as_mut()) {
                let n = (self.buf.len() - self.start).min(am.left());
                am.absorb(&self.buf[self.start..self.start + n]);
                self.start += n;
                if am.left() > 0 {
                    return Ok(None);
                }
                let token = am.token();
                self.direct().am = None;
                sink.am_end(token, Ok(()));
                *delivered += 1;
                continue;
            }
            if let Some(put) = self.direct.as_mut().and_then(|d| d.put.as_mut()) {
                let n = (self.buf.len() - self.start).min(put.left());
                put.absorb(&self.buf[self.start..self.start + n]);
                self.start += n;
                let Some((seq, status)) = put.finished() else {
                    return Ok(None);
                };
                self.direct().put = None;
                return Ok(Some(Event::PutDone(seq, status)));
            }
            if self.buf.len() - self.start < FRAME_HDR {
                return Ok(None);
            }
            let mut hdr = [0u8; FRAME_HDR];
            hdr.copy_from_slice(&self.buf[self.start..self.start + FRAME_HDR]);
            // What must be buffered before the frame can be handled: all
            // of a message or an acknowledgement, the header of a put.
            let (body_len, body) =
                match wire::parse_frame_hdr(&hdr, limits.max_frame, limits.max_put)? {
                    Frame::Ctrl(c) => {
                        self.start += FRAME_HDR;
                        return Ok(Some(Event::Ctrl(c)));
                    }
                    Frame::Am(id, len) => (len, Body::Am(id)),
                    Frame::PutAck => (ACK_LEN, Body::PutAck),
                    Frame::Put(len) => (PUT_HDR, Body::Put(len)),
                };
            if !self.data_ok {
                return Err(PeerMisbehaved::Invalid {
                    what: "frame",
                    detail: "a message before the connection was accepted".into(),
                });
            }
            let need = FRAME_HDR + body_len;
            if self.buf.len() - self.start < need {
                if let Body::Am(id) = body {
                    if self.begin_direct(id, src, body_len, sink) {
                        continue;
                    }
                }
                self.make_room(need);
                return Ok(None);
            }
            let at = self.start + FRAME_HDR;
            self.start += need;
            let bytes = &self.buf[at..self.start];
            match body {
                Body::Am(id) => {
                    sink.am(id, src, bytes);
                    *delivered += 1;
                    self.announced = true;
                }
                Body::PutAck => {
                    let mut b = [0u8; ACK_LEN];
                    b.copy_from_slice(bytes);
                    let (seq, status) = wire::parse_ack(&b)?;
                    return Ok(Some(Event::PutAck(seq, status)));
                }
                Body::Put(len) => {
                    let mut b = [0u8; PUT_HDR];
                    b.copy_from_slice(bytes);
                    let h = PutHdr::decode(&b, len)?;
                    self.direct().put = Some(PutRx::begin(&h));
                }
            }
        }
    }

    /// Offers the sink a large message of `len` bytes whose header is at
    /// `start` and whose data is not all here, to be received straight
    /// into a place it names. Whether the sink took it.
    fn begin_direct(
        &mut self,
        id: uct::AmId,
        src: SrcId,
        len: usize,
        sink: &mut dyn AmSink,
    ) -> bool {
        let at = self.start + FRAME_HDR;
        let here = self.buf.len() - at;
        if len < DIRECT_MIN || here < uct::AM_HEAD_MIN.min(len) {
            return false;
        }
        let Some(dest) = sink.am_begin(id, src, &self.buf[at..], len) else {
            return false;
        };
        // A sink cannot make the iface skip past the message.
        let hdr = dest.hdr().min(here).min(len);
        self.start = at + hdr;
        self.announced = true;
        self.direct().am = Some(AmRx::new(dest, len - hdr));
        true
    }

    /// Makes sure a frame of `frame` bytes starting at `start` fits.
    fn make_room(&mut self, frame: usize) {
        if self.buf.capacity() - self.start < frame {
            self.compact();
        }
        if self.buf.capacity() < frame {
            // Room for the next frame's start too, so that one read can
            // span the boundary; no more than a segment beyond the frame.
            let want = if frame <= self.seg() {
                self.seg()
            } else {
                frame + self.seg()
            };
            self.buf.reserve_exact(want - self.buf.len());
        }
    }

    fn compact(&mut self) {
        if self.start > 0 {
            self.buf.drain(..self.start);
            self.start = 0;
        }
    }
}

#[cfg(test)]
mod tests;
