//! Datatypes end to end: every pair of send and receive layouts
//! (contiguous, iovec in one buffer, iovec over many, a generic strided
//! type) for tag messages on the eager path and on each rendezvous scheme,
//! streams and active messages, over `self`, `posix,cma`, `tcp` and
//! `rc_iwarp`; every byte checked.

mod common;
mod dt_layouts;

#[cfg(feature = "verbs")]
use common::rc_verbs;
use common::{context_vars, pattern, until};
use dt_layouts::{recv_value, send_value, Layout, Posting, Strided, LAYOUTS};
use rucx::dt::{Iov, Pack, Unpack};
use rucx::{AmMsg, AmParams, Error, Op, Posted, Worker};
use std::sync::{Arc, Mutex};

fn pair(vars: &[(&str, &str)]) -> (Worker, Worker, rucx::Ep, rucx::Ep) {
    let ctx = context_vars(vars);
    let mut a = ctx.create_worker().expect("worker a");
    let mut b = ctx.create_worker().expect("worker b");
    let ab = a.connect(&b.address()).expect("a->b");
    let ba = b.connect(&a.address()).expect("b->a");
    (a, b, ab, ba)
}

/// Waits for a send on `a` and a receive on `b`; returns what `b` got.
fn settle(a: &mut Worker, b: &mut Worker, s: Posting, r: Posting) -> Vec<u8> {
    let (sid, rid) = (s.id(), r.id());
    until(a, b, |a, b| {
        sid.is_none_or(|id| !a.request_is_active(id))
            && rid.is_none_or(|id| !b.request_is_active(id))
    });
    let (sinfo, _) = s.finish(a).expect("send");
    let (rinfo, got) = r.finish(b).expect("recv");
    assert_eq!(sinfo.length, rinfo.length, "lengths reported");
    got
}

const SIZES: [usize; 7] = [0, 1, 100, 8191, 65_539, 300_000, 2 << 20];

/// Every send layout against every receive layout, every size.
fn tag_matrix(tls: &str, extra: &[(&str, &str)], sizes: &[usize]) {
    let mut vars = vec![("RUCX_TLS", tls)];
    vars.extend_from_slice(extra);
    let (mut a, mut b, ab, _) = pair(&vars);
    let mut seed = 0;
    for &size in sizes {
        for sl in LAYOUTS {
            for rl in LAYOUTS {
                seed += 1;
                let data = pattern(size, seed as u64);
                let tag = seed as u64;
                let r = recv_value(rl, size, seed).tag_recv(&mut b, tag);
                let s = send_value(sl, &data, seed).tag_send(&mut a, ab, tag);
                let got = settle(&mut a, &mut b, s, r);
                assert!(
                    got == data,
                    "{tls} {extra:?}: {size} bytes, {sl:?} sent, {rl:?} received: corrupted"
                );
            }
        }
    }
}

const SCHEMES: [&[(&str, &str)]; 5] = [
    &[],
    &[("RUCX_ZCOPY_THRESH", "1")],
    &[("RUCX_RNDV_THRESH", "1k"), ("RUCX_RNDV_SCHEME", "am")],
    &[
        ("RUCX_RNDV_THRESH", "1k"),
        ("RUCX_RNDV_SCHEME", "get_zcopy"),
    ],
    &[
        ("RUCX_RNDV_THRESH", "1k"),
        ("RUCX_RNDV_SCHEME", "put_zcopy"),
    ],
];

fn tag_every_scheme(tls: &str) {
    tag_every_scheme_with(tls, &[]);
}

/// [`tag_every_scheme`] with `base` added to every scheme's variables.
fn tag_every_scheme_with(tls: &str, base: &[(&str, &str)]) {
    let with = |extra: &[(&'static str, &'static str)]| {
        let mut v = base.to_vec();
        v.extend_from_slice(extra);
        v
    };
    tag_matrix(tls, &with(SCHEMES[0]), &SIZES);
    for extra in &SCHEMES[1..] {
        tag_matrix(tls, &with(extra), &[100, 65_539, 300_000]);
    }
}

#[test]
fn self_tag_layouts() {
    tag_every_scheme("self");
}

#[test]
fn shm_tag_layouts() {
    tag_every_scheme("posix,cma");
}

