//! Connection setup: the MPA Request/Reply exchange (RFC 5044 §7.1, with
//! RFC 6581's IRD/ORD word and peer-to-peer mode) as pure decisions, and
//! the reading of one frame from a socket.
//!
//! Negotiation follows Linux siw's relaxed rules: the responder's ORD is
//! cut to the initiator's IRD and its IRD raised to the initiator's ORD
//! (within the device limit); the initiator does the same with the reply.
//! A responder in peer-to-peer mode picks one ready-to-receive message:
//! a zero-length WRITE if offered, else a zero-length READ, else proposes
//! a WRITE; never a zero-length SEND (it would take a posted receive).

use std::io;
use std::os::fd::{AsRawFd, OwnedFd};

use rucx_rdma::ConnParam;
use uct::ucs::sock::{self, Recv};

use super::qp::Rtr;
use crate::config::{Settings, MAX_RD};
use crate::wire::mpa::{EnhancedWord, MpaFrame, HEADER_LEN};
use crate::wire::WireError;

/// What both sides agreed on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Agreed {
    pub(crate) crc: bool,
    pub(crate) ord: u32,
    pub(crate) ird: u32,
    pub(crate) rtr: Option<Rtr>,
}

fn depth(v: u32, default: u32) -> u32 {
    if v == 0 {
        default
    } else {
        v.min(MAX_RD)
    }
}

/// The request an initiator sends.
pub(crate) fn request(s: &Settings, param: &ConnParam) -> MpaFrame {
    let enhanced = (s.rev == 2).then(|| EnhancedWord {
        p2p: s.p2p,
        rtr_send: false,
        ird: depth(param.ird, s.ird) as u16,
        rtr_write: s.p2p,
        rtr_read: s.p2p,
        ord: depth(param.ord, s.ord) as u16,
    });
    MpaFrame {
        reply: false,
        markers: false,
        crc: s.crc,
        reject: false,
        rev: s.rev,
        enhanced,
        private_data: param.private_data.clone(),
    }
}

/// The peer's parameters as a request (or reply) states them.
pub(crate) fn peer_param(s: &Settings, f: &MpaFrame) -> ConnParam {
    let (ord, ird) = match f.enhanced {
        Some(w) => (u32::from(w.ord), u32::from(w.ird)),
        None => (s.ord, s.ird),
    };
    ConnParam {
        private_data: f.private_data.clone(),
        ord,
        ird,
    }
}

/// Why a request is answered with a rejecting reply at once.
pub(crate) fn refuse(s: &Settings, req: &MpaFrame) -> Option<&'static str> {
    if req.markers {
        Some("markers requested")
    } else if !(req.rev == 1 || (req.rev == 2 && s.rev == 2)) {
        Some("MPA revision not supported")
    } else {
        None
    }
}

/// A rejecting reply (`rdma_reject`, or a request we cannot serve): the
/// request's revision unless we do not speak it.
pub(crate) fn reject_reply(s: &Settings, req: &MpaFrame, private_data: &[u8]) -> MpaFrame {
    let rev = if req.rev == 1 || req.rev == s.rev {
        req.rev
    } else {
        s.rev
    };
    let enhanced = (rev == 2 && req.enhanced.is_some()).then(EnhancedWord::default);
    MpaFrame {
        reply: true,
        markers: false,
        crc: req.crc,
        reject: true,
        rev,
        enhanced,
        private_data: private_data.to_vec(),
    }
}

/// The accepting reply and what it agrees on.
pub(crate) fn accept_reply(s: &Settings, req: &MpaFrame, param: &ConnParam) -> (MpaFrame, Agreed) {
    let mut ord = depth(param.ord, s.ord);
    let mut ird = depth(param.ird, s.ird);
    let mut rtr = None;
    let enhanced = req.enhanced.map(|w| {
        ord = ord.min(u32::from(w.ird));
        ird = ird.max(u32::from(w.ord)).min(MAX_RD);
        let mut reply = EnhancedWord {
            p2p: w.p2p,
            ird: ird as u16,
            ord: ord as u16,
            ..EnhancedWord::default()
        };
        if w.p2p {
            if w.rtr_write || !w.rtr_read {
                reply.rtr_write = true;
                rtr = Some(Rtr::Write);
            } else {
                reply.rtr_read = true;
                rtr = Some(Rtr::Read);
            }
        }
        reply
    });
    let crc = req.crc || s.crc;
    let reply = MpaFrame {
        reply: true,
        markers: false,
        crc,
        reject: false,
        rev: req.rev,
        enhanced,
        private_data: param.private_data.clone(),
    };
    (reply, Agreed { crc, ord, ird, rtr })
}

