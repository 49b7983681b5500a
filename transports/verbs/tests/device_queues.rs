//! Device tests of queues: sends posted before the connection, shared
//! receive queues, inline sends, keys of regions without remote rights,
//! and the completion channel behind the event fd. Like `device.rs`,
//! each says `skipped: no RDMA device` without one (fails instead when
//! `RUCX_REQUIRE_ALL=1`).

#![cfg(feature = "sys")]

mod common;

use std::net::SocketAddr;

use common::{connect, connect_sides, device, finish_connect, wait_cm, Buf, Side};
use rucx_rdma::{
    Access, CmEvent, ConnParam, RecvWr, SendFlags, SendOp, SendWr, Sge, SrqInit, WcOpcode, WcStatus,
};
use uct::Armed;

#[test]
fn sends_posted_while_connecting_go_out_once_connected() {
    let Some(dev) = device() else {
        return;
    };
    let pd = dev.alloc_pd().unwrap();
    let (mut a, mut b) = (Side::new(&*dev, pd), Side::new(&*dev, pd));
    let dst = Buf::new(&*dev, pd, 256, 0);
    let src = Buf::new(&*dev, pd, 64, 0x5a);
    let sg = [dst.sge(0, 128)];
    // SAFETY: `dst` lives until the end of the test.
    unsafe {
        b.ctx.post_recv(
            b.qp,
            &RecvWr {
                wr_id: 1,
                sges: &sg,
            },
        )
    }
    .unwrap();
    let at = b.ctx.listen(SocketAddr::new(dev.attr().addr, 0)).unwrap();
    let hello = ConnParam {
        private_data: b"hello".to_vec(),
        ..ConnParam::default()
    };
    a.ctx.connect(a.qp, at, &hello).unwrap();
    // An inline SEND from unregistered memory, reused at once, then a
    // WRITE from registered memory: both wait for the connection.
    let mut stack = *b"early bird";
    let sge = Sge {
        addr: stack.as_ptr() as u64,
        len: stack.len() as u32,
        lkey: 0,
    };
    let wr = SendWr {
        wr_id: 10,
        op: SendOp::Send,
        sges: &[sge],
        flags: SendFlags::SIGNALED | SendFlags::INLINE,
    };
    // SAFETY: inline: read during the call.
    unsafe { a.ctx.post_send(a.qp, &wr) }.unwrap();
    stack.fill(b'X');
    let op = SendOp::Write {
        remote_addr: dst.mr.addr + 128,
        rkey: dst.mr.rkey,
    };
    a.send(11, op, &[src.sge(0, 64)]);
    finish_connect(&mut a, &mut b);
    let (w1, w2) = (a.wc(), a.wc());
    assert_eq!((w1.wr_id, w1.status), (10, WcStatus::Success));
    assert_eq!((w2.wr_id, w2.status), (11, WcStatus::Success));
    let r = b.wc();
    assert_eq!((r.wr_id, r.status, r.byte_len), (1, WcStatus::Success, 10));
    assert_eq!(&dst.data[..10], b"early bird");
    assert!(dst.data[128..192].iter().all(|&x| x == 0x5a));
}

#[test]
fn a_failed_connection_flushes_the_sends_it_kept() {
    let Some(dev) = device() else {
        return;
    };
    let pd = dev.alloc_pd().unwrap();
    let (mut a, mut b) = (Side::new(&*dev, pd), Side::new(&*dev, pd));
    // Nobody listens on this port: b's listener is bound, then a goes to
    // the next port.
    let at = b.ctx.listen(SocketAddr::new(dev.attr().addr, 0)).unwrap();
    let nowhere = SocketAddr::new(at.ip(), at.port().wrapping_add(1).max(1));
    a.ctx.connect(a.qp, nowhere, &ConnParam::default()).unwrap();
    let src = Buf::new(&*dev, pd, 8, 1);
    a.send(5, SendOp::Send, &[src.sge(0, 8)]);
    match wait_cm(&mut a, &mut b) {
        CmEvent::Rejected { .. } | CmEvent::ConnectError { .. } => {}
        other => panic!("expected the connection to fail, got {other:?}"),
    }
    let wc = a.wc();
    assert_eq!((wc.wr_id, wc.status), (5, WcStatus::WrFlushErr));
    assert_eq!(wc.qp, Some(a.qp));
}

#[test]
fn receives_come_from_the_shared_queue() {
    let Some(dev) = device() else {
        return;
    };
    let pd = dev.alloc_pd().unwrap();
    let mut srq = None;
    let b = Side::with(&*dev, pd, |ctx| {
        let init = SrqInit {
            pd,
            max_wr: 16,
            max_sge: 1,
        };
        srq = Some(ctx.create_srq(&init).unwrap());
        srq
    });
    let srq = srq.unwrap();
    let (mut a, mut b) = connect_sides(&*dev, Side::new(&*dev, pd), b);
    let dst = Buf::new(&*dev, pd, 4096, 0);
    for (i, off) in [(1u64, 0usize), (2, 2048)] {
        let sg = [dst.sge(off, 2048)];
        // SAFETY: `dst` lives until the end of the test.
        unsafe {
            b.ctx.post_srq_recv(
                srq,
                &RecvWr {
                    wr_id: i,
                    sges: &sg,
                },
            )
        }
        .unwrap();
    }
    let sg = [dst.sge(0, 8)];
    // SAFETY: as above; refused anyway.
    let own = unsafe {
        b.ctx.post_recv(
            b.qp,
            &RecvWr {
                wr_id: 3,
                sges: &sg,
            },
        )
    };
    assert!(
        own.is_err(),
        "a queue pair on a shared queue takes no receive of its own"
    );
    let src = Buf::new(&*dev, pd, 1000, 7);
    a.send(1, SendOp::Send, &[src.sge(0, 16)]);
    a.send(2, SendOp::Send, &[src.sge(0, 1000)]);
    let mut got = [b.wc(), b.wc()];
    got.sort_by_key(|w| w.byte_len);
    for (w, len) in got.iter().zip([16, 1000]) {
        assert_eq!(
            (w.status, w.opcode, w.byte_len),
            (WcStatus::Success, WcOpcode::Recv, len)
        );
        assert_eq!(w.qp, Some(b.qp));
    }
    assert!(b.ctx.destroy_srq(srq).is_err(), "a queue pair uses it");
    assert_eq!(a.wc().status, WcStatus::Success);
}

