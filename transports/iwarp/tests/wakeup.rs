//! Sleeping on a context's event fd: `arm` says Busy while something is
//! pending, and the fd wakes the caller for data and for timeouts.

mod common;

use std::net::TcpListener;
use std::os::fd::RawFd;
use std::time::{Duration, Instant};

use common::*;
use rucx_rdma::{Access, CmEvent, ConnParam, SendFlags, SendOp, Verbs};
use uct::Armed;

fn readable(fd: RawFd, ms: i32) -> bool {
    let mut p = libc::pollfd {
        fd,
        events: libc::POLLIN,
        revents: 0,
    };
    // SAFETY: one pollfd, alive for the call.
    unsafe { libc::poll(&mut p, 1, ms) == 1 }
}

/// Progresses until `arm` lets the context sleep.
fn settle(ctx: &mut dyn Verbs) {
    let start = Instant::now();
    while ctx.arm().unwrap() == Armed::Busy {
        ctx.progress();
        while ctx.poll_cm().is_some() {}
        let mut wcs = [Default::default(); 16];
        while ctx.poll_cq(rucx_rdma::CqId(0), &mut wcs) > 0 {}
        assert!(start.elapsed() < DEADLINE);
    }
}

#[test]
fn data_wakes_a_sleeping_context() {
    let (mut a, mut b) = pair();
    settle(b.ctx.as_mut());
    let fd = b.ctx.event_fd().unwrap();
    assert!(!readable(fd, 0));
    let rbuf = b.buf(8, 0, Access::LOCAL_WRITE);
    b.post_recv(1, &[rbuf.sge(0, 8)]);
    let src = a.buf(8, 1, Access::LOCAL_WRITE);
    a.post_send(1, SendOp::Send, &[src.sge(0, 8)], SendFlags::empty());
    assert!(readable(fd, 5000));
    // Level-triggered: the fd stays readable until the data is taken.
    assert!(readable(fd, 0));
    ok(&wait_wc(&mut a, &mut b, 1, 1));
}

#[test]
fn a_timeout_wakes_a_sleeping_context() {
    let mut a = Node::new(device(&[("MPA_TIMEOUT", "300ms")]));
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    a.ctx
        .connect(a.qp, l.local_addr().unwrap(), &ConnParam::default())
        .unwrap();
    let (_s, _) = l.accept().unwrap();
    let fd = a.ctx.event_fd().unwrap();
    let start = Instant::now();
    loop {
        a.poll();
        if !a.cm.is_empty() {
            break;
        }
        if a.ctx.arm().unwrap() == Armed::Sleep {
            readable(fd, 5000);
        }
        assert!(start.elapsed() < Duration::from_secs(5), "no wakeup");
    }
    assert!(
        matches!(a.cm[0], CmEvent::ConnectError { .. }),
        "{:?}",
        a.cm
    );
    assert!(start.elapsed() >= Duration::from_millis(250));
}
