//! Behaviour of `self` beyond the conformance suite: several ifaces,
//! threads, sleeping senders, the exact failure reports.

use super::*;
use crate::testing::{Event, TestSink};
use crate::{Armed, EpId, Posted, SrcId, Status, Token};
use std::time::{Duration, Instant};

/// A component whose mailboxes take 4 messages.
static TINY: SelfComponent = SelfComponent::with_config(SelfConfig {
    mailbox_bytes: SelfConfig::MIN_MAILBOX_BYTES,
    mailbox_msgs: 4,
});

fn open(c: &SelfComponent) -> Box<dyn Iface> {
    let md = c.md_open().unwrap().pop().unwrap();
    let r = md.resources().unwrap().pop().unwrap();
    md.iface_open(&r, &IfaceParams::default()).unwrap()
}

fn addrs(i: &dyn Iface) -> (Vec<u8>, Vec<u8>) {
    (i.device_addr().to_vec(), i.iface_addr().to_vec())
}

fn connect(from: &mut dyn Iface, to: &(Vec<u8>, Vec<u8>)) -> EpId {
    from.ep_create(&to.0, &to.1).unwrap()
}

fn readable(fd: i32, ms: i32) -> bool {
    let mut p = libc::pollfd {
        fd,
        events: libc::POLLIN,
        revents: 0,
    };
    // SAFETY: one valid pollfd on the stack.
    let rc = unsafe { libc::poll(&mut p, 1, ms) };
    rc == 1 && p.revents & libc::POLLIN != 0
}

#[test]
fn component_has_one_resource() {
    assert_eq!(COMPONENT.name(), "self");
    assert_eq!(COMPONENT.config_tables()[0].prefix, "SELF_");
    let mds = COMPONENT.md_open().unwrap();
    assert_eq!(mds.len(), 1);
    assert_eq!(mds[0].name(), "self");
    let res = mds[0].resources().unwrap();
    assert_eq!(
        res,
        [TlResource {
            tl_name: "self".into(),
            dev_name: "memory".into(),
            dev_type: DeviceType::SelfDev,
        }]
    );
    let mut wrong = res[0].clone();
    wrong.dev_name = "lo".into();
    let e = mds[0]
        .iface_open(&wrong, &IfaceParams::default())
        .unwrap_err();
    assert_eq!(e.status(), Status::InvalidParam);
}

#[test]
fn bad_config_fails_md_open() {
    static BAD: SelfComponent = SelfComponent::with_config(SelfConfig {
        mailbox_bytes: 1,
        mailbox_msgs: 1024,
    });
    assert!(BAD.md_open().is_err());
}

#[test]
fn loopback_and_per_endpoint_sources() {
    let mut a = open(&COMPONENT);
    let mut b = open(&COMPONENT);
    let ax = addrs(&*a);
    let to_self = connect(a.as_mut(), &ax);
    let bx = addrs(&*b);
    let (e1, e2) = (connect(a.as_mut(), &bx), connect(a.as_mut(), &bx));
    assert_eq!(
        a.am().unwrap().am_short(to_self, 3, 11, b"me").unwrap(),
        Posted::Done
    );
    let mut sink = TestSink::new();
    assert_eq!(a.progress(&mut sink), 1);
    assert_eq!(sink.ams[0].data[8..], *b"me");

    for ep in [e1, e2, e1] {
        assert_eq!(
            a.am().unwrap().am_bcopy(ep, 1, &[b"x"]).unwrap(),
            (Posted::Done, 1)
        );
    }
    let mut sink = TestSink::new();
    assert_eq!(b.progress(&mut sink), 3);
    let srcs: Vec<SrcId> = sink.ams.iter().map(|m| m.src).collect();
    assert_eq!(srcs[0], srcs[2]);
    assert_ne!(srcs[0], srcs[1]);
}

#[test]
fn other_process_and_closed_ifaces_are_unreachable() {
    let mut a = open(&COMPONENT);
    let b = open(&COMPONENT);
    let (mut dev, iface) = addrs(&*b);
    assert!(a.is_reachable(&dev, &iface));
    drop(b);
    assert!(!a.is_reachable(&dev, &iface));
    let e = a.ep_create(&dev, &iface).unwrap_err();
    assert_eq!(e.status(), Status::Unreachable);
    let c = open(&COMPONENT);
    let (_, iface_c) = addrs(&*c);
    dev[8] ^= 0x55; // another pid
    assert!(!a.is_reachable(&dev, &iface_c));
    assert_eq!(
        a.ep_create(&dev, &iface_c).unwrap_err().status(),
        Status::Unreachable
    );
}

