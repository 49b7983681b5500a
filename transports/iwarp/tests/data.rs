//! SEND, RDMA WRITE and RDMA READ between two contexts over loopback,
//! contents checked.

mod common;

use common::*;
use rucx_rdma::{Access, SendFlags, SendOp, WcOpcode};

fn all() -> Access {
    Access::LOCAL_WRITE | Access::REMOTE_WRITE | Access::REMOTE_READ
}

fn send_recv(a: &mut Node, b: &mut Node, len: usize, id: u64) {
    let src = a.buf(len, 0, all());
    let mut src = src;
    src.data[..len].copy_from_slice(&pattern(len, id as u8));
    let dst = b.buf(len + 16, 0xee, all());
    b.post_recv(id, &[dst.sge(0, len + 16)]);
    a.post_send(id, SendOp::Send, &[src.sge(0, len)], SendFlags::empty());
    let wc = wait_wc(a, b, 0, id);
    ok(&wc);
    assert_eq!(wc.opcode, WcOpcode::Send);
    let wc = wait_wc(a, b, 1, id);
    ok(&wc);
    assert_eq!(wc.opcode, WcOpcode::Recv);
    assert_eq!(wc.byte_len as usize, len);
    assert_eq!(&dst.data[..len], &pattern(len, id as u8)[..], "len {len}");
    assert!(dst.data[len..len + 16].iter().all(|&b| b == 0xee));
}

#[test]
fn sends_of_many_sizes() {
    let (mut a, mut b) = pair();
    for (i, len) in [0, 1, 4096, 1 << 20, 65474, 65475, 3 * 65474 + 5]
        .into_iter()
        .enumerate()
    {
        send_recv(&mut a, &mut b, len, i as u64 + 1);
    }
}

#[test]
fn sends_without_crc_and_with_rev1() {
    for cfg in [
        &[("MPA_CRC", "n")][..],
        &[("MPA_REV", "1")][..],
        &[("P2P", "n")][..],
    ] {
        let (mut a, mut b) = pair_with(cfg, cfg);
        send_recv(&mut a, &mut b, 100_000, 7);
        send_recv(&mut b, &mut a, 3, 8);
    }
}

#[test]
fn inline_and_gathered_sends() {
    let (mut a, mut b) = pair();
    let dst = b.buf(64, 0, all());
    b.post_recv(1, &[dst.sge(0, 10), dst.sge(32, 32)]);
    let local = b"hello, inline world!".to_vec();
    let sge = rucx_rdma::Sge {
        addr: local.as_ptr() as u64,
        len: local.len() as u32,
        lkey: 0,
    };
    a.post_send(
        1,
        SendOp::Send,
        &[sge],
        SendFlags::INLINE | SendFlags::SOLICITED,
    );
    let wc = wait_wc(&mut a, &mut b, 1, 1);
    ok(&wc);
    assert!(wc.solicited);
    assert_eq!(wc.byte_len, 20);
    assert_eq!(&dst.data[..10], b"hello, inl");
    assert_eq!(&dst.data[32..42], b"ine world!");
    // A gather list using the device's local key.
    let lkey = a.dev.attr().local_lkey.unwrap();
    b.post_recv(2, &[dst.sge(0, 64)]);
    let parts = [b"abc".to_vec(), b"defgh".to_vec()];
    let sges: Vec<_> = parts
        .iter()
        .map(|p| rucx_rdma::Sge {
            addr: p.as_ptr() as u64,
            len: p.len() as u32,
            lkey,
        })
        .collect();
    a.post_send(2, SendOp::Send, &sges, SendFlags::empty());
    let wc = wait_wc(&mut a, &mut b, 1, 2);
    assert_eq!(wc.byte_len, 8);
    assert_eq!(&dst.data[..8], b"abcdefgh");
}

#[test]
fn write_then_zero_length_read_flush() {
    let (mut a, mut b) = pair();
    for len in [1usize, 5000, 1 << 20] {
        let mut src = a.buf(len, 0, all());
        src.data.copy_from_slice(&pattern(len, 3));
        let dst = b.buf(len + 8, 0x55, all());
        a.post_write(1, dst.addr() + 4, dst.mr.rkey, &[src.sge(0, len)]);
        a.post_read(2, dst.addr(), dst.mr.rkey, &[]);
        let wc = wait_wc(&mut a, &mut b, 0, 2);
        ok(&wc);
        assert_eq!(wc.opcode, WcOpcode::RdmaRead);
        let w = a.take_wc(1).expect("the WRITE completed first");
        ok(&w);
        assert_eq!(w.opcode, WcOpcode::RdmaWrite);
        assert_eq!(&dst.data[4..4 + len], &pattern(len, 3)[..]);
        assert!(dst.data[..4]
            .iter()
            .chain(&dst.data[4 + len..])
            .all(|&b| b == 0x55));
        // No completion at the target.
        assert!(b.wcs.is_empty());
    }
}

