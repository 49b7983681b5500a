//! A misbehaving RC peer — a raw queue pair that connects with a valid
//! handshake, then breaks the credit protocol or sends malformed
//! messages — fails its own connection only: the hub's other connection
//! goes on.

mod common;
mod star;

/// The RC transport over userspace iWARP on `lo`.
fn fixture() -> uct::testing::ComponentFixture {
    uct::testing::ComponentFixture::new(&rucx_iwarp::COMPONENT, "iwarp_lo")
}

use common::{device, established, listen, Node};
use rucx_rdma::rc::wire::{header, ConnReq, GRANT};
use rucx_rdma::{Access, CmEvent, ConnParam, RecvWr, SendFlags, SendOp, SendWr, Sge};

/// A raw peer connected to the hub's RC iface.
fn rogue(s: &mut star::Star) -> (Node, Vec<u8>) {
    let mut r = Node::new(device(&[]));
    let rx = vec![0u8; 8 * 64];
    // SAFETY: `rx` is returned to the caller, which keeps it until the
    // context is done with it; nothing else touches it meanwhile.
    let mr = unsafe {
        r.dev
            .reg_mr(r.pd, rx.as_ptr() as *mut u8, rx.len(), Access::LOCAL_WRITE)
            .unwrap()
    };
    for i in 0..8u64 {
        let sge = [Sge {
            addr: rx.as_ptr() as u64 + 64 * i,
            len: 64,
            lkey: mr.lkey,
        }];
        // SAFETY: as above.
        unsafe {
            r.ctx.post_recv(
                r.qp,
                &RecvWr {
                    wr_id: i,
                    sges: &sge,
                },
            )
        }
        .unwrap();
    }
    let me = listen(&mut r);
    let hub = uct::ip_addr::unpack(s.hub.device_addr(), s.hub.iface_addr()).unwrap();
    let req = ConnReq {
        seg: 8192,
        uuid: 7,
        credits: 2,
        posted: 2,
        listen: me,
        max_window: 64,
    };
    let param = ConnParam {
        private_data: req.encode(),
        ord: 1,
        ird: 1,
    };
    r.ctx.connect(r.qp, hub.addr, &param).unwrap();
    let start = std::time::Instant::now();
    while established(&r).is_none() {
        s.progress();
        r.poll();
        assert!(start.elapsed() < star::DEADLINE, "{:?}", r.cm);
    }
    (r, rx)
}

fn send(r: &mut Node, bytes: &[u8]) {
    let sge = [Sge {
        addr: bytes.as_ptr() as u64,
        len: bytes.len() as u32,
        lkey: 0,
    }];
    let wr = SendWr {
        wr_id: 1,
        op: SendOp::Send,
        sges: &sge,
        flags: SendFlags::INLINE | SendFlags::SIGNALED,
    };
    // SAFETY: inline: copied at post time.
    unsafe { r.ctx.post_send(r.qp, &wr) }.unwrap();
}

/// An active message with credit field `field`.
fn am(field: u16) -> Vec<u8> {
    let mut m = header(1, field).to_vec();
    m.extend_from_slice(&7u64.to_le_bytes());
    m
}

/// Sends `msgs` from a fresh rogue; the hub must end that connection
/// while its connection to the good peer keeps working.
fn fails_alone(what: &str, msgs: &[Vec<u8>]) {
    let f = fixture();
    let mut s = star::Star::open(&f, 1);
    let ep = s.exchange(1)[0];
    let (mut r, _rx) = rogue(&mut s);
    for m in msgs {
        send(&mut r, m);
    }
    let start = std::time::Instant::now();
    while !r
        .cm
        .iter()
        .any(|e| matches!(e, CmEvent::Disconnected { .. }))
    {
        s.progress();
        r.poll();
        assert!(start.elapsed() < star::DEADLINE, "{what}: not disconnected");
    }
    // The good peer's connection is untouched.
    let before = s.hub_sink.ams.len();
    s.short(Some(0), ep, 3, 42);
    s.drive_until("the good peer's message", |s| {
        s.hub_sink.ams[before..].iter().any(|a| a.id == 3)
    });
    assert_eq!(s.failures(Some(0)), 0, "{what}");
    let back = s.hub_ep(0).unwrap();
    s.short(None, back, 4, 0);
    s.drive_until("an answer", |s| s.sinks[0].ams.iter().any(|a| a.id == 4));
    assert!(s.hub_sink.ams.len() - before <= msgs.len() + 1, "{what}");
}

#[test]
fn a_send_beyond_the_window_fails_that_connection() {
    // A window of 2; the hub grants once after two, then has no grant
    // left until acknowledged: the fifth unacknowledged message is over.
    fails_alone("over the window", &vec![am(0); 5]);
}

#[test]
fn returning_more_credits_than_granted_fails_that_connection() {
    fails_alone("too many credits", &[am(100)]);
}

#[test]
fn malformed_messages_fail_that_connection() {
    fails_alone("short message", &[vec![1, 0]]);
    fails_alone("unknown id", &[header(0xfe, 0).to_vec()]);
    fails_alone(
        "two grants",
        &[header(GRANT, 0).to_vec(), header(GRANT, 0).to_vec()],
    );
    fails_alone("stray acknowledgement", &[am(1 << 15)]);
}

/// The control of the tests above: four messages fit (two, a grant,
/// two more), and the connection stays.
#[test]
fn a_peer_within_its_window_stays_connected() {
    let f = fixture();
    let mut s = star::Star::open(&f, 1);
    s.exchange(1);
    let (mut r, _rx) = rogue(&mut s);
    for _ in 0..4 {
        send(&mut r, &am(0));
    }
    let start = std::time::Instant::now();
    while s.hub_sink.ams.len() < 5 {
        s.progress();
        r.poll();
        assert!(start.elapsed() < star::DEADLINE, "messages not delivered");
    }
    for _ in 0..200 {
        s.progress();
        r.poll();
    }
    assert!(!r
        .cm
        .iter()
        .any(|e| matches!(e, CmEvent::Disconnected { .. })));
    assert_eq!(s.failures(None), 0);
    // The hub returned two credits in a grant.
    let grants = r
        .wcs
        .iter()
        .filter(|w| w.opcode == rucx_rdma::WcOpcode::Recv)
        .count();
    assert_eq!(grants, 1);
}
