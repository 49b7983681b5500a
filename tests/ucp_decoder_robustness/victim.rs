//! A worker attacked through its TCP iface: a raw socket says hello as
//! the transport expects and then sends eager-protocol messages built from
//! arbitrary headers, so that the decoders and the reassembly behind them
//! see what a hostile peer can send. A well-behaved worker with an
//! endpoint into the same worker checks that it keeps working.
//!
//! Shared by the `decoder_robustness` test and the `ucp_eager_rx` fuzz
//! target; public API only.

#![allow(dead_code)]

use std::io::{ErrorKind, Read, Write};
use std::net::{Ipv4Addr, Shutdown, SocketAddrV4, TcpStream};
use std::time::{Duration, Instant};

use rucx_ucp::proto::wire::{FirstHdr, MiddleHdr, AM_EAGER_FIRST, AM_EAGER_MIDDLE, AM_EAGER_ONLY};
use rucx_ucp::wireup::address::WorkerAddress;
use rucx_ucp::{Context, Ep, Error, Op, Posted, ReqId, UcpConfig, Worker, TAG_MASK_ALL};

/// Longest anything may take before it counts as a hang.
const HANG: Duration = Duration::from_secs(20);
/// Tags of the well-behaved worker's messages (the attack uses others).
const GOOD_TAG: u64 = 0x600d_0000_0000_0000;
/// Largest receive buffer drained from the unexpected queue.
const DRAIN_CAP: usize = 4096;

/// One eager message from the attacker.
#[derive(Debug, Clone)]
pub(crate) enum Msg {
    /// `EAGER_ONLY`.
    Only { tag: u64, payload: Vec<u8> },
    /// `EAGER_FIRST`.
    First {
        tag: u64,
        total: u64,
        msg_id: u64,
        frag: Vec<u8>,
    },
    /// `EAGER_MIDDLE`.
    Middle {
        msg_id: u64,
        offset: u64,
        frag: Vec<u8>,
    },
    /// Any id and bytes.
    Raw { id: u8, data: Vec<u8> },
}

impl Msg {
    /// The transport frame carrying this message.
    pub(crate) fn frame(&self) -> Vec<u8> {
        let (id, body) = match self {
            Msg::Only { tag, payload } => {
                let mut b = tag.to_le_bytes().to_vec();
                b.extend_from_slice(payload);
                (AM_EAGER_ONLY, b)
            }
            Msg::First {
                tag,
                total,
                msg_id,
                frag,
            } => {
                let h = FirstHdr {
                    tag: *tag,
                    total: *total,
                    msg_id: *msg_id,
                };
                let mut b = h.encode().to_vec();
                b.extend_from_slice(frag);
                (AM_EAGER_FIRST, b)
            }
            Msg::Middle {
                msg_id,
                offset,
                frag,
            } => {
                let h = MiddleHdr {
                    msg_id: *msg_id,
                    offset: *offset,
                };
                let mut b = h.encode().to_vec();
                b.extend_from_slice(frag);
                (AM_EAGER_MIDDLE, b)
            }
            Msg::Raw { id, data } => (*id, data.clone()),
        };
        let mut f = vec![id];
        f.extend_from_slice(&(body.len() as u32).to_le_bytes());
        f.extend_from_slice(&body);
        f
    }
}

/// What became of the receives and unexpected messages of one attack.
#[derive(Debug, Default)]
pub(crate) struct Report {
    /// Receives that completed (length reported).
    pub(crate) completed: usize,
    /// Receives that failed (truncated, or their source failed).
    pub(crate) failed: usize,
    /// Unexpected messages drained after the attack.
    pub(crate) drained: usize,
    /// Receives still in flight after the attacker left, which could not
    /// be canceled because they had matched a message.
    pub(crate) stuck: usize,
}

/// The attacked worker and a well-behaved peer.
#[derive(Debug)]
pub(crate) struct Victim {
    w: Worker,
    peer: Worker,
    ep: Ep,
    tcp: SocketAddrV4,
    seq: u64,
}

/// A context with the TCP transport on the loopback device only.
pub(crate) fn tcp_context() -> Context {
    let cfg = UcpConfig::from_lookup(|v| match v {
        "RUCX_TLS" => Some("tcp".to_string()),
        "RUCX_NET_DEVICES" => Some("lo".to_string()),
        _ => None,
    })
    .expect("config");
    rucx::Context::with_config(cfg)
        .expect("tcp context on lo")
        .into_inner()
}

/// The TCP listening address in a worker address.
pub(crate) fn tcp_addr(address: &[u8]) -> SocketAddrV4 {
    let a = WorkerAddress::decode(address).expect("own address decodes");
    let e = a
        .ifaces
        .iter()
        .find(|e| e.tl_name == "tcp")
        .expect("a tcp iface");
    let (d, p) = (&e.dev_addr, &e.iface_addr);
    // IPv4 device address: family 4, the address, the host id.
    assert!(
        d.len() == 13 && d[0] == 4 && p.len() == 2,
        "tcp address layout"
    );
    SocketAddrV4::new(
        Ipv4Addr::new(d[1], d[2], d[3], d[4]),
        u16::from_be_bytes([p[0], p[1]]),
    )
}

/// The hello of a made-up connector.
fn hello() -> Vec<u8> {
    let mut v = b"rucx-tcp".to_vec();
    v.extend_from_slice(&3u16.to_le_bytes()); // the TCP wire version
    v.extend_from_slice(&9u16.to_be_bytes());
    v.extend_from_slice(&[4, 127, 0, 0, 3]); // IPv4, the address
    v
}

