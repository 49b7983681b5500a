use super::*;

const V4: AddrFamily = AddrFamily::Inet;
const V6: AddrFamily = AddrFamily::Inet6;

fn ip(s: &str) -> IpAddr {
    s.parse().unwrap()
}

fn local(host_id: u64, loopback: bool, family: AddrFamily) -> Local {
    Local {
        host_id,
        loopback,
        family,
    }
}

#[test]
fn round_trip_both_families() {
    let dev = pack_dev(ip("10.1.2.3"), 0x1122_3344_5566_7788);
    let iface = pack_iface(4000);
    assert_eq!(dev.len(), DEV_ADDR_V4_LEN);
    assert_eq!(&dev[..5], &[FAMILY_V4, 10, 1, 2, 3]);
    assert_eq!(iface, [0x0f, 0xa0]);
    let r = unpack(&dev, &iface).unwrap();
    assert_eq!(r.addr, "10.1.2.3:4000".parse().unwrap());
    assert_eq!(r.host_id, 0x1122_3344_5566_7788);

    let dev = pack_dev(ip("fd00::2"), 9);
    assert_eq!(dev.len(), DEV_ADDR_V6_LEN);
    assert_eq!(dev[0], FAMILY_V6);
    let r = unpack(&dev, &iface).unwrap();
    assert_eq!(r.addr, "[fd00::2]:4000".parse().unwrap());
    assert_eq!(r.host_id, 9);
    assert_eq!(unpack_dev(&pack_dev(ip("::1"), 3)), Some((ip("::1"), 3)));
}

#[test]
fn malformed_devices_decode_to_none() {
    let v4 = pack_dev(ip("10.0.0.1"), 7);
    let v6 = pack_dev(ip("fd00::1"), 7);
    assert_eq!(unpack_dev(&[]), None);
    assert_eq!(unpack_dev(&v4[..12]), None, "the pre-family 12-byte layout");
    assert_eq!(unpack_dev(&v6[..24]), None);
    let mut longer = v4.clone();
    longer.push(0);
    assert_eq!(unpack_dev(&longer), None);
    // A family byte that disagrees with the length, or an unknown one.
    let mut swapped = v4.clone();
    swapped[0] = FAMILY_V6;
    assert_eq!(unpack_dev(&swapped), None);
    let mut swapped = v6.clone();
    swapped[0] = FAMILY_V4;
    assert_eq!(unpack_dev(&swapped), None);
    for f in [0u8, 5, 10, 255] {
        let mut bad = v4.clone();
        bad[0] = f;
        assert_eq!(unpack_dev(&bad), None, "family {f}");
        let mut bad = v6.clone();
        bad[0] = f;
        assert_eq!(unpack_dev(&bad), None, "family {f}");
    }
    // Every length up to the longest, every family byte: no panic.
    for len in 0..=DEV_ADDR_V6_LEN + 1 {
        for f in 0..=u8::MAX {
            let mut b = vec![0xa5; len];
            if let Some(first) = b.first_mut() {
                *first = f;
            }
            let ok = unpack_dev(&b).is_some();
            let want = (f == FAMILY_V4 && len == DEV_ADDR_V4_LEN)
                || (f == FAMILY_V6 && len == DEV_ADDR_V6_LEN);
            assert_eq!(ok, want, "family {f} length {len}");
        }
    }
}

#[test]
fn same_host_is_by_host_id_whatever_the_address() {
    let me = local(7, false, V4);
    let net = ip("192.0.2.9");
    assert!(me.same_host(&pack_dev(ip("127.0.0.1"), 7)));
    assert!(me.same_host(&pack_dev(net, 7)));
    assert!(me.same_host(&pack_dev(ip("::1"), 7)));
    assert!(
        !me.same_host(&pack_dev(net, 8)),
        "another namespace or host"
    );
    assert!(!me.same_host(&pack_dev(net, 7)[..12]), "malformed");
    assert!(!me.same_host(&[]));
}

#[test]
fn malformed_is_unreachable() {
    let me = local(7, false, V4);
    let dev = pack_dev(ip("10.0.0.1"), 7);
    assert!(me.is_reachable(&dev, &pack_iface(1)));
    assert!(!me.is_reachable(&dev[..12], &pack_iface(1)));
    assert!(!me.is_reachable(&dev, &[1]));
    assert!(!me.is_reachable(&dev, &[1, 2, 3]));
    assert!(!me.is_reachable(&dev, &pack_iface(0)));
    assert!(!me.is_reachable(&[], &[]));
    for a in ["0.0.0.0", "255.255.255.255", "224.0.0.1"] {
        assert!(!me.is_reachable(&pack_dev(ip(a), 7), &pack_iface(1)), "{a}");
    }
    let me6 = local(7, false, V6);
    assert!(me6.is_reachable(&pack_dev(ip("fd00::1"), 7), &pack_iface(1)));
    for a in ["::", "ff02::1", "fe80::1", "::ffff:10.0.0.1"] {
        assert!(
            !me6.is_reachable(&pack_dev(ip(a), 7), &pack_iface(1)),
            "{a}"
        );
    }
}

#[test]
fn families_never_mix() {
    let port = pack_iface(5000);
    for loopback in [false, true] {
        let four = local(1, loopback, V4);
        let six = local(1, loopback, V6);
        for a in ["::1", "fd00::2"] {
            assert!(!four.is_reachable(&pack_dev(ip(a), 1), &port), "{a}");
        }
        for a in ["127.0.0.1", "10.0.0.2"] {
            assert!(!six.is_reachable(&pack_dev(ip(a), 1), &port), "{a}");
        }
    }
}

#[test]
fn loopback_rules() {
    for (lo, net, family) in [("127.0.0.1", "192.0.2.9", V4), ("::1", "2001:db8::9", V6)] {
        let (lo, net) = (ip(lo), ip(net));
        let port = pack_iface(5000);
        let on_lo = local(1, true, family);
        let on_net = local(1, false, family);
        // Loopback remote: loopback iface on the same host only.
        assert!(on_lo.is_reachable(&pack_dev(lo, 1), &port));
        assert!(!on_lo.is_reachable(&pack_dev(lo, 2), &port));
        assert!(!on_net.is_reachable(&pack_dev(lo, 1), &port));
        // Network remote: any network iface; a loopback iface on this host.
        assert!(on_net.is_reachable(&pack_dev(net, 2), &port));
        assert!(on_lo.is_reachable(&pack_dev(net, 1), &port));
        assert!(!on_lo.is_reachable(&pack_dev(net, 2), &port));
    }
}
