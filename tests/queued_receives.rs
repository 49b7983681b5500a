//! Receives that report through the completion queue (`Op::queue`, the C
//! API's requests): a whole eager message finishes them in the message
//! path, with the user data, tag and length, or `Truncated` when the
//! buffer is too small, and their slot is gone afterwards; over self and
//! shared memory; and a completion hook that takes some completions
//! before the queue sees them.

mod common;

use common::*;
use rucx::ucp::{Error, Op, Posted};

fn check(tls: &str) {
    let ctx = context(tls);
    let mut a = ctx.create_worker().expect("worker");
    let mut b = ctx.create_worker().expect("worker");
    let ep = a.connect(&b.address()).expect("connect");
    let mut fits = [0u8; 8];
    let mut small = [0u8; 4];
    // SAFETY: the buffers outlive the requests, which complete below.
    let r1 = unsafe {
        b.tag_recv_raw(
            fits.as_mut_ptr(),
            8,
            1,
            u64::MAX,
            Op::new().queue().user_data(11),
        )
    };
    let Ok(Posted::InFlight(id1)) = r1 else {
        panic!("{tls}: receive 1 should wait: {r1:?}");
    };
    // SAFETY: as above.
    let r2 = unsafe {
        b.tag_recv_raw(
            small.as_mut_ptr(),
            4,
            2,
            u64::MAX,
            Op::new().queue().user_data(22),
        )
    };
    let Ok(Posted::InFlight(id2)) = r2 else {
        panic!("{tls}: receive 2 should wait: {r2:?}");
    };
    a.tag_send_blocking(ep, &0x0102_0304_0506_0708u64.to_le_bytes(), 1)
        .expect("send 1");
    a.tag_send_blocking(ep, &0x1112_1314_1516_1718u64.to_le_bytes(), 2)
        .expect("send 2");
    let mut got = Vec::new();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while got.len() < 2 {
        assert!(std::time::Instant::now() < deadline, "{tls}: {got:?}");
        a.progress();
        b.progress();
        while let Some(c) = b.next_completion() {
            got.push((c.id, c.user_data, c.result));
        }
    }
    got.sort_by_key(|g| g.1);
    assert_eq!((got[0].0, got[0].1), (id1, 11), "{tls}");
    let info = got[0].2.as_ref().expect("receive 1");
    assert_eq!((info.tag, info.length), (1, 8), "{tls}");
    assert_eq!(u64::from_le_bytes(fits), 0x0102_0304_0506_0708, "{tls}");
    assert_eq!((got[1].0, got[1].1), (id2, 22), "{tls}");
    assert!(
        matches!(
            got[1].2,
            Err(Error::Truncated {
                length: 8,
                capacity: 4
            })
        ),
        "{tls}: {:?}",
        got[1].2
    );
    assert_eq!(
        small,
        0x1516_1718u32.to_le_bytes(),
        "{tls}: the first bytes"
    );
    // Reported once, and gone: no second completion, no request left.
    assert!(b.next_completion().is_none(), "{tls}");
    assert!(!b.request_set_user_data(id1, 5), "{tls}");
    assert!(!b.request_set_user_data(id2, 5), "{tls}");
}

#[test]
fn queued_receives_finish_in_the_message_path() {
    for tls in ["self", "posix"] {
        check(tls);
    }
}

/// User data the hook below took, summed.
static TAKEN: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// Takes completions with even user data, leaves odd ones to the queue.
fn take_even(user_data: u64, result: &rucx::ucp::Result<rucx::ucp::Info>) -> bool {
    if user_data % 2 == 0 && result.is_ok() {
        TAKEN.fetch_add(user_data, std::sync::atomic::Ordering::Relaxed);
        return true;
    }
    false
}

#[test]
fn a_completion_hook_takes_what_it_claims() {
    let ctx = context("self");
    let mut a = ctx.create_worker().expect("worker");
    let mut b = ctx.create_worker().expect("worker");
    let ep = a.connect(&b.address()).expect("connect");
    b.set_completion_hook(Some(take_even));
    let mut bufs = [[0u8; 8]; 4];
    for (i, buf) in bufs.iter_mut().enumerate() {
        let ud = 100 + i as u64;
        // SAFETY: the buffers outlive the requests, which complete below.
        let r = unsafe {
            b.tag_recv_raw(
                buf.as_mut_ptr(),
                8,
                ud,
                u64::MAX,
                Op::new().queue().user_data(ud),
            )
        };
        assert!(matches!(r, Ok(Posted::InFlight(_))), "{r:?}");
    }
    for i in 0..4u64 {
        a.tag_send_blocking(ep, &i.to_le_bytes(), 100 + i)
            .expect("send");
    }
    let mut queued = Vec::new();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while queued.len() < 2 || TAKEN.load(std::sync::atomic::Ordering::Relaxed) < 100 + 102 {
        assert!(std::time::Instant::now() < deadline, "{queued:?}");
        a.progress();
        b.progress();
        while let Some(c) = b.next_completion() {
            queued.push(c.user_data);
        }
    }
    queued.sort_unstable();
    assert_eq!(queued, [101, 103], "the odd ones, through the queue");
    assert_eq!(TAKEN.load(std::sync::atomic::Ordering::Relaxed), 100 + 102);
    for (i, buf) in bufs.iter().enumerate() {
        assert_eq!(u64::from_le_bytes(*buf), i as u64);
    }
}
