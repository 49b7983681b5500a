//! Corked sends: held in the backlog until `uncork` (or the next
//! progress), then written in one go, in order.

use super::*;

#[test]
fn corked_sends_wait_for_uncork_then_arrive_in_order() {
    let (mut a, mut b, mut ra, mut rb, ab) = connected();
    a.cork();
    for k in 1..=200u64 {
        let p = a.am().unwrap().am_short(ab, 2, k, &[7u8; 24]).unwrap();
        assert_eq!(p, Posted::Done, "a corked small send is done at once");
    }
    assert_eq!(a.corked_conns.len(), 1);
    // Nothing left this process: the peer sees none of them.
    let until = Instant::now() + Duration::from_millis(50);
    while Instant::now() < until {
        b.progress(&mut rb);
    }
    assert_eq!(rb.ams.len(), 1, "corked sends wait in the backlog");
    a.uncork(&mut ra);
    assert!(a.corked_conns.is_empty());
    drive(&mut [(&mut a, &mut ra), (&mut b, &mut rb)], |x| {
        x[1].1.ams.len() == 201
    });
    let got: Vec<u64> = rb.ams.iter().filter(|m| m.0 == 2).map(|m| m.2).collect();
    assert_eq!(got, (1..=200).collect::<Vec<_>>());
    assert_eq!((ra.failed, rb.failed), (0, 0));
}

#[test]
fn progress_writes_corked_sends() {
    let (mut a, mut b, mut ra, mut rb, ab) = connected();
    a.cork();
    let p = a.am().unwrap().am_short(ab, 3, 9, &[]).unwrap();
    assert_eq!(p, Posted::Done);
    assert_eq!(
        a.arm().unwrap(),
        uct::Armed::Busy,
        "held sends keep the iface busy"
    );
    // A progress while corked writes what waits (a blocking wait inside
    // a corked section must not hang).
    a.progress(&mut ra);
    drive(&mut [(&mut a, &mut ra), (&mut b, &mut rb)], |x| {
        x[1].1.ams.len() == 2
    });
    assert_eq!(rb.ams[1], (3, rb.ams[0].1, 9));
    a.uncork(&mut ra);
}

#[test]
fn large_sends_are_not_corked() {
    let (mut a, mut b, mut ra, mut rb, ab) = connected();
    a.cork();
    let big = vec![1u8; 4000];
    let (p, _) = a
        .am()
        .unwrap()
        .am_bcopy(ab, 4, &[&5u64.to_le_bytes(), &big])
        .unwrap();
    assert_eq!(p, Posted::Done);
    assert!(
        a.corked_conns.is_empty(),
        "a frame over the copy limit goes out at once"
    );
    drive(&mut [(&mut a, &mut ra), (&mut b, &mut rb)], |x| {
        x[1].1.ams.len() == 2
    });
    a.uncork(&mut ra);
}