#[test]
fn inline_sends_need_no_registration_and_have_a_limit() {
    let Some(dev) = device() else {
        return;
    };
    let max = dev.attr().max_inline as usize;
    assert!(max >= 64, "soft-RoCE and NICs offer inline sends ({max})");
    let pd = dev.alloc_pd().unwrap();
    let (mut a, mut b) = connect(&*dev, pd);
    let dst = Buf::new(&*dev, pd, 4096, 0);
    let sg = [dst.sge(0, 4096)];
    // SAFETY: `dst` lives until the end of the test.
    unsafe {
        b.ctx.post_recv(
            b.qp,
            &RecvWr {
                wr_id: 1,
                sges: &sg,
            },
        )
    }
    .unwrap();
    let data: Vec<u8> = (0..max + 1).map(|i| i as u8).collect();
    let entry = |len: usize| {
        [Sge {
            addr: data.as_ptr() as u64,
            len: len as u32,
            lkey: 0,
        }]
    };
    let (over, fits) = (entry(max + 1), entry(64));
    let send = |sges| SendWr {
        wr_id: 2,
        op: SendOp::Send,
        sges,
        flags: SendFlags::SIGNALED | SendFlags::INLINE,
    };
    // SAFETY: inline: read during the call.
    let too_long = unsafe { a.ctx.post_send(a.qp, &send(&over)) };
    assert!(too_long.is_err(), "an inline send over the device's limit");
    // SAFETY: as above.
    unsafe { a.ctx.post_send(a.qp, &send(&fits)) }.unwrap();
    assert_eq!(a.wc().status, WcStatus::Success);
    let r = b.wc();
    assert_eq!((r.status, r.byte_len), (WcStatus::Success, 64));
    assert_eq!(&dst.data[..64], &data[..64]);
}

#[test]
fn regions_without_remote_rights_refuse_peers() {
    let Some(dev) = device() else {
        return;
    };
    let pd = dev.alloc_pd().unwrap();
    let mut local = vec![0u8; 4096];
    // SAFETY: `local` outlives the registration (deregistered below).
    let mr = unsafe { dev.reg_mr(pd, local.as_mut_ptr(), 4096, Access::LOCAL_WRITE) }.unwrap();
    assert_ne!(mr.rkey, 0, "keys are never 0");
    let (mut a, _b) = connect(&*dev, pd);
    let src = Buf::new(&*dev, pd, 8, 3);
    let op = SendOp::Write {
        remote_addr: mr.addr,
        rkey: mr.rkey,
    };
    a.send(1, op, &[src.sge(0, 8)]);
    assert_eq!(a.wc().status, WcStatus::RemAccessErr);
    assert!(local.iter().all(|&x| x == 0));
    // Deregistration names the region, whatever rights it quotes.
    let quoted = rucx_rdma::Mr {
        access: Access::empty(),
        ..mr
    };
    dev.dereg_mr(&quoted).unwrap();
    assert!(dev.dereg_mr(&mr).is_err());
}

#[test]
fn the_event_fd_wakes_on_a_completion() {
    let Some(dev) = device() else {
        return;
    };
    let pd = dev.alloc_pd().unwrap();
    let (mut a, _b) = connect(&*dev, pd);
    let fd = a.ctx.event_fd().expect("an fd to sleep on");
    // Drain what connecting left, until arm lets us sleep.
    let start = std::time::Instant::now();
    while a.ctx.arm().unwrap() == Armed::Busy {
        while a.ctx.poll_cm().is_some() {}
        assert!(start.elapsed() < common::DEADLINE, "never idle");
    }
    let src = Buf::new(&*dev, pd, 64, 1);
    let dst = Buf::new(&*dev, pd, 64, 0);
    let op = SendOp::Write {
        remote_addr: dst.mr.addr,
        rkey: dst.mr.rkey,
    };
    a.send(1, op, &[src.sge(0, 64)]);
    let mut pfd = libc::pollfd {
        fd,
        events: libc::POLLIN,
        revents: 0,
    };
    // SAFETY: one valid pollfd.
    let n = unsafe { libc::poll(&mut pfd, 1, 10_000) };
    assert_eq!(n, 1, "the completion channel woke the fd");
    assert_eq!(a.wc().status, WcStatus::Success);
    // Armed again, and nothing pending: sleep.
    assert_eq!(a.ctx.arm().unwrap(), Armed::Sleep);
}
