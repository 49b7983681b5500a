//! Over TCP, data of large messages for receives already posted is
//! received straight into the receive buffer: whole eager messages, and
//! rendezvous data sent as active messages. Contents, truncation and
//! messages nobody waits for yet all behave as on the copying path.

mod common;

use common::*;
use rucx::{Error, Op, Posted, Worker, TAG_MASK_ALL};

fn pair(vars: &[(&str, &str)]) -> (Worker, Worker, rucx::Ep) {
    let mut all = vec![("RUCX_TLS", "tcp"), ("RUCX_NET_DEVICES", "lo")];
    all.extend_from_slice(vars);
    let ctx = context_vars(&all);
    let mut a = ctx.create_worker().expect("worker");
    let b = ctx.create_worker().expect("worker");
    let ep = a.connect(&b.address()).expect("connect");
    (a, b, ep)
}

/// Sends `size` bytes from `a` to a receive of `cap` bytes that `b` posted
/// first; returns the receive's result and buffer, and what was sent.
fn transfer(
    a: &mut Worker,
    b: &mut Worker,
    ep: rucx::Ep,
    size: usize,
    cap: usize,
    tag: u64,
) -> (rucx::Result<rucx::Info>, Vec<u8>, Vec<u8>) {
    let r = match b
        .tag_recv(vec![0u8; cap], tag, TAG_MASK_ALL, Op::new())
        .expect("recv")
    {
        Posted::InFlight(id) => id,
        Posted::Done(..) => panic!("nothing was sent yet"),
    };
    let data = pattern(size, tag);
    let s = a.tag_send(ep, data.clone(), tag, Op::new()).expect("send");
    let sid = match s {
        Posted::InFlight(id) => Some(id),
        Posted::Done(..) => None,
    };
    for _ in 0..10_000_000 {
        a.progress();
        b.progress();
        if !b.request_is_active(r) && sid.is_none_or(|id| !a.request_is_active(id)) {
            break;
        }
    }
    if let Some(id) = sid {
        a.take::<Vec<u8>>(id).expect("send done").expect("send ok");
    }
    match b.take::<Vec<u8>>(r).expect("receive done") {
        Ok((info, buf)) => (Ok(info), buf, data),
        Err(e) => (Err(e.error), e.buf, data),
    }
}

#[test]
fn eager_messages_for_posted_receives() {
    let (mut a, mut b, ep) = pair(&[("RUCX_RNDV_THRESH", "inf")]);
    for (i, size) in [20_000usize, 65_536, 100_000, 1 << 20]
        .into_iter()
        .enumerate()
    {
        let (r, buf, data) = transfer(&mut a, &mut b, ep, size, size, i as u64);
        assert_eq!(r.expect("receive").length, size);
        assert!(buf == data, "{size} bytes");
    }
    // A buffer shorter than the message: its first bytes, and the error.
    let (r, buf, data) = transfer(&mut a, &mut b, ep, 100_000, 30_000, 9);
    assert!(
        matches!(
            r,
            Err(Error::Truncated {
                length: 100_000,
                capacity: 30_000
            })
        ),
        "{r:?}"
    );
    assert!(buf[..] == data[..30_000]);
    // Later messages still arrive whole and in order.
    let (r, buf, data) = transfer(&mut a, &mut b, ep, 70_000, 70_000, 10);
    assert_eq!(r.expect("receive").length, 70_000);
    assert!(buf == data);
}

#[test]
fn rendezvous_data_over_active_messages() {
    let (mut a, mut b, ep) = pair(&[("RUCX_RNDV_SCHEME", "am"), ("RUCX_RNDV_THRESH", "32k")]);
    for (i, size) in [40_000usize, 1 << 20, (3 << 20) + 5]
        .into_iter()
        .enumerate()
    {
        let (r, buf, data) = transfer(&mut a, &mut b, ep, size, size, 20 + i as u64);
        assert_eq!(r.expect("receive").length, size);
        assert!(buf == data, "{size} bytes");
    }
    let (r, buf, data) = transfer(&mut a, &mut b, ep, 1 << 20, 100_000, 30);
    assert!(matches!(r, Err(Error::Truncated { .. })), "{r:?}");
    assert!(buf[..] == data[..100_000]);
}
