//! Memory registration and one-sided operations (`put_zcopy`,
//! `get_zcopy`).
//!
//! The checks register memory with the fixture's memory domain
//! ([`Fixture::memory_domain`]) as `b`'s, hand its packed key through
//! `rkey_unpack` as `a` would, and post from `a`. They run only where `a`
//! advertises the operation and the fixture gives a domain that registers;
//! [`rma_caps`] checks the rest everywhere. Registered ranges sit between
//! guard bytes, and every refused operation must leave guards, range and
//! local buffers as they were. An operation may complete with `Done` or
//! `InFlight` and a completion; a refused one may fail at post or in its
//! completion, and may fail its endpoint (the checks then use a new one).

mod keys;
mod support;

pub use keys::{rma_dereg, rma_forged_keys};

use super::pattern;
use crate::testing::{Fixture, Pair};
use crate::{Access, Caps, EpId, IfaceAttr, Iov, IovMut, MemoryDomain, RemoteKey, Status, Token};
use std::sync::Arc;
use support::{assert_bytes, expect_refused, run, usable_ep, Op, RawBuf, Region, GUARD};

/// The fixture's memory domain if it registers and `a` offers one of
/// `ops`, with `a`'s attributes (from a pair opened and closed to ask);
/// otherwise says why the check does not apply.
fn prepare(f: &dyn Fixture, ops: Caps) -> Option<(&dyn MemoryDomain, IfaceAttr)> {
    let skip = |why: &str| eprintln!("{}: not applicable: {why}", f.name());
    let Some(md) = f.memory_domain() else {
        skip("the fixture gives no memory domain");
        return None;
    };
    let attr = Pair::open(f).a().attr().clone();
    if !attr.caps.intersects(ops) {
        skip(&format!("no {ops:?}"));
        return None;
    }
    if !md.can_register() {
        // `rma_caps` fails on this.
        skip("the memory domain does not register memory");
        return None;
    }
    Some((md, attr))
}

/// The one-sided operations `attr` offers.
fn offered(attr: &IfaceAttr) -> Vec<Op> {
    let mut v = Vec::new();
    if attr.caps.contains(Caps::PUT_ZCOPY) {
        v.push(Op::Put);
    }
    if attr.caps.contains(Caps::GET_ZCOPY) {
        v.push(Op::Get);
    }
    v
}

fn limit(attr: &IfaceAttr, op: Op) -> usize {
    match op {
        Op::Put => attr.max_put_zcopy,
        Op::Get => attr.max_get_zcopy,
    }
}

/// The right `op` needs on the remote side.
fn right(op: Op) -> Access {
    match op {
        Op::Put => Access::REMOTE_WRITE,
        Op::Get => Access::REMOTE_READ,
    }
}

