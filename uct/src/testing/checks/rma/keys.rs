//! Keys that must not work: of ended registrations, and forged ones.

mod guess;

use super::support::{assert_bytes, expect_refused, run, usable_ep, Op, RawBuf, Region};
use super::{offered, pattern, prepare};
use crate::testing::{Fixture, Pair};
use crate::{Access, Caps, EpId, IfaceAttr, RemoteKey};

/// After `mem_dereg`, operations with the region's key fail and copy
/// nothing, also once the same memory is registered again (which gives a
/// new key that works); a second `mem_dereg` of the handle fails.
pub fn rma_dereg(f: &dyn Fixture) {
    let Some((md, attr)) = prepare(f, Caps::PUT_ZCOPY | Caps::GET_ZCOPY) else {
        return;
    };
    let name = f.name().to_owned();
    let len = 64;
    let rw = Access::REMOTE_READ | Access::REMOTE_WRITE;
    let mut region = Region::new(md, &name, &pattern(15, len), rw);
    let local = RawBuf::new(&pattern(16, len));
    let mut p = Pair::open(f);
    let mut ep = p.ep_ab();
    let ops = offered(&attr);
    for &op in &ops {
        let r = run(
            &mut p,
            op,
            ep,
            &[local.iov(0, len)],
            region.addr(0),
            region.key(),
        );
        r.unwrap_or_else(|e| panic!("{name}: {} while registered failed: {e}", op.name()));
    }
    let memh = region.memh().clone();
    region
        .dereg()
        .unwrap_or_else(|e| panic!("{name}: mem_dereg failed: {e}"));
    assert!(md.mem_dereg(&memh).is_err(), "{name}: mem_dereg twice");
    let dead = region.key().clone();
    refused_everywhere(
        &mut p,
        &mut ep,
        &ops,
        &region,
        &local,
        &dead,
        "deregistered",
    );
    let old = region.reregister(&name, rw);
    refused_everywhere(
        &mut p,
        &mut ep,
        &ops,
        &region,
        &local,
        &old,
        "re-registered",
    );
    for &op in &ops {
        local.write(0, &pattern(op as u64 + 30, len));
        ep = usable_ep(&mut p, ep);
        let what = format!("{} with the new key", op.name());
        let r = run(
            &mut p,
            op,
            ep,
            &[local.iov(0, len)],
            region.addr(0),
            region.key(),
        );
        r.unwrap_or_else(|e| panic!("{name}: {what} failed: {e}"));
        assert_bytes(&name, &what, &region.contents(), &local.read());
        region.assert_guards(&name, &what);
    }
}

/// Runs each of `ops` over the whole range with `key`, expecting refusals
/// that leave region and local buffer alone.
fn refused_everywhere(
    p: &mut Pair,
    ep: &mut EpId,
    ops: &[Op],
    region: &Region<'_>,
    local: &RawBuf,
    key: &RemoteKey,
    state: &str,
) {
    let name = p.name().to_owned();
    let len = local.read().len();
    for &op in ops {
        let what = format!("{} with the key of a {state} region", op.name());
        let (before, mine) = (region.snapshot(), local.read());
        *ep = usable_ep(p, *ep);
        let r = run(p, op, *ep, &[local.iov(0, len)], region.addr(0), key);
        expect_refused(&name, &what, r);
        assert_bytes(&name, &what, &region.snapshot(), &before);
        assert_bytes(&name, &format!("{what}: local"), &local.read(), &mine);
    }
}

/// Variations of a packed key: every truncation, longer ones, each byte
/// with one bit flipped and inverted, random bytes.
fn forgeries(packed: &[u8]) -> Vec<(String, Vec<u8>)> {
    let mut v: Vec<(String, Vec<u8>)> = (0..packed.len())
        .map(|n| (format!("truncated to {n} bytes"), packed[..n].to_vec()))
        .collect();
    let mut longer = packed.to_vec();
    longer.push(0);
    v.push(("one byte longer".into(), longer));
    v.push(("doubled".into(), [packed, packed].concat()));
    for i in 0..packed.len() {
        let mut k = packed.to_vec();
        k[i] ^= 1 << (i % 8);
        v.push((format!("bit {} of byte {i} flipped", i % 8), k));
        let mut k = packed.to_vec();
        k[i] ^= 0xff;
        v.push((format!("byte {i} inverted"), k));
    }
    for seed in 0..16u64 {
        v.push((
            format!("random bytes #{seed}"),
            pattern(1000 + seed, packed.len()),
        ));
    }
    for len in [1usize, 7, 8, 16, 64, 255] {
        v.push((
            format!("{len} random bytes"),
            pattern(2000 + len as u64, len),
        ));
    }
    v
}

