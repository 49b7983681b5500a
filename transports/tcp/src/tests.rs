//! Connection-level tests that look inside the iface: one connection per
//! pair of ifaces, however the endpoints were created.

use std::time::{Duration, Instant};

use uct::{AmId, AmSink, EpId, Error, Iface, IfaceParams, Posted, SrcId, Token};

use crate::config::TcpConfig;
use crate::iface::TcpIface;

mod alloc;
mod batch;
mod cork;
mod keepalive;
mod scale;

#[derive(Default)]
struct Rec {
    ams: Vec<(AmId, SrcId, u64)>,
    failed: usize,
    /// Messages to send, in order: (endpoint, id, number).
    outbox: std::collections::VecDeque<(EpId, AmId, u64)>,
    /// Endpoints whose sends wait in the iface's pending queue.
    waiting: std::collections::HashSet<EpId>,
}

impl Rec {
    /// Sends what the outbox holds, in order per endpoint; a send the
    /// iface cannot take yet (connection not open, backlog full) waits in
    /// its pending queue until `pending_ready`.
    fn pump(&mut self, i: &mut TcpIface) {
        let mut k = 0;
        let mut blocked = std::collections::HashSet::new();
        while k < self.outbox.len() {
            let (e, id, n) = self.outbox[k];
            if blocked.contains(&e) || self.waiting.contains(&e) {
                blocked.insert(e);
                k += 1;
                continue;
            }
            match i.am().unwrap().am_short(e, id, n, &[]).unwrap() {
                Posted::Done => {
                    self.outbox.remove(k);
                }
                Posted::NoResource => {
                    i.pending_add(e, Token(e.0 as u64)).unwrap();
                    self.waiting.insert(e);
                    blocked.insert(e);
                    k += 1;
                }
                p => panic!("am_short: {p:?}"),
            }
        }
    }
}

impl AmSink for Rec {
    fn am(&mut self, id: AmId, src: SrcId, data: &[u8]) {
        let h = u64::from_le_bytes(data[..8].try_into().unwrap());
        self.ams.push((id, src, h));
    }
    fn completed(&mut self, _: Token, r: uct::Result<()>) {
        r.unwrap();
    }
    fn pending_ready(&mut self, ep: EpId, _: Token) {
        self.waiting.remove(&ep);
    }
    fn ep_failed(&mut self, _: EpId, _: Error) {
        self.failed += 1;
    }
    fn src_failed(&mut self, _: SrcId, _: Error) {
        self.failed += 1;
    }
}

fn open() -> TcpIface {
    TcpIface::open("lo", &IfaceParams::default(), &TcpConfig::default()).unwrap()
}

fn ep(from: &mut TcpIface, to: &TcpIface) -> EpId {
    from.ep_create(to.device_addr(), to.iface_addr()).unwrap()
}

fn drive(
    ifaces: &mut [(&mut TcpIface, &mut Rec)],
    done: impl Fn(&[(&mut TcpIface, &mut Rec)]) -> bool,
) {
    let start = Instant::now();
    while !done(ifaces) {
        for (i, s) in ifaces.iter_mut() {
            i.progress(*s);
            s.pump(i);
        }
        assert!(start.elapsed() < Duration::from_secs(20), "stuck");
    }
}

/// Sends `n` numbered messages from an endpoint: at once where its
/// connection is open, otherwise through the pending queue while the
/// connection settles (as the protocol layer does).
fn send(i: &mut TcpIface, r: &mut Rec, e: EpId, id: AmId, n: u64) {
    r.outbox.extend((0..n).map(|k| (e, id, k)));
    r.pump(i);
}

/// Two ifaces with an endpoint `a → b` whose connection is open: a first
/// message (id 1) arrived.
fn connected() -> (TcpIface, TcpIface, Rec, Rec, EpId) {
    let (mut a, mut b) = (open(), open());
    let (mut ra, mut rb) = (Rec::default(), Rec::default());
    let ab = ep(&mut a, &b);
    send(&mut a, &mut ra, ab, 1, 1);
    drive(&mut [(&mut a, &mut ra), (&mut b, &mut rb)], |x| {
        x[1].1.ams.len() == 1
    });
    (a, b, ra, rb, ab)
}

