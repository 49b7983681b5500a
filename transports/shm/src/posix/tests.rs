//! The posix iface between two ifaces of this process (each maps the
//! other's segment through /proc/self/fd). The conformance suite and the
//! multi-process tests are in `tests/`.

use std::time::{Duration, Instant};

use uct::testing::{Event, TestSink};
use uct::{Armed, EpId, Iface, IfaceParams, Posted, Token};

use super::*;
use crate::segment::PosixConfig;

fn open_with(mm: &MmConfig) -> PosixIface {
    PosixIface::open(&IfaceParams::default(), mm, &PosixConfig::default()).unwrap()
}

fn open() -> PosixIface {
    open_with(&MmConfig::default())
}

fn connect(from: &mut PosixIface, to: &PosixIface) -> EpId {
    assert!(from.is_reachable(to.device_addr(), to.iface_addr()));
    from.ep_create(to.device_addr(), to.iface_addr()).unwrap()
}

/// Progresses `iface` until `done` or a deadline.
fn drive(iface: &mut PosixIface, sink: &mut TestSink, mut done: impl FnMut(&TestSink) -> bool) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while !done(sink) {
        assert!(Instant::now() < deadline, "timed out");
        iface.progress(sink);
        std::thread::yield_now();
    }
}

#[test]
fn config_defaults_and_limits() {
    MM_TABLE.check_defaults().unwrap();
    let fifo = MmConfig::default().fifo().unwrap();
    assert_eq!(
        (
            fifo.elem_size,
            fifo.capacity,
            fifo.release_every,
            fifo.desc_size
        ),
        (128, 64, 8, 8192)
    );
    let a = open();
    assert_eq!((a.attr().max_short, a.attr().max_bcopy), (112, 8192));
    let bad = MmConfig {
        release_factor: 0.0,
        ..MmConfig::default()
    };
    assert!(bad.fifo().is_err());
    let bad = MmConfig {
        fifo_size: 100,
        ..MmConfig::default()
    };
    assert!(bad.fifo().is_err());
}

#[test]
fn short_and_bcopy_arrive_in_order_with_one_source() {
    let mut a = open();
    let mut b = open();
    let ep = connect(&mut a, &b);
    let big: Vec<u8> = (0..8192u32).map(|i| (i * 7) as u8).collect();
    assert_eq!(
        a.am().unwrap().am_short(ep, 3, 0x1122, b"hi").unwrap(),
        Posted::Done
    );
    assert_eq!(
        a.am()
            .unwrap()
            .am_bcopy(ep, 4, &[&big[..100], &big[100..]])
            .unwrap(),
        (Posted::Done, 8192)
    );
    assert_eq!(
        a.am().unwrap().am_bcopy(ep, 5, &[]).unwrap(),
        (Posted::Done, 0)
    );
    assert!(a.am().unwrap().am_short(ep, 3, 0, &[0; 113]).is_err());
    assert!(a.am().unwrap().am_bcopy(ep, 3, &[&big, b"x"]).is_err());
    let mut sink = TestSink::new();
    drive(&mut b, &mut sink, |s| s.ams.len() == 3);
    let mut short = 0x1122u64.to_le_bytes().to_vec();
    short.extend_from_slice(b"hi");
    assert_eq!((sink.ams[0].id, &sink.ams[0].data), (3, &short));
    assert_eq!((sink.ams[1].id, &sink.ams[1].data), (4, &big));
    assert_eq!((sink.ams[2].id, sink.ams[2].data.len()), (5, 0));
    assert!(sink.ams.iter().all(|m| m.src == sink.ams[0].src));
}

#[test]
fn full_fifo_refuses_then_pending_comes_back() {
    let mm = MmConfig {
        fifo_size: 4,
        ..MmConfig::default()
    };
    let mut a = open_with(&mm);
    let mut b = open_with(&mm);
    let ep = connect(&mut a, &b);
    let mut sent = 0;
    while a.am().unwrap().am_short(ep, 1, sent, &[]).unwrap() == Posted::Done {
        sent += 1;
    }
    assert_eq!(sent, 4);
    let mut sa = TestSink::new();
    a.pending_add(ep, Token(9)).unwrap();
    a.progress(&mut sa);
    assert!(sa.pending_tokens(ep).is_empty(), "still full");
    let mut sb = TestSink::new();
    drive(&mut b, &mut sb, |s| s.ams.len() == 4);
    // The receiver releases in batches (half the FIFO), so room is back.
    drive(&mut a, &mut sa, |s| s.pending_tokens(ep) == [Token(9)]);
    assert_eq!(
        a.am().unwrap().am_short(ep, 1, 99, &[]).unwrap(),
        Posted::Done
    );
}