/// Capabilities agree with the limits and the memory domain; operations
/// that are not offered fail with `Unsupported`; a domain that registers
/// packs keys that unpack to what was registered.
pub fn rma_caps(f: &dyn Fixture) {
    let mut p = Pair::open(f);
    let name = p.name().to_owned();
    let attr = p.a().attr().clone();
    let ep = p.ep_ab();
    let none = RemoteKey {
        md_name: String::new(),
        packed: Arc::from(&[][..]),
        addr: 0,
        len: 0,
        access: Access::empty(),
    };
    for (cap, op) in [(Caps::PUT_ZCOPY, Op::Put), (Caps::GET_ZCOPY, Op::Get)] {
        let max = limit(&attr, op);
        if attr.caps.contains(cap) {
            assert!(max > 0, "{name}: {cap:?} with a limit of 0");
            assert!(attr.max_iov > 0, "{name}: {cap:?} with max_iov 0");
            continue;
        }
        assert_eq!(max, 0, "{name}: limit of {} without {cap:?}", op.name());
        // Not offered: no implementation to call, or one whose limit of 0
        // refuses a single byte.
        let mut buf = [0u8; 1];
        let r = match op {
            Op::Put => p.a().put().map(|o| {
                let iov = [Iov::from_slice(&buf)];
                // SAFETY: `buf` outlives the call; a refused operation keeps
                // nothing.
                unsafe { o.put_zcopy(ep, &iov, 0, &none, Token(1)) }
            }),
            Op::Get => p.a().get().map(|o| {
                let iov = [IovMut::from_slice(&mut buf)];
                // SAFETY: as above.
                unsafe { o.get_zcopy(ep, &iov, 0, &none, Token(2)) }
            }),
        };
        match r {
            None => {}
            Some(Err(e)) => assert_eq!(e.status(), Status::InvalidParam, "{name}: {}", op.name()),
            Some(Ok(x)) => panic!("{name}: {} without {cap:?} gave {x:?}", op.name()),
        }
    }
    let Some(md) = f.memory_domain() else { return };
    if attr.caps.intersects(Caps::PUT_ZCOPY | Caps::GET_ZCOPY) {
        assert!(
            md.can_register(),
            "{name}: one-sided operations, no mem_reg"
        );
    }
    if !md.can_register() {
        let buf = RawBuf::filled(0, 8);
        // SAFETY: `buf` outlives the call; a domain that does not register
        // refuses without keeping the range.
        let r = unsafe { md.mem_reg(buf.at(0), 8, Access::REMOTE_READ) };
        assert!(
            r.is_err(),
            "{name}: mem_reg of a domain that cannot register"
        );
        assert!(md.rkey_unpack(&[1, 2, 3]).is_err(), "{name}: rkey_unpack");
        return;
    }
    let cost = md.reg_cost();
    for c in [cost.c0, cost.c1] {
        assert!(c.is_finite() && c >= 0.0, "{name}: reg_cost {cost:?}");
    }
    let access = Access::REMOTE_READ | Access::REMOTE_WRITE;
    let mut r = Region::new(md, &name, &pattern(1, 100), access);
    let h = r.memh().clone();
    assert_eq!((h.addr as u64, h.len, h.access), (r.addr(0), 100, access));
    let k = r.key().clone();
    assert_eq!(k.md_name, md.name(), "{name}: key's md_name");
    assert_eq!(&k.packed[..], &r.packed()[..], "{name}: key's bytes");
    assert_eq!((k.addr, k.len, k.access), (r.addr(0), 100, access));
    r.dereg()
        .unwrap_or_else(|e| panic!("{name}: mem_dereg failed: {e}"));
    assert!(md.mem_dereg(&h).is_err(), "{name}: mem_dereg twice");
}

/// `put_zcopy` writes (`get_zcopy` reads) exactly the range named, at the
/// start and at the end of a registration, for 0, 1, 4095 and 1 MiB bytes
/// (as far as the limit allows).
pub fn rma_put(f: &dyn Fixture) {
    one_way(f, Op::Put);
}

/// See [`rma_put`].
pub fn rma_get(f: &dyn Fixture) {
    one_way(f, Op::Get);
}

fn one_way(f: &dyn Fixture, op: Op) {
    let cap = match op {
        Op::Put => Caps::PUT_ZCOPY,
        Op::Get => Caps::GET_ZCOPY,
    };
    let Some((md, attr)) = prepare(f, cap) else {
        return;
    };
    let name = f.name().to_owned();
    let sizes: Vec<usize> = [0, 1, 4095, 1 << 20]
        .into_iter()
        .filter(|&s| s <= limit(&attr, op))
        .collect();
    let rlen = sizes.iter().max().copied().unwrap_or(0) + 7;
    let region = Region::new(md, &name, &pattern(1, rlen), right(op));
    let local = RawBuf::new(&pattern(2, GUARD + rlen + GUARD));
    let mut p = Pair::open(f);
    let ep = p.ep_ab();
    let mut remote_want = region.contents();
    let mut local_want = local.read();
    let mut seed = 10;
    for &size in &sizes {
        for off in [3.min(rlen - size), rlen - size] {
            seed += 1;
            let data = pattern(seed, size);
            let what = format!("{} of {size} bytes at offset {off}", op.name());
            match op {
                Op::Put => {
                    local.write(GUARD, &data);
                    local_want[GUARD..GUARD + size].copy_from_slice(&data);
                    remote_want[off..off + size].copy_from_slice(&data);
                }
                Op::Get => {
                    region.write(off, &data);
                    remote_want[off..off + size].copy_from_slice(&data);
                    local_want[GUARD..GUARD + size].copy_from_slice(&data);
                }
            }
            let iov = [local.iov(GUARD, size)];
            let r = run(&mut p, op, ep, &iov, region.addr(off), region.key());
            r.unwrap_or_else(|e| panic!("{name}: {what} failed: {e}"));
            assert_bytes(&name, &what, &region.contents(), &remote_want);
            region.assert_guards(&name, &what);
            assert_bytes(&name, &format!("{what}: local"), &local.read(), &local_want);
        }
    }
}