fn in_order(r: &Rec, id: AmId, n: u64) {
    let got: Vec<u64> = r.ams.iter().filter(|m| m.0 == id).map(|m| m.2).collect();
    assert_eq!(got, (0..n).collect::<Vec<_>>());
    let srcs: std::collections::HashSet<_> = r.ams.iter().map(|m| m.1).collect();
    assert_eq!(srcs.len(), 1, "all from one source");
}

#[test]
fn simultaneous_connects_settle_on_one_connection() {
    for _ in 0..5 {
        let (mut a, mut b) = (open(), open());
        let (mut ra, mut rb) = (Rec::default(), Rec::default());
        let ab = ep(&mut a, &b);
        let ba = ep(&mut b, &a);
        let ab2 = ep(&mut a, &b);
        assert_eq!((a.conns.len(), b.conns.len()), (1, 1));
        send(&mut a, &mut ra, ab, 1, 50);
        send(&mut b, &mut rb, ba, 2, 50);
        send(&mut a, &mut ra, ab2, 3, 50);
        drive(&mut [(&mut a, &mut ra), (&mut b, &mut rb)], |x| {
            x[0].1.ams.len() == 50 && x[1].1.ams.len() == 100
        });
        in_order(&rb, 1, 50);
        in_order(&rb, 3, 50);
        in_order(&ra, 2, 50);
        // The losing connection is gone on both sides.
        drive(&mut [(&mut a, &mut ra), (&mut b, &mut rb)], |x| {
            x[0].0.conns.len() == 1 && x[1].0.conns.len() == 1
        });
        assert_eq!(a.unopened + b.unopened, 0);
        assert_eq!((ra.failed, rb.failed), (0, 0));
        // Later endpoints reuse it.
        let ba2 = ep(&mut b, &a);
        assert_eq!(b.conns.len(), 1);
        send(&mut b, &mut rb, ba2, 4, 3);
        drive(&mut [(&mut a, &mut ra), (&mut b, &mut rb)], |x| {
            x[0].1.ams.len() == 53
        });
        assert_eq!(ra.ams[50].1, ra.ams[0].1);
    }
}

/// Nothing is held for a connection that a peer in another process has
/// not accepted: the send waits in the pending queue and is handed back
/// once the connection opens, so that a send reported done is already in
/// the kernel. To an iface of this process it is buffered at once.
#[test]
fn a_send_to_another_process_waits_for_the_connection_to_open() {
    let (mut a, mut b) = (open(), open());
    let (mut ra, mut rb) = (Rec::default(), Rec::default());
    let ab = ep(&mut a, &b);
    let posted = a.am().unwrap().am_short(ab, 1, 0, &[]).unwrap();
    assert_eq!(posted, Posted::Done, "b is in this process");
    drive(&mut [(&mut a, &mut ra), (&mut b, &mut rb)], |x| {
        x[1].1.ams.len() == 1
    });
    let mut c = open();
    let mut rc = Rec::default();
    c.local_key.forget();
    let ac = ep(&mut a, &c);
    let posted = a.am().unwrap().am_short(ac, 1, 0, &[]).unwrap();
    assert_eq!(posted, Posted::NoResource);
    a.pending_add(ac, Token(7)).unwrap();
    ra.waiting.insert(ac);
    drive(&mut [(&mut a, &mut ra), (&mut c, &mut rc)], |x| {
        x[0].1.waiting.is_empty()
    });
    let ci = a.eps.get(ac.0).unwrap().conn.unwrap();
    assert!(a.conns.get(ci).unwrap().is_open());
    assert_eq!(
        a.am().unwrap().am_short(ac, 1, 0, &[]).unwrap(),
        Posted::Done
    );
    drive(&mut [(&mut a, &mut ra), (&mut c, &mut rc)], |x| {
        x[1].1.ams.len() == 1
    });
}

