//! Protection and protocol errors: the right Terminate, the right
//! completions and events on both sides, target memory untouched.

mod common;

use common::*;
use rucx_rdma::{Access, AsyncEventKind, CmEvent, PdId, QpState, SendFlags, SendOp, WcStatus};

fn rw() -> Access {
    Access::LOCAL_WRITE | Access::REMOTE_WRITE | Access::REMOTE_READ
}

/// WRITE through `rkey`/`addr`, then a 0-length READ: the READ fails with
/// a remote access error and `expect` names the cause.
fn bad_write(rkey: impl Fn(&Node) -> (u64, u32, Option<Buf>), len: usize, expect: &str) {
    let (mut a, mut b) = pair();
    let (addr, rkey, target) = rkey(&b);
    let src = a.buf(len, 0xab, rw());
    a.post_write(1, addr, rkey, &[src.sge(0, len)]);
    a.post_read(2, addr, rkey, &[]);
    let ev = wait_failed(&mut a, &mut b, 0);
    assert_eq!(ev.kind, AsyncEventKind::QpAccessErr, "{ev:?}");
    assert!(ev.detail.contains(expect), "{ev:?} should name {expect}");
    drive(&mut a, &mut b, |a, _| a.wcs.iter().any(|w| w.wr_id == 2));
    let read = a.take_wc(2).unwrap();
    assert_eq!(read.status, WcStatus::RemAccessErr);
    // The target saw the same and sent the Terminate.
    drive(&mut a, &mut b, |_, b| !b.asyncs.is_empty());
    assert!(
        b.asyncs[0].detail.starts_with("sent Terminate"),
        "{:?}",
        b.asyncs
    );
    assert_eq!(a.ctx.qp_state(a.qp), Some(QpState::Error));
    assert_eq!(b.ctx.qp_state(b.qp), Some(QpState::Error));
    if let Some(t) = target {
        assert!(t.data.iter().all(|&x| x == 0x11), "target memory changed");
    }
}

#[test]
fn write_with_unknown_stag() {
    bad_write(|_| (0x1000, 0x1234_5678, None), 100, "invalid STag");
}

#[test]
fn write_with_stale_stag() {
    bad_write(
        |b| {
            let t = b.buf(4096, 0x11, rw());
            b.dev.dereg_mr(&t.mr).unwrap();
            (t.addr(), t.mr.rkey, Some(t))
        },
        100,
        "invalid STag",
    );
}

#[test]
fn write_out_of_bounds() {
    bad_write(
        |b| {
            let t = b.buf(4096, 0x11, rw());
            (t.addr() + 4000, t.mr.rkey, Some(t))
        },
        100,
        "base",
    );
}

#[test]
fn write_without_remote_write() {
    bad_write(
        |b| {
            let t = b.buf(4096, 0x11, Access::LOCAL_WRITE | Access::REMOTE_READ);
            (t.addr(), t.mr.rkey, Some(t))
        },
        100,
        "invalid STag",
    );
}

#[test]
fn write_to_another_pd() {
    bad_write(
        |b| {
            let pd: PdId = b.dev.alloc_pd().unwrap();
            let t = b.buf_in(pd, 4096, 0x11, rw());
            (t.addr(), t.mr.rkey, Some(t))
        },
        100,
        "not associated",
    );
}

fn bad_read(src: impl Fn(&Node) -> (u64, u32), len: usize, expect: &str) {
    let (mut a, mut b) = pair();
    let (addr, rkey) = src(&b);
    let sink = a.buf(len, 0x22, rw());
    a.post_read(1, addr, rkey, &[sink.sge(0, len)]);
    let ev = wait_failed(&mut a, &mut b, 0);
    assert_eq!(ev.kind, AsyncEventKind::QpAccessErr, "{ev:?}");
    assert!(ev.detail.contains(expect), "{ev:?} should name {expect}");
    let wc = wait_wc(&mut a, &mut b, 0, 1);
    assert_eq!(wc.status, WcStatus::RemAccessErr);
    assert!(sink.data.iter().all(|&x| x == 0x22));
    drive(&mut a, &mut b, |_, b| !b.asyncs.is_empty());
    assert_eq!(b.asyncs[0].kind, AsyncEventKind::QpAccessErr);
}