#[test]
fn tcp_tag_layouts() {
    tag_every_scheme("tcp");
}

#[test]
fn rc_iwarp_tag_layouts() {
    tag_every_scheme("rc_iwarp");
}

#[cfg(feature = "verbs")]
#[test]
fn rc_verbs_tag_layouts() {
    // A device pins what it registers, so `auto` keeps rendezvous
    // registrations in the cache, which does not watch `free`: this test
    // frees its buffers without `rcache_invalidate`, and a later buffer
    // at the same address would be read through the stale pages.
    if let Some(tls) = rc_verbs() {
        tag_every_scheme_with(tls, &[("RUCX_RCACHE_ENABLE", "no")]);
    }
}

/// Streams: sends of random sizes in every layout, received whole into
/// other layouts of other sizes; the concatenation checked.
fn stream_layouts(tls: &str) {
    let (mut a, mut b, ab, ba) = pair(&[("RUCX_TLS", tls)]);
    let total = 600_000;
    let data = pattern(total, 9);
    let (mut sent, mut got, mut k) = (0, Vec::new(), 3usize);
    while sent < total || got.len() < total {
        k = k.wrapping_mul(1_103_515_245).wrapping_add(12_345) % 1_000_003;
        let n = (1 + k % 70_000).min(total - sent);
        let s = (sent < total).then(|| {
            let l = LAYOUTS[k % 4];
            let p = send_value(l, &data[sent..sent + n], k).stream_send(&mut a, ab);
            sent += n;
            p
        });
        let m = (1 + (k / 7) % 50_000).min(sent - got.len());
        if m > 0 {
            let r = recv_value(LAYOUTS[(k / 3) % 4], m, k).stream_recv_all(&mut b, ba);
            let rid = r.id();
            until(&mut a, &mut b, |_, b| {
                rid.is_none_or(|id| !b.request_is_active(id))
            });
            got.extend(r.finish(&mut b).expect("stream recv").1);
        }
        if let Some(s) = s {
            let sid = s.id();
            until(&mut a, &mut b, |a, _| {
                sid.is_none_or(|id| !a.request_is_active(id))
            });
            s.finish(&mut a).expect("stream send");
        }
    }
    assert!(got == data, "{tls}: stream bytes differ");
}

#[test]
fn self_stream_layouts() {
    stream_layouts("self");
}

#[test]
fn tcp_stream_layouts() {
    stream_layouts("tcp");
}

#[test]
fn shm_stream_layouts() {
    stream_layouts("posix,cma");
}

type Fetched = Arc<Mutex<Vec<(Layout, Option<Posting>)>>>;

/// Active messages sent in every layout, eager and rendezvous; the
/// handler fetches each into the layout the header names.
fn am_layouts(tls: &str) {
    let (mut a, mut b, ab, _) = pair(&[("RUCX_TLS", tls)]);
    let fetched: Fetched = Arc::default();
    let f = Arc::clone(&fetched);
    b.am_set_handler(5, move |w, m: AmMsg| {
        let l = LAYOUTS[usize::from(m.header()[0])];
        let n = m.data_len();
        let p = match dt_layouts::recv_value(l, n, n) {
            dt_layouts::SendValue::Contig(v) => {
                Posting::Contig(w.am_recv_data(m, v, Op::new()).expect("fetch"))
            }
            dt_layouts::SendValue::Iov(v) => {
                Posting::Iov(w.am_recv_data_dt(m, v, Op::new()).expect("fetch"))
            }
            dt_layouts::SendValue::Gen(v) => {
                Posting::Gen(w.am_recv_data_dt(m, v, Op::new()).expect("fetch"))
            }
        };
        f.lock().unwrap().push((l, Some(p)));
    });
    let mut i = 0;
    for params in [
        AmParams::new().eager(),
        AmParams::new().rndv(),
        AmParams::new(),
    ] {
        for size in [0usize, 1, 100, 65_539, 1 << 20] {
            for (sl, rl) in LAYOUTS
                .iter()
                .flat_map(|s| LAYOUTS.iter().map(move |r| (*s, *r)))
            {
                if size == 1 << 20 && params == AmParams::new().eager() {
                    continue;
                }
                i += 1;
                let data = pattern(size, i as u64);
                let hdr = [LAYOUTS.iter().position(|l| *l == rl).unwrap() as u8];
                let s = match send_value(sl, &data, i) {
                    dt_layouts::SendValue::Contig(v) => Posting::Contig(
                        a.am_send_owned(ab, 5, &hdr, v, params, Op::new())
                            .expect("am"),
                    ),
                    dt_layouts::SendValue::Iov(v) => {
                        Posting::Iov(a.am_send_dt(ab, 5, &hdr, v, params, Op::new()).expect("am"))
                    }
                    dt_layouts::SendValue::Gen(v) => {
                        Posting::Gen(a.am_send_dt(ab, 5, &hdr, v, params, Op::new()).expect("am"))
                    }
                };
                until(&mut a, &mut b, |_, _| !fetched.lock().unwrap().is_empty());
                let (_, r) = fetched.lock().unwrap().pop().expect("arrived");
                let got = settle(&mut a, &mut b, s, r.expect("posted"));
                assert!(
                    got == data,
                    "{tls}: {size} bytes {sl:?} -> {rl:?} ({params:?}) corrupted"
                );
            }
        }
    }
}