impl Victim {
    /// Two workers on TCP over loopback, the peer connected to the victim.
    pub(crate) fn open() -> Victim {
        let ctx = tcp_context();
        let w = ctx.create_worker().expect("worker");
        let mut peer = ctx.create_worker().expect("peer worker");
        let ep = peer.connect(&w.address()).expect("connect");
        let tcp = tcp_addr(&w.address());
        let mut v = Victim {
            w,
            peer,
            ep,
            tcp,
            seq: 0,
        };
        v.still_works(5);
        v
    }

    fn progress(&mut self) {
        self.w.progress();
        self.peer.progress();
    }

    /// The peer sends a message of `len` bytes; the victim must receive it
    /// intact.
    pub(crate) fn still_works(&mut self, len: usize) {
        self.seq += 1;
        let tag = GOOD_TAG | self.seq;
        let msg: Vec<u8> = (0..len).map(|i| (i as u64 ^ self.seq) as u8).collect();
        let recv = match self
            .w
            .tag_recv(vec![0u8; len], tag, TAG_MASK_ALL, Op::new())
        {
            Ok(Posted::InFlight(id)) => id,
            other => panic!("receive of the good message: {other:?}"),
        };
        let send = match self.peer.tag_send(self.ep, msg.clone(), tag, Op::new()) {
            Ok(Posted::Done(..)) => None,
            Ok(Posted::InFlight(id)) => Some(id),
            Err(e) => panic!("good endpoint failed: {e}"),
        };
        let start = Instant::now();
        let got = loop {
            self.progress();
            if let Some(r) = self.w.take::<Vec<u8>>(recv) {
                break r;
            }
            assert!(start.elapsed() < HANG, "good message never arrived");
        };
        let (info, buf) = got.expect("good message received");
        assert_eq!((info.tag, info.length), (tag, len));
        assert!(buf == msg, "good message corrupted");
        if let Some(id) = send {
            while self.peer.take::<Vec<u8>>(id).is_none() {
                self.progress();
                assert!(start.elapsed() < HANG, "good send never completed");
            }
        }
        self.peer
            .ep_status(self.ep)
            .expect("good endpoint still up");
    }

    /// Posts receives of the given (tag, capacity), sends the messages from
    /// a raw connection in writes of the given sizes, closes it, waits
    /// until the victim closed it too, then settles every receive and
    /// drains the unexpected queue. Checks the good peer still works.
    pub(crate) fn attack(
        &mut self,
        recvs: &[(u64, usize)],
        msgs: &[Msg],
        pieces: &[usize],
    ) -> Report {
        let mut posted: Vec<(ReqId, usize)> = Vec::new();
        let mut report = Report::default();
        for &(tag, cap) in recvs {
            match self
                .w
                .tag_recv(vec![0u8; cap], tag & !GOOD_TAG, TAG_MASK_ALL, Op::new())
            {
                Ok(Posted::InFlight(id)) => posted.push((id, cap)),
                Ok(Posted::Done(info, buf)) => {
                    assert!(info.length <= buf.len());
                    report.completed += 1;
                }
                Err(e) => panic!("posting a receive: {e}"),
            }
        }
        let mut bytes = hello();
        for m in msgs {
            bytes.extend(m.frame());
        }
        self.send_raw(&bytes, pieces);
        for (id, cap) in posted {
            match self.w.take::<Vec<u8>>(id) {
                Some(Ok((info, buf))) => {
                    assert!(info.length <= cap && buf.len() == cap, "{info:?} in {cap}");
                    report.completed += 1;
                }
                Some(Err(e)) => {
                    assert!(
                        matches!(
                            e.error,
                            Error::Truncated { .. } | Error::EndpointFailed { .. }
                        ),
                        "{e:?}"
                    );
                    report.failed += 1;
                }
                None => {
                    if !self.w.request_cancel(id) {
                        report.stuck += 1;
                        self.w.request_release(id);
                    } else {
                        let _ = self.w.take::<Vec<u8>>(id);
                    }
                }
            }
        }
        // Drain the unexpected queue of every tag but the good ones.
        while let Some(info) = self.w.tag_probe(0, GOOD_TAG) {
            let cap = info.length.min(DRAIN_CAP);
            match self
                .w
                .tag_recv(vec![0u8; cap], info.tag, TAG_MASK_ALL, Op::new())
            {
                Ok(Posted::Done(..)) | Err(Error::Truncated { .. }) => report.drained += 1,
                Ok(Posted::InFlight(id)) => {
                    report.stuck += 1;
                    self.w.request_release(id);
                }
                Err(e) => panic!("draining: {e}"),
            }
        }
        self.still_works(100);
        report
    }

    fn send_raw(&mut self, bytes: &[u8], pieces: &[usize]) {
        let mut s = TcpStream::connect(self.tcp).expect("connect a raw socket to the worker");
        let _ = s.set_nodelay(true);
        let mut at = 0;
        let mut sizes = pieces.iter().copied().filter(|&n| n > 0).cycle();
        while at < bytes.len() {
            let n = sizes.next().unwrap_or(bytes.len()).min(bytes.len() - at);
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
        loop {
            match s.read(&mut b) {
                Ok(0) => break,
                Ok(_) => {}
                Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::Interrupted) => {}
                Err(_) => break,
            }
            self.progress();
            assert!(start.elapsed() < HANG, "worker never closed the connection");
        }
        // Whatever the close reported runs in the next progress.
        self.progress();
    }
}