#[test]
fn read_with_bad_stags_bounds_rights_and_pd() {
    bad_read(|_| (0x1000, 0xdead_be00), 10, "invalid STag");
    bad_read(
        |b| {
            let t = b.buf(4096, 0, rw());
            b.dev.dereg_mr(&t.mr).unwrap();
            (t.addr(), t.mr.rkey)
        },
        10,
        "invalid STag",
    );
    bad_read(
        |b| {
            let t = b.buf(4096, 0, rw());
            let r = (t.addr() + 4095, t.mr.rkey);
            std::mem::forget(t);
            r
        },
        10,
        "base",
    );
    bad_read(
        |b| {
            let t = b.buf(4096, 0, Access::LOCAL_WRITE | Access::REMOTE_WRITE);
            let r = (t.addr(), t.mr.rkey);
            std::mem::forget(t);
            r
        },
        10,
        "access rights",
    );
    bad_read(
        |b| {
            let pd = b.dev.alloc_pd().unwrap();
            let t = b.buf_in(pd, 4096, 0, rw());
            let r = (t.addr(), t.mr.rkey);
            std::mem::forget(t);
            r
        },
        10,
        "not associated",
    );
    // The device's local key is never a remote key.
    bad_read(
        |b| {
            let t = b.buf(64, 0, rw());
            let r = (t.addr(), b.dev.attr().local_lkey.unwrap());
            std::mem::forget(t);
            r
        },
        10,
        "invalid STag",
    );
}

#[test]
fn send_without_a_receive_terminates() {
    let (mut a, mut b) = pair();
    let src = a.buf(10, 1, rw());
    let rbuf = a.buf(10, 0, rw());
    a.post_recv(50, &[rbuf.sge(0, 10)]);
    a.post_send(1, SendOp::Send, &[src.sge(0, 10)], SendFlags::empty());
    let ev = wait_failed(&mut a, &mut b, 0);
    assert_eq!(ev.kind, AsyncEventKind::QpFatal);
    assert!(ev.detail.contains("peer sent Terminate"), "{ev:?}");
    assert!(ev.detail.contains("layer 1, type 2, code 0x02"), "{ev:?}");
    // a's receive is flushed; later sends are flushed at once.
    let wc = wait_wc(&mut a, &mut b, 0, 50);
    assert_eq!(wc.status, WcStatus::WrFlushErr);
    a.post_send(2, SendOp::Send, &[src.sge(0, 10)], SendFlags::empty());
    assert_eq!(wait_wc(&mut a, &mut b, 0, 2).status, WcStatus::WrFlushErr);
    drive(&mut a, &mut b, |_, b| {
        b.cm.iter()
            .any(|e| matches!(e, CmEvent::Disconnected { .. }))
    });
}

#[test]
fn send_longer_than_the_receive_terminates() {
    let (mut a, mut b) = pair();
    let src = a.buf(100, 1, rw());
    let rbuf = b.buf(50, 0, rw());
    b.post_recv(5, &[rbuf.sge(0, 50)]);
    a.post_send(1, SendOp::Send, &[src.sge(0, 100)], SendFlags::empty());
    let ev = wait_failed(&mut a, &mut b, 0);
    assert!(ev.detail.contains("code 0x05"), "{ev:?}");
    assert_eq!(wait_wc(&mut a, &mut b, 1, 5).status, WcStatus::WrFlushErr);
}