#[test]
fn accepted_connection_carries_the_reply() {
    let (mut a, mut b, mut ra, mut rb, _ab) = connected();
    let ba = ep(&mut b, &a);
    assert_eq!(b.conns.len(), 1, "no new connection");
    assert!(b
        .conns
        .get(b.eps.get(ba.0).unwrap().conn.unwrap())
        .unwrap()
        .is_open());
    send(&mut b, &mut rb, ba, 2, 1);
    drive(&mut [(&mut a, &mut ra), (&mut b, &mut rb)], |x| {
        x[0].1.ams.len() == 1
    });
    assert_eq!(a.conns.len(), 1);
}

#[test]
fn three_ifaces_all_to_all() {
    let mut ifs = [open(), open(), open()];
    let mut recs = [Rec::default(), Rec::default(), Rec::default()];
    let mut eps = Vec::new();
    for i in 0..3 {
        for j in 0..3 {
            if i != j {
                let (x, y) = if i < j {
                    let (l, r) = ifs.split_at_mut(j);
                    (&mut l[i], &r[0])
                } else {
                    let (l, r) = ifs.split_at_mut(i);
                    (&mut r[0], &l[j])
                };
                eps.push((i, ep(x, y), (10 * i + j) as AmId));
            }
        }
    }
    for &(i, e, id) in &eps {
        send(&mut ifs[i], &mut recs[i], e, id, 20);
    }
    let start = Instant::now();
    while recs.iter().map(|r| r.ams.len()).sum::<usize>() < 120 {
        for (i, r) in ifs.iter_mut().zip(recs.iter_mut()) {
            i.progress(r);
            r.pump(i);
        }
        assert!(start.elapsed() < Duration::from_secs(20), "stuck");
    }
    for (k, r) in recs.iter().enumerate() {
        for &(i, _, id) in &eps {
            if id as usize % 10 == k {
                let got: Vec<u64> = r.ams.iter().filter(|m| m.0 == id).map(|m| m.2).collect();
                assert_eq!(got, (0..20).collect::<Vec<_>>(), "from {i}");
            }
        }
    }
    for (i, r) in ifs.iter_mut().zip(recs.iter_mut()) {
        let start = Instant::now();
        while i.conns.len() != 2 {
            i.progress(r);
            assert!(start.elapsed() < Duration::from_secs(20), "stuck");
        }
        assert_eq!(r.failed, 0);
    }
}

#[test]
fn endpoint_to_itself_uses_a_loopback_pair() {
    let mut a = open();
    let mut ra = Rec::default();
    let (dev, addr) = (a.device_addr().to_vec(), a.iface_addr().to_vec());
    let e1 = a.ep_create(&dev, &addr).unwrap();
    let e2 = a.ep_create(&dev, &addr).unwrap();
    send(&mut a, &mut ra, e1, 1, 3);
    send(&mut a, &mut ra, e2, 2, 3);
    let start = Instant::now();
    while ra.ams.len() < 6 {
        a.progress(&mut ra);
        ra.pump(&mut a);
        assert!(start.elapsed() < Duration::from_secs(20), "stuck");
    }
    assert_eq!(a.conns.len(), 2, "the connecting end and the accepted end");
    in_order(&ra, 1, 3);
}

#[test]
fn a_peer_of_this_host_loops_back_from_any_device() {
    let a = open();
    let b = open();
    assert!(a.loops_back(b.device_addr()));
    // The same address from another host (or network namespace).
    let mut other = b.device_addr().to_vec();
    // The host id is the last 8 bytes.
    let last = other.len() - 1;
    other[last] ^= 1;
    assert!(!a.loops_back(&other));
    assert!(!a.loops_back(&other[..4]), "malformed");
}
