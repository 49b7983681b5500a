//! Sleeping on the iface's event fd.

mod common;

use common::{connect, connect_ready, drive, lo, short_when_open, Recorder};
use rucx_tcp::TcpConfig;
use uct::{Armed, Posted, Token};

/// Whether `fd` becomes readable within `ms` milliseconds.
fn readable(fd: i32, ms: i32) -> bool {
    let mut p = libc::pollfd {
        fd,
        events: libc::POLLIN,
        revents: 0,
    };
    // SAFETY: one valid pollfd, alive for the call.
    let n = unsafe { libc::poll(&mut p, 1, ms) };
    assert!(n >= 0, "poll failed");
    n == 1 && p.revents & libc::POLLIN != 0
}

#[test]
fn event_fd_wakes_on_arrival() {
    let cfg = TcpConfig::default();
    let (mut a, mut b) = (lo(&cfg), lo(&cfg));
    let (mut sa, mut sb) = (Recorder::default(), Recorder::default());
    let ep = connect(a.as_mut(), b.as_ref());
    let first = short_when_open(
        &mut [(a.as_mut(), &mut sa), (b.as_mut(), &mut sb)],
        ep,
        0,
        1,
        b"first",
    );
    assert_eq!(first.unwrap(), Posted::Done);
    drive(&mut [(a.as_mut(), &mut sa), (b.as_mut(), &mut sb)], |x| {
        x[1].1.ams.len() == 1
    });
    let efd = b.event_fd().unwrap();
    // Nothing pending: may sleep, and the fd stays quiet.
    assert_eq!(b.arm().unwrap(), Armed::Sleep);
    assert!(!readable(efd, 0));
    // A message from another thread's point of view: the fd wakes up.
    assert_eq!(
        a.am().unwrap().am_short(ep, 0, 2, b"second").unwrap(),
        Posted::Done
    );
    assert!(readable(efd, 10_000), "no wake-up within 10 s");
    assert!(b.progress(&mut sb) >= 1);
    assert_eq!(sb.ams[1].2[8..], *b"second");
    assert_eq!(b.arm().unwrap(), Armed::Sleep);
    assert!(!readable(efd, 0));

    // The fd nests in a worker's own epoll set.
    // SAFETY: plain syscalls on fds owned by this test or the iface.
    unsafe {
        let outer = libc::epoll_create1(libc::EPOLL_CLOEXEC);
        assert!(outer >= 0);
        let mut ev = libc::epoll_event {
            events: libc::EPOLLIN as u32,
            u64: 7,
        };
        assert_eq!(libc::epoll_ctl(outer, libc::EPOLL_CTL_ADD, efd, &mut ev), 0);
        // A progress call of `a` first: a second small send since its last
        // one would wait for it (RUCX_TCP_TX_BATCH).
        a.progress(&mut sa);
        assert_eq!(
            a.am().unwrap().am_short(ep, 0, 3, b"third").unwrap(),
            Posted::Done
        );
        let mut out = [libc::epoll_event { events: 0, u64: 0 }; 1];
        let n = libc::epoll_wait(outer, out.as_mut_ptr(), 1, 10_000);
        let data = out[0].u64;
        assert_eq!((n, data), (1, 7));
        libc::close(outer);
    }
    b.progress(&mut sb);
    assert_eq!(sb.ams[2].2[8..], *b"third");
}

#[test]
fn arm_is_busy_with_queued_reports() {
    let cfg = TcpConfig::default();
    let (mut a, mut b) = (lo(&cfg), lo(&cfg));
    let (mut sa, mut sb) = (Recorder::default(), Recorder::default());
    let ep = connect_ready(a.as_mut(), &mut sa, b.as_mut(), &mut sb);
    a.progress(&mut sa);
    assert_eq!(a.arm().unwrap(), Armed::Sleep);
    a.pending_add(ep, Token(9)).unwrap();
    assert_eq!(a.arm().unwrap(), Armed::Busy);
    a.progress(&mut sa);
    assert_eq!(sa.ready.last(), Some(&(ep, Token(9))));
    assert_eq!(a.arm().unwrap(), Armed::Sleep);
    // A dead peer wakes the sender up and fails its endpoint.
    drop(b);
    drive(&mut [(a.as_mut(), &mut sa)], |x| {
        !x[0].1.ep_failed.is_empty()
    });
}
