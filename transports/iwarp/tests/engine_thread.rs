//! `RUCX_IWARP_THREAD=y`: a context whose caller never progresses it
//! still has peers' RDMA WRITEs placed and READs answered (its engine
//! thread does it, as a NIC would), completes its receives, and wakes a
//! caller that sleeps on its event fd; without the thread, the same READ
//! waits for the target's progress.

mod common;

use common::{drive, ok, pair_with, pattern, Node, DEADLINE};
use rucx_rdma::{Access, WcOpcode};
use std::time::{Duration, Instant};
use uct::ucs::progress::wait_readable;
use uct::Armed;

fn all() -> Access {
    Access::LOCAL_WRITE | Access::REMOTE_READ | Access::REMOTE_WRITE
}

/// Progresses only `a` until its completion of `wr_id` arrives or `limit`
/// passes.
fn wait_alone(a: &mut Node, wr_id: u64, limit: Duration) -> Option<rucx_rdma::Wc> {
    let start = Instant::now();
    while start.elapsed() < limit {
        a.poll();
        if let Some(wc) = a.take_wc(wr_id) {
            return Some(wc);
        }
    }
    None
}

#[test]
fn a_target_that_never_progresses_serves_writes_and_reads() {
    let (mut a, b) = pair_with(&[], &[("THREAD", "y")]);
    // From here on only `a` progresses.
    for (i, len) in [1usize, 5000, 1 << 20].into_iter().enumerate() {
        let mut src = a.buf(len, 0, all());
        src.data.copy_from_slice(&pattern(len, i as u8));
        let dst = b.buf(len, 0x55, all());
        let sink = a.buf(len, 0, all());
        let id = 10 * i as u64;
        a.post_write(id + 1, dst.addr(), dst.mr.rkey, &[src.sge(0, len)]);
        a.post_read(id + 2, dst.addr(), dst.mr.rkey, &[sink.sge(0, len)]);
        let wc = wait_alone(&mut a, id + 2, DEADLINE).expect("the READ completes");
        ok(&wc);
        assert_eq!(wc.opcode, WcOpcode::RdmaRead);
        ok(&a.take_wc(id + 1).expect("the WRITE completed"));
        assert!(
            sink.data == src.data,
            "len {len}: read back what was written"
        );
        assert!(dst.data == src.data, "len {len}: placed at the target");
    }
    drop(b);
}

#[test]
fn a_sleeping_target_is_woken_by_its_receive_completion() {
    let (mut a, mut b) = pair_with(&[], &[("THREAD", "y")]);
    let rx = b.buf(4096, 0, all());
    b.post_recv(7, &[rx.sge(0, 4096)]);
    // WRITEs and READs need no completion at the target: they do not
    // wake it.
    let mut src = a.buf(4096, 0, all());
    src.data.copy_from_slice(&pattern(4096, 9));
    let dst = b.buf(4096, 0, all());
    a.post_write(1, dst.addr(), dst.mr.rkey, &[src.sge(0, 4096)]);
    // A READ after it answers once the WRITE is placed.
    a.post_read(3, dst.addr(), dst.mr.rkey, &[]);
    ok(&wait_alone(&mut a, 3, DEADLINE).expect("the READ completes"));
    ok(&a.take_wc(1).expect("the WRITE completed"));
    assert!(dst.data == src.data, "the WRITE is placed");
    let fd = b.ctx.event_fd().expect("event fd");
    assert_eq!(b.ctx.arm().expect("arm"), Armed::Sleep);
    assert!(
        !wait_readable(fd, Duration::from_millis(200)).expect("poll"),
        "woken without a completion"
    );
    // A SEND: its receive's completion wakes b.
    a.post_send(
        2,
        rucx_rdma::SendOp::Send,
        &[src.sge(0, 100)],
        Default::default(),
    );
    ok(&wait_alone(&mut a, 2, DEADLINE).expect("the SEND completes"));
    assert!(
        wait_readable(fd, DEADLINE).expect("poll"),
        "the receive's completion does not wake the target"
    );
    drive(&mut a, &mut b, |_, b| b.wcs.iter().any(|w| w.wr_id == 7));
    let wc = b.take_wc(7).expect("receive");
    ok(&wc);
    assert_eq!(wc.byte_len, 100);
    assert_eq!(&rx.data[..100], &src.data[..100]);
}

/// The control: without the thread, a READ of a target that does not
/// progress waits (so the tests above show the thread's work).
#[test]
fn without_the_thread_a_read_waits_for_the_target() {
    let (mut a, mut b) = pair_with(&[], &[]);
    let src = b.buf(4096, 3, all());
    let sink = a.buf(4096, 0, all());
    a.post_read(1, src.addr(), src.mr.rkey, &[sink.sge(0, 4096)]);
    assert!(
        wait_alone(&mut a, 1, Duration::from_millis(300)).is_none(),
        "a READ completed without the target's progress"
    );
    drive(&mut a, &mut b, |a, _| a.wcs.iter().any(|w| w.wr_id == 1));
    assert!(sink.data.iter().all(|&x| x == 3));
}
