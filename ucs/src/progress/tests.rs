//! Tests of the event set and event fd (they use real fds).

use super::*;
use crate::Error;
use std::io::Write;
use std::os::fd::AsRawFd;
use std::os::unix::net::UnixStream;
use std::time::Duration;

/// Long enough never to expire on a loaded machine; the tests only check
/// that a ready fd is reported, never how fast.
const PATIENCE: Option<Duration> = Some(Duration::from_secs(30));

#[test]
fn eventfd_wakes_epoll() {
    let mut set = EventSet::new().unwrap();
    let efd = EventFd::new().unwrap();
    set.add(efd.as_raw_fd(), 42, Interest::READABLE).unwrap();
    let mut out = Vec::new();
    assert_eq!(set.wait(Some(Duration::ZERO), &mut out).unwrap(), 0);
    assert!(!efd.drain().unwrap(), "not signaled yet");

    efd.signal().unwrap();
    efd.signal().unwrap();
    assert_eq!(set.wait(PATIENCE, &mut out).unwrap(), 1);
    assert_eq!(out[0].0, 42);
    assert!(out[0].1.is_readable() && !out[0].1.is_writable());
    assert!(efd.drain().unwrap(), "signals coalesce into one");
    assert!(!efd.drain().unwrap());
    assert_eq!(set.wait(Some(Duration::ZERO), &mut out).unwrap(), 0);
    assert!(out.is_empty());
}

#[test]
fn signal_from_another_thread() {
    let mut set = EventSet::new().unwrap();
    let efd = EventFd::new().unwrap();
    set.add(efd.as_raw_fd(), 7, Interest::READABLE).unwrap();
    let mut out = Vec::new();
    std::thread::scope(|s| {
        s.spawn(|| efd.signal().unwrap());
        // Blocks until the other thread signals (a timeout is only a guard
        // against hanging the test suite).
        while set.wait(PATIENCE, &mut out).unwrap() == 0 {}
    });
    assert_eq!(out, [(7, out[0].1)]);
}

#[test]
fn modify_and_remove() {
    let mut set = EventSet::with_capacity(1).unwrap();
    let (mut a, b) = UnixStream::pair().unwrap();
    let fd = b.as_raw_fd();
    set.add(fd, 1, Interest::WRITABLE).unwrap();
    let mut out = Vec::new();
    assert_eq!(set.wait(PATIENCE, &mut out).unwrap(), 1);
    assert_eq!(out[0].0, 1);
    assert!(out[0].1.is_writable());

    set.modify(fd, 2, Interest::READABLE | Interest::READ_HANGUP)
        .unwrap();
    assert_eq!(set.wait(Some(Duration::ZERO), &mut out).unwrap(), 0);
    a.write_all(b"x").unwrap();
    assert_eq!(set.wait(PATIENCE, &mut out).unwrap(), 1);
    assert_eq!(out[0].0, 2);
    assert!(out[0].1.is_readable() && !out[0].1.is_hangup());
    drop(a);
    assert_eq!(set.wait(PATIENCE, &mut out).unwrap(), 1);
    assert!(out[0].1.is_hangup());

    set.remove(fd).unwrap();
    assert_eq!(set.wait(Some(Duration::ZERO), &mut out).unwrap(), 0);
    assert!(set.as_raw_fd() >= 0);
}

#[test]
fn edge_triggered_reports_once() {
    let mut set = EventSet::new().unwrap();
    let efd = EventFd::new().unwrap();
    set.add(efd.as_raw_fd(), 5, Interest::READABLE | Interest::EDGE)
        .unwrap();
    efd.signal().unwrap();
    let mut out = Vec::new();
    assert_eq!(set.wait(PATIENCE, &mut out).unwrap(), 1);
    // Still readable, but the edge was reported already.
    assert_eq!(set.wait(Some(Duration::ZERO), &mut out).unwrap(), 0);
}

#[test]
fn errors_name_the_call() {
    let set = EventSet::new().unwrap();
    let efd = EventFd::new().unwrap();
    match set.add(-1, 0, Interest::READABLE) {
        Err(Error::Io { op, .. }) => assert!(op.starts_with("epoll_ctl(ADD"), "{op}"),
        other => panic!("{other:?}"),
    }
    set.add(efd.as_raw_fd(), 0, Interest::READABLE).unwrap();
    assert!(
        set.add(efd.as_raw_fd(), 0, Interest::READABLE).is_err(),
        "twice"
    );
    let other = EventFd::new().unwrap();
    assert!(set.remove(other.as_raw_fd()).is_err(), "not watched");
    assert!(set
        .modify(other.as_raw_fd(), 0, Interest::READABLE)
        .is_err());
}

#[test]
fn readiness_bits() {
    let r = Readiness::from_bits((libc::EPOLLERR | libc::EPOLLOUT) as u32);
    assert!(r.is_error() && r.is_writable() && !r.is_readable() && !r.is_hangup());
    assert_eq!(Readiness::from_bits(r.bits()), r);
    assert_eq!(
        (Interest::READABLE | Interest::WRITABLE).bits(),
        (libc::EPOLLIN | libc::EPOLLOUT) as u32
    );
}
