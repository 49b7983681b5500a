//! The protocol selection table drives the send path; user thresholds
//! move the switches and every size still arrives intact.

mod common;

use common::*;
use rucx::ucp::proto::select::ProtocolId;
use rucx::ucp::UcpConfig;
use rucx::Context;
use rucx::{Op, Posted, Worker, TAG_MASK_ALL};

fn context_with(tls: &str, vars: &[(&str, &str)]) -> Context {
    let cfg = UcpConfig::from_lookup(|k| {
        if k == "RUCX_TLS" {
            return Some(tls.to_string());
        }
        vars.iter()
            .find(|(n, _)| format!("RUCX_{n}") == k)
            .map(|(_, v)| v.to_string())
    })
    .expect("config");
    Context::with_config(cfg).expect("context")
}

const SIZES: [usize; 9] = [0, 1, 100, 8184, 8185, 65536, 70000, 1 << 20, (1 << 20) + 1];

fn round_trips(a: &mut Worker, b: &mut Worker, ep: rucx::Ep) {
    for (i, &size) in SIZES.iter().enumerate() {
        let out = pattern(size, i as u64 + 50);
        for sync in [false, true] {
            let op = if sync { Op::new().sync() } else { Op::new() };
            let tag = i as u64 * 2 + u64::from(sync);
            let r = match b.tag_recv(vec![0u8; size], tag, TAG_MASK_ALL, Op::new()) {
                Ok(Posted::InFlight(id)) => id,
                other => panic!("recv: {other:?}"),
            };
            let s = a.tag_send(ep, out.clone(), tag, op).expect("send");
            let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
            while b.request_is_active(r)
                || matches!(s, Posted::InFlight(id) if a.request_is_active(id))
            {
                assert!(
                    std::time::Instant::now() < deadline,
                    "size {size} timed out"
                );
                a.progress();
                b.progress();
            }
            let (info, got) = b.take::<Vec<u8>>(r).expect("done").expect("recv ok");
            assert_eq!(info.length, size);
            assert!(got == out, "size {size} (sync {sync}) corrupted");
        }
    }
}

fn pair(ctx: &Context) -> (Worker, Worker, rucx::Ep) {
    let mut a = ctx.create_worker().expect("worker");
    let b = ctx.create_worker().expect("worker");
    let ep = a.connect(&b.address()).expect("connect");
    (a, b, ep)
}

#[test]
fn default_table_over_tcp() {
    let ctx = context_with("tcp", &[]);
    let (mut a, mut b, ep) = pair(&ctx);
    let tables = a.ep_protocols(ep).expect("tables");
    assert_eq!(tables[0].lookup(8).proto, ProtocolId::EagerShort);
    assert_eq!(tables[0].lookup(0).proto, ProtocolId::EagerShort);
    round_trips(&mut a, &mut b, ep);
}

#[test]
fn forced_copy_everywhere() {
    // Zero-copy never (eager, and no rendezvous); copy from 1 byte on
    // (inline only for 0 bytes).
    let ctx = context_with(
        "tcp",
        &[
            ("ZCOPY_THRESH", "inf"),
            ("BCOPY_THRESH", "1"),
            ("RNDV_THRESH", "inf"),
        ],
    );
    let (mut a, mut b, ep) = pair(&ctx);
    let t = &a.ep_protocols(ep).expect("tables")[0];
    assert_eq!(t.lookup(8).proto, ProtocolId::EagerBcopySingle);
    assert_eq!(t.lookup(1 << 20).proto, ProtocolId::EagerBcopyMulti);
    round_trips(&mut a, &mut b, ep);
}

#[test]
fn forced_zero_copy_from_one_byte() {
    let ctx = context_with("self", &[("ZCOPY_THRESH", "1")]);
    let (mut a, mut b, ep) = pair(&ctx);
    let t = &a.ep_protocols(ep).expect("tables")[0];
    assert_eq!(t.lookup(1).proto, ProtocolId::EagerZcopySingle);
    assert_eq!(t.lookup(0).proto, ProtocolId::EagerShort);
    round_trips(&mut a, &mut b, ep);
}

#[test]
fn bad_threshold_is_a_config_error() {
    let cfg = UcpConfig::from_lookup(|k| (k == "RUCX_RNDV_SCHEME").then(|| "fastest".into()));
    assert!(cfg.is_err());
    let cfg = UcpConfig::from_lookup(|k| (k == "RUCX_ZCOPY_THRESH").then(|| "12q".into()));
    assert!(cfg.is_err());
}

