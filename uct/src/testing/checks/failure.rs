//! Sleeping on the event fd, peer loss, and destroying busy endpoints.

use super::{expect_delivered, kinds, send, skip, Sent};
use crate::testing::{Fixture, Pair, TIMEOUT};
use crate::{Armed, Caps, Iov, Posted, Status, Token};
use std::os::fd::RawFd;
use std::time::Instant;

/// Whether `fd` becomes readable within `ms` milliseconds.
fn readable(fd: RawFd, ms: i32) -> bool {
    let mut p = libc::pollfd {
        fd,
        events: libc::POLLIN,
        revents: 0,
    };
    // SAFETY: one valid pollfd on the stack, count 1.
    let rc = unsafe { libc::poll(&mut p, 1, ms) };
    rc == 1 && p.revents & libc::POLLIN != 0
}

/// With `EVENT_FD`: a drained iface arms to `Sleep` with its fd not
/// readable; a message from the peer makes the fd readable and progress
/// delivers it. Twice, so that re-arming works.
pub fn event_fd(f: &dyn Fixture) {
    let mut p = Pair::open(f);
    let name = p.name().to_owned();
    if !p.a().attr().caps.contains(Caps::EVENT_FD) {
        return skip(&p, "no EVENT_FD");
    }
    let kind = kinds(p.a().attr().caps)[0];
    let fd = p.b().event_fd().expect("EVENT_FD gives an fd");
    let ep = p.ep_ab();
    let mut sent = Sent::default();
    for round in 0..3u64 {
        if round > 0 {
            // Drain b, then arm it.
            let start = Instant::now();
            loop {
                p.progress();
                match p.b().arm() {
                    Ok(Armed::Sleep) => break,
                    Ok(Armed::Busy) => {}
                    Err(e) => panic!("{name}: arm failed: {e}"),
                }
                assert!(start.elapsed() < TIMEOUT, "{name}: arm never said Sleep");
            }
            assert!(
                !readable(fd, 0),
                "{name}: arm() said Sleep but the event fd is readable"
            );
        }
        // Send from a, progressing only a (after the first round, which
        // may have to wait for b to accept a connection), until b's fd
        // wakes.
        let (posted, data) = send_progressing_a(&mut p, ep, kind, round);
        let (id, data) = data.expect("posted");
        sent.record(posted, Token(round), id, data);
        if round > 0 {
            let start = Instant::now();
            while !readable(fd, 10) {
                p.progress_a();
                assert!(
                    start.elapsed() < TIMEOUT,
                    "{name}: event fd not readable after the peer sent"
                );
            }
        }
        let n = sent.expected.len();
        p.drive_until("message after wakeup", |p| p.sink_b.ams.len() >= n);
    }
    expect_delivered(&mut p, &sent, "messages around sleeps");
}

fn send_progressing_a(
    p: &mut Pair,
    ep: crate::EpId,
    kind: super::Kind,
    seq: u64,
) -> (Posted, Option<(crate::AmId, Vec<u8>)>) {
    let start = Instant::now();
    loop {
        let r = send(p, ep, kind, seq, 64, true);
        if r.1.is_some() {
            return r;
        }
        if seq == 0 {
            p.progress();
        } else {
            p.progress_a();
        }
        assert!(
            start.elapsed() < TIMEOUT,
            "{}: send never accepted",
            p.name()
        );
    }
}