/// An endpoint's own sender, used from another thread, reaches the peer
/// as the endpoint's source, refuses a payload past `max_short`, says so
/// when the FIFO is full, and keeps the peer's sender slot while it lives.
#[test]
fn a_short_sender_sends_from_another_thread() {
    let mm = MmConfig {
        fifo_size: 8,
        ..MmConfig::default()
    };
    let mut a = open_with(&mm);
    let mut b = open_with(&mm);
    let ep = connect(&mut a, &b);
    let mut tx = a.am().unwrap().short_sender(ep).expect("a sender");
    assert_eq!(
        a.am().unwrap().am_short(ep, 2, 0, b"iface").unwrap(),
        Posted::Done
    );
    let (mut tx, sent) = std::thread::spawn(move || {
        assert!(tx.am_short(3, 0, &[0; 113]).is_err());
        let mut sent = 0u64;
        while tx.am_short(3, sent, b"own").unwrap() {
            sent += 1;
        }
        (tx, sent)
    })
    .join()
    .unwrap();
    assert_eq!(sent, 7, "the FIFO holds 8, one of them the iface's");
    // The endpoint goes; the sender still holds the peer's slot.
    a.ep_destroy(ep);
    let mut sink = TestSink::new();
    drive(&mut b, &mut sink, |s| s.ams.len() == 8);
    assert!(sink.ams.iter().all(|m| m.src == sink.ams[0].src));
    assert_eq!(&sink.ams[0].data[8..], b"iface");
    for (i, m) in sink.ams[1..].iter().enumerate() {
        assert_eq!(m.data[..8], (i as u64).to_le_bytes());
        assert_eq!(&m.data[8..], b"own");
    }
    assert!(tx.am_short(3, 99, b"late").unwrap());
    drop(tx);
    drive(&mut b, &mut sink, |s| s.ams.len() == 9);
}

