//! The perftest bootstrap reader fed by a raw peer: a server-side
//! `Bootstrap` reads frames that a raw socket wrote (then closed for
//! writing), following a script of reads; a model of the documented frame
//! format predicts each result.
//!
//! Shared by the `decoder_robustness` test and the `perf_bootstrap` fuzz
//! target; public API only.

#![allow(dead_code)]

use std::io::Write;
use std::net::{Shutdown, TcpStream};
use std::time::{Duration, Instant};

use rucx::perf::bootstrap::{FrameKind, Listener, Wireup, MAX_FRAME, MAX_RKEY};
use rucx::perf::params::TestParams;
use rucx::perf::PerfError;

/// Deadline of each read; the peer has closed, so none should wait.
const READ_TIMEOUT: Duration = Duration::from_secs(10);

/// Frame kinds in wire order (1..=6).
pub(crate) const KINDS: [FrameKind; 6] = [
    FrameKind::Params,
    FrameKind::Accept,
    FrameKind::Wireup,
    FrameKind::Status,
    FrameKind::Barrier,
    FrameKind::Abort,
];

/// One read of the server side.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Step {
    /// `recv` of a kind; params and wireup payloads are decoded too.
    Recv(FrameKind),
    /// `recv_outcome` of a kind.
    Outcome(FrameKind),
    /// `barrier`.
    Barrier,
    /// `check_alive`.
    CheckAlive,
}

/// What a step gave, reduced to what the model can predict.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Got {
    /// A frame's payload.
    Payload(Vec<u8>),
    /// An outcome frame: ok, or failed with a reason.
    Outcome(Result<(), String>),
    /// A step that returns nothing succeeded.
    Done,
    /// The peer broke the protocol.
    Protocol,
    /// The peer closed the connection.
    Gone,
    /// The peer sent an abort frame with this reason.
    Aborted(String),
}

fn classify(e: PerfError) -> Got {
    match e {
        PerfError::Protocol(_) => Got::Protocol,
        PerfError::PeerGone(_) => Got::Gone,
        PerfError::PeerAborted(why) => Got::Aborted(why),
        other => panic!("unexpected error from a closed peer: {other}"),
    }
}

/// A frame as the documentation describes it.
pub(crate) fn frame(kind: u8, payload: &[u8]) -> Vec<u8> {
    let mut v = vec![kind];
    v.extend_from_slice(&(payload.len() as u32).to_le_bytes());
    v.extend_from_slice(payload);
    v
}

/// The model: the server side's view of the bytes not yet read.
#[derive(Debug)]
pub(crate) struct Model<'a> {
    rest: &'a [u8],
    barriers_seen: u32,
}

impl<'a> Model<'a> {
    pub(crate) fn new(bytes: &'a [u8]) -> Model<'a> {
        Model {
            rest: bytes,
            barriers_seen: 0,
        }
    }

    fn recv(&mut self, expect: FrameKind) -> Result<Vec<u8>, Got> {
        let Some((hdr, after)) = self.rest.split_first_chunk::<5>() else {
            return Err(Got::Gone);
        };
        self.rest = after;
        let kind = hdr[0];
        let len = u32::from_le_bytes([hdr[1], hdr[2], hdr[3], hdr[4]]) as usize;
        if len > MAX_FRAME || !(1..=6).contains(&kind) {
            return Err(Got::Protocol);
        }
        if self.rest.len() < len {
            return Err(Got::Gone);
        }
        let (payload, after) = self.rest.split_at(len);
        self.rest = after;
        if kind == FrameKind::Abort as u8 {
            return Err(Got::Aborted(String::from_utf8_lossy(payload).into_owned()));
        }
        if kind != expect as u8 {
            return Err(Got::Protocol);
        }
        Ok(payload.to_vec())
    }

    /// The predicted result of `step`.
    pub(crate) fn step(&mut self, step: Step) -> Got {
        let r = match step {
            Step::Recv(kind) => self.recv(kind).map(Got::Payload),
            Step::Outcome(kind) => self.recv(kind).and_then(|p| match p.split_first() {
                Some((0, [])) => Ok(Got::Outcome(Ok(()))),
                Some((1, why)) => Ok(Got::Outcome(Err(String::from_utf8_lossy(why).into_owned()))),
                _ => Err(Got::Protocol),
            }),
            Step::Barrier => self.recv(FrameKind::Barrier).and_then(|p| {
                if p.len() == 4 && p[..] == self.barriers_seen.to_le_bytes() {
                    self.barriers_seen += 1;
                    Ok(Got::Done)
                } else {
                    Err(Got::Protocol)
                }
            }),
            Step::CheckAlive => match self.rest.first() {
                None => Err(Got::Gone),
                Some(&k) if k == FrameKind::Abort as u8 => Err(self
                    .recv(FrameKind::Abort)
                    .err()
                    .unwrap_or_else(|| Got::Aborted(String::new()))),
                Some(_) => Ok(Got::Done),
            },
        };
        r.unwrap_or_else(|e| e)
    }
}

/// A listening server.
#[derive(Debug)]
pub(crate) struct Server {
    listener: Listener,
    port: u16,
}

impl Server {
    pub(crate) fn open() -> Server {
        let listener = Listener::bind(0, true).expect("listen on loopback");
        let port = listener.port().expect("port");
        Server { listener, port }
    }