#[test]
fn self_am_layouts() {
    am_layouts("self");
}

#[test]
fn tcp_am_layouts() {
    am_layouts("tcp");
}

#[test]
fn shm_am_layouts() {
    am_layouts("posix,cma");
}

/// A generic datatype that fails to unpack: the receive fails with its
/// error; one that packs short: the send is refused; a layout too small:
/// truncated.
#[test]
fn datatype_failures_reach_the_request() {
    #[derive(Debug)]
    struct Refuses;
    impl Unpack for Refuses {
        fn packed_size(&self) -> usize {
            64
        }
        fn unpack(&mut self, _: usize, _: &[u8]) -> rucx::Result<()> {
            Err(Error::InvalidParam("refused".into()))
        }
    }
    struct Short;
    impl Pack for Short {
        fn packed_size(&self) -> usize {
            10
        }
        fn pack(&mut self, _: usize, d: &mut [u8]) -> usize {
            d.len().min(4)
        }
    }
    for tls in ["self", "tcp"] {
        let (mut a, mut b, ab, _) = pair(&[("RUCX_TLS", tls)]);
        let r = b
            .tag_recv_dt(Refuses, 1, u64::MAX, Op::new())
            .expect("recv");
        let Posted::InFlight(rid) = r else {
            panic!("nothing sent yet")
        };
        let s = a.tag_send(ab, vec![1u8; 64], 1, Op::new()).expect("send");
        let sid = s_id(&s);
        until(&mut a, &mut b, |a, b| {
            sid.is_none_or(|id| !a.request_is_active(id)) && !b.request_is_active(rid)
        });
        let e = b
            .take::<Refuses>(rid)
            .expect("done")
            .expect_err("unpack refused");
        assert!(
            matches!(e.error, Error::InvalidParam(ref m) if m == "refused"),
            "{tls}: {:?}",
            e.error
        );
        assert!(matches!(
            a.tag_send_dt(ab, Short, 2, Op::new()),
            Err(Error::InvalidParam(_))
        ));

        let small = Iov::new(vec![vec![0u8; 3], vec![0u8; 4]]);
        let r = b.tag_recv_dt(small, 3, u64::MAX, Op::new()).expect("recv");
        let s = a.tag_send(ab, pattern(20, 1), 3, Op::new()).expect("send");
        let (sid, rid) = (
            s_id(&s),
            match r {
                Posted::InFlight(id) => id,
                _ => panic!("early"),
            },
        );
        until(&mut a, &mut b, |a, b| {
            sid.is_none_or(|id| !a.request_is_active(id)) && !b.request_is_active(rid)
        });
        let e = b
            .take::<Iov<Vec<u8>>>(rid)
            .expect("done")
            .expect_err("truncated");
        assert!(
            matches!(
                e.error,
                Error::Truncated {
                    length: 20,
                    capacity: 7
                }
            ),
            "{tls}: {:?}",
            e.error
        );
        assert_eq!(b.requests_outstanding(), 0);
        let _ = Strided::new(1, 1, 1);
    }
}

fn s_id<B>(p: &Posted<B>) -> Option<rucx::ReqId> {
    match p {
        Posted::InFlight(id) => Some(*id),
        Posted::Done(..) => None,
    }
}