#[test]
fn arming_and_wake_up_through_the_event_fd() {
    let mut a = open();
    let mut b = open();
    let ep = connect(&mut a, &b);
    assert!(
        a.watched_processes() == 0,
        "no watch of this process's own exit"
    );
    assert_eq!(b.arm().unwrap(), Armed::Sleep);
    let fd = b.event_fd().unwrap();
    let readable = |timeout_ms| {
        let mut pfd = libc::pollfd {
            fd,
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: one valid pollfd.
        unsafe { libc::poll(&mut pfd, 1, timeout_ms) == 1 }
    };
    assert!(!readable(0));
    assert_eq!(
        a.am().unwrap().am_short(ep, 1, 7, &[]).unwrap(),
        Posted::Done
    );
    assert!(readable(5000), "the sender woke the armed receiver");
    assert_eq!(b.arm().unwrap(), Armed::Busy, "a message waits");
    let mut sink = TestSink::new();
    drive(&mut b, &mut sink, |s| s.ams.len() == 1);
    assert_eq!(b.arm().unwrap(), Armed::Sleep);
    assert!(!readable(0), "arming drained the socket");
}

#[test]
fn closing_the_sender_fails_its_source_after_its_messages() {
    let mut a = open();
    let mut b = open();
    let ep = connect(&mut a, &b);
    for i in 0..3 {
        assert_eq!(
            a.am().unwrap().am_short(ep, 1, i, &[]).unwrap(),
            Posted::Done
        );
    }
    a.ep_destroy(ep);
    let mut sink = TestSink::new();
    drive(&mut b, &mut sink, |s| {
        s.events
            .iter()
            .any(|e| matches!(e, Event::SrcFailed { .. }))
    });
    assert_eq!(sink.ams.len(), 3, "messages first, then the failure");
    // The slot is reused with another source id.
    let ep2 = connect(&mut a, &b);
    assert_eq!(
        a.am().unwrap().am_short(ep2, 1, 0, &[]).unwrap(),
        Posted::Done
    );
    drive(&mut b, &mut sink, |s| s.ams.len() == 4);
    assert_ne!(sink.ams[3].src, sink.ams[0].src);
}

#[test]
fn a_closed_receiver_fails_the_endpoint() {
    let mut a = open();
    let b = open();
    let ep = connect(&mut a, &b);
    a.pending_add(ep, Token(1)).unwrap();
    drop(b);
    let mut sink = TestSink::new();
    drive(&mut a, &mut sink, |s| s.ep_failures(ep) == 1);
    assert!(sink.pending_tokens(ep).contains(&Token(1)));
    assert!(a.am().unwrap().am_short(ep, 1, 0, &[]).is_err());
    assert!(a.flush(Some(ep), Token(2)).is_err());
}

#[test]
fn unreachable_and_malformed_addresses() {
    let mut a = open();
    let b = open();
    let mut other_host = b.device_addr().to_vec();
    other_host[0] ^= 1;
    assert!(!a.is_reachable(&other_host, b.iface_addr()));
    assert!(a.ep_create(&other_host, b.iface_addr()).is_err());
    assert!(!a.is_reachable(b.device_addr(), &[1, 2, 3]));
    assert!(a.ep_create(b.device_addr(), &[0; 44]).is_err());
    assert!(a.am().unwrap().am_short(EpId(77), 1, 0, &[]).is_err());
}

#[test]
fn endpoints_to_one_receiver_share_its_peer_record() {
    let mut a = open();
    let mut b = open();
    let mut c = open();
    let e1 = connect(&mut a, &b);
    let e2 = connect(&mut a, &b);
    let e3 = connect(&mut a, &c);
    for (ep, id) in [(e1, 1), (e2, 2)] {
        assert_eq!(
            a.am().unwrap().am_short(ep, id, 0, b"").unwrap(),
            Posted::Done
        );
    }
    assert_eq!(
        a.am().unwrap().am_short(e3, 3, 0, b"").unwrap(),
        Posted::Done
    );
    let mut sb = TestSink::new();
    drive(&mut b, &mut sb, |s| s.ams.len() == 2);
    assert_eq!(sb.ams[0].src, sb.ams[1].src, "one sender slot per peer");
    let mut sc = TestSink::new();
    drive(&mut c, &mut sc, |s| s.ams.len() == 1);
    // The last endpoint of a peer releases it; a new one attaches again,
    // in the freed record, and is a new source for the receiver.
    a.ep_destroy(e1);
    a.ep_destroy(e2);
    let e4 = connect(&mut a, &b);
    assert_eq!(
        a.am().unwrap().am_short(e4, 4, 0, b"").unwrap(),
        Posted::Done
    );
    assert_eq!(
        a.am().unwrap().am_short(e3, 5, 0, b"").unwrap(),
        Posted::Done
    );
    drive(&mut b, &mut sb, |s| s.ams.len() == 3);
    assert_eq!(sb.ams[2].id, 4);
    drive(&mut c, &mut sc, |s| s.ams.len() == 2);
    assert_eq!(sc.ams[1].src, sc.ams[0].src);
}

#[test]
fn a_full_sender_table_fails_only_the_next_peer() {
    let mm = MmConfig {
        max_senders: 2,
        ..MmConfig::default()
    };
    let mut b = open_with(&mm);
    let mut senders: Vec<PosixIface> = (0..3).map(|_| open()).collect();
    let e0 = connect(&mut senders[0], &b);
    let _e1 = connect(&mut senders[1], &b);
    let err = senders[2]
        .ep_create(b.device_addr(), b.iface_addr())
        .unwrap_err();
    assert!(err.to_string().contains("no free sender slot"), "{err}");
    // The peers that got in are unaffected.
    assert_eq!(
        senders[0].am().unwrap().am_short(e0, 9, 0, b"").unwrap(),
        Posted::Done
    );
    let mut sb = TestSink::new();
    drive(&mut b, &mut sb, |s| s.ams.len() == 1);
    assert_eq!(sb.ams[0].id, 9);
    let bad = MmConfig {
        max_senders: 0,
        ..MmConfig::default()
    };
    assert!(PosixIface::open(&IfaceParams::default(), &bad, &PosixConfig::default()).is_err());
}

/// Pages of `ptr..ptr + len` mapped in this process (from
/// /proc/self/pagemap), by index.
fn resident_pages(ptr: *const u8, len: usize) -> Vec<usize> {
    use std::io::{Read, Seek, SeekFrom};
    const PAGE: usize = 4096;
    let mut pm = std::fs::File::open("/proc/self/pagemap").unwrap();
    let mut buf = vec![0u8; len.div_ceil(PAGE) * 8];
    pm.seek(SeekFrom::Start((ptr as usize / PAGE * 8) as u64))
        .unwrap();
    pm.read_exact(&mut buf).unwrap();
    buf.chunks_exact(8)
        .enumerate()
        .filter(|(_, e)| u64::from_le_bytes((*e).try_into().unwrap()) >> 63 == 1)
        .map(|(i, _)| i)
        .collect()
}

#[test]
fn a_sender_maps_only_the_pages_it_writes_of_a_peer() {
    let mut a = open();
    let mut b = open();
    let ep = connect(&mut a, &b);
    let (ptr, len) = a.peer_mapping(ep).unwrap();
    // The receiver's own pages around the first (its FIFO's elements)
    // are not mapped along with it.
    assert_eq!(resident_pages(ptr, len), [0], "after the attach");
    for i in 0..8u64 {
        let sent = a.am().unwrap().am_short(ep, 3, i, b"small").unwrap();
        assert_eq!(sent, Posted::Done);
    }
    assert_eq!(
        resident_pages(ptr, len),
        [0],
        "slot entry, head, tail and the first elements share a page"
    );
    let copied = a.am().unwrap().am_bcopy(ep, 4, &[&[7u8; 200]]).unwrap();
    assert_eq!(copied, (Posted::Done, 200));
    let pages = resident_pages(ptr, len);
    assert_eq!(pages.len(), 2, "and one page of a descriptor: {pages:?}");
    let mut sink = TestSink::new();
    drive(&mut b, &mut sink, |s| s.ams.len() >= 9);
    assert_eq!(sink.ams.len(), 9);
}

/// Set in the environment of [`peer_child_main`]'s process.
const CHILD_ENV: &str = "RUCX_SHM_TEST_POSIX_CHILD";

/// A peer process for the exit tests: opens an iface, prints its
/// addresses, then waits to be killed; does nothing in a normal run.
#[test]
fn peer_child_main() {
    if std::env::var_os(CHILD_ENV).is_none() {
        return;
    }
    let iface = open();
    let hex = |b: &[u8]| b.iter().map(|x| format!("{x:02x}")).collect::<String>();
    println!(
        "posix-child: {} {}",
        hex(iface.device_addr()),
        hex(iface.iface_addr())
    );
    // A parent that hangs must not leave the child behind.
    std::thread::sleep(Duration::from_secs(60));
    std::process::exit(2);
}

/// A child process running [`peer_child_main`], and its addresses.
fn peer_child() -> (std::process::Child, Vec<u8>, Vec<u8>) {
    use std::io::BufRead;
    let mut child = std::process::Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "posix::tests::peer_child_main", "--nocapture"])
        .args(["--test-threads", "1"])
        .env(CHILD_ENV, "1")
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let out = std::io::BufReader::new(child.stdout.take().unwrap());
    let unhex = |s: &str| {
        (0..s.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
            .collect::<Vec<u8>>()
    };
    for line in out.lines() {
        let line = line.unwrap();
        // The harness's "test ... " may start the line.
        if let Some((_, rest)) = line.split_once("posix-child: ") {
            let (dev, iface) = rest.trim().split_once(' ').unwrap();
            return (child, unhex(dev), unhex(iface));
        }
    }
    let _ = child.kill();
    let _ = child.wait();
    panic!("the child printed no addresses");
}

