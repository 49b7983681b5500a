//! What travels on a connection.
//!
//! One TCP connection joins a pair of ifaces and carries frames both ways.
//! The side that connected starts with a hello of 17 bytes (IPv4) or 29
//! bytes (IPv6):
//!
//! | bytes  | field   | value                                              |
//! |--------|---------|----------------------------------------------------|
//! | 0..8   | magic   | [`MAGIC`], little-endian                           |
//! | 8..10  | version | [`VERSION`], little-endian                         |
//! | 10..12 | port    | the connector's listening port, big-endian         |
//! | 12     | family  | 4 (IPv4) or 6 (IPv6)                               |
//! | 13..   | ip      | the connector's iface address (4 or 16 bytes, network order) |
//!
//! The acceptor checks each field as soon as its bytes are in: a wrong
//! magic, another version (an older peer's 16-byte hello among them) or
//! an unknown family fails the connection without waiting for more.
//! The accepting side answers with an `ACCEPT` or `REJECT` control frame.
//! After that, both sides send frames, each a 5-byte header and its payload:
//!
//! | bytes  | field  | value                                 |
//! |--------|--------|---------------------------------------|
//! | 0      | am_id  | active message id                     |
//! | 1..5   | length | payload length, u32 little-endian     |
//! | 5..    | payload| `length` bytes                        |
//!
//! Ids below [`uct::AM_ID_MAX`] are the user's. Above, the transport's own:
//! [`CTRL_ACCEPT`] and [`CTRL_REJECT`], with no payload, only as the first
//! frame towards a connector; [`CTRL_PUT`] and [`CTRL_PUT_ACK`] (below).
//! Any other id is an error.
//!
//! The payload of an `am_short` frame is the 8-byte little-endian header
//! followed by the payload; `am_bcopy`, the parts concatenated; `am_zcopy`,
//! the header then the iov. A receiver rejects a length above its largest
//! frame.
//!
//! REJECT settles connections opened by both sides at once: the connection
//! opened by the iface with the smaller [`key`] (listening address,
//! ordered by IP, then port) is kept, the other one is
//! rejected and its queued frames move to the kept one before any frame was
//! sent on it.
//!
//! # Put
//!
//! `put_zcopy` sends a PUT frame ([`CTRL_PUT`]) whose payload is a 56-byte
//! header ([`PutHdr`]) followed by the data, sent from the caller's iov:
//!
//! | bytes  | field      | value                                            |
//! |--------|------------|--------------------------------------------------|
//! | 0..8   | seq        | the initiator's put number on this connection    |
//! | 8..16  | addr       | destination address in the target's memory       |
//! | 16..24 | host id    | owner of the key: host id (key bytes 8..16)      |
//! | 24..32 | nonce      | owner of the key: process nonce (key 20..28)     |
//! | 32..36 | pid        | owner of the key: process id (key 16..20)        |
//! | 36..40 | index      | registration index (key 28..32)                  |
//! | 40..44 | generation | registration generation (key 32..36)             |
//! | 44..52 | secret     | registration secret (key 36..44)                 |
//! | 52..56 | length     | data bytes; must equal the frame length - 56     |
//! | 56..   | data       | `length` bytes                                   |
//!
//! All fields little-endian; the key layout is in `rkey.rs`. A frame
//! shorter than 56 bytes, with more than the receiver's `max_put_zcopy`
//! bytes of data, or whose length field disagrees with the frame fails the
//! connection. Otherwise the target checks the key: its owner must be the
//! target process, its registration live with that secret (a wrong
//! secret gets the status of a registration that ended, status 1),
//! `[addr, addr + length)` inside it, with remote write rights. The data
//! is written as it arrives, each piece after checking again that the
//! registration is live; when
//! the key is refused (at the start or midway) the rest is read and
//! dropped. After the last byte the target answers a PUT_ACK frame
//! ([`CTRL_PUT_ACK`]) with a 12-byte payload:
//!
//! | bytes  | field  | value                                            |
//! |--------|--------|--------------------------------------------------|
//! | 0..8   | seq    | the put's seq                                    |
//! | 8..12  | status | u32 little-endian, [`PutStatus`]: 0 ok, 1 no live registration, 2 key of another process, 3 outside the registration or no remote write |
//!
//! A connection's acknowledgements come in the order of its puts; one
//! with another seq, an unknown status, a payload length other than 12,
//! or no put outstanding fails the connection. An initiator has at most
//! [`MAX_PUTS`] puts unacknowledged on a connection, so a target never
//! needs to hold more acknowledgements than that for a peer that reads
//! them; one that must, fails the connection.

mod hello;
mod put;

pub(crate) use hello::{hello, key, parse_hello, Key, HELLO_MAX};

#[cfg(test)]
pub(crate) use put::ack_frame;
pub(crate) use put::{ack_body, parse_ack, PutHdr, PutStatus, ACK_LEN, PUT_HDR};

use uct::ucs::PeerMisbehaved;
use uct::{AmId, AM_ID_MAX};

/// Length of a frame header.
pub(crate) const FRAME_HDR: usize = 5;