    /// A raw client writes `bytes` and closes its writing side; the server
    /// side runs `steps` until the first error. Returns the results; checks
    /// decoded payloads on the way and that no step waited for the
    /// deadline.
    pub(crate) fn run(&self, bytes: &[u8], steps: &[Step]) -> Vec<Got> {
        let mut raw = TcpStream::connect(("127.0.0.1", self.port)).expect("connect");
        let mut boot = self
            .listener
            .accept(Some(Duration::from_secs(10)))
            .expect("accept");
        raw.write_all(bytes).expect("write the bytes");
        raw.shutdown(Shutdown::Write).expect("shutdown");
        let mut out = Vec::new();
        let mut no_progress = || Ok(());
        for &step in steps {
            let start = Instant::now();
            let got = match step {
                Step::Recv(kind) => boot.recv(kind, READ_TIMEOUT, &mut no_progress).map(|p| {
                    check_payload(kind, &p);
                    Got::Payload(p)
                }),
                Step::Outcome(kind) => boot
                    .recv_outcome(kind, READ_TIMEOUT, &mut no_progress)
                    .map(Got::Outcome),
                Step::Barrier => boot
                    .barrier(READ_TIMEOUT, &mut no_progress)
                    .map(|()| Got::Done),
                Step::CheckAlive => boot.check_alive().map(|()| Got::Done),
            }
            .unwrap_or_else(classify);
            assert!(
                start.elapsed() < READ_TIMEOUT,
                "{step:?} waited for its deadline on a closed peer"
            );
            let stop = !matches!(got, Got::Payload(_) | Got::Outcome(_) | Got::Done);
            out.push(got);
            if stop {
                break;
            }
        }
        drop(raw);
        out
    }

    /// Runs `bytes` and `steps` and compares with the model.
    pub(crate) fn check(&self, bytes: &[u8], steps: &[Step]) {
        let mut model = Model::new(bytes);
        let mut want = Vec::new();
        for &s in steps {
            let g = model.step(s);
            let stop = !matches!(g, Got::Payload(_) | Got::Outcome(_) | Got::Done);
            want.push(g);
            if stop {
                break;
            }
        }
        let got = self.run(bytes, steps);
        assert_eq!(got, want, "steps {steps:?} on {bytes:02x?}");
    }
}

/// Decodes the payload of a params or wireup frame: no panic, and an
/// accepted payload re-encodes to itself.
pub(crate) fn check_payload(kind: FrameKind, p: &[u8]) {
    match kind {
        FrameKind::Params => check_params(p),
        FrameKind::Wireup => check_wireup(p),
        _ => {}
    }
}

/// [`TestParams::decode`] on untrusted bytes.
pub(crate) fn check_params(p: &[u8]) {
    if let Ok(params) = TestParams::decode(p) {
        params.check().expect("decoded parameters pass the checks");
        assert_eq!(params.encode(), p, "re-encoding changed the block");
    }
}

/// [`Wireup::decode`] on untrusted bytes: an accepted payload has a
/// listener port only without an address, a key within the limit, and a
/// key exactly when it has a buffer address.
pub(crate) fn check_wireup(p: &[u8]) {
    if let Ok(w) = Wireup::decode(p) {
        // Only a wireup without worker address carries a listener port.
        assert!(w.address.is_empty() || w.listen_port == 0, "{w:?}");
        assert!(w.rkey.len() <= MAX_RKEY);
        assert_eq!(w.rkey.is_empty(), w.recv_buffer == 0, "{w:?}");
        assert_eq!(w.encode(), p, "re-encoding changed the wireup");
    }
}
