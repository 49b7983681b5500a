//! The incast benchmark: M sender processes stream small tag messages to
//! one receiver that takes only `rate` of them a second, then drains the
//! rest. It prints the receiver's peak memory growth and the most its
//! unexpected messages held, and checks that every message arrived, in
//! order per sender.
//!
//! Each message's tag is its sender's index and its data starts with its
//! sequence number; a sender ends with a message tagged `DONE | index`
//! carrying its count. Senders keep at most [`WINDOW`] sends in flight,
//! as an MPI program waiting on its requests would.

use std::time::{Duration, Instant};

use super::children::ChildProc;
use super::{hex, sys};
use crate::ucp::{Op, Posted};
use crate::Context;

/// Tag bit of a sender's last message.
const DONE: u64 = 1 << 63;
/// Sends a sender keeps in flight at most.
const WINDOW: u64 = 256;

/// What an incast run measured.
#[derive(Debug, Clone)]
pub(crate) struct IncastReport {
    pub(crate) senders: usize,
    pub(crate) messages: u64,
    pub(crate) peak_kb: u64,
    /// The most the receiver's unexpected messages held (as charged).
    pub(crate) peak_unexp_kb: u64,
    pub(crate) drain_ms: f64,
}

/// The receiver: `senders` children for `secs` seconds of `size`-byte
/// messages, taken at `rate` a second.
pub(crate) fn run(
    senders: usize,
    secs: f64,
    size: usize,
    rate: f64,
) -> Result<IncastReport, String> {
    if senders == 0 || size < 8 || !(rate > 0.0 && rate.is_finite()) {
        return Err("incast needs a sender, messages of 8 bytes or more and a rate".into());
    }
    let send_time = seconds(secs)?;
    let ctx = Context::new().map_err(|e| format!("context: {e}"))?;
    let mut w = ctx.create_worker().map_err(|e| format!("worker: {e}"))?;
    let me = hex::encode(&w.address());
    w.progress();
    let base = sys::rss_kb();
    let mut kids = Vec::with_capacity(senders);
    for i in 0..senders {
        let args = [
            "--send",
            &me,
            &secs.to_string(),
            &size.to_string(),
            &i.to_string(),
        ];
        kids.push(ChildProc::spawn(&args.map(String::from))?);
    }
    let mut seen = Seen {
        next: vec![0; senders],
        done: vec![None; senders],
        buf: vec![0; size],
    };
    let slow_end = later(send_time)?;
    let gap = seconds(1.0 / rate)?;
    let mut due = Instant::now();
    while Instant::now() < slow_end {
        w.progress();
        if Instant::now() >= due {
            seen.take(&mut w)?;
            due += gap;
        }
    }
    let t = Instant::now();
    let limit = send_time
        .saturating_mul(10)
        .saturating_add(Duration::from_secs(60));
    while seen.done.iter().any(Option::is_none) {
        w.progress();
        while seen.take(&mut w)? {}
        if t.elapsed() > limit {
            return Err(format!("senders not done after {limit:?}: {:?}", seen.done));
        }
    }
    let drain_ms = t.elapsed().as_secs_f64() * 1e3;
    let peak_kb = sys::hwm_kb().saturating_sub(base);
    let peak_unexp_kb = (w.unexpected_bytes().1 / 1024) as u64;
    for (i, (n, d)) in seen.next.iter().zip(&seen.done).enumerate() {
        if Some(*n) != *d {
            return Err(format!("sender {i} sent {d:?} messages, {n} arrived"));
        }
    }
    for k in kids {
        k.finish()?;
    }
    Ok(IncastReport {
        senders,
        messages: seen.next.iter().sum(),
        peak_kb,
        peak_unexp_kb,
        drain_ms,
    })
}

/// What the receiver has taken from each sender.
struct Seen {
    /// The sequence number due next.
    next: Vec<u64>,
    /// The count a sender said it sent, once its last message arrived.
    done: Vec<Option<u64>>,
    buf: Vec<u8>,
}

