//! The payloads of PUT and PUT_ACK frames (layout in the parent module).

use uct::ucs::{AccessDenied, Error, PeerMisbehaved, Result, Status};

#[cfg(test)]
use super::{frame_hdr, CTRL_PUT_ACK, FRAME_HDR};
use crate::rkey::Owner;

/// Length of the header at the start of a PUT frame's payload.
pub(crate) const PUT_HDR: usize = 56;
/// Length of a PUT_ACK frame's payload.
pub(crate) const ACK_LEN: usize = 12;
/// Length of a whole PUT_ACK frame.
#[cfg(test)]
pub(crate) const ACK_FRAME: usize = FRAME_HDR + ACK_LEN;

/// The header of a PUT frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct PutHdr {
    /// The initiator's sequence number, echoed in the acknowledgement.
    pub(crate) seq: u64,
    /// Where the data goes in the target's memory.
    pub(crate) addr: u64,
    /// The process that packed the key.
    pub(crate) owner: Owner,
    /// The registration the key names.
    pub(crate) index: u32,
    pub(crate) generation: u32,
    /// The registration's secret, which the key carries.
    pub(crate) secret: u64,
    /// Bytes of data after the header.
    pub(crate) len: u32,
}

fn le<const N: usize>(b: &[u8], at: usize) -> [u8; N] {
    let mut out = [0u8; N];
    out.copy_from_slice(&b[at..at + N]);
    out
}

impl PutHdr {
    pub(crate) fn encode(&self) -> [u8; PUT_HDR] {
        let mut b = [0u8; PUT_HDR];
        b[0..8].copy_from_slice(&self.seq.to_le_bytes());
        b[8..16].copy_from_slice(&self.addr.to_le_bytes());
        b[16..24].copy_from_slice(&self.owner.host_id.to_le_bytes());
        b[24..32].copy_from_slice(&self.owner.nonce.to_le_bytes());
        b[32..36].copy_from_slice(&self.owner.pid.to_le_bytes());
        b[36..40].copy_from_slice(&self.index.to_le_bytes());
        b[40..44].copy_from_slice(&self.generation.to_le_bytes());
        b[44..52].copy_from_slice(&self.secret.to_le_bytes());
        b[52..56].copy_from_slice(&self.len.to_le_bytes());
        b
    }

    /// Decodes the header of a PUT frame whose payload is `frame_len`
    /// bytes: its length field must say the rest of the frame.
    pub(crate) fn decode(b: &[u8; PUT_HDR], frame_len: usize) -> Result<PutHdr, PeerMisbehaved> {
        let h = PutHdr {
            seq: u64::from_le_bytes(le(b, 0)),
            addr: u64::from_le_bytes(le(b, 8)),
            owner: Owner {
                host_id: u64::from_le_bytes(le(b, 16)),
                nonce: u64::from_le_bytes(le(b, 24)),
                pid: u32::from_le_bytes(le(b, 32)),
            },
            index: u32::from_le_bytes(le(b, 36)),
            generation: u32::from_le_bytes(le(b, 40)),
            secret: u64::from_le_bytes(le(b, 44)),
            len: u32::from_le_bytes(le(b, 52)),
        };
        if Some(h.len as usize) != frame_len.checked_sub(PUT_HDR) {
            return Err(PeerMisbehaved::Invalid {
                what: "put length",
                detail: format!("{} bytes in a frame of {frame_len}", h.len),
            });
        }
        Ok(h)
    }
}

/// The target's answer to a put.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum PutStatus {
    /// The data is in the target's memory.
    Ok = 0,
    /// The key names no live registration (never made, or ended).
    NoRegistration = 1,
    /// The key was packed by another process.
    Foreign = 2,
    /// The range is outside the registration, or it grants no remote
    /// write.
    Access = 3,
}

impl PutStatus {
    /// The status for an access that the registration table refused.
    pub(crate) fn of_refusal(e: &Error) -> PutStatus {
        match e.status() {
            Status::InvalidParam => PutStatus::NoRegistration,
            _ => PutStatus::Access,
        }
    }

    /// What the initiator's put completes with; `peer` names the target.
    pub(crate) fn result(self, peer: &dyn std::fmt::Display) -> Result<()> {
        match self {
            PutStatus::Ok => Ok(()),
            PutStatus::NoRegistration => Err(Error::InvalidParam(format!(
                "tcp: put to {peer}: the remote key names no live registration"
            ))),
            PutStatus::Foreign => Err(Error::InvalidParam(format!(
                "tcp: put to {peer}: the remote key was not packed by the target process"
            ))),
            PutStatus::Access => Err(Error::remote_access(
                "tcp",
                AccessDenied::Refused(
                    format!(
                        "put to {peer}: the range is outside the registration \
                         or the registration grants no remote write"
                    )
                    .into(),
                ),
            )),
        }
    }
}

