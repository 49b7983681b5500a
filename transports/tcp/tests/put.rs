//! `put_zcopy` between two ifaces on loopback: contents, refusals that
//! leave memory alone and the connection usable, limits, back-pressure,
//! flush, cancellation and peer death.

mod common;
#[path = "put/mem.rs"]
mod mem;

use common::{connect_ready, drive, lo, pattern, Recorder};
use mem::{md, Mem, Reg};
use rucx_tcp::TcpConfig;
use uct::{Access, Caps, EpId, Iface, Iov, Posted, RemoteKey, Status, Token};

/// Two ifaces with a ready endpoint from `a` to `b`.
struct Two {
    a: Box<dyn Iface>,
    sa: Recorder,
    b: Box<dyn Iface>,
    sb: Recorder,
    ep: EpId,
}

impl Two {
    fn open(cfg: &TcpConfig) -> Two {
        let (mut a, mut b) = (lo(cfg), lo(cfg));
        let (mut sa, mut sb) = (Recorder::default(), Recorder::default());
        let ep = connect_ready(a.as_mut(), &mut sa, b.as_mut(), &mut sb);
        Two { a, sa, b, sb, ep }
    }

    fn drive(&mut self, done: impl FnMut(&Recorder) -> bool) {
        let mut done = done;
        drive(
            &mut [
                (self.a.as_mut(), &mut self.sa),
                (self.b.as_mut(), &mut self.sb),
            ],
            |x| done(x[0].1),
        );
    }

    /// Posts a put (retried past `NoResource`) and waits for its
    /// completion; returns its result as a status.
    fn put(&mut self, iov: &[Iov], remote: u64, key: &RemoteKey, token: u64) -> Result<(), Status> {
        let t = Token(token);
        loop {
            // SAFETY: the ranges are in `Mem`s created before the ifaces
            // (dropped after them), and this waits for the completion.
            match unsafe {
                self.a
                    .put()
                    .unwrap()
                    .put_zcopy(self.ep, iov, remote, key, t)
            } {
                Ok(Posted::NoResource) => {
                    self.a.progress(&mut self.sa);
                    self.b.progress(&mut self.sb);
                }
                Ok(Posted::InFlight) => break,
                Ok(Posted::Done) => panic!("a put completed without its acknowledgement"),
                Err(e) => return Err(e.status()),
            }
        }
        self.drive(|s| s.completed.iter().any(|(x, _)| *x == t));
        let hits: Vec<_> = self.sa.completed.iter().filter(|(x, _)| *x == t).collect();
        assert_eq!(
            hits.len(),
            1,
            "token {token} completed once (tokens must be unique)"
        );
        match &hits[0].1 {
            Ok(()) => Ok(()),
            Err(e) if e.contains("remote key") => Err(Status::InvalidParam),
            Err(e) if e.contains("range is outside") => Err(Status::Rejected),
            Err(e) => panic!("unexpected put error {e}"),
        }
    }

    /// An active message still goes through, after whatever happened.
    fn am_works(&mut self, seq: u64) {
        assert_eq!(
            self.a
                .am()
                .unwrap()
                .am_short(self.ep, 3, seq, b"am")
                .unwrap(),
            Posted::Done
        );
        let before = self.sb.ams.len();
        drive(
            &mut [
                (self.a.as_mut(), &mut self.sa),
                (self.b.as_mut(), &mut self.sb),
            ],
            |x| x[1].1.ams.len() > before,
        );
        assert_eq!(self.sb.ams.last().unwrap().2[..8], seq.to_le_bytes());
        assert!(self.sa.ep_failed.is_empty(), "{:?}", self.sa.ep_failed);
    }
}