/// What an initiator makes of the reply to `req` (sent with `param`).
pub(crate) fn on_reply(req: &MpaFrame, reply: &MpaFrame) -> Result<Agreed, String> {
    if reply.markers {
        return Err("the responder asks for markers".into());
    }
    if reply.rev != req.rev {
        return Err(format!(
            "MPA revision {} in the reply to a revision {} request",
            reply.rev, req.rev
        ));
    }
    let crc = req.crc || reply.crc;
    let Some(mine) = req.enhanced else {
        return Ok(Agreed {
            crc,
            ord: 0,
            ird: 0,
            rtr: None,
        });
    };
    let theirs = reply
        .enhanced
        .ok_or("the reply lacks the IRD/ORD word of revision 2")?;
    if u32::from(theirs.ord) > MAX_RD {
        return Err(format!(
            "insufficient IRD: the responder asks for {} outstanding READs",
            theirs.ord
        ));
    }
    let ord = u32::from(mine.ord).min(u32::from(theirs.ird));
    let ird = u32::from(mine.ird).max(u32::from(theirs.ord));
    let rtr = if mine.p2p && theirs.p2p {
        if theirs.rtr_write && mine.rtr_write {
            Some(Rtr::Write)
        } else if theirs.rtr_read && mine.rtr_read {
            Some(Rtr::Read)
        } else {
            return Err("no ready-to-receive message agreed".into());
        }
    } else {
        None
    };
    Ok(Agreed { crc, ord, ird, rtr })
}

/// Progress of reading one MPA frame.
#[derive(Debug)]
pub(crate) enum FrameRead {
    /// The whole frame.
    Done(MpaFrame),
    /// More bytes are needed.
    Pending,
    /// The peer closed or broke the connection, or sent a bad frame.
    Failed(String),
}

/// Reads the frame being received into `buf`: exactly its 20 header bytes,
/// then exactly its private data, so no byte after it is taken.
pub(crate) fn read_frame(fd: &OwnedFd, buf: &mut Vec<u8>) -> FrameRead {
    loop {
        let need = if buf.len() < HEADER_LEN {
            HEADER_LEN
        } else {
            HEADER_LEN + usize::from(u16::from_be_bytes([buf[18], buf[19]]))
        };
        if buf.len() >= HEADER_LEN {
            match MpaFrame::decode(buf) {
                Ok(Some((frame, _))) => return FrameRead::Done(frame),
                Ok(None) => {}
                Err(e) => return FrameRead::Failed(bad(&e)),
            }
        }
        let have = buf.len();
        buf.resize(need, 0);
        match sock::recv(fd.as_raw_fd(), &mut buf[have..]) {
            Ok(Recv::Data(n)) => buf.truncate(have + n),
            Ok(Recv::WouldBlock) => {
                buf.truncate(have);
                return FrameRead::Pending;
            }
            Ok(Recv::Eof) => return FrameRead::Failed("the peer closed the connection".into()),
            Err(e) => return FrameRead::Failed(io_err(&e)),
        }
        // A wrong key is refused as soon as its first bytes are in.
        if let Err(e) = MpaFrame::decode(buf) {
            return FrameRead::Failed(bad(&e));
        }
    }
}

fn bad(e: &WireError) -> String {
    format!("bad MPA frame: {e}")
}

