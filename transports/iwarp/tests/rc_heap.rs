//! Heap bytes an RC connection holds over userspace iWARP, counted by a
//! counting allocator: `n` peers, each its own iface, exchange one
//! message each way with a hub, then with a second hub (the second round
//! shows what one more connection holds on both sides, the first adds
//! what each peer iface sets up on its first connection). Receive and
//! copy buffers are mappings of their own, not counted here (see
//! `rc_memory`). Its own test binary: the counter is process-wide.

mod star;

/// The RC transport over userspace iWARP on `lo`.
fn fixture() -> uct::testing::ComponentFixture {
    uct::testing::ComponentFixture::new(&rucx_iwarp::COMPONENT, "iwarp_lo")
}

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};

struct Counting;

static LIVE: AtomicI64 = AtomicI64::new(0);
static LARGE: AtomicU64 = AtomicU64::new(0);
static ALLOCS: AtomicU64 = AtomicU64::new(0);
/// The counters are process-wide: one test at a time.
static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

// SAFETY: forwards to the system allocator, counting on the way.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        LIVE.fetch_add(l.size() as i64, Ordering::Relaxed);
        ALLOCS.fetch_add(1, Ordering::Relaxed);
        if l.size() >= 4096 {
            LARGE.fetch_add(1, Ordering::Relaxed);
        }
        // SAFETY: the caller's layout, as `GlobalAlloc::alloc` requires.
        unsafe { System.alloc(l) }
    }

    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        LIVE.fetch_sub(l.size() as i64, Ordering::Relaxed);
        // SAFETY: `p` came from `alloc` with this layout.
        unsafe { System.dealloc(p, l) }
    }
}

#[global_allocator]
static A: Counting = Counting;

fn live() -> i64 {
    LIVE.load(Ordering::Relaxed)
}

#[test]
fn heap_bytes_per_connection() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    const N: usize = 200;
    let f = fixture();
    drop(f.open(0));
    let mut s = star::Star::open(&f, N);
    s.progress();
    let (opened, large0) = (live(), LARGE.load(Ordering::Relaxed));
    s.exchange(1);
    let (first, large1) = (live(), LARGE.load(Ordering::Relaxed));
    let hub0 = std::mem::replace(&mut s.hub, f.open(2));
    s.hub_sink = Default::default();
    for k in &mut s.sinks {
        k.ams.clear();
    }
    s.progress();
    let (second_hub, large2) = (live(), LARGE.load(Ordering::Relaxed));
    s.exchange(1);
    let (second, large3) = (live(), LARGE.load(Ordering::Relaxed));
    let per = |a: i64, b: i64| (b - a) as f64 / N as f64;
    println!(
        "rc_iwarp heap: {N} connections; round 1 {:.0} bytes per connection (both sides, \
         with the peers' first-connection costs), {} allocations of 4 KiB or more; round 2 \
         {:.0} bytes per connection, {} such allocations",
        per(opened, first),
        large1 - large0,
        per(second_hub, second),
        large3 - large2
    );
    // An idle connection holds less than 16 KiB of heap on both sides
    // together; large allocations are tables growing, not one or more per
    // connection.
    assert!(per(second_hub, second) < 16384.0);
    assert!(((large3 - large2) as usize) < N / 2);
    drop(hub0);
}

/// Counts what arrives, allocating nothing.
#[derive(Default)]
struct CountSink {
    ams: usize,
}

impl uct::AmSink for CountSink {
    fn am(&mut self, _: uct::AmId, _: uct::SrcId, _: &[u8]) {
        self.ams += 1;
    }
    fn completed(&mut self, _: uct::Token, _: uct::Result<()>) {}
    fn pending_ready(&mut self, _: uct::EpId, _: uct::Token) {}
    fn ep_failed(&mut self, _: uct::EpId, e: uct::Error) {
        panic!("endpoint failed: {e}");
    }
    fn src_failed(&mut self, _: uct::SrcId, e: uct::Error) {
        panic!("source failed: {e}");
    }
}

/// The single-connection fast path allocates nothing once warm: ping-pong
/// (credits coming back in replies) and streaming bursts (window growth,
/// grants) on one connection, counted by the allocator.
#[test]
fn one_connection_allocates_nothing_per_message() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let f = fixture();
    let mut s = star::Star::open(&f, 1);
    let ep = s.exchange(1)[0];
    let back = s.hub_ep(0).unwrap();
    let (mut hub_sink, mut peer_sink) = (CountSink::default(), CountSink::default());
    let round = |s: &mut star::Star, hub: &mut CountSink, peer: &mut CountSink| {
        // A burst: as many as the credits allow, then everything drained.
        let mut sent = 0;
        while s.peers[0].am().unwrap().am_short(ep, 1, 0, b"x").unwrap() == uct::Posted::Done {
            sent += 1;
        }
        let want = hub.ams + sent;
        while hub.ams < want {
            s.hub.progress(hub);
            s.peers[0].progress(peer);
        }
        // A ping-pong.
        for _ in 0..4 {
            let (h, p) = (hub.ams, peer.ams);
            while s.peers[0].am().unwrap().am_short(ep, 1, 0, b"x").unwrap() != uct::Posted::Done {
                s.hub.progress(hub);
                s.peers[0].progress(peer);
            }
            while hub.ams == h {
                s.hub.progress(hub);
                s.peers[0].progress(peer);
            }
            while s.hub.am().unwrap().am_short(back, 2, 0, b"y").unwrap() != uct::Posted::Done {
                s.hub.progress(hub);
                s.peers[0].progress(peer);
            }
            while peer.ams == p {
                s.hub.progress(hub);
                s.peers[0].progress(peer);
            }
        }
    };
    for _ in 0..500 {
        round(&mut s, &mut hub_sink, &mut peer_sink);
    }
    let (before, msgs) = (ALLOCS.load(Ordering::Relaxed), hub_sink.ams + peer_sink.ams);
    for _ in 0..500 {
        round(&mut s, &mut hub_sink, &mut peer_sink);
    }
    let allocs = ALLOCS.load(Ordering::Relaxed) - before;
    let msgs = hub_sink.ams + peer_sink.ams - msgs;
    println!("rc_iwarp fast path: {allocs} allocations over {msgs} messages");
    assert_eq!(allocs, 0, "{allocs} allocations over {msgs} messages");
}
