//! Keys guessed from other keys of the same domain.
//!
//! A peer that holds keys of some registrations knows how keys look, and
//! which of their fields are small counters (slots, generations) or follow
//! the addresses it registered. If a key were made of such fields only, a
//! peer could compute the key of another live registration from two keys
//! it holds: when consecutive keys differ by a constant step, the next key
//! is `2 * k[i+1] - k[i]`, reading the bytes as one little-endian number.
//! The check registers equally spaced ranges of one buffer in turn, and the
//! same range again and again, and tries the extrapolated key of each next
//! registration: it must be refused by `rkey_unpack` or by the operations,
//! and leave memory alone. A domain whose keys carry a secret unknown to
//! the peer passes; one whose keys are predictable fails.

use super::super::support::{assert_bytes, expect_refused, run, usable_ep, RawBuf};
use super::super::{offered, pattern};
use crate::testing::Pair;
use crate::{Access, IfaceAttr, MemHandle, MemoryDomain};

/// Registrations in one buffer.
const COUNT: usize = 8;
/// Bytes of each registration.
const LEN: usize = 16;
/// Distance between the starts of two registrations.
const STRIDE: usize = 64;

/// Live registrations, ended when dropped.
struct Regs<'m> {
    md: &'m dyn MemoryDomain,
    handles: Vec<MemHandle>,
}

impl Regs<'_> {
    /// Registers `[at, at + LEN)` of `buf` read-write; returns its packed key.
    fn add(&mut self, name: &str, buf: &RawBuf, at: usize) -> Vec<u8> {
        let rw = Access::REMOTE_READ | Access::REMOTE_WRITE;
        // SAFETY: the range lies in `buf`, which is reached only through
        // its raw pointer and outlives these registrations (`check` drops
        // them first).
        let memh = unsafe { self.md.mem_reg(buf.at(at), LEN, rw) }
            .unwrap_or_else(|e| panic!("{name}: mem_reg failed: {e}"));
        let packed = self
            .md
            .mkey_pack(&memh)
            .unwrap_or_else(|e| panic!("{name}: mkey_pack failed: {e}"));
        self.handles.push(memh);
        packed
    }

    /// Ends the latest registration.
    fn drop_last(&mut self, name: &str) {
        let memh = self.handles.pop().expect("a registration");
        self.md
            .mem_dereg(&memh)
            .unwrap_or_else(|e| panic!("{name}: mem_dereg failed: {e}"));
    }
}

impl Drop for Regs<'_> {
    fn drop(&mut self) {
        for memh in self.handles.drain(..) {
            let _ = self.md.mem_dereg(&memh);
        }
    }
}

/// `2 * b - a`, the bytes read as little-endian numbers of one length
/// (`None` if the lengths differ), wrapping.
pub(super) fn extrapolate(a: &[u8], b: &[u8]) -> Option<Vec<u8>> {
    if a.len() != b.len() {
        return None;
    }
    let mut out = Vec::with_capacity(a.len());
    let mut carry = 0i32;
    for (&x, &y) in a.iter().zip(b) {
        let v = 2 * i32::from(y) - i32::from(x) + carry;
        out.push(v.rem_euclid(256) as u8);
        carry = v.div_euclid(256);
    }
    Some(out)
}

/// Runs the check on `md` with a pair of the fixture `name` opened by
/// `open` (after the buffers, as the support module asks).
pub(super) fn check(md: &dyn MemoryDomain, attr: &IfaceAttr, open: impl FnOnce() -> Pair) {
    let buf = RawBuf::new(&pattern(41, STRIDE * (COUNT + 1)));
    let local = RawBuf::new(&pattern(42, LEN));
    let mut regs = Regs {
        md,
        handles: Vec::new(),
    };
    let mut p = open();
    let name = p.name().to_owned();
    // Equally spaced ranges, registered in turn, all live.
    let keys: Vec<Vec<u8>> = (0..COUNT)
        .map(|i| regs.add(&name, &buf, STRIDE * (i + 1)))
        .collect();
    let mut guesses: Vec<(String, Vec<u8>, usize)> = (2..COUNT)
        .filter_map(|i| {
            let g = extrapolate(&keys[i - 2], &keys[i - 1])?;
            Some((
                format!("of range {i} guessed from ranges {} and {}", i - 2, i - 1),
                g,
                STRIDE * (i + 1),
            ))
        })
        .collect();
    // Another range, registered, ended and registered again twice: the
    // key of the third registration guessed from the two that ended.
    let at = STRIDE / 2;
    let first = regs.add(&name, &buf, at);
    regs.drop_last(&name);
    let second = regs.add(&name, &buf, at);
    regs.drop_last(&name);
    let third = regs.add(&name, &buf, at);
    if let Some(g) = extrapolate(&first, &second) {
        guesses.push((
            "guessed from two earlier registrations of its range".into(),
            g,
            at,
        ));
    }
    let mut ep = p.ep_ab();
    for (what, guess, at) in &guesses {
        let Ok(key) = md.rkey_unpack(guess) else {
            continue;
        };
        let remote = buf.at(*at).addr() as u64;
        for op in offered(attr) {
            let tried = format!("{} with the key {what}", op.name());
            let (before, mine) = (buf.read(), local.read());
            ep = usable_ep(&mut p, ep);
            let r = run(&mut p, op, ep, &[local.iov(0, LEN)], remote, &key);
            expect_refused(&name, &tried, r);
            assert_bytes(&name, &tried, &buf.read(), &before);
            assert_bytes(&name, &format!("{tried}: local"), &local.read(), &mine);
        }
    }
    // The genuine keys work: the guesses failed for want of a secret, not
    // because the ranges were unusable.
    for (packed, at) in [(&third, at), (&keys[COUNT - 1], STRIDE * COUNT)] {
        let key = md
            .rkey_unpack(packed)
            .unwrap_or_else(|e| panic!("{name}: rkey_unpack of a fresh key failed: {e}"));
        let remote = buf.at(at).addr() as u64;
        for op in offered(attr) {
            let what = format!("{} with a genuine key", op.name());
            local.write(0, &pattern(43 + at as u64, LEN));
            ep = usable_ep(&mut p, ep);
            run(&mut p, op, ep, &[local.iov(0, LEN)], remote, &key)
                .unwrap_or_else(|e| panic!("{name}: {what} failed: {e}"));
            assert_bytes(&name, &what, &local.read(), &buf.read()[at..at + LEN]);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::extrapolate;

    #[test]
    fn extrapolation_continues_a_constant_step() {
        // Fields of a predictable key: a counter, an address, a constant.
        let key = |i: u32, addr: u64| {
            let mut k = b"tag\0".to_vec();
            k.extend_from_slice(&i.to_le_bytes());
            k.extend_from_slice(&addr.to_le_bytes());
            k.extend_from_slice(&7u32.to_le_bytes());
            k
        };
        let (a, b, c) = (key(9, 0x10f0), key(10, 0x1130), key(11, 0x1170));
        assert_eq!(extrapolate(&a, &b).unwrap(), c);
        // Going down, across a byte boundary.
        let (a, b, c) = (key(0x102, 0x2000), key(0x101, 0x1fc0), key(0x100, 0x1f80));
        assert_eq!(extrapolate(&a, &b).unwrap(), c);
        assert_eq!(extrapolate(&a, &b[1..]), None);
        assert_eq!(extrapolate(&[], &[]).unwrap(), Vec::<u8>::new());
    }
}