#[test]
fn puts_of_every_size_land_exactly() {
    let md = md();
    const MIB: usize = 1 << 20;
    let sizes = [0, 1, 4095, 65536, MIB];
    let rlen = MIB + 64;
    let region = Reg::new(&*md, &pattern(rlen, 1), Access::REMOTE_WRITE);
    let src = Mem::new(&pattern(4 * MIB, 2));
    let mut t = Two::open(&TcpConfig::default());
    // What the conformance suite's one-sided checks need to run.
    assert!(t.a.attr().caps.contains(Caps::PUT_ZCOPY));
    assert!(md.can_register());
    assert_eq!(t.a.attr().max_put_zcopy, MIB);
    let mut want = region.mem.read();
    for (i, &size) in sizes.iter().enumerate() {
        for off in [7, rlen - size] {
            let data = pattern(size, 100 + i as u64 + off as u64);
            src.write(0, &data);
            want[off..off + size].copy_from_slice(&data);
            let token = (i * 2 + usize::from(off != 7)) as u64;
            let r = t.put(&[src.iov(0, size)], region.addr(off), region.key(), token);
            assert_eq!(r, Ok(()), "{size} bytes at {off}");
            let got = region.mem.read();
            let diff: Vec<usize> = (0..rlen).filter(|&i| got[i] != want[i]).take(5).collect();
            assert!(
                diff.is_empty(),
                "{size} bytes at {off}: differs at {diff:?}"
            );
        }
    }
    // Over the limit: refused at post, nothing sent.
    for iov in [
        vec![src.iov(0, 4 * MIB)],
        vec![src.iov(0, MIB), src.iov(0, 1)],
    ] {
        // SAFETY: refused before anything is kept.
        let r = unsafe {
            t.a.put()
                .unwrap()
                .put_zcopy(t.ep, &iov, region.addr(0), region.key(), Token(99))
        };
        assert_eq!(r.unwrap_err().status(), Status::InvalidParam);
    }
    let many: Vec<Iov> = (0..t.a.attr().max_iov + 1).map(|i| src.iov(i, 1)).collect();
    // SAFETY: as above.
    let r = unsafe {
        t.a.put()
            .unwrap()
            .put_zcopy(t.ep, &many, region.addr(0), region.key(), Token(98))
    };
    assert_eq!(r.unwrap_err().status(), Status::InvalidParam);
    t.am_works(1);
    assert!(region.mem.read() == want, "refused puts wrote nothing");
}

#[test]
fn an_iov_of_several_entries_is_gathered_in_order() {
    let md = md();
    let region = Reg::new(&*md, &[0u8; 70_000], Access::REMOTE_WRITE);
    let src = Mem::new(&pattern(80_000, 3));
    let mut t = Two::open(&TcpConfig::default());
    let parts = [
        (5, 1),
        (10, 0),
        (20, 13),
        (100, 65_000),
        (70_000, 4096),
        (79_990, 7),
    ];
    let iov: Vec<Iov> = parts.iter().map(|&(o, l)| src.iov(o, l)).collect();
    assert_eq!(t.put(&iov, region.addr(11), region.key(), 1), Ok(()));
    let s = src.read();
    let mut want = vec![0u8; 70_000];
    let mut at = 11;
    for &(o, l) in &parts {
        want[at..at + l].copy_from_slice(&s[o..o + l]);
        at += l;
    }
    assert!(region.mem.read() == want);
}

#[test]
fn refused_puts_fail_touch_nothing_and_keep_the_connection() {
    let md = md();
    let init = pattern(4096, 4);
    let rw = Reg::new(&*md, &init, Access::REMOTE_WRITE);
    let ro = Reg::new(&*md, &init, Access::REMOTE_READ | Access::LOCAL_WRITE);
    let mut dead = Reg::new(&*md, &init, Access::REMOTE_WRITE);
    let dead_key = dead.key().clone();
    dead.dereg();
    // The same registration as packed by another process: the nonce
    // (key bytes 20..28) differs.
    let mut packed = rw.key().packed.to_vec();
    packed[20] ^= 0x5a;
    let foreign = md.rkey_unpack(&packed).expect("the format is fine");
    // The genuine key with its secret (key bytes 36..44) altered, and the
    // key of `ro` as a peer holding `rw`'s would guess it: every field but
    // the secret is right. Both name nothing, as a deregistered key.
    let mut packed = rw.key().packed.to_vec();
    packed[40] ^= 0x01;
    let forged = md.rkey_unpack(&packed).expect("the format is fine");
    let mut packed = ro.key().packed.to_vec();
    packed[36..44].copy_from_slice(&rw.key().packed[36..44]);
    let guessed = md.rkey_unpack(&packed).expect("the format is fine");
    let src = Mem::new(&pattern(4096, 5));
    let mut t = Two::open(&TcpConfig::default());
    let cases: [(&str, u64, usize, &RemoteKey, Status); 9] = [
        (
            "deregistered",
            dead.addr(0),
            4096,
            &dead_key,
            Status::InvalidParam,
        ),
        (
            "no remote write",
            ro.addr(0),
            4096,
            ro.key(),
            Status::Rejected,
        ),
        ("past the end", rw.addr(1), 4096, rw.key(), Status::Rejected),
        (
            "before the start",
            rw.addr(0) - 1,
            1,
            rw.key(),
            Status::Rejected,
        ),
        (
            "empty, out of range",
            rw.addr(4096) + 1,
            0,
            rw.key(),
            Status::Rejected,
        ),
        ("wrapping", u64::MAX - 1, 16, rw.key(), Status::Rejected),
        (
            "another process's key",
            rw.addr(0),
            4096,
            &foreign,
            Status::InvalidParam,
        ),
        (
            "a wrong secret",
            rw.addr(0),
            4096,
            &forged,
            Status::InvalidParam,
        ),
        (
            "another registration's secret",
            ro.addr(0),
            4096,
            &guessed,
            Status::InvalidParam,
        ),
    ];
    for (i, (what, remote, len, key, want)) in cases.into_iter().enumerate() {
        let r = t.put(&[src.iov(0, len)], remote, key, 10 + i as u64);
        assert_eq!(r, Err(want), "{what}");
        assert_eq!(rw.mem.read(), init, "{what}");
        assert_eq!(ro.mem.read(), init, "{what}");
        assert_eq!(dead.mem.read(), init, "{what}");
        t.am_works(i as u64);
    }
    assert_eq!(t.put(&[src.iov(0, 4096)], rw.addr(0), rw.key(), 99), Ok(()));
    assert_eq!(rw.mem.read(), src.read());
}

