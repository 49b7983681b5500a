//! Streams between two workers (`self`, `posix`, `tcp`, `rc_iwarp`):
//! random send and receive sizes with every byte checked, receives that
//! wait for a full buffer, data handed out without a copy, the poll for
//! endpoints with data, and receives failing with their endpoint.

mod common;

use common::*;
use rucx::ucp::{Ep, Op, Posted, ReqId};
use rucx::{Error, Worker};
use std::time::{Duration, Instant};

/// Two workers, `a` connected to `b`, and `b`'s endpoint back to `a`
/// (found through the poll once the first bytes arrived).
fn pair(tls: &str) -> (Worker, Worker, Ep, Ep) {
    let ctx = context(tls);
    let mut a = ctx.create_worker().expect("worker");
    let mut b = ctx.create_worker().expect("worker");
    let ab = a.connect(&b.address()).expect("connect");
    a.stream_send_blocking(ab, b"hi").expect("send");
    let mut back = Vec::new();
    until(&mut a, &mut b, |_, b| {
        back = b.stream_worker_poll(4);
        !back.is_empty()
    });
    assert_eq!(back.len(), 1);
    let ba = back[0];
    let mut hi = [0u8; 2];
    b.stream_recv_all_blocking(ba, &mut hi).expect("recv");
    assert_eq!(&hi, b"hi");
    assert!(b.stream_worker_poll(4).is_empty(), "nothing left to read");
    (a, b, ab, ba)
}

/// A small deterministic generator (xorshift).
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: usize) -> usize {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        (self.0 % n as u64) as usize
    }

    /// Mostly small, sometimes up to `max`.
    fn size(&mut self, max: usize) -> usize {
        match self.below(4) {
            0 => self.below(16),
            1 => self.below(9000),
            2 => self.below(70_000),
            _ => self.below(max),
        }
    }
}

/// Sends `total` bytes in random pieces from `a` while `b` receives them
/// in random pieces (some posted before the bytes arrive, some after,
/// some `recv_all`, some taken with `stream_recv_data`); checks every byte.
fn random_sizes(tls: &str, total: usize, max: usize) {
    let (mut a, mut b, ab, ba) = pair(tls);
    let data = pattern(total, 7);
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let (mut sent, mut got) = (0usize, Vec::with_capacity(total));
    let mut sends: Vec<ReqId> = Vec::new();
    let mut recv: Option<(ReqId, usize)> = None;
    let deadline = Instant::now() + Duration::from_secs(60);
    while got.len() < total {
        assert!(
            Instant::now() < deadline,
            "timed out at {} of {total}",
            got.len()
        );
        if sent < total && sends.len() < 8 {
            let n = rng.size(max).min(total - sent).max(1);
            match a
                .stream_send(ab, data[sent..sent + n].to_vec(), Op::new())
                .expect("send")
            {
                Posted::Done(info, _) => assert_eq!(info.length, n),
                Posted::InFlight(id) => sends.push(id),
            }
            sent += n;
        }
        sends.retain(|&id| match a.take::<Vec<u8>>(id) {
            Some(r) => {
                r.expect("send completes");
                false
            }
            None => true,
        });
        if recv.is_none() {
            let want = (rng.size(max) + 1).min(total - got.len());
            let all = rng.below(3) == 0;
            let p = match (rng.below(5), all) {
                (0, _) => {
                    if let Some(chunk) = b.stream_recv_data(ba).expect("recv_data") {
                        got.extend_from_slice(&chunk);
                    }
                    None
                }
                (_, true) => Some(b.stream_recv_all(ba, vec![0u8; want], Op::new())),
                (_, false) => Some(b.stream_recv(ba, vec![0u8; want], Op::new())),
            };
            match p.map(|p| p.expect("recv")) {
                Some(Posted::Done(info, buf)) => {
                    assert!(info.length > 0 && info.length <= want);
                    assert!(!all || info.length == want, "recv_all completed short");
                    got.extend_from_slice(&buf[..info.length]);
                }
                Some(Posted::InFlight(id)) => recv = Some((id, want)),
                None => {}
            }
        }
        if let Some((id, want)) = recv {
            if let Some(r) = b.take::<Vec<u8>>(id) {
                let (info, buf) = r.expect("recv completes");
                assert!(info.length > 0 && info.length <= want);
                got.extend_from_slice(&buf[..info.length]);
                recv = None;
            }
        }
        a.progress();
        b.progress();
    }
    assert_eq!(got.len(), total);
    let first_bad = got.iter().zip(&data).position(|(x, y)| x != y);
    assert_eq!(first_bad, None, "{tls}: stream bytes differ");
}