/// First 8 bytes of every connection: `"rucx-tcp"` read as a little-endian
/// u64.
pub(crate) const MAGIC: u64 = u64::from_le_bytes(*b"rucx-tcp");

/// Version of this wire format (3: the hello carries IPv4 or IPv6).
pub(crate) const VERSION: u16 = 3;

/// Control frame: the connection is accepted; frames may flow.
pub(crate) const CTRL_ACCEPT: AmId = 0xf0;
/// Control frame: the connection is refused in favour of the one the
/// acceptor opened towards the connector.
pub(crate) const CTRL_REJECT: AmId = 0xf1;

/// A put: header and data (see the module doc).
pub(crate) const CTRL_PUT: AmId = 0xf2;
/// A put's acknowledgement.
pub(crate) const CTRL_PUT_ACK: AmId = 0xf3;

/// Most puts an initiator leaves unacknowledged on one connection.
pub(crate) const MAX_PUTS: usize = 1024;

/// A control frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Ctrl {
    /// The connector's hello, with its iface key.
    Hello(Key),
    Accept,
    Reject,
}

/// Encodes a frame header.
pub(crate) fn frame_hdr(id: AmId, len: u32) -> [u8; FRAME_HDR] {
    let l = len.to_le_bytes();
    [id, l[0], l[1], l[2], l[3]]
}

/// What a frame header announces.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Frame {
    /// A user message of this id and payload length.
    Am(AmId, usize),
    /// A control frame (no payload).
    Ctrl(Ctrl),
    /// A put of this payload length (header and data).
    Put(usize),
    /// A put's acknowledgement ([`ACK_LEN`] bytes of payload).
    PutAck,
}

/// Decodes and checks a frame header: user messages up to `max_len`
/// bytes, puts of up to `max_put` bytes of data.
pub(crate) fn parse_frame_hdr(
    hdr: &[u8; FRAME_HDR],
    max_len: usize,
    max_put: usize,
) -> Result<Frame, PeerMisbehaved> {
    let id = hdr[0];
    let len = u32::from_le_bytes([hdr[1], hdr[2], hdr[3], hdr[4]]) as usize;
    if id < AM_ID_MAX {
        if len > max_len {
            return Err(PeerMisbehaved::FrameTooLong { len, max: max_len });
        }
        return Ok(Frame::Am(id, len));
    }
    let (frame, want) = match id {
        CTRL_ACCEPT => (Frame::Ctrl(Ctrl::Accept), 0),
        CTRL_REJECT => (Frame::Ctrl(Ctrl::Reject), 0),
        CTRL_PUT_ACK => (Frame::PutAck, ACK_LEN),
        CTRL_PUT => {
            if len < PUT_HDR {
                return Err(PeerMisbehaved::Truncated {
                    what: "put header",
                    len,
                    min: PUT_HDR,
                });
            }
            let max = max_put.saturating_add(PUT_HDR);
            if len > max {
                return Err(PeerMisbehaved::FrameTooLong { len, max });
            }
            return Ok(Frame::Put(len));
        }
        _ => return Err(PeerMisbehaved::UnknownId(id)),
    };
    if len != want {
        return Err(PeerMisbehaved::Invalid {
            what: "control frame length",
            detail: format!("{len}, expected {want}"),
        });
    }
    Ok(frame)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frame_header_round_trip() {
        let h = frame_hdr(7, 0x0102_0304);
        assert_eq!(h, [7, 4, 3, 2, 1]);
        assert_eq!(
            parse_frame_hdr(&h, usize::MAX, 0),
            Ok(Frame::Am(7, 0x0102_0304))
        );
        assert_eq!(parse_frame_hdr(&frame_hdr(0, 0), 0, 0), Ok(Frame::Am(0, 0)));
        assert_eq!(
            parse_frame_hdr(&frame_hdr(CTRL_ACCEPT, 0), 0, 0),
            Ok(Frame::Ctrl(Ctrl::Accept))
        );
        assert_eq!(
            parse_frame_hdr(&frame_hdr(CTRL_REJECT, 0), 0, 0),
            Ok(Frame::Ctrl(Ctrl::Reject))
        );
    }

    #[test]
    fn bad_frames_are_rejected() {
        assert_eq!(
            parse_frame_hdr(&frame_hdr(1, 101), 100, 0),
            Err(PeerMisbehaved::FrameTooLong { len: 101, max: 100 })
        );
        assert_eq!(
            parse_frame_hdr(&frame_hdr(AM_ID_MAX, 1), 100, 0),
            Err(PeerMisbehaved::UnknownId(AM_ID_MAX))
        );
        assert!(matches!(
            parse_frame_hdr(&frame_hdr(CTRL_ACCEPT, 1), 100, 0),
            Err(PeerMisbehaved::Invalid { .. })
        ));
        assert_eq!(
            parse_frame_hdr(&[255; FRAME_HDR], 100, 0),
            Err(PeerMisbehaved::UnknownId(255))
        );
        assert_eq!(
            parse_frame_hdr(&[0, 255, 255, 255, 255], 100, 0),
            Err(PeerMisbehaved::FrameTooLong {
                len: u32::MAX as usize,
                max: 100
            })
        );
    }
}