#[test]
fn send_with_invalidate() {
    let (mut a, mut b) = pair();
    let target = b.buf(64, 0x11, rw());
    let rbuf = b.buf(8, 0, rw());
    b.post_recv(1, &[rbuf.sge(0, 8)]);
    let src = a.buf(8, 3, rw());
    a.post_send(
        1,
        SendOp::SendInv {
            rkey: target.mr.rkey,
        },
        &[src.sge(0, 8)],
        SendFlags::empty(),
    );
    let wc = wait_wc(&mut a, &mut b, 1, 1);
    ok(&wc);
    assert_eq!(wc.invalidated_rkey, Some(target.mr.rkey));
    // The region no longer takes remote writes.
    a.post_write(2, target.addr(), target.mr.rkey, &[src.sge(0, 8)]);
    let ev = wait_failed(&mut a, &mut b, 0);
    assert!(ev.detail.contains("invalid STag"), "{ev:?}");
    assert!(target.data.iter().all(|&x| x == 0x11));
    // A deregistration of an invalidated region still works.
    b.dev.dereg_mr(&target.mr).unwrap();
}

#[test]
fn bad_local_keys_complete_with_protection_errors() {
    let (mut a, mut b) = pair();
    let buf = a.buf(64, 0, Access::REMOTE_READ);
    let mut bad = buf.sge(0, 64);
    bad.lkey ^= 0x55;
    a.post_send(1, SendOp::Send, &[bad], SendFlags::empty());
    assert_eq!(wait_wc(&mut a, &mut b, 0, 1).status, WcStatus::LocProtErr);
    // A READ sink needs LOCAL_WRITE.
    let src = b.buf(64, 0, rw());
    a.post_read(2, src.addr(), src.mr.rkey, &[buf.sge(0, 64)]);
    assert_eq!(wait_wc(&mut a, &mut b, 0, 2).status, WcStatus::LocProtErr);
    // Out of range of its region.
    let mut long = buf.sge(0, 64);
    long.len = 65;
    a.post_send(3, SendOp::Send, &[long], SendFlags::empty());
    assert_eq!(wait_wc(&mut a, &mut b, 0, 3).status, WcStatus::LocProtErr);
    assert_eq!(a.ctx.qp_state(a.qp), Some(QpState::Rts));
}

#[test]
fn peer_dying_flushes() {
    let (mut a, mut b) = pair();
    let rbuf = a.buf(64, 0, rw());
    a.post_recv(1, &[rbuf.sge(0, 64)]);
    a.post_recv(2, &[rbuf.sge(0, 64)]);
    // A READ the peer will never answer: it dies first.
    let sink = a.buf(64, 0, rw());
    drop(std::mem::replace(&mut b, Node::new(device(&[]))));
    a.post_read(3, 0x1000, 0x100, &[sink.sge(0, 64)]);
    drive(&mut a, &mut b, |a, _| a.wcs.len() == 3);
    for wc in &a.wcs {
        assert_ne!(wc.status, WcStatus::Success, "{wc:?}");
    }
    assert!(a
        .cm
        .iter()
        .any(|e| matches!(e, CmEvent::Disconnected { .. })));
    assert_eq!(a.ctx.qp_state(a.qp), Some(QpState::Error));
}

#[test]
fn disconnect_flushes_both_sides() {
    let (mut a, mut b) = pair();
    let rb = b.buf(64, 0, rw());
    b.post_recv(9, &[rb.sge(0, 64)]);
    a.ctx.disconnect(a.qp).unwrap();
    assert_eq!(wait_wc(&mut a, &mut b, 1, 9).status, WcStatus::WrFlushErr);
    drive(&mut a, &mut b, |a, b| {
        [a, b].iter().all(|n| {
            n.cm.iter()
                .any(|e| matches!(e, CmEvent::Disconnected { .. }))
        })
    });
    // A clean close is no fatal error.
    assert!(
        a.asyncs.is_empty() && b.asyncs.is_empty(),
        "{:?} {:?}",
        a.asyncs,
        b.asyncs
    );
}