#[test]
fn a_completed_put_is_in_the_target_before_a_later_message() {
    let md = md();
    let region = Reg::new(&*md, &[0u8; 1 << 20], Access::REMOTE_WRITE);
    let src = Mem::new(&pattern(1 << 20, 6));
    let mut t = Two::open(&TcpConfig::default());
    for round in 0..4u64 {
        src.write(0, &pattern(1 << 20, 7 + round));
        assert_eq!(
            t.put(&[src.iov(0, 1 << 20)], region.addr(0), region.key(), round),
            Ok(())
        );
        // The "all data arrived" message: when it is delivered, the data
        // must be there (it was before the put completed).
        t.am_works(round);
        assert!(region.mem.read() == src.read(), "round {round}");
    }
}

#[test]
fn flush_waits_for_acknowledgements() {
    let md = md();
    let region = Reg::new(&*md, &[0u8; 64], Access::REMOTE_WRITE);
    let src = Mem::new(&pattern(64, 8));
    let mut t = Two::open(&TcpConfig::default());
    // SAFETY: `src` outlives the ifaces; the test waits for completion.
    let r = unsafe {
        t.a.put().unwrap().put_zcopy(
            t.ep,
            &[src.iov(0, 64)],
            region.addr(0),
            region.key(),
            Token(1),
        )
    };
    assert_eq!(r.unwrap(), Posted::InFlight);
    // The bytes left at once, but the acknowledgement has not come: the
    // target has not even read them.
    assert_eq!(t.a.flush(Some(t.ep), Token(2)).unwrap(), Posted::InFlight);
    assert_eq!(t.a.flush(None, Token(3)).unwrap(), Posted::InFlight);
    for _ in 0..50 {
        t.a.progress(&mut t.sa);
    }
    assert!(t.sa.completed.is_empty(), "{:?}", t.sa.completed);
    t.drive(|s| s.completed.len() == 3);
    let order: Vec<Token> = t.sa.completed.iter().map(|(x, _)| *x).collect();
    assert_eq!(order[0], Token(1), "the put completes before the flushes");
    assert!(t.sa.completed.iter().all(|(_, r)| r.is_ok()));
    assert_eq!(region.mem.read(), src.read());
    assert_eq!(t.a.flush(Some(t.ep), Token(4)).unwrap(), Posted::Done);
}

#[test]
fn puts_beyond_the_outstanding_limit_wait_for_acknowledgements() {
    let md = md();
    let region = Reg::new(&*md, &[0u8; 8], Access::REMOTE_WRITE);
    let src = Mem::new(&[1]);
    let mut t = Two::open(&TcpConfig::default());
    let post = |t: &mut Two, token: u64| {
        // SAFETY: `src` outlives the ifaces; the test waits for all puts.
        unsafe {
            t.a.put().unwrap().put_zcopy(
                t.ep,
                &[src.iov(0, 1)],
                region.addr(0),
                region.key(),
                Token(token),
            )
        }
        .unwrap()
    };
    let mut n = 0;
    while post(&mut t, n) == Posted::InFlight {
        n += 1;
        assert!(n <= 100_000, "never refused");
    }
    // At most 1024 unacknowledged puts per connection (wire.rs).
    assert!((16..=1024).contains(&n), "refused after {n} puts");
    t.a.pending_add(t.ep, Token(u64::MAX)).unwrap();
    t.drive(|s| s.ready.iter().any(|r| r.1 == Token(u64::MAX)));
    assert_eq!(post(&mut t, n), Posted::InFlight);
    t.drive(|s| s.completed.len() as u64 == n + 1);
    assert!(t.sa.completed.iter().all(|(_, r)| r.is_ok()));
}