/// Several iov entries (one of them empty) are gathered into (scattered
/// from) one remote range, in order, leaving the gaps between them alone;
/// more entries than `max_iov` are refused.
pub fn rma_iov(f: &dyn Fixture) {
    let Some((md, attr)) = prepare(f, Caps::PUT_ZCOPY | Caps::GET_ZCOPY) else {
        return;
    };
    let name = f.name().to_owned();
    const LENS: [usize; 6] = [1, 0, 13, 256, 7, 4096];
    const GAP: usize = 5;
    let rlen = 8192;
    let access = Access::REMOTE_READ | Access::REMOTE_WRITE;
    let region = Region::new(md, &name, &pattern(3, rlen), access);
    let local = RawBuf::new(&pattern(
        4,
        LENS.iter().sum::<usize>() + GAP * (LENS.len() + 1),
    ));
    let many = RawBuf::new(&pattern(5, attr.max_iov.min(4096) + 1));
    let mut p = Pair::open(f);
    let mut ep = p.ep_ab();
    for op in offered(&attr) {
        let n = LENS.len().min(attr.max_iov);
        let mut iov = Vec::new();
        let mut at = GAP;
        for &len in &LENS[..n] {
            iov.push(local.iov(at, len));
            at += len + GAP;
        }
        let total: usize = LENS[..n].iter().sum();
        if total > limit(&attr, op) {
            continue;
        }
        let off = 11;
        let (local_before, remote_before) = (local.read(), region.contents());
        let r = run(&mut p, op, ep, &iov, region.addr(off), region.key());
        r.unwrap_or_else(|e| panic!("{name}: {} of {n} entries failed: {e}", op.name()));
        let (mut local_want, mut remote_want) = (local_before.clone(), remote_before);
        let mut at = off;
        for v in &iov {
            let l = v.ptr.addr() - local.at(0).addr();
            match op {
                Op::Put => remote_want[at..at + v.len].copy_from_slice(&local_before[l..l + v.len]),
                Op::Get => local_want[l..l + v.len].copy_from_slice(&remote_want[at..at + v.len]),
            }
            at += v.len;
        }
        let what = format!("{} of {n} entries", op.name());
        assert_bytes(&name, &what, &region.contents(), &remote_want);
        assert_bytes(&name, &format!("{what}: local"), &local.read(), &local_want);
        region.assert_guards(&name, &what);

        if attr.max_iov < 4096 {
            let k = attr.max_iov + 1;
            let iov: Vec<Iov> = (0..k).map(|i| many.iov(i, 1)).collect();
            let (m, r) = (many.read(), region.snapshot());
            let res = run(&mut p, op, ep, &iov, region.addr(0), region.key());
            let what = format!("{} with {k} entries, over max_iov", op.name());
            let e = expect_refused(&name, &what, res);
            assert_eq!(e.status(), Status::InvalidParam, "{name}: {what}: {e}");
            assert_bytes(&name, &what, &region.snapshot(), &r);
            assert_bytes(&name, &what, &many.read(), &m);
            ep = usable_ep(&mut p, ep);
        }
    }
}

