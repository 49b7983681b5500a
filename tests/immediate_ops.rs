//! Operations that must complete while posted (`Op::immediate`, UCX's
//! `UCP_OP_ATTR_FLAG_FORCE_IMM_CMPL`): each completes at once or fails
//! with `Error::NoResource` having posted nothing, over `self`, shared
//! memory and tcp. A refused receive takes no message; a refused send
//! delivers none; a refused put writes nothing; a refused stream send
//! leaves no gap in the stream, and a refused stream receive leaves the
//! stream's bytes for the next one.

mod common;

use common::*;
use rucx::{Access, AmParams, Error, Op, Posted, Worker, TAG_MASK_ALL};

fn pair(tls: &str) -> (Worker, Worker, rucx::Ep, rucx::Ep) {
    let ctx = context_vars(&[("RUCX_TLS", tls), ("RUCX_NET_DEVICES", "lo")]);
    let mut a = ctx.create_worker().expect("worker a");
    let mut b = ctx.create_worker().expect("worker b");
    let ab = a.connect(&b.address()).expect("a->b");
    let ba = b.connect(&a.address()).expect("b->a");
    // One message each way first, so that both endpoints are wired up.
    greet(&mut a, &mut b, ab);
    greet(&mut b, &mut a, ba);
    (a, b, ab, ba)
}

/// Sends a greeting from `w` on `ep` and receives it on `v`.
fn greet(w: &mut Worker, v: &mut Worker, ep: rucx::Ep) {
    w.tag_send_blocking(ep, b"hi", 99).expect("send");
    until_probed(w, v, 99);
    let mut buf = [0u8; 2];
    v.tag_recv_blocking(&mut buf, 99, TAG_MASK_ALL)
        .expect("recv");
}

fn is_no_resource<T: std::fmt::Debug>(r: &rucx::Result<T>) -> bool {
    matches!(r, Err(Error::NoResource))
}

/// Progresses `a` and `b` until `b` has a message tagged `tag` (30 s at
/// most).
fn until_probed(a: &mut Worker, b: &mut Worker, tag: u64) -> rucx::Info {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    loop {
        a.progress();
        b.progress();
        if let Some(info) = b.tag_probe(tag, TAG_MASK_ALL) {
            return info;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "message {tag} never arrived"
        );
    }
}

fn tag_ops(tls: &str) {
    let (mut a, mut b, ab, _) = pair(tls);
    // A receive with nothing there is refused, and takes nothing later.
    let r = b.tag_recv(vec![0u8; 8], 1, TAG_MASK_ALL, Op::new().immediate());
    assert!(is_no_resource(&r), "{tls}: {r:?}");
    // A small send completes at once; the receive of it, once it is here.
    let s = a.tag_send(ab, pattern(8, 1), 1, Op::new().immediate());
    assert!(matches!(s, Ok(Posted::Done(..))), "{tls}: small send {s:?}");
    until_probed(&mut a, &mut b, 1);
    match b.tag_recv(vec![0u8; 8], 1, TAG_MASK_ALL, Op::new().immediate()) {
        Ok(Posted::Done(info, buf)) => {
            assert_eq!(info.length, 8);
            assert_eq!(buf, pattern(8, 1));
        }
        other => panic!("{tls}: receive of a message here: {other:?}"),
    }
    // A synchronous send, and one large enough for rendezvous, cannot.
    let r = a.tag_send(ab, pattern(8, 2), 2, Op::new().sync().immediate());
    assert!(is_no_resource(&r), "{tls}: sync send {r:?}");
    let big = 4 << 20;
    let r = a.tag_send(ab, pattern(big, 3), 3, Op::new().immediate());
    assert!(is_no_resource(&r), "{tls}: large send {r:?}");
    // Nothing of them arrives.
    progress_for(&mut a, 50);
    progress_for(&mut b, 50);
    assert!(
        b.tag_probe(2, TAG_MASK_ALL).is_none(),
        "{tls}: refused sync send arrived"
    );
    assert!(
        b.tag_probe(3, TAG_MASK_ALL).is_none(),
        "{tls}: refused send arrived"
    );
    // A large message that is here but not whole (its data still at the
    // sender) is not taken by an immediate receive; a plain one gets it.
    let data = pattern(big, 4);
    let sent = a.tag_send(ab, data.clone(), 4, Op::new()).expect("send");
    assert_eq!(until_probed(&mut a, &mut b, 4).length, big);
    let r = b.tag_recv(vec![0u8; big], 4, TAG_MASK_ALL, Op::new().immediate());
    assert!(
        is_no_resource(&r),
        "{tls}: receive of a rendezvous message {r:?}"
    );
    let got = match b
        .tag_recv(vec![0u8; big], 4, TAG_MASK_ALL, Op::new())
        .expect("recv")
    {
        Posted::Done(_, buf) => buf,
        Posted::InFlight(id) => {
            let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
            while b.request_is_active(id) {
                assert!(
                    std::time::Instant::now() < deadline,
                    "{tls}: rendezvous timed out"
                );
                a.progress();
                b.progress();
            }
            b.take::<Vec<u8>>(id).expect("done").expect("received").1
        }
    };
    assert!(got == data, "{tls}: rendezvous bytes differ");
    if let Posted::InFlight(id) = sent {
        progress_until(&mut a, 30, |a| !a.request_is_active(id));
    }
}