#[test]
fn reads_of_many_sizes() {
    let (mut a, mut b) = pair();
    for (i, len) in [1usize, 100, 65474, 65475, 1 << 20, 4 << 20]
        .into_iter()
        .enumerate()
    {
        let mut src = b.buf(len, 0, all());
        src.data.copy_from_slice(&pattern(len, i as u8));
        let sink = a.buf(len, 0, all());
        let id = i as u64 + 10;
        a.post_read(id, src.addr(), src.mr.rkey, &[sink.sge(0, len)]);
        let wc = wait_wc(&mut a, &mut b, 0, id);
        ok(&wc);
        assert_eq!(wc.byte_len as usize, len);
        assert_eq!(sink.data, src.data, "len {len}");
    }
}

#[test]
fn many_reads_beyond_ord() {
    let mut a = Node::new(device(&[("ORD", "2")]));
    let mut b = Node::new(device(&[("IRD", "2")]));
    connect(
        &mut a,
        &mut b,
        &rucx_rdma::ConnParam::default(),
        &rucx_rdma::ConnParam::default(),
    );
    let n = 50;
    let mut src = b.buf(n * 100, 0, all());
    src.data.copy_from_slice(&pattern(n * 100, 9));
    let sink = a.buf(n * 100, 0, all());
    for i in 0..n {
        a.post_read(
            i as u64,
            src.addr() + (i * 100) as u64,
            src.mr.rkey,
            &[sink.sge(i * 100, 100)],
        );
    }
    drive(&mut a, &mut b, |a, _| a.wcs.len() == n);
    for (i, wc) in a.wcs.iter().enumerate() {
        ok(wc);
        assert_eq!(wc.wr_id, i as u64);
    }
    assert_eq!(sink.data, src.data);
    assert!(a.asyncs.is_empty() && b.asyncs.is_empty());
}

#[test]
fn sends_both_ways_interleaved_with_reads() {
    let (mut a, mut b) = pair();
    let len = 300_000;
    let mut src = b.buf(len, 0, all());
    src.data.copy_from_slice(&pattern(len, 1));
    let sink = a.buf(len, 0, all());
    let msg_a = a.buf(len, 7, all());
    let rbuf = b.buf(len, 0, all());
    b.post_recv(100, &[rbuf.sge(0, len)]);
    a.post_read(1, src.addr(), src.mr.rkey, &[sink.sge(0, len)]);
    a.post_send(2, SendOp::Send, &[msg_a.sge(0, len)], SendFlags::empty());
    ok(&wait_wc(&mut a, &mut b, 0, 1));
    ok(&wait_wc(&mut a, &mut b, 1, 100));
    assert_eq!(sink.data, src.data);
    assert!(rbuf.data.iter().all(|&x| x == 7));
}

#[test]
fn ethernet_sized_segments() {
    // As across a link with an MTU of 1500: FPDUs of at most 1442 bytes.
    let v = [("MSS", "1448")];
    let (mut a, mut b) = pair_with(&v, &v);
    send_recv(&mut a, &mut b, 1 << 20, 1);
    send_recv(&mut b, &mut a, 1443, 2);
    let len = 3 << 20;
    let mut src = b.buf(len, 0, all());
    src.data.copy_from_slice(&pattern(len, 5));
    let sink = a.buf(len, 0, all());
    a.post_read(3, src.addr(), src.mr.rkey, &[sink.sge(0, len)]);
    ok(&wait_wc(&mut a, &mut b, 0, 3));
    assert_eq!(sink.data, src.data);
    let dst = b.buf(len, 0, all());
    a.post_write(4, dst.addr(), dst.mr.rkey, &[sink.sge(0, len)]);
    a.post_read(5, dst.addr(), dst.mr.rkey, &[]);
    ok(&wait_wc(&mut a, &mut b, 0, 5));
    assert_eq!(dst.data, src.data);
}
