//! Connections over IPv6: devices on `lo` with `RUCX_IWARP_AF_PRIO=inet6`
//! use `::1`, connect, and move SEND, RDMA WRITE and RDMA READ data; a
//! device of one family refuses peers of the other.
//!
//! Without `::1` on `lo` the tests print `skipped: <why>`, or fail when
//! `RUCX_REQUIRE_ALL=1`.

mod common;

use std::net::SocketAddr;

use common::*;
use rucx_rdma::{Access, ConnParam, SendFlags, SendOp, WcOpcode};
use uct::ucs::netif::{self, AddrFamily};

const INET6: &[(&str, &str)] = &[("AF_PRIO", "inet6")];

/// Whether `lo` has `::1`; otherwise reports the skip (or fails when
/// everything is required).
fn have_ipv6_loopback() -> bool {
    let has = netif::find("lo")
        .map(|i| i.addr_of(AddrFamily::Inet6).is_some())
        .unwrap_or(false);
    if !has {
        if std::env::var("RUCX_REQUIRE_ALL").is_ok_and(|v| v == "1") {
            panic!("required but unavailable: ::1 on lo");
        }
        println!("skipped: no IPv6 address (::1) on lo");
    }
    has
}

fn all() -> Access {
    Access::LOCAL_WRITE | Access::REMOTE_WRITE | Access::REMOTE_READ
}

#[test]
fn send_write_read_over_ipv6_loopback() {
    if !have_ipv6_loopback() {
        return;
    }
    let (mut a, mut b) = pair_with(INET6, INET6);
    assert!(a.dev.attr().addr.is_ipv6() && b.dev.attr().addr.is_ipv6());
    let len = 200_000;
    // SEND into a posted receive.
    let mut src = a.buf(len, 0, all());
    src.data.copy_from_slice(&pattern(len, 1));
    let dst = b.buf(len, 0xee, all());
    b.post_recv(1, &[dst.sge(0, len)]);
    a.post_send(1, SendOp::Send, &[src.sge(0, len)], SendFlags::empty());
    ok(&wait_wc(&mut a, &mut b, 0, 1));
    let wc = wait_wc(&mut a, &mut b, 1, 1);
    ok(&wc);
    assert_eq!(wc.opcode, WcOpcode::Recv);
    assert_eq!(dst.data, pattern(len, 1));
    // RDMA WRITE into b's region.
    let mut w = a.buf(len, 0, all());
    w.data.copy_from_slice(&pattern(len, 2));
    let target = b.buf(len, 0, all());
    a.post_write(2, target.addr(), target.mr.rkey, &[w.sge(0, len)]);
    ok(&wait_wc(&mut a, &mut b, 0, 2));
    // RDMA READ of it back (a READ completes once its data is placed,
    // after the WRITE before it).
    let sink = a.buf(len, 0, all());
    a.post_read(3, target.addr(), target.mr.rkey, &[sink.sge(0, len)]);
    let wc = wait_wc(&mut a, &mut b, 0, 3);
    ok(&wc);
    assert_eq!(wc.opcode, WcOpcode::RdmaRead);
    assert_eq!(sink.data, pattern(len, 2));
    assert_eq!(target.data, pattern(len, 2));
}

#[test]
fn a_device_refuses_peers_of_the_other_family() {
    if !have_ipv6_loopback() {
        return;
    }
    let mut four = Node::new(device(&[]));
    let mut six = Node::new(device(INET6));
    assert!(four.dev.attr().addr.is_ipv4());
    let at6 = listen(&mut six);
    let at4 = listen(&mut four);
    assert!(at6.is_ipv6() && at4.is_ipv4());
    let p = ConnParam::default();
    assert!(matches!(
        four.ctx.connect(four.qp, at6, &p),
        Err(uct::Error::Unreachable(_))
    ));
    assert!(matches!(
        six.ctx.connect(six.qp, at4, &p),
        Err(uct::Error::Unreachable(_))
    ));
    let mut other = Node::new(device(&[]));
    let v6_any: SocketAddr = "[::]:0".parse().expect("addr");
    assert!(
        other.ctx.listen(v6_any).is_err(),
        "listening in the other family"
    );
}
