//! Large active messages received straight into the place the sink names
//! (`AmSink::am_begin`): the data lands there whole, a place shorter than
//! the data drops the rest without losing the stream's framing, and a
//! peer that goes away in the middle ends the placement with an error
//! before its source is reported gone.

mod common;

use std::io::Write;
use std::net::TcpStream;

use common::{connect_ready, drive, lo, pattern, port, Recorder};
use rucx_tcp::TcpConfig;
use uct::{Iface, Iov, Posted, Token};

const ID: u8 = 3;
const HDR: usize = 16;

/// Sends `hdr` and `data` as one message with `am_zcopy` and waits until
/// the transport no longer needs `data`.
fn send(
    a: &mut dyn Iface,
    sa: &mut Recorder,
    b: &mut dyn Iface,
    sb: &mut Recorder,
    ep: uct::EpId,
    hdr: &[u8],
    data: &[u8],
) {
    let iov = [Iov::from_slice(data)];
    // SAFETY: `data` outlives the send: this waits for its completion.
    let r = unsafe { a.zcopy().unwrap().am_zcopy(ep, ID, hdr, &iov, Token(7)) }.expect("am_zcopy");
    if r == Posted::InFlight {
        drive(&mut [(a, sa), (b, sb)], |x| {
            x[0].1.completed.iter().any(|(t, _)| *t == Token(7))
        });
        sa.completed.clear();
    }
}

#[test]
fn large_messages_land_in_the_sinks_place_and_small_ones_as_before() {
    let cfg = TcpConfig::default();
    let (mut a, mut b) = (lo(&cfg), lo(&cfg));
    let (mut sa, mut sb) = (Recorder::default(), Recorder::default());
    let ep = connect_ready(a.as_mut(), &mut sa, b.as_mut(), &mut sb);
    let hdr = pattern(HDR, 1);
    let data = pattern(600 * 1024, 2);
    // A place as long as the data, then one shorter: the rest is dropped.
    for (i, cap) in [(0u64, data.len()), (1, 1000)] {
        sb.place = Some((ID, HDR, cap));
        send(a.as_mut(), &mut sa, b.as_mut(), &mut sb, ep, &hdr, &data);
        drive(&mut [(a.as_mut(), &mut sa), (b.as_mut(), &mut sb)], |x| {
            x[1].1.ended.len() as u64 > i
        });
        assert_eq!(sb.ended[i as usize], (i, Ok(())));
        let (buf, head) = &sb.placed[i as usize];
        assert_eq!(head, &hdr, "the sink saw the header");
        assert!(buf[..] == data[..cap], "message {i}: the data in place");
    }
    // Small messages, and large ones the sink declines, come whole.
    sb.place = None;
    assert_eq!(
        a.am().unwrap().am_short(ep, 0, 5, b"after").unwrap(),
        Posted::Done
    );
    send(a.as_mut(), &mut sa, b.as_mut(), &mut sb, ep, &hdr, &data);
    drive(&mut [(a.as_mut(), &mut sa), (b.as_mut(), &mut sb)], |x| {
        x[1].1.ams.len() == 2
    });
    assert_eq!(&sb.ams[0].2[8..], b"after");
    assert_eq!(sb.ams[1].2[..HDR], hdr[..]);
    assert!(sb.ams[1].2[HDR..] == data[..]);
    assert!(sb.src_failed.is_empty() && sb.ep_failed.is_empty());
}

const MAGIC: &[u8; 8] = b"rucx-tcp";

#[test]
fn a_peer_gone_mid_message_ends_the_placement_before_its_source() {
    let cfg = TcpConfig::default();
    let mut b = lo(&cfg);
    let mut sb = Recorder {
        place: Some((ID, HDR, 200 * 1024)),
        ..Recorder::default()
    };
    // A raw peer: hello, then a 200 KiB message of which 4 KiB arrive.
    let mut s = TcpStream::connect(("127.0.0.1", port(b.as_ref()))).unwrap();
    let mut hello = MAGIC.to_vec();
    hello.extend_from_slice(&3u16.to_le_bytes());
    hello.extend_from_slice(&1u16.to_be_bytes());
    hello.extend_from_slice(&[4, 127, 0, 0, 1]);
    s.write_all(&hello).unwrap();
    let total = (HDR + 200 * 1024) as u32;
    let mut f = vec![ID];
    f.extend_from_slice(&total.to_le_bytes());
    f.extend_from_slice(&pattern(HDR + 4096, 3));
    s.write_all(&f).unwrap();
    drive(&mut [(b.as_mut(), &mut sb)], |x| !x[0].1.placed.is_empty());
    drop(s);
    drive(&mut [(b.as_mut(), &mut sb)], |x| {
        !x[0].1.src_failed.is_empty()
    });
    assert_eq!(sb.ended.len(), 1);
    assert!(sb.ended[0].1.is_err(), "{:?}", sb.ended);
    assert_eq!(sb.ended_before_src_failed, vec![1], "ended first");
    let p = pattern(HDR + 4096, 3);
    assert!(sb.placed[0].0[..4096] == p[HDR..], "what came is in place");
}
