//! Attributes and addresses.

use super::{kinds, send, Sent};
use crate::testing::{Fixture, Pair};
use crate::{Caps, ConnectMode, EpId, Iov, Posted, Token};

/// Capabilities agree with limits, with the event fd and with what the
/// operations do; names and performance model are sane.
pub fn caps_consistent(f: &dyn Fixture) {
    let mut p = Pair::open(f);
    let name = p.name().to_owned();
    let attr = p.a().attr().clone();
    let caps = attr.caps;
    assert!(!p.a().tl_name().is_empty(), "{name}: empty tl_name");
    assert!(!p.a().dev_name().is_empty(), "{name}: empty dev_name");
    assert_eq!(
        p.b().attr().caps,
        caps,
        "{name}: two ifaces of one resource differ"
    );
    assert!(
        caps.contains(Caps::CONNECT_TO_IFACE) && attr.connect == ConnectMode::ToIface,
        "{name}: endpoints must connect to an iface address"
    );
    if caps.contains(Caps::AM_SHORT) {
        assert!(attr.max_short > 0, "{name}: AM_SHORT with max_short 0");
    }
    if caps.contains(Caps::AM_BCOPY) {
        assert!(attr.max_bcopy > 0, "{name}: AM_BCOPY with max_bcopy 0");
    }
    if caps.contains(Caps::AM_ZCOPY) {
        assert!(attr.max_zcopy > 0, "{name}: AM_ZCOPY with max_zcopy 0");
        assert!(attr.max_iov > 0, "{name}: AM_ZCOPY with max_iov 0");
    }
    assert!(
        !kinds(caps).is_empty(),
        "{name}: no active message operation"
    );
    if caps.contains(Caps::EVENT_FD) {
        assert!(p.a().event_fd().is_some(), "{name}: EVENT_FD without an fd");
    }
    let m = attr.model;
    assert!(
        m.latency.is_finite() && m.latency >= 0.0,
        "{name}: latency {}",
        m.latency
    );
    assert!(
        m.overhead.is_finite() && m.overhead >= 0.0,
        "{name}: overhead {}",
        m.overhead
    );
    assert!(
        m.bandwidth.is_finite() && m.bandwidth > 0.0,
        "{name}: bandwidth {}",
        m.bandwidth
    );

    // The operation bits are the ones the families and limits give.
    assert_eq!(
        caps & Caps::OPS,
        crate::op_caps(p.a()),
        "{name}: operation bits differ from the implemented families"
    );
    assert!(caps.contains(Caps::PENDING), "{name}: no PENDING");

    // What is not advertised is refused, not half-done: a family that is
    // implemented but has a limit of 0 refuses a single byte.
    let ep = p.ep_ab();
    let buf = [0u8; 1];
    if let Some(am) = p.a().am() {
        if !caps.contains(Caps::AM_SHORT) {
            assert!(
                am.am_short(ep, 0, 0, &buf).is_err(),
                "{name}: am_short without AM_SHORT"
            );
        }
        if !caps.contains(Caps::AM_BCOPY) {
            assert!(
                am.am_bcopy(ep, 0, &[&buf]).is_err(),
                "{name}: am_bcopy without AM_BCOPY"
            );
        }
    }
    if let Some(zc) = p.a().zcopy().filter(|_| !caps.contains(Caps::AM_ZCOPY)) {
        let iov = [Iov::from_slice(&buf)];
        // SAFETY: `buf` outlives the call; an op that is not offered must
        // not keep the range.
        let r = unsafe { zc.am_zcopy(ep, 0, &[], &iov, Token(1)) };
        assert!(r.is_err(), "{name}: am_zcopy without AM_ZCOPY");
    }
}

/// Own addresses are reachable; empty, truncated and garbage addresses are
/// not, and `ep_create` on them is an error; the iface works afterwards.
pub fn reachability(f: &dyn Fixture) {
    let mut p = Pair::open(f);
    let name = p.name().to_owned();
    let dev = p.b().device_addr().to_vec();
    let iface = p.b().iface_addr().to_vec();
    assert!(
        p.a().is_reachable(&dev, &iface),
        "{name}: b unreachable from a"
    );
    let (dev_a, iface_a) = (p.a().device_addr().to_vec(), p.a().iface_addr().to_vec());
    assert!(
        p.b().is_reachable(&dev_a, &iface_a),
        "{name}: a unreachable from b"
    );

    let mut bad: Vec<(&str, Vec<u8>, Vec<u8>)> = vec![("both empty", vec![], vec![])];
    if !dev.is_empty() {
        bad.push(("empty device address", vec![], iface.clone()));
        bad.push((
            "device address short by one",
            dev[..dev.len() - 1].to_vec(),
            iface.clone(),
        ));
    }
    if dev.len() > 2 {
        bad.push((
            "device address of one byte",
            dev[..1].to_vec(),
            iface.clone(),
        ));
    }
    if !iface.is_empty() {
        bad.push(("empty iface address", dev.clone(), vec![]));
        bad.push((
            "iface address short by one",
            dev.clone(),
            iface[..iface.len() - 1].to_vec(),
        ));
    }
    if iface.len() > 2 {
        bad.push((
            "iface address of one byte",
            dev.clone(),
            iface[..1].to_vec(),
        ));
    }
    for (what, d, i) in &bad {
        assert!(!p.a().is_reachable(d, i), "{name}: {what} is reachable");
        if let Ok(EpId(n)) = p.a().ep_create(d, i) {
            panic!("{name}: ep_create on {what} gave endpoint {n}");
        }
    }
    // Random bytes of every length up to 64: whatever the answer, no panic.
    for len in 0..=64usize {
        let d = super::pattern(len as u64 + 1, len);
        let i = super::pattern(len as u64 + 1000, len);
        let _ = p.a().is_reachable(&d, &i);
        let _ = p.a().is_reachable(&dev, &i);
        let _ = p.a().is_reachable(&d, &iface);
    }

    // Still works.
    let ep = p.ep_ab();
    let kind = kinds(p.a().attr().caps)[0];
    let mut sent = Sent::default();
    let (posted, data) = send(&mut p, ep, kind, 7, 16, false);
    let (id, data) = data.expect("posted");
    sent.record(posted, crate::Token(7), id, data);
    assert_ne!(posted, Posted::NoResource);
    super::expect_delivered(&mut p, &sent, "message after bad addresses");
}