/// Puts into a region without remote write rights and gets from one
/// without remote read rights fail and copy nothing; with the right, they
/// work.
pub fn rma_access(f: &dyn Fixture) {
    let Some((md, attr)) = prepare(f, Caps::PUT_ZCOPY | Caps::GET_ZCOPY) else {
        return;
    };
    let name = f.name().to_owned();
    let len = 64;
    let regions = [
        Region::new(md, &name, &pattern(6, len), Access::REMOTE_READ),
        Region::new(md, &name, &pattern(7, len), Access::REMOTE_WRITE),
        Region::new(md, &name, &pattern(8, len), Access::LOCAL_WRITE),
    ];
    let local = RawBuf::new(&pattern(9, len));
    let mut p = Pair::open(f);
    let mut ep = p.ep_ab();
    for op in offered(&attr) {
        for r in &regions {
            let what = format!("{} on a region with {:?}", op.name(), r.memh().access);
            let (before, mine) = (r.snapshot(), local.read());
            ep = usable_ep(&mut p, ep);
            let res = run(&mut p, op, ep, &[local.iov(0, len)], r.addr(0), r.key());
            if r.memh().access.contains(right(op)) {
                res.unwrap_or_else(|e| panic!("{name}: {what} failed: {e}"));
                // Afterwards both sides hold what the source held.
                let want = match op {
                    Op::Put => mine,
                    Op::Get => before[GUARD..GUARD + len].to_vec(),
                };
                assert_bytes(&name, &what, &r.contents(), &want);
                assert_bytes(&name, &format!("{what}: local"), &local.read(), &want);
                local.write(0, &pattern(op as u64 + 20, len));
            } else {
                expect_refused(&name, &what, res);
                assert_bytes(&name, &what, &r.snapshot(), &before);
                assert_bytes(&name, &format!("{what}: local"), &local.read(), &mine);
            }
            r.assert_guards(&name, &what);
        }
    }
}

/// Ranges that leave the registration, start before it, or wrap around
/// the address space are refused and copy nothing; the endpoint (or a new
/// one) works afterwards.
pub fn rma_bounds(f: &dyn Fixture) {
    let Some((md, attr)) = prepare(f, Caps::PUT_ZCOPY | Caps::GET_ZCOPY) else {
        return;
    };
    let name = f.name().to_owned();
    let len = 4096;
    let access = Access::REMOTE_READ | Access::REMOTE_WRITE;
    let region = Region::new(md, &name, &pattern(11, len), access);
    let local = RawBuf::new(&pattern(12, len + 1));
    let mut p = Pair::open(f);
    let mut ep = p.ep_ab();
    let (start, end) = (region.addr(0), region.addr(len));
    let cases: [(&str, u64, usize); 8] = [
        ("one byte past the end", end, 1),
        ("across the end", end - 4, 8),
        ("at the last guard byte", region.span_end() - 1, 1),
        ("one byte before the start", start - 1, 1),
        ("across the start", start - 1, 2),
        ("one byte longer than the registration", start, len + 1),
        ("wrapping around the address space", u64::MAX - 3, 8),
        ("at the last address", u64::MAX, 1),
    ];
    for op in offered(&attr) {
        for (what, remote, n) in cases {
            if n > limit(&attr, op) {
                continue;
            }
            let what = format!("{} {what}", op.name());
            let (before, mine) = (region.snapshot(), local.read());
            ep = usable_ep(&mut p, ep);
            let res = run(&mut p, op, ep, &[local.iov(0, n)], remote, region.key());
            expect_refused(&name, &what, res);
            assert_bytes(&name, &what, &region.snapshot(), &before);
            assert_bytes(&name, &format!("{what}: local"), &local.read(), &mine);
        }
        ep = usable_ep(&mut p, ep);
        let what = format!("{} of the whole registration after refusals", op.name());
        let r = run(&mut p, op, ep, &[local.iov(0, len)], start, region.key());
        r.unwrap_or_else(|e| panic!("{name}: {what} failed: {e}"));
        assert_bytes(&name, &what, &region.contents(), &local.read()[..len]);
        region.assert_guards(&name, &what);
    }
}

/// An endpoint id that names nothing is refused.
pub fn rma_bad_endpoint(f: &dyn Fixture) {
    let Some((md, attr)) = prepare(f, Caps::PUT_ZCOPY | Caps::GET_ZCOPY) else {
        return;
    };
    let name = f.name().to_owned();
    let access = Access::REMOTE_READ | Access::REMOTE_WRITE;
    let region = Region::new(md, &name, &pattern(13, 16), access);
    let local = RawBuf::new(&pattern(14, 16));
    let mut p = Pair::open(f);
    let _ = p.ep_ab();
    let nobody = EpId(u32::MAX - 7);
    for op in offered(&attr) {
        let (before, mine) = (region.snapshot(), local.read());
        let res = run(
            &mut p,
            op,
            nobody,
            &[local.iov(0, 16)],
            region.addr(0),
            region.key(),
        );
        let what = format!("{} on no endpoint", op.name());
        expect_refused(&name, &what, res);
        assert_bytes(&name, &what, &region.snapshot(), &before);
        assert_bytes(&name, &what, &local.read(), &mine);
    }
}
