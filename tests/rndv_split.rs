//! The split rendezvous (`RUCX_RNDV_SPLIT_THRESH`): the receiver of a
//! rendezvous by get reads one half of a large message while the sender
//! writes the other (which half is whose depends on the pair of workers). Two workers of this process, over `shm` (CMA)
//! and `rc_iwarp`:
//!
//! * messages around the threshold and of odd lengths arrive intact, as
//!   plain and synchronous sends, to receives posted before and after the
//!   request to send arrived;
//! * over `shm` the split happens from the threshold on and not below it,
//!   nor with `inf`: the receiver then registers the tail of its buffer,
//!   which the shared registration cache counts as a second miss; over
//!   `rc_iwarp` (a network lane) it never happens;
//! * a receive shorter than the message is not split, fails with a
//!   truncation, and the sender still completes.

mod common;

use common::{context_vars, pattern};
use rucx::{Context, Ep, Error, Op, Posted, ReqId, Worker, TAG_MASK_ALL};
use std::time::{Duration, Instant};

const TLS: [&str; 2] = ["shm", "rc_iwarp"];
const THRESH: usize = 32 * 1024;

struct Pair {
    ctx: Context,
    a: Worker,
    b: Worker,
    ab: Ep,
}

fn pair(tls: &str, split: &str) -> Pair {
    // One network lane: on a host with two network devices an `rc_iwarp`
    // rendezvous by get would also read over the second device, and the
    // sender's buffer would be registered with that device's domain too,
    // a further cache miss that says nothing about the split. (`shm`
    // needs its second lane, cma beside posix, to split at all.)
    let lanes = if tls == "shm" { "2" } else { "1" };
    let ctx = context_vars(&[
        ("RUCX_TLS", tls),
        ("RUCX_RNDV_THRESH", "8k"),
        ("RUCX_RNDV_SPLIT_THRESH", split),
        ("RUCX_RCACHE_ENABLE", "yes"),
        ("RUCX_MAX_RNDV_LANES", lanes),
    ]);
    let mut a = ctx.create_worker().expect("worker a");
    let b = ctx.create_worker().expect("worker b");
    let ab = a.connect(&b.address()).expect("connect");
    Pair { ctx, a, b, ab }
}

/// What a finished operation gave: its length, or its error.
type Outcome = Result<usize, Error>;

impl Pair {
    /// Progresses both workers until `id` of `a` (`on_a`) or `b` finished.
    fn wait(&mut self, on_a: bool, id: ReqId) -> Outcome {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let w = if on_a { &mut self.a } else { &mut self.b };
            if !w.request_is_active(id) {
                return match w.take::<Vec<u8>>(id).expect("result") {
                    Ok((info, _)) => Ok(info.length),
                    Err(e) => Err(e.error),
                };
            }
            assert!(Instant::now() < deadline, "transfer timed out");
            self.a.progress();
            self.b.progress();
        }
    }

    /// Sends `size` bytes from `a` to `b` into a receive of `capacity`,
    /// posted before or after the request to send arrived; returns the
    /// received bytes and both outcomes.
    fn transfer(
        &mut self,
        size: usize,
        capacity: usize,
        sync: bool,
        late: bool,
    ) -> (Vec<u8>, Outcome, Outcome) {
        let tag = size as u64;
        let data = pattern(size, tag);
        let op = if sync { Op::new().sync() } else { Op::new() };
        let post_recv = |b: &mut Worker| {
            b.tag_recv(vec![0u8; capacity], tag, TAG_MASK_ALL, Op::new())
                .expect("post receive")
        };
        let early = (!late).then(|| post_recv(&mut self.b));
        let s = self.a.tag_send(self.ab, data, tag, op).expect("post send");
        if late {
            for _ in 0..100 {
                self.a.progress();
                self.b.progress();
            }
        }
        let r = early.unwrap_or_else(|| post_recv(&mut self.b));
        let sent = match s {
            Posted::InFlight(id) => self.wait(true, id),
            Posted::Done(info, _) => Ok(info.length),
        };
        let (got, received) = match r {
            Posted::InFlight(id) => {
                let deadline = Instant::now() + Duration::from_secs(30);
                while self.b.request_is_active(id) {
                    assert!(Instant::now() < deadline, "receive timed out");
                    self.a.progress();
                    self.b.progress();
                }
                match self.b.take::<Vec<u8>>(id).expect("result") {
                    Ok((info, buf)) => (buf, Ok(info.length)),
                    Err(e) => (e.buf, Err(e.error)),
                }
            }
            Posted::Done(info, buf) => (buf, Ok(info.length)),
        };
        (got, sent, received)
    }
}

#[test]
fn split_messages_arrive_whole() {
    for tls in TLS {
        let mut p = pair(tls, "32k");
        let sizes = [
            THRESH - 1,
            THRESH,
            THRESH + 1,
            65536 + 7,
            (1 << 20) + 3,
            8 << 20,
        ];
        for (i, size) in sizes.into_iter().enumerate() {
            let (sync, late) = (i % 2 == 1, i % 3 == 2);
            let (got, sent, received) = p.transfer(size, size, sync, late);
            assert_eq!(sent.expect("send"), size, "{tls} {size}: send");
            assert_eq!(received.expect("receive"), size, "{tls} {size}: receive");
            assert!(
                got == pattern(size, size as u64),
                "{tls} {size} (sync {sync}, late {late}): data differs"
            );
        }
        assert_eq!(p.a.requests_outstanding(), 0, "{tls}: sender leaked");
        assert_eq!(p.b.requests_outstanding(), 0, "{tls}: receiver leaked");
    }
}

/// Registration-cache misses of one transfer of `size` bytes.
fn misses(tls: &str, split: &str, size: usize) -> u64 {
    let mut p = pair(tls, split);
    let (got, sent, received) = p.transfer(size, size, false, false);
    sent.expect("send");
    received.expect("receive");
    assert!(
        got == pattern(size, size as u64),
        "{tls} {size}: data differs"
    );
    p.ctx.rcache_stats().misses
}

#[test]
fn split_from_the_threshold_on() {
    // The sender's buffer only...
    assert_eq!(misses("shm", "32k", THRESH - 1), 1, "below");
    assert_eq!(misses("shm", "inf", 1 << 20), 1, "inf");
    // ...and the receiver's tail.
    assert_eq!(misses("shm", "32k", THRESH), 2, "at");
    assert_eq!(misses("shm", "32k", 1 << 20), 2, "above");
}

#[test]
fn network_lanes_are_not_split() {
    assert_eq!(misses("rc_iwarp", "32k", 1 << 20), 1);
}

#[test]
fn endpoints_say_where_they_split() {
    for (tls, split, want) in [
        ("shm", "32k", Some(THRESH)),
        ("shm", "1m", Some(1 << 20)),
        ("shm", "inf", None),
        ("rc_iwarp", "32k", None),
    ] {
        let p = pair(tls, split);
        assert_eq!(p.a.ep_rndv_split(p.ab).expect("ep"), want, "{tls} {split}");
    }
}

#[test]
fn truncated_receive_is_not_split() {
    for tls in TLS {
        let mut p = pair(tls, "32k");
        let size = 1 << 20;
        let (_, sent, received) = p.transfer(size, size / 2, false, false);
        assert!(
            matches!(received, Err(Error::Truncated { .. })),
            "{tls}: {received:?}"
        );
        sent.expect("the sender of a truncated message completes");
        assert_eq!(p.ctx.rcache_stats().misses, 1, "{tls}: receiver registered");
        assert_eq!(p.b.requests_outstanding(), 0, "{tls}: receiver leaked");
    }
}