#[test]
fn tag_ops_self() {
    tag_ops("self");
}

#[test]
fn tag_ops_shm() {
    tag_ops("shm");
}

#[test]
fn tag_ops_tcp() {
    tag_ops("tcp");
}

fn stream_and_am(tls: &str) {
    let (mut a, mut b, ab, ba) = pair(tls);
    let r = b.stream_recv(ba, vec![0u8; 8], Op::new().immediate());
    assert!(is_no_resource(&r), "{tls}: stream receive of nothing {r:?}");
    // A stream send too large to leave at once is refused and takes no
    // room in the stream: the next bytes follow on without a gap.
    let r = a.stream_send(ab, pattern(4 << 20, 9), Op::new().immediate());
    assert!(is_no_resource(&r), "{tls}: large stream send {r:?}");
    a.stream_send_blocking(ab, &pattern(6, 5))
        .expect("stream send");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    // Six bytes: a receive of all 8 is refused and leaves them; one of
    // at least one byte takes them.
    loop {
        a.progress();
        b.progress();
        let r = b.stream_recv_all(ba, vec![0u8; 8], Op::new().immediate());
        assert!(
            is_no_resource(&r),
            "{tls}: stream_recv_all of 6 bytes {r:?}"
        );
        match b.stream_recv(ba, vec![0u8; 8], Op::new().immediate()) {
            Ok(Posted::Done(info, buf)) => {
                let mut have = buf[..info.length].to_vec();
                // The rest may come later, in order.
                while have.len() < 6 {
                    b.progress();
                    if let Ok(Posted::Done(i, rest)) =
                        b.stream_recv(ba, vec![0u8; 8], Op::new().immediate())
                    {
                        have.extend_from_slice(&rest[..i.length]);
                    }
                    assert!(std::time::Instant::now() < deadline);
                }
                assert_eq!(have, pattern(6, 5), "{tls}: stream bytes");
                break;
            }
            Err(Error::NoResource) => {}
            other => panic!("{tls}: stream receive {other:?}"),
        }
        assert!(
            std::time::Instant::now() < deadline,
            "{tls}: stream bytes never came"
        );
    }
    // Active messages: a small one at once, a rendezvous one refused.
    let s = a.am_send(ab, 3, b"", &pattern(16, 6), AmParams::new());
    assert!(matches!(s, Ok(Posted::Done(..))), "{tls}: small am {s:?}");
    let r = a.am_send_owned(
        ab,
        3,
        b"",
        pattern(64, 7),
        AmParams::new().rndv(),
        Op::new().immediate(),
    );
    assert!(is_no_resource(&r), "{tls}: rendezvous am {r:?}");
}

#[test]
fn stream_and_am_shm() {
    stream_and_am("shm");
}

#[test]
fn stream_and_am_tcp() {
    stream_and_am("tcp");
}

/// A put over tcp is carried later: refused, and the target's memory is
/// untouched; over shared memory the target's segment is mapped and the
/// put is done at once.
fn put(tls: &str, at_once: bool) {
    let (mut a, mut b, ab, _) = pair(tls);
    let ctx = context_vars(&[("RUCX_TLS", tls), ("RUCX_NET_DEVICES", "lo")]);
    let mem = ctx
        .mem_alloc(4096, Access::REMOTE_READ | Access::REMOTE_WRITE)
        .expect("mem_alloc");
    let rkey = a
        .rkey_unpack(ab, &mem.rkey_pack().expect("pack"))
        .expect("unpack");
    let data = pattern(64, 8);
    // SAFETY: an immediate put either copied the bytes or posted nothing;
    // either way nothing keeps the pointer.
    let r = unsafe {
        a.put_raw(
            ab,
            data.as_ptr(),
            data.len(),
            mem.addr(),
            &rkey,
            Op::new().immediate(),
        )
    };
    progress_for(&mut a, 20);
    progress_for(&mut b, 20);
    let mut got = vec![0u8; 64];
    mem.read(0, &mut got).expect("read");
    if at_once {
        assert!(matches!(r, Ok(Posted::Done(..))), "{tls}: put {r:?}");
        assert_eq!(got, data, "{tls}: put bytes");
    } else {
        assert!(is_no_resource(&r), "{tls}: put {r:?}");
        assert!(got.iter().all(|&x| x == 0), "{tls}: a refused put wrote");
    }
}

#[test]
fn put_tcp_is_refused() {
    put("tcp", false);
}

#[test]
fn put_shm_is_done_at_once() {
    put("shm", true);
}