#[test]
fn forced_rendezvous_over_tcp_and_self() {
    for tls in ["tcp", "self"] {
        let ctx = context_with(tls, &[("RNDV_THRESH", "8185")]);
        let (mut a, mut b, ep) = pair(&ctx);
        let t = &a.ep_protocols(ep).expect("tables")[0];
        let want = if tls == "self" {
            // self registers memory and offers get: the receiver reads.
            ProtocolId::RndvGetZcopy
        } else {
            ProtocolId::RndvAm
        };
        assert_eq!(t.lookup(8185).proto, want, "{tls}");
        assert_eq!(t.lookup(8184).proto, ProtocolId::EagerShort, "{tls}");
        round_trips(&mut a, &mut b, ep);
    }
}

#[test]
fn every_rendezvous_scheme_over_self() {
    for (scheme, want) in [
        ("put_zcopy", ProtocolId::RndvPutZcopy),
        ("get_zcopy", ProtocolId::RndvGetZcopy),
        ("am", ProtocolId::RndvAm),
    ] {
        let ctx = context_with(
            "self",
            &[
                ("RNDV_THRESH", "8185"),
                ("RNDV_SCHEME", scheme),
                ("RNDV_FRAG_SIZE", "64k"),
            ],
        );
        let (mut a, mut b, ep) = pair(&ctx);
        let t = &a.ep_protocols(ep).expect("tables")[0];
        assert_eq!(t.lookup(8185).proto, want, "{scheme}");
        assert_eq!(t.lookup(1 << 30).proto, want, "{scheme}");
        round_trips(&mut a, &mut b, ep);
    }
}

#[test]
fn rendezvous_while_unexpected_and_truncated() {
    let ctx = context_with("tcp", &[("RNDV_THRESH", "1k")]);
    let (mut a, mut b, ep) = pair(&ctx);
    // Sent before any receive: the RTS waits unexpected, the data does not.
    let out = pattern(300_000, 7);
    let s = match a.tag_send(ep, out.clone(), 9, Op::new()).expect("send") {
        Posted::InFlight(id) => id,
        Posted::Done(..) => panic!("rendezvous done at once"),
    };
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while b.tag_probe(9, TAG_MASK_ALL).is_none() {
        assert!(std::time::Instant::now() < deadline);
        a.progress();
        b.progress();
    }
    assert_eq!(
        b.tag_probe(9, TAG_MASK_ALL).map(|i| i.length),
        Some(300_000)
    );
    assert!(
        a.request_is_active(s),
        "sender finished before the receiver asked"
    );
    let mut got = vec![0u8; 300_000];
    let r = b.scope(|sc| {
        let p = sc.tag_recv(&mut got, 9, TAG_MASK_ALL);
        loop {
            if sc.test(&p) {
                break sc.wait(p).0;
            }
            sc.progress();
            a.progress();
        }
    });
    assert_eq!(r.expect("recv").length, 300_000);
    assert!(got == out);
    while a.request_is_active(s) {
        a.progress();
        b.progress();
    }
    // A receive too small for the message: truncated, nothing overflows,
    // and the sender still completes.
    let s2 = a.tag_send(ep, out.clone(), 10, Op::new()).expect("send");
    let mut small = vec![0u8; 5000];
    let r = b.scope(|sc| {
        let p = sc.tag_recv(&mut small, 10, TAG_MASK_ALL);
        loop {
            if sc.test(&p) {
                break sc.wait(p).0;
            }
            sc.progress();
            a.progress();
        }
    });
    assert!(matches!(
        r,
        Err(rucx::Error::Truncated {
            length: 300_000,
            capacity: 5000
        })
    ));
    assert!(small[..] == out[..5000]);
    if let Posted::InFlight(id) = s2 {
        while a.request_is_active(id) {
            a.progress();
            b.progress();
        }
    }
}

#[test]
fn rendezvous_sender_fails_when_receiver_goes_away() {
    let ctx = context_with("tcp", &[("RNDV_THRESH", "1k")]);
    let (mut a, mut b, ep) = pair(&ctx);
    let s = match a
        .tag_send(ep, vec![1u8; 100_000], 3, Op::new())
        .expect("send")
    {
        Posted::InFlight(id) => id,
        Posted::Done(..) => panic!("rendezvous done at once"),
    };
    // The RTS arrives; nobody matches it; then the receiver is gone.
    while b.tag_probe(3, TAG_MASK_ALL).is_none() {
        a.progress();
        b.progress();
    }
    drop(b);
    progress_until(&mut a, 20, |a| !a.request_is_active(s));
    assert!(matches!(a.request_test(s), Some(Err(_))));
}