#[test]
fn back_pressure_on_large_puts() {
    let md = md();
    let region = Reg::new(&*md, &[0u8; 1 << 20], Access::REMOTE_WRITE);
    let src = Mem::new(&pattern(1 << 20, 9));
    let mut t = Two::open(&TcpConfig::default());
    let mut posted = 0u64;
    let mut refused = false;
    // The target does not read: the socket fills and a put is refused.
    while posted < 64 {
        // SAFETY: as above.
        let r = unsafe {
            t.a.put().unwrap().put_zcopy(
                t.ep,
                &[src.iov(0, 1 << 20)],
                region.addr(0),
                region.key(),
                Token(posted),
            )
        };
        match r.unwrap() {
            Posted::InFlight => posted += 1,
            Posted::NoResource => {
                refused = true;
                break;
            }
            Posted::Done => panic!("Done without acknowledgement"),
        }
    }
    assert!(refused, "64 MiB went out with the target not reading");
    t.a.pending_add(t.ep, Token(1000)).unwrap();
    t.drive(|s| s.ready.iter().any(|r| r.1 == Token(1000)));
    t.drive(|s| s.completed.len() as u64 == posted);
    assert!(t.sa.completed.iter().all(|(_, r)| r.is_ok()));
    assert!(region.mem.read() == src.read());
}

#[test]
fn ep_destroy_cancels_puts_and_the_connection_goes_on() {
    let md = md();
    let region = Reg::new(&*md, &[0u8; 1 << 20], Access::REMOTE_WRITE);
    let src = Mem::new(&pattern(1 << 20, 10));
    let mut t = Two::open(&TcpConfig::default());
    let ep2 = t.a.ep_create(t.b.device_addr(), t.b.iface_addr()).unwrap();
    // SAFETY: `src` outlives the ifaces; the put is canceled below, after
    // which the iface no longer reads it (it copied the rest).
    let r = unsafe {
        t.a.put().unwrap().put_zcopy(
            t.ep,
            &[src.iov(0, 1 << 20)],
            region.addr(0),
            region.key(),
            Token(1),
        )
    };
    assert_eq!(r.unwrap(), Posted::InFlight);
    t.a.ep_destroy(t.ep);
    t.a.progress(&mut t.sa);
    assert_eq!(t.sa.completed.len(), 1);
    assert!(t.sa.completed[0].1.as_ref().unwrap_err().contains("cancel"));
    t.ep = ep2;
    // The canceled put still lands and is acknowledged; the next put on
    // the same connection is matched correctly.
    assert_eq!(
        t.put(&[src.iov(0, 100)], region.addr(0), region.key(), 2),
        Ok(())
    );
    assert!(region.mem.read() == src.read());
    t.am_works(5);
}

#[test]
fn peer_death_fails_puts_in_flight() {
    let md = md();
    let region = Reg::new(&*md, &[0u8; 1 << 20], Access::REMOTE_WRITE);
    let src = Mem::new(&pattern(1 << 20, 11));
    let mut t = Two::open(&TcpConfig::default());
    let mut tokens = Vec::new();
    for i in 0..8 {
        // SAFETY: `src` outlives the ifaces; the test waits for all.
        let r = unsafe {
            t.a.put().unwrap().put_zcopy(
                t.ep,
                &[src.iov(0, 1 << 20)],
                region.addr(0),
                region.key(),
                Token(i),
            )
        };
        match r.unwrap() {
            Posted::InFlight => tokens.push(Token(i)),
            Posted::NoResource => break,
            Posted::Done => panic!("Done without acknowledgement"),
        }
    }
    assert!(!tokens.is_empty());
    // The target dies without having read anything.
    let dead = std::mem::replace(&mut t.b, lo(&TcpConfig::default()));
    drop(dead);
    let mut sa = std::mem::take(&mut t.sa);
    drive(&mut [(t.a.as_mut(), &mut sa)], |x| {
        x[0].1.completed.len() == tokens.len() && !x[0].1.ep_failed.is_empty()
    });
    for (tok, r) in &sa.completed {
        assert!(tokens.contains(tok));
        assert!(r.is_err(), "{tok:?} completed with {r:?}");
    }
    // SAFETY: refused at once on a failed endpoint.
    let r = unsafe {
        t.a.put().unwrap().put_zcopy(
            t.ep,
            &[src.iov(0, 1)],
            region.addr(0),
            region.key(),
            Token(50),
        )
    };
    assert!(r.is_err());
    assert_eq!(t.a.flush(None, Token(51)).unwrap(), Posted::Done);
}