#[test]
fn self_random_sizes() {
    random_sizes("self", 8 << 20, 1 << 20);
}

#[test]
fn posix_random_sizes() {
    random_sizes("posix", 8 << 20, 1 << 20);
}

#[test]
fn tcp_random_sizes() {
    random_sizes("tcp", 8 << 20, 1 << 20);
}

#[test]
fn rc_iwarp_random_sizes() {
    random_sizes("rc_iwarp", 4 << 20, 600_000);
}

#[test]
fn a_receive_without_wait_all_completes_with_what_arrived() {
    let (mut a, mut b, ab, ba) = pair("tcp");
    let p = b.stream_recv(ba, vec![0u8; 1000], Op::new()).expect("recv");
    let Posted::InFlight(id) = p else {
        panic!("nothing was sent yet");
    };
    a.stream_send_blocking(ab, b"abc").expect("send");
    let mut res = None;
    until(&mut a, &mut b, |_, b| {
        res = b.take::<Vec<u8>>(id);
        res.is_some()
    });
    let (info, buf) = res.unwrap().expect("recv");
    assert_eq!(info.length, 3);
    assert_eq!(&buf[..3], b"abc");
}

#[test]
fn a_wait_all_receive_waits_for_a_full_buffer() {
    let (mut a, mut b, ab, ba) = pair("tcp");
    let Posted::InFlight(id) = b.stream_recv_all(ba, vec![0u8; 10], Op::new()).unwrap() else {
        panic!("nothing was sent yet");
    };
    a.stream_send_blocking(ab, b"01234").expect("send");
    progress_for(&mut a, 20);
    progress_for(&mut b, 50);
    assert!(
        b.take::<Vec<u8>>(id).is_none(),
        "half a buffer completed it"
    );
    a.stream_send_blocking(ab, b"56789xyz").expect("send");
    let mut res = None;
    until(&mut a, &mut b, |_, b| {
        res = b.take::<Vec<u8>>(id);
        res.is_some()
    });
    let (info, buf) = res.unwrap().expect("recv");
    assert_eq!((info.length, &buf[..]), (10, &b"0123456789"[..]));
    // The rest waits, and the poll says so.
    until(&mut a, &mut b, |_, b| !b.stream_worker_poll(8).is_empty());
    assert_eq!(
        b.stream_recv_data(ba).unwrap().as_deref(),
        Some(&b"xyz"[..])
    );
    assert_eq!(b.stream_recv_data(ba).unwrap(), None);
}

#[test]
fn a_cancelled_receive_reports_what_it_took() {
    let (mut a, mut b, ab, ba) = pair("self");
    let Posted::InFlight(id) = b.stream_recv_all(ba, vec![0u8; 10], Op::new()).unwrap() else {
        panic!("nothing was sent yet");
    };
    assert!(b.request_cancel(id));
    match b.take::<Vec<u8>>(id).expect("complete") {
        Err(e) => assert!(matches!(e.error, Error::Canceled), "{}", e.error),
        Ok(_) => panic!("cancelled empty receive succeeded"),
    }
    let Posted::InFlight(id) = b.stream_recv_all(ba, vec![0u8; 10], Op::new()).unwrap() else {
        panic!("nothing was sent yet");
    };
    a.stream_send_blocking(ab, b"1234").expect("send");
    progress_for(&mut a, 10);
    progress_for(&mut b, 10);
    assert!(b.request_cancel(id));
    let (info, buf) = b.take::<Vec<u8>>(id).expect("complete").expect("partial");
    assert_eq!((info.length, &buf[..4]), (4, &b"1234"[..]));
}

#[test]
fn receives_fail_with_their_endpoint() {
    let (a, mut b, _ab, ba) = pair("tcp");
    let Posted::InFlight(id) = b.stream_recv(ba, vec![0u8; 10], Op::new()).unwrap() else {
        panic!("nothing was sent yet");
    };
    drop(a);
    let mut res = None;
    progress_until(&mut b, 20, |b| {
        res = b.take::<Vec<u8>>(id);
        res.is_some()
    });
    assert!(
        res.unwrap().is_err(),
        "a receive from a dead peer succeeded"
    );
    assert!(b.stream_recv(ba, vec![0u8; 4], Op::new()).is_err());
}

#[test]
fn an_empty_send_completes_at_once() {
    let (mut a, _b, ab, _ba) = pair("self");
    let info = a.stream_send_blocking(ab, &[]).expect("send");
    assert_eq!(info.length, 0);
}