impl Seen {
    /// Receives one message if one waits; checks its order.
    fn take(&mut self, w: &mut crate::Worker) -> Result<bool, String> {
        if w.tag_probe(0, 0).is_none() {
            return Ok(false);
        }
        let info = w
            .tag_recv_blocking(&mut self.buf, 0, 0)
            .map_err(|e| format!("receive: {e}"))?;
        let from = (info.tag & !DONE) as usize;
        if from >= self.next.len() || info.length < 8 {
            let (t, l) = (info.tag, info.length);
            return Err(format!("a message with tag {t:#x}, {l} bytes"));
        }
        let mut v = [0u8; 8];
        v.copy_from_slice(&self.buf[..8]);
        let value = u64::from_le_bytes(v);
        if info.tag & DONE != 0 {
            self.done[from] = Some(value);
        } else if value != self.next[from] || self.done[from].is_some() {
            let due = self.next[from];
            return Err(format!(
                "sender {from}: message {value} where {due} was due"
            ));
        } else {
            self.next[from] += 1;
        }
        Ok(true)
    }
}

/// A sender: streams to `addr` for `secs` seconds, then its count.
pub(crate) fn send(addr: &str, secs: f64, size: usize, index: u64) -> Result<(), String> {
    let addr = hex::decode(addr).ok_or("a bad receiver address")?;
    let ctx = Context::new().map_err(|e| format!("context: {e}"))?;
    let mut w = ctx.create_worker().map_err(|e| format!("worker: {e}"))?;
    let ep = w.connect(&addr).map_err(|e| format!("connect: {e}"))?;
    let end = later(seconds(secs)?)?;
    let (mut seq, mut inflight) = (0u64, 0u64);
    let mut post = |w: &mut crate::Worker, tag: u64, value: u64| -> Result<(), String> {
        let mut data = vec![0u8; size];
        data[..8].copy_from_slice(&value.to_le_bytes());
        match w.tag_send(ep, data, tag, Op::new()) {
            Ok(Posted::InFlight(id)) => {
                w.request_release(id);
                inflight += 1;
            }
            Ok(Posted::Done(..)) => {}
            Err(e) => return Err(format!("send {value}: {e}")),
        }
        // A sender that progresses hears the receiver's grants.
        w.progress();
        while inflight.saturating_sub(w.released_completed()) > WINDOW {
            // Idle senders give the cores to the receiver (the machine may
            // have fewer cores than processes).
            if w.progress() == 0 {
                std::thread::sleep(Duration::from_micros(50));
            }
        }
        match w.take_released_error() {
            Some(e) => Err(format!("a send failed: {e}")),
            None => Ok(()),
        }
    };
    while Instant::now() < end {
        post(&mut w, index, seq)?;
        seq += 1;
    }
    post(&mut w, DONE | index, seq)?;
    // Until the receiver has everything (it closes our input then).
    sys::stdin_nonblocking().map_err(|e| format!("stdin: {e}"))?;
    let mut b = [0u8; 16];
    loop {
        if w.progress() == 0 {
            std::thread::sleep(Duration::from_micros(50));
        }
        match std::io::Read::read(&mut std::io::stdin(), &mut b) {
            Ok(0) => return Ok(()),
            Ok(_) => {}
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
            Err(e) => return Err(format!("stdin: {e}")),
        }
    }
}

/// `secs` as a duration; an error for a negative, infinite or NaN value.
fn seconds(secs: f64) -> Result<Duration, String> {
    Duration::try_from_secs_f64(secs).map_err(|_| format!("{secs} is not a number of seconds"))
}

/// The instant `d` from now; an error if that is beyond the clock's range.
fn later(d: Duration) -> Result<Instant, String> {
    Instant::now()
        .checked_add(d)
        .ok_or_else(|| format!("{d:?} from now is out of range"))
}