#[test]
fn dropped_target_fails_endpoint_once_with_pending_tokens() {
    let mut a = open(&TINY);
    let b = open(&TINY);
    let ep = connect(a.as_mut(), &addrs(&*b));
    while a.am().unwrap().am_short(ep, 1, 0, &[]).unwrap() == Posted::Done {}
    a.pending_add(ep, Token(1)).unwrap();
    a.pending_add(ep, Token(2)).unwrap();
    assert_eq!(a.arm().unwrap(), Armed::Sleep);
    drop(b);
    assert!(
        readable(a.event_fd().unwrap(), 0),
        "closing wakes the sender"
    );
    assert_eq!(a.arm().unwrap(), Armed::Busy);
    let mut sink = TestSink::new();
    assert_eq!(a.progress(&mut sink), 3);
    match &sink.events[..] {
        [Event::EpFailed { ep: f, error }, Event::PendingReady {
            token: Token(1), ..
        }, Event::PendingReady {
            token: Token(2), ..
        }] if *f == ep => {
            assert_eq!(error.status(), Status::ConnectionReset)
        }
        other => panic!("unexpected reports {other:?}"),
    }
    for _ in 0..3 {
        assert_eq!(a.progress(&mut sink), 0);
    }
    assert_eq!(a.arm().unwrap(), Armed::Sleep);
    assert!(a.am().unwrap().am_short(ep, 1, 0, &[]).is_err());
    assert!(a.pending_add(ep, Token(3)).is_err());
    assert!(a.flush(Some(ep), Token(4)).is_err());
    assert_eq!(a.flush(None, Token(5)).unwrap(), Posted::Done);
}

#[test]
fn messages_of_a_dropped_sender_still_arrive() {
    let mut a = open(&COMPONENT);
    let mut b = open(&COMPONENT);
    let ep = connect(a.as_mut(), &addrs(&*b));
    assert_eq!(
        a.am()
            .unwrap()
            .am_bcopy(ep, 2, &[b"last", b" words"])
            .unwrap()
            .0,
        Posted::Done
    );
    drop(a);
    let mut sink = TestSink::new();
    assert_eq!(b.progress(&mut sink), 1);
    assert_eq!(sink.ams[0].data, b"last words");
    assert!(sink.events.is_empty(), "no src_failed for whole messages");
}

#[test]
fn destroyed_endpoint_drops_pending_tokens_and_id_is_reused() {
    let mut a = open(&COMPONENT);
    let b = open(&COMPONENT);
    let bx = addrs(&*b);
    let ep = connect(a.as_mut(), &bx);
    a.pending_add(ep, Token(1)).unwrap();
    assert_eq!(a.arm().unwrap(), Armed::Busy, "a ready token is work");
    a.ep_destroy(ep);
    a.ep_destroy(ep);
    let mut sink = TestSink::new();
    assert_eq!(a.progress(&mut sink), 0);
    assert_eq!(a.arm().unwrap(), Armed::Sleep);
    let again = connect(a.as_mut(), &bx);
    assert_eq!(again, ep);
    a.pending_add(again, Token(2)).unwrap();
    a.progress(&mut sink);
    assert_eq!(sink.pending_tokens(again), [Token(2)]);
}

/// A sender and a receiver on two threads, both sleeping on their event
/// fds whenever `arm` allows: the receiver when its mailbox is empty, the
/// sender when the receiver's 4-message mailbox is full. A lost wakeup
/// fails the test (poll runs out) instead of hanging it.
#[test]
fn threads_sleep_and_wake() {
    const N: u64 = 5000;
    let mut tx = open(&TINY);
    let mut rx = open(&TINY);
    let ep = connect(tx.as_mut(), &addrs(&*rx));
    let wait = |iface: &mut Box<dyn Iface>, what: &str| {
        if iface.arm().unwrap() == Armed::Sleep {
            let fd = iface.event_fd().unwrap();
            assert!(readable(fd, 20_000), "{what}: lost wakeup");
        }
    };
    let receiver = std::thread::spawn(move || {
        let mut sink = TestSink::new();
        while (sink.ams.len() as u64) < N {
            if rx.progress(&mut sink) == 0 {
                wait(&mut rx, "receiver");
            }
        }
        for (i, m) in sink.ams.iter().enumerate() {
            assert_eq!(m.data[..8], (i as u64).to_le_bytes());
        }
    });
    let mut sink = TestSink::new();
    let start = Instant::now();
    let mut seq = 0;
    while seq < N {
        match tx.am().unwrap().am_short(ep, 0, seq, &[0; 16]).unwrap() {
            Posted::Done => seq += 1,
            Posted::InFlight => unreachable!(),
            Posted::NoResource => {
                tx.pending_add(ep, Token(seq)).unwrap();
                while tx.progress(&mut sink) == 0 {
                    wait(&mut tx, "sender");
                }
                assert_eq!(sink.pending_tokens(ep).last(), Some(&Token(seq)));
            }
        }
        assert!(start.elapsed() < Duration::from_secs(60));
    }
    receiver.join().unwrap();
}
