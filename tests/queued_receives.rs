//! Receives that report through the completion queue (`Op::queue`, the C
//! API's requests): a whole eager message finishes them in the message
//! path, with the user data, tag and length, or `Truncated` when the
//! buffer is too small, and their slot is gone afterwards; over self and
//! shared memory.

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