fn io_err(e: &io::Error) -> String {
    format!("MPA exchange: {e}")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::IwarpConfig;

    fn settings() -> Settings {
        Settings::from_config(&IwarpConfig::default()).unwrap()
    }

    fn param(ord: u32, ird: u32) -> ConnParam {
        ConnParam {
            private_data: b"pd".to_vec(),
            ord,
            ird,
        }
    }

    #[test]
    fn peer_to_peer_write_rtr_and_depths() {
        let s = settings();
        let req = request(&s, &param(8, 4));
        let w = req.enhanced.unwrap();
        assert!(w.p2p && w.rtr_write && w.rtr_read && !w.rtr_send);
        assert_eq!((w.ord, w.ird), (8, 4));
        // The responder wants ORD 16 (cut to the initiator's IRD 4) and
        // IRD 2 (raised to the initiator's ORD 8).
        let (reply, agreed) = accept_reply(&s, &req, &param(16, 2));
        assert_eq!((agreed.ord, agreed.ird), (4, 8));
        assert_eq!(agreed.rtr, Some(Rtr::Write));
        let rw = reply.enhanced.unwrap();
        assert!(rw.p2p && rw.rtr_write && !rw.rtr_read);
        let mine = on_reply(&req, &reply).unwrap();
        assert_eq!((mine.ord, mine.ird), (8, 4));
        assert_eq!(mine.rtr, Some(Rtr::Write));
        // Neither side asked for CRC (the default).
        assert!(!mine.crc && !agreed.crc);
    }

    #[test]
    fn read_rtr_when_only_read_is_offered() {
        let s = settings();
        let mut req = request(&s, &param(1, 1));
        req.enhanced.as_mut().unwrap().rtr_write = false;
        let (reply, agreed) = accept_reply(&s, &req, &param(1, 1));
        assert_eq!(agreed.rtr, Some(Rtr::Read));
        assert_eq!(on_reply(&req, &reply).unwrap().rtr, Some(Rtr::Read));
    }

    #[test]
    fn siw_style_request_gets_no_rtr() {
        let s = settings();
        let req = MpaFrame {
            reply: false,
            markers: false,
            crc: false,
            reject: false,
            rev: 2,
            enhanced: Some(EnhancedWord {
                ird: 16,
                ord: 16,
                ..EnhancedWord::default()
            }),
            private_data: vec![],
        };
        assert_eq!(refuse(&s, &req), None);
        let (reply, agreed) = accept_reply(&s, &req, &param(0, 0));
        assert_eq!(agreed.rtr, None);
        assert!(!reply.crc, "neither side asks for CRC by default");
        assert_eq!((agreed.ord, agreed.ird), (16, 32));
        assert!(!reply.enhanced.unwrap().p2p);
        let p = peer_param(&s, &req);
        assert_eq!((p.ord, p.ird), (16, 16));
    }

    #[test]
    fn refusals() {
        let s = settings();
        let mut req = request(&s, &param(1, 1));
        req.markers = true;
        assert!(refuse(&s, &req).is_some());
        req.markers = false;
        req.rev = 0;
        assert!(refuse(&s, &req).is_some());
        let r = reject_reply(&s, &req, b"no");
        assert!(r.reject && r.reply);
        assert_eq!(r.rev, 2);
        // A revision 1 responder refuses revision 2.
        let c = IwarpConfig::from_lookup(|v| (v == "RUCX_IWARP_MPA_REV").then(|| "1".into()));
        let s1 = Settings::from_config(&c.unwrap()).unwrap();
        let req2 = request(&s, &param(1, 1));
        assert!(refuse(&s1, &req2).is_some());
        assert_eq!(reject_reply(&s1, &req2, b"").rev, 1);
    }

    #[test]
    fn bad_replies() {
        let s = settings();
        let req = request(&s, &param(1, 1));
        let (mut reply, _) = accept_reply(&s, &req, &param(1, 1));
        reply.rev = 1;
        reply.enhanced = None;
        assert!(on_reply(&req, &reply).is_err());
        let (mut reply, _) = accept_reply(&s, &req, &param(1, 1));
        reply.enhanced = None;
        assert!(on_reply(&req, &reply).is_err());
        let (mut reply, _) = accept_reply(&s, &req, &param(1, 1));
        reply.enhanced.as_mut().unwrap().rtr_write = false;
        assert!(on_reply(&req, &reply).is_err());
        // Without A in the reply, no ready-to-receive message.
        reply.enhanced.as_mut().unwrap().p2p = false;
        assert_eq!(on_reply(&req, &reply).unwrap().rtr, None);
    }
}