/// With `PEER_FAILURE`: dropping `b` fails `a`'s endpoint exactly once, an
/// in-flight zero-copy send completes, and later operations on the
/// endpoint are errors.
pub fn peer_failure(f: &dyn Fixture) {
    let mut p = Pair::open(f);
    let name = p.name().to_owned();
    let attr = p.a().attr().clone();
    let caps = attr.caps;
    if !caps.contains(Caps::PEER_FAILURE) {
        return skip(&p, "no PEER_FAILURE");
    }
    let ep = p.ep_ab();
    let mut sent = Sent::default();
    let (posted, data) = send(&mut p, ep, kinds(caps)[0], 1, 64, false);
    let (id, data) = data.expect("posted");
    sent.record(posted, Token(1), id, data);
    expect_delivered(&mut p, &sent, "message before the peer dies");

    let big = Token(77);
    let mut in_flight = false;
    if caps.contains(Caps::AM_ZCOPY) {
        let body = vec![9u8; attr.max_zcopy.min(4 << 20)];
        let r = p.zcopy_once(ep, 2, &[], vec![body], big);
        in_flight = matches!(r, Ok(Posted::InFlight));
    }
    p.drop_b();
    p.drive_until("ep_failed after the peer died", |p| {
        p.sink_a.ep_failures(ep) > 0
    });
    if in_flight {
        p.drive_until("completion of the in-flight send", |p| {
            p.sink_a.completion(big).is_some()
        });
    }
    for _ in 0..100 {
        p.progress_a();
    }
    assert_eq!(
        p.sink_a.ep_failures(ep),
        1,
        "{name}: ep_failed more than once"
    );
    if in_flight {
        assert_eq!(
            p.sink_a.completions(big),
            1,
            "{name}: completed more than once"
        );
    }

    if caps.contains(Caps::AM_SHORT) {
        assert!(
            p.a().am().unwrap().am_short(ep, 1, 0, &[1]).is_err(),
            "{name}: am_short on a failed ep"
        );
    }
    if caps.contains(Caps::AM_BCOPY) {
        assert!(
            p.a().am().unwrap().am_bcopy(ep, 1, &[&[1]]).is_err(),
            "{name}: am_bcopy on a failed ep"
        );
    }
    if caps.contains(Caps::AM_ZCOPY) {
        let buf = [1u8; 8];
        let iov = [Iov::from_slice(&buf)];
        // SAFETY: `buf` outlives the call, which must fail without keeping it.
        let r = unsafe { p.a().zcopy().unwrap().am_zcopy(ep, 1, &[], &iov, Token(78)) };
        assert!(r.is_err(), "{name}: am_zcopy on a failed ep");
    }
    assert!(
        p.a().flush(Some(ep), Token(79)).is_err(),
        "{name}: flush of a failed ep"
    );
    if caps.contains(Caps::PENDING) {
        assert!(
            p.a().pending_add(ep, Token(80)).is_err(),
            "{name}: pending_add on a failed ep"
        );
    }
    p.a().ep_destroy(ep);
}

/// Destroying an endpoint with operations posted: in-flight ones complete
/// with `Ok` or `Canceled`, its pending tokens are dropped, it refuses
/// further work, and another endpoint keeps working.
pub fn ep_destroy_in_flight(f: &dyn Fixture) {
    let mut p = Pair::open(f);
    let name = p.name().to_owned();
    let attr = p.a().attr().clone();
    let caps = attr.caps;
    let doomed = p.ep_ab();
    let other = p.ep_ab();
    let mut tokens = Vec::new();
    for (i, kind) in kinds(caps).into_iter().cycle().take(12).enumerate() {
        let seq = 1000 + i as u64;
        match send(&mut p, doomed, kind, seq, 32 << 10, true) {
            (Posted::InFlight, _) => tokens.push(Token(seq)),
            (_, None) => break,
            _ => {}
        }
    }
    if caps.contains(Caps::PENDING) {
        p.a().pending_add(doomed, Token(9999)).expect("pending_add");
    }
    p.a().ep_destroy(doomed);
    p.drive_until("completions of a destroyed endpoint", |p| {
        tokens.iter().all(|&t| p.sink_a.completion(t).is_some())
    });
    for &t in &tokens {
        if let Some(Err(e)) = p.sink_a.completion(t) {
            assert_eq!(
                e.status(),
                Status::Canceled,
                "{name}: {t:?} completed with {e}"
            );
        }
    }
    assert!(
        p.a().am().unwrap().am_bcopy(doomed, 1, &[&[1]]).is_err(),
        "{name}: send on a destroyed ep"
    );
    p.a().ep_destroy(doomed);

    let kind = kinds(caps)[0];
    let (_, data) = send(&mut p, other, kind, 4242, 40, false);
    let (_, want) = data.expect("posted");
    p.drive_until("message on the surviving endpoint", |p| {
        p.sink_b.ams.iter().any(|m| m.data == want)
    });
    for _ in 0..50 {
        p.progress();
    }
    assert!(
        p.sink_a.pending_tokens(doomed).is_empty(),
        "{name}: a destroyed endpoint's pending token came back"
    );
}
