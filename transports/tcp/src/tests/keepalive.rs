//! Every connection, opened or accepted, gets the keepalive and user
//! timeout of the configuration (read back with `getsockopt`).

use uct::ucs::sock::Keepalive;
use uct::IfaceParams;

use super::{drive, ep, send, Rec};
use crate::config::TcpConfig;
use crate::iface::TcpIface;

fn config(vars: &[(&str, &str)]) -> TcpConfig {
    TcpConfig::from_lookup(|k| {
        vars.iter()
            .find(|(name, _)| *name == k)
            .map(|(_, v)| v.to_string())
    })
    .unwrap()
}

/// The options of every connection socket of `i`.
fn options(i: &TcpIface) -> Vec<Keepalive> {
    // Slots are reused from the lowest index: a few cover these tests.
    (0..16)
        .filter_map(|ci| i.conns.get(ci))
        .filter_map(|c| c.fd())
        .map(|fd| Keepalive::of(fd).unwrap())
        .collect()
}

/// Connects `a` to `b` and waits until a message went through, so that
/// both ends of the connection exist.
fn connected(cfg: &TcpConfig) -> (TcpIface, TcpIface) {
    let p = IfaceParams::default();
    let mut a = TcpIface::open("lo", &p, cfg).unwrap();
    let mut b = TcpIface::open("lo", &p, cfg).unwrap();
    let (mut ra, mut rb) = (Rec::default(), Rec::default());
    let e = ep(&mut a, &b);
    send(&mut a, &mut ra, e, 1, 1);
    drive(&mut [(&mut a, &mut ra), (&mut b, &mut rb)], |x| {
        x[1].1.ams.len() == 1
    });
    (a, b)
}

#[test]
fn connections_get_the_configured_options() {
    let cfg = config(&[
        ("RUCX_TCP_KEEPIDLE", "7s"),
        ("RUCX_TCP_KEEPINTVL", "3s"),
        ("RUCX_TCP_KEEPCNT", "5"),
        ("RUCX_TCP_USER_TIMEOUT", "1500ms"),
    ]);
    let (a, b) = connected(&cfg);
    let want = Keepalive {
        idle: Some(7),
        intvl: 3,
        cnt: 5,
        user_timeout_ms: Some(1500),
    };
    let (oa, ob) = (options(&a), options(&b));
    assert_eq!(oa.len(), 1, "the connecting end");
    assert_eq!(ob.len(), 1, "the accepted end");
    for o in oa.iter().chain(&ob) {
        assert_eq!(*o, want);
    }
}

#[test]
fn defaults_and_off() {
    let (a, _b) = connected(&TcpConfig::default());
    let o = options(&a)[0];
    assert_eq!((o.idle, o.intvl, o.cnt), (Some(10), 2, 3));
    assert_eq!(o.user_timeout_ms, Some(30_000));
    let cfg = config(&[
        ("RUCX_TCP_KEEPIDLE", "inf"),
        ("RUCX_TCP_USER_TIMEOUT", "off"),
    ]);
    let (a, b) = connected(&cfg);
    for o in options(&a).iter().chain(&options(&b)) {
        assert_eq!(o.idle, None, "no keepalive");
        assert_eq!(o.user_timeout_ms, None, "no user timeout");
    }
}