#[test]
fn a_peer_process_exit_wakes_the_armed_iface() {
    let mut a = open();
    let (mut child, dev, iface) = peer_child();
    let ep = a.ep_create(&dev, &iface).unwrap();
    let ep2 = a.ep_create(&dev, &iface).unwrap();
    assert_eq!(a.watched_processes(), 1, "one descriptor per peer process");
    assert_eq!(a.arm().unwrap(), Armed::Sleep);
    let mut pfd = libc::pollfd {
        fd: a.event_fd().unwrap(),
        events: libc::POLLIN,
        revents: 0,
    };
    // SAFETY: one valid pollfd.
    assert_eq!(unsafe { libc::poll(&mut pfd, 1, 0) }, 0, "asleep");
    child.kill().unwrap();
    child.wait().unwrap();
    // SAFETY: as above.
    assert_eq!(
        unsafe { libc::poll(&mut pfd, 1, 5000) },
        1,
        "the exit woke it"
    );
    assert_eq!(a.arm().unwrap(), Armed::Busy, "a failure waits");
    let mut sink = TestSink::new();
    a.progress(&mut sink);
    assert_eq!(sink.ep_failures(ep), 1);
    assert_eq!(sink.ep_failures(ep2), 1);
    assert!(a.watched_processes() == 0, "its exit is watched no more");
    assert_eq!(a.arm().unwrap(), Armed::Sleep, "its exit wakes no more");
    // SAFETY: as above.
    assert_eq!(unsafe { libc::poll(&mut pfd, 1, 0) }, 0);
}

#[test]
fn the_first_progress_after_a_pause_finds_a_dead_peer() {
    let mut a = open();
    let (mut child, dev, iface) = peer_child();
    let ep = a.ep_create(&dev, &iface).unwrap();
    let mut sink = TestSink::new();
    a.progress(&mut sink);
    a.ep_destroy(ep);
    assert!(a.watched_processes() == 0, "no peer of it left, no watch");
    let ep = a.ep_create(&dev, &iface).unwrap();
    child.kill().unwrap();
    child.wait().unwrap();
    // Longer than the liveness period (100 ms).
    std::thread::sleep(Duration::from_millis(200));
    // One call, idle: it looks.
    a.progress(&mut sink);
    assert_eq!(sink.ep_failures(ep), 1);
}
