//! `RUCX_TCP_TX_BATCH`: a small send to a connection that wrote since the
//! last progress call waits for the next one, which hands it back
//! (`pending_ready`); resumed corked, the sends that waited leave in one
//! write, in order.

use super::*;

/// Posts `am_short`s numbered `from..to` until one answers `NoResource`;
/// the number of those done.
fn post_until_held(a: &mut TcpIface, ab: EpId, from: u64, to: u64) -> u64 {
    for k in from..to {
        match a.am().unwrap().am_short(ab, 5, k, &[3u8; 16]).unwrap() {
            Posted::Done => {}
            Posted::NoResource => return k - from,
            p => panic!("am_short: {p:?}"),
        }
    }
    to - from
}

#[test]
fn a_second_small_send_waits_for_the_next_progress_and_leaves_with_the_batch() {
    let (mut a, mut b, mut ra, mut rb, ab) = connected();
    a.progress(&mut ra);
    assert_eq!(post_until_held(&mut a, ab, 0, 10), 1, "the first goes out");
    a.pending_add(ab, Token(1)).unwrap();
    ra.waiting.insert(ab);
    assert_eq!(
        a.arm().unwrap(),
        uct::Armed::Busy,
        "the held send keeps it busy"
    );
    // Until it is handed back, later sends queue behind it.
    assert_eq!(
        a.am().unwrap().am_short(ab, 5, 99, &[]).unwrap(),
        Posted::NoResource
    );
    a.progress(&mut ra);
    assert!(ra.waiting.is_empty(), "one progress call hands it back");
    // The protocol layer resumes it (and what queued behind it) corked.
    a.cork();
    for k in 1..50u64 {
        let p = a.am().unwrap().am_short(ab, 5, k, &[3u8; 16]).unwrap();
        assert_eq!(p, Posted::Done, "resumed sends join the batch");
    }
    a.uncork(&mut ra);
    drive(&mut [(&mut a, &mut ra), (&mut b, &mut rb)], |x| {
        x[1].1.ams.len() == 51
    });
    let got: Vec<u64> = rb.ams.iter().filter(|m| m.0 == 5).map(|m| m.2).collect();
    assert_eq!(got, (0..50).collect::<Vec<_>>());
    // After a progress call, the next send goes straight out again.
    a.progress(&mut ra);
    assert_eq!(post_until_held(&mut a, ab, 50, 52), 1);
    assert_eq!((ra.failed, rb.failed), (0, 0));
}

#[test]
fn without_batching_every_send_goes_out_at_once() {
    let config = TcpConfig {
        tx_batch: false,
        ..TcpConfig::default()
    };
    let mut a = TcpIface::open("lo", &IfaceParams::default(), &config).unwrap();
    let mut b = open();
    let (mut ra, mut rb) = (Rec::default(), Rec::default());
    let ab = ep(&mut a, &b);
    send(&mut a, &mut ra, ab, 1, 1);
    drive(&mut [(&mut a, &mut ra), (&mut b, &mut rb)], |x| {
        x[1].1.ams.len() == 1
    });
    a.progress(&mut ra);
    assert_eq!(post_until_held(&mut a, ab, 0, 100), 100);
    drive(&mut [(&mut a, &mut ra), (&mut b, &mut rb)], |x| {
        x[1].1.ams.len() == 101
    });
}

#[test]
fn large_sends_are_not_held() {
    let (mut a, mut b, mut ra, mut rb, ab) = connected();
    a.progress(&mut ra);
    let big = vec![1u8; 1500];
    for _ in 0..3 {
        let (p, _) = a
            .am()
            .unwrap()
            .am_bcopy(ab, 4, &[&5u64.to_le_bytes(), &big])
            .unwrap();
        assert_eq!(
            p,
            Posted::Done,
            "a frame over the batch limit goes out at once"
        );
    }
    drive(&mut [(&mut a, &mut ra), (&mut b, &mut rb)], |x| {
        x[1].1.ams.len() == 4
    });
}