/// Forged keys of a read-only region are refused by `rkey_unpack`, or
/// give operations that never write the region (nor its guards) and never
/// read outside it; a key whose declared range and rights were widened
/// gains nothing. The genuine key works afterwards. Then keys of live
/// read-write registrations, guessed from keys of others (see `guess.rs`:
/// a key needs a secret), are refused and touch nothing.
pub fn rma_forged_keys(f: &dyn Fixture) {
    let Some((md, attr)) = prepare(f, Caps::PUT_ZCOPY | Caps::GET_ZCOPY) else {
        return;
    };
    let name = f.name().to_owned();
    let len = 64;
    let region = Region::new(md, &name, &pattern(17, len), Access::REMOTE_READ);
    let local = RawBuf::filled(0x5a, 1);
    let mut p = Pair::open(f);
    let mut ep = p.ep_ab();
    let original = region.snapshot();
    let mut t = Tries {
        p: &mut p,
        ep: &mut ep,
        region: &region,
        local: &local,
        attr: &attr,
        original: &original,
    };
    for (what, bytes) in forgeries(&region.packed()) {
        if let Ok(key) = md.rkey_unpack(&bytes) {
            t.try_key(&key, &what);
        }
    }
    let mut lying = region.key().clone();
    lying.len = u64::MAX - lying.addr;
    lying.access = Access::all();
    t.try_key(&lying, "genuine bytes, declared range and rights widened");

    if attr.caps.contains(Caps::GET_ZCOPY) {
        ep = usable_ep(&mut p, ep);
        let r = run(
            &mut p,
            Op::Get,
            ep,
            &[local.iov(0, 1)],
            region.addr(9),
            region.key(),
        );
        r.unwrap_or_else(|e| panic!("{name}: get_zcopy with the genuine key failed: {e}"));
        assert_eq!(
            local.read(),
            region.contents()[9..10],
            "{name}: genuine get"
        );
    }
    drop(p);
    guess::check(md, &attr, || Pair::open(f));
}

/// What [`rma_forged_keys`] tries each key on.
struct Tries<'a, 'm> {
    p: &'a mut Pair,
    ep: &'a mut EpId,
    region: &'a Region<'m>,
    /// One byte.
    local: &'a RawBuf,
    attr: &'a IfaceAttr,
    /// Guards and range as registered; nothing may change them.
    original: &'a [u8],
}

impl Tries<'_, '_> {
    /// One-byte operations with `key` inside the region, at its edges,
    /// just outside and (if it falls within the guards) at the key's
    /// declared address: puts must fail (the region is read-only), gets
    /// outside must fail, gets inside may work but read the right byte.
    fn try_key(&mut self, key: &RemoteKey, what: &str) {
        let name = self.p.name().to_owned();
        let len = self.region.contents().len() as u64;
        let (start, end) = (self.region.addr(0), self.region.addr(len as usize));
        let mut spots = vec![start, end - 1, end, start - 1];
        let (lo, hi) = (self.region.span_start(), self.region.span_end());
        if (lo..hi).contains(&key.addr) {
            spots.push(key.addr);
        }
        for op in offered(self.attr) {
            for &remote in &spots {
                let inside = (start..end).contains(&remote);
                let tried = format!("{} at {remote:#x} with a key {what}", op.name());
                let mine = self.local.read();
                *self.ep = usable_ep(self.p, *self.ep);
                let iov = [self.local.iov(0, 1)];
                let r = run(self.p, op, *self.ep, &iov, remote, key);
                match op {
                    Op::Put => {
                        expect_refused(&name, &tried, r);
                    }
                    Op::Get if !inside => {
                        expect_refused(&name, &tried, r);
                        assert_bytes(&name, &tried, &self.local.read(), &mine);
                    }
                    Op::Get => {
                        if r.is_ok() {
                            let at = (remote - start) as usize;
                            let want = &self.region.contents()[at..at + 1];
                            assert_bytes(&name, &tried, &self.local.read(), want);
                        }
                    }
                }
                assert_bytes(&name, &tried, &self.region.snapshot(), self.original);
            }
        }
    }
}