/// The payload of a PUT_ACK frame.
pub(crate) fn ack_body(seq: u64, status: PutStatus) -> [u8; ACK_LEN] {
    let mut b = [0u8; ACK_LEN];
    b[..8].copy_from_slice(&seq.to_le_bytes());
    b[8..].copy_from_slice(&(status as u32).to_le_bytes());
    b
}

/// A whole PUT_ACK frame.
#[cfg(test)]
pub(crate) fn ack_frame(seq: u64, status: PutStatus) -> [u8; ACK_FRAME] {
    let mut b = [0u8; ACK_FRAME];
    b[..FRAME_HDR].copy_from_slice(&frame_hdr(CTRL_PUT_ACK, ACK_LEN as u32));
    b[FRAME_HDR..].copy_from_slice(&ack_body(seq, status));
    b
}

/// Decodes the payload of a PUT_ACK frame.
pub(crate) fn parse_ack(b: &[u8; ACK_LEN]) -> Result<(u64, PutStatus), PeerMisbehaved> {
    let seq = u64::from_le_bytes(le(b, 0));
    let status = match u32::from_le_bytes(le(b, 8)) {
        0 => PutStatus::Ok,
        1 => PutStatus::NoRegistration,
        2 => PutStatus::Foreign,
        3 => PutStatus::Access,
        s => {
            return Err(PeerMisbehaved::Invalid {
                what: "put status",
                detail: format!("{s}"),
            })
        }
    };
    Ok((seq, status))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::{parse_frame_hdr, Frame, CTRL_PUT};

    fn sample() -> PutHdr {
        PutHdr {
            seq: 0x0102_0304_0506_0708,
            addr: 0x7f00_dead_b000,
            owner: Owner {
                host_id: 0x1111_2222_3333_4444,
                pid: 4242,
                nonce: 0x5555_6666_7777_8888,
            },
            index: 9,
            generation: 17,
            secret: 0x0f1e_2d3c_4b5a_6978,
            len: 4095,
        }
    }

    /// A tiny deterministic generator for the random inputs.
    struct Rng(u64);

    impl Rng {
        fn byte(&mut self) -> u8 {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            self.0 as u8
        }
    }

    #[test]
    fn put_header_round_trip_at_documented_offsets() {
        let h = sample();
        let b = h.encode();
        assert_eq!(b[0..8], h.seq.to_le_bytes());
        assert_eq!(b[8..16], h.addr.to_le_bytes());
        assert_eq!(b[16..24], h.owner.host_id.to_le_bytes());
        assert_eq!(b[24..32], h.owner.nonce.to_le_bytes());
        assert_eq!(b[32..36], 4242u32.to_le_bytes());
        assert_eq!(b[36..40], 9u32.to_le_bytes());
        assert_eq!(b[40..44], 17u32.to_le_bytes());
        assert_eq!(b[44..52], 0x0f1e_2d3c_4b5a_6978u64.to_le_bytes());
        assert_eq!(b[52..56], 4095u32.to_le_bytes());
        assert_eq!(PutHdr::decode(&b, PUT_HDR + 4095), Ok(h));
        let empty = PutHdr { len: 0, ..h };
        assert_eq!(PutHdr::decode(&empty.encode(), PUT_HDR), Ok(empty));
    }

    #[test]
    fn put_length_must_match_the_frame() {
        let b = sample().encode();
        for frame_len in [0, 1, PUT_HDR - 1, PUT_HDR, PUT_HDR + 4094, PUT_HDR + 4096] {
            assert!(
                matches!(
                    PutHdr::decode(&b, frame_len),
                    Err(PeerMisbehaved::Invalid { .. })
                ),
                "{frame_len}"
            );
        }
        assert!(PutHdr::decode(&b, usize::MAX).is_err());
    }

    #[test]
    fn put_frame_headers_are_bounded() {
        let max_put = 1000;
        let parse = |len: u32| parse_frame_hdr(&frame_hdr(CTRL_PUT, len), 10, max_put);
        assert_eq!(parse(PUT_HDR as u32), Ok(Frame::Put(PUT_HDR)));
        assert_eq!(parse(PUT_HDR as u32 + 1000), Ok(Frame::Put(PUT_HDR + 1000)));
        for short in [0, 1, PUT_HDR as u32 - 1] {
            assert!(matches!(
                parse(short),
                Err(PeerMisbehaved::Truncated { .. })
            ));
        }
        for long in [PUT_HDR as u32 + 1001, u32::MAX] {
            assert!(matches!(
                parse(long),
                Err(PeerMisbehaved::FrameTooLong { .. })
            ));
        }
        assert_eq!(
            parse_frame_hdr(&frame_hdr(CTRL_PUT, u32::MAX), 0, usize::MAX),
            Ok(Frame::Put(u32::MAX as usize))
        );
        let ack = |len: u32| parse_frame_hdr(&frame_hdr(CTRL_PUT_ACK, len), 1 << 20, 1 << 20);
        assert_eq!(ack(ACK_LEN as u32), Ok(Frame::PutAck));
        for bad in [0, ACK_LEN as u32 - 1, ACK_LEN as u32 + 1, u32::MAX] {
            assert!(
                matches!(ack(bad), Err(PeerMisbehaved::Invalid { .. })),
                "{bad}"
            );
        }
    }

    #[test]
    fn acks_round_trip_and_unknown_statuses_are_refused() {
        for s in [
            PutStatus::Ok,
            PutStatus::NoRegistration,
            PutStatus::Foreign,
            PutStatus::Access,
        ] {
            let f = ack_frame(77, s);
            assert_eq!(f[..FRAME_HDR], frame_hdr(CTRL_PUT_ACK, ACK_LEN as u32));
            let p: [u8; ACK_LEN] = f[FRAME_HDR..].try_into().unwrap();
            assert_eq!(parse_ack(&p), Ok((77, s)));
        }
        let mut p: [u8; ACK_LEN] = ack_frame(1, PutStatus::Ok)[FRAME_HDR..].try_into().unwrap();
        for s in [4u32, 5, 0x100, u32::MAX] {
            p[8..].copy_from_slice(&s.to_le_bytes());
            assert!(parse_ack(&p).is_err(), "{s}");
        }
    }

    #[test]
    fn statuses_map_to_errors() {
        let peer = "127.0.0.1:1";
        assert!(PutStatus::Ok.result(&peer).is_ok());
        let st = |s: PutStatus| s.result(&peer).unwrap_err().status();
        assert_eq!(st(PutStatus::NoRegistration), Status::InvalidParam);
        assert_eq!(st(PutStatus::Foreign), Status::InvalidParam);
        assert_eq!(st(PutStatus::Access), Status::Rejected);
        let gone = Error::InvalidParam("gone".into());
        assert_eq!(PutStatus::of_refusal(&gone), PutStatus::NoRegistration);
        let out = Error::remote_access("tcp", AccessDenied::Refused("out".into()));
        assert_eq!(PutStatus::of_refusal(&out), PutStatus::Access);
    }

    #[test]
    fn random_and_truncated_headers_never_panic() {
        let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
        let good = sample().encode();
        for round in 0..5000 {
            let mut frame = [0u8; FRAME_HDR];
            frame.iter_mut().for_each(|b| *b = rng.byte());
            if round % 3 == 0 {
                frame[0] = CTRL_PUT;
            } else if round % 3 == 1 {
                frame[0] = CTRL_PUT_ACK;
            }
            let max_put = usize::from(rng.byte()) << (rng.byte() % 24);
            let parsed = parse_frame_hdr(&frame, 1 << 20, max_put);
            let len = u32::from_le_bytes([frame[1], frame[2], frame[3], frame[4]]) as usize;
            match parsed {
                Ok(Frame::Put(l)) => {
                    assert_eq!(l, len);
                    assert!(l >= PUT_HDR && l - PUT_HDR <= max_put);
                }
                Ok(Frame::PutAck) => assert_eq!(len, ACK_LEN),
                _ => {}
            }
            let mut hdr = [0u8; PUT_HDR];
            hdr.iter_mut().for_each(|b| *b = rng.byte());
            if round % 2 == 0 {
                // A valid header cut short, the rest random: every field
                // boundary gets a turn.
                let keep = usize::from(rng.byte()) % PUT_HDR;
                hdr[..keep].copy_from_slice(&good[..keep]);
            }
            let frame_len = if round % 4 == 0 {
                PUT_HDR + u32::from_le_bytes(hdr[52..].try_into().unwrap()) as usize
            } else {
                len
            };
            match PutHdr::decode(&hdr, frame_len) {
                Ok(h) => {
                    assert_eq!(h.encode(), hdr, "re-encodes");
                    assert_eq!(h.len as usize + PUT_HDR, frame_len);
                }
                Err(_) => assert_ne!(
                    Some(u32::from_le_bytes(hdr[52..].try_into().unwrap()) as usize),
                    frame_len.checked_sub(PUT_HDR)
                ),
            }
            let mut ack = [0u8; ACK_LEN];
            ack.iter_mut().for_each(|b| *b = rng.byte());
            if round % 2 == 0 {
                ack[9..].fill(0);
            }
            match parse_ack(&ack) {
                Ok((seq, s)) => {
                    assert_eq!(seq, u64::from_le_bytes(ack[..8].try_into().unwrap()));
                    assert_eq!(ack_frame(seq, s)[FRAME_HDR..], ack);
                }
                Err(_) => assert!(u32::from_le_bytes(ack[8..].try_into().unwrap()) > 3),
            }
        }
    }
}
