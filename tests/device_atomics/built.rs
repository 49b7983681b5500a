//! Atomics the device lacks, built by the initiator from the device's
//! 64-bit fetch-and-add and compare-and-swap, on device memory.

use super::double;
use super::harness::*;
use rucx::{AtomicOp, AtomicValue, Ep, Error, MemMap, Op, Posted, Rkey, Worker};
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

/// `op` on a word of `width` bytes holding `old`, as the target's CPU
/// would do it: the new value.
fn model(op: AtomicOp, old: u64, v: u64, cmp: u64, width: usize) -> u64 {
    let mask = if width == 4 {
        u64::from(u32::MAX)
    } else {
        u64::MAX
    };
    let (v, cmp) = (v & mask, cmp & mask);
    let new = match op {
        AtomicOp::Add => old.wrapping_add(v),
        AtomicOp::And => old & v,
        AtomicOp::Or => old | v,
        AtomicOp::Xor => old ^ v,
        AtomicOp::Swap => v,
        AtomicOp::Cswap if old == cmp => v,
        AtomicOp::Cswap => old,
    };
    new & mask
}

/// The word of `width` bytes at byte `at` of `mem`.
fn read(mem: &[u8; 64], at: usize, width: usize) -> u64 {
    let mut b = [0u8; 8];
    b[..width].copy_from_slice(&mem[at..at + width]);
    if width == 4 {
        u64::from(u32::from_ne_bytes(b[..4].try_into().unwrap()))
    } else {
        u64::from_ne_bytes(b)
    }
}

fn write(mem: &mut [u8; 64], at: usize, width: usize, v: u64) {
    if width == 4 {
        mem[at..at + 4].copy_from_slice(&(v as u32).to_ne_bytes());
    } else {
        mem[at..at + 8].copy_from_slice(&v.to_ne_bytes());
    }
}

/// A small deterministic generator of operands.
struct Gen(u64);

impl Gen {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
}

#[test]
fn every_form_of_both_widths_on_device_memory() {
    let _g = serial();
    for f in fabrics() {
        let mut p = pair(&f, "device");
        let (_b, m, k) = p.map();
        assert!(k.atomics_by_device());
        // The connection is up once a put completed (the transports'
        // connection setup needs the target's progress); from then on the
        // target does not progress.
        let zero = [0u8; 8];
        // SAFETY: `zero` outlives the request, which `wait` completes.
        let put = unsafe {
            p.a.put_raw(p.at, zero.as_ptr(), 8, k.addr() + 56, &k, Op::new())
        };
        p.wait(put).unwrap();
        p.target_progress = false;
        every_form(&mut p, &f, &m, &k);
        drop(m);
    }
}

/// Every form of every operation, 64-bit and 32-bit, three rounds each, on
/// the memory of `m` (all zero) through `k`: each old value and the memory
/// after each against a model, and (where counted) each done by the
/// device.
pub(crate) fn every_form(p: &mut Pair, f: &Fabric, m: &MemMap, k: &Rkey) {
    let mut mem = [0u8; 64];
    let mut gen = Gen(0x9e37_79b9_7f4a_7c15);
    let mut n = 0;
    for (at, width) in [(0usize, 8usize), (8, 8), (16, 4), (20, 4), (28, 4)] {
        for (op, fetch) in AtomicOp::FORMS {
            for round in 0..3 {
                let v = gen.next();
                let old = read(&mem, at, width);
                // cswap: against the current value every other round.
                let cmp = if round % 2 == 0 { old } else { gen.next() };
                let value = if width == 4 {
                    AtomicValue::U32(v as u32)
                } else {
                    AtomicValue::U64(v)
                };
                let addr = k.addr() + at as u64;
                let before = executed();
                let what = format!("{} {}{} at {at}", f.tls, op.name(fetch), width * 8);
                if fetch {
                    let got = p.fetch(op, value, cmp, addr, k).expect(&what);
                    assert_eq!(got, old, "{what}: old value");
                } else {
                    p.post(op, value, addr, k).expect(&what);
                }
                write(&mut mem, at, width, model(op, old, v, cmp, width));
                for w in 0..8 {
                    assert_eq!(
                        m.load_u64(w * 8).unwrap(),
                        read(&mem, w * 8, 8),
                        "{what}: word {w} after"
                    );
                }
                if f.counted {
                    assert!(executed() > before, "{what}: done by the device");
                }
                n += 1;
            }
        }
    }
    assert_eq!(n, 5 * 10 * 3);
}

/// Waits for `p` on `w` alone.
fn wait(w: &mut Worker, p: rucx::Result<Posted<()>>) -> rucx::Result<()> {
    match p? {
        Posted::Done(..) => Ok(()),
        Posted::InFlight(id) => w.request_wait(id).map(|_| ()),
    }
}

/// One initiator's share of `concurrent_loops_lose_nothing`: the old
/// values of its fetching adds on the low and the high 32-bit half of
/// word 0.
fn initiator(w: &mut Worker, ep: Ep, k: &Rkey, seed: u64, n: usize) -> (Vec<u64>, Vec<u64>) {
    let mut g = Gen(seed);
    let (mut lo, mut hi) = (Vec::new(), Vec::new());
    let a = k.addr();
    for _ in 0..n {
        for (half, olds) in [(0, &mut lo), (4, &mut hi)] {
            let old = w
                .atomic_blocking(ep, AtomicOp::Add, AtomicValue::U32(1), 0, a + half, k)
                .expect("fadd32");
            olds.push(old.as_u64());
        }
        w.atomic_blocking(ep, AtomicOp::Xor, AtomicValue::U64(g.next()), 0, a + 8, k)
            .expect("fxor64");
        let x = w.atomic_post(
            ep,
            AtomicOp::Xor,
            AtomicValue::U64(g.next()),
            a + 16,
            k,
            Op::new(),
        );
        wait(w, x).expect("xor64");
        let o = w.atomic_post(
            ep,
            AtomicOp::Or,
            AtomicValue::U32(g.next() as u32),
            a + 28,
            k,
            Op::new(),
        );
        wait(w, o).expect("or32");
    }
    (lo, hi)
}

#[test]
fn concurrent_loops_lose_nothing() {
    const N: usize = 100;
    let _g = serial();
    for f in fabrics() {
        let (tctx, mut t, inits) = target_and_initiators(&f, 2);
        let (_b, m, _) = map(&tctx, &inits[0].0, inits[0].1);
        let packed = m.rkey_pack().unwrap();
        let seeds = [0x1234_5678_9abc_def1u64, 0x0fed_cba9_8765_4321];
        let done = std::sync::atomic::AtomicUsize::new(0);
        let olds: Vec<(Vec<u64>, Vec<u64>)> = std::thread::scope(|s| {
            let hs: Vec<_> = inits
                .into_iter()
                .zip(seeds)
                .map(|((mut w, ep), seed)| {
                    let (packed, done) = (&packed, &done);
                    s.spawn(move || {
                        let k = w.rkey_unpack(ep, packed).expect("unpack");
                        let r = initiator(&mut w, ep, &k, seed, N);
                        done.fetch_add(1, Ordering::SeqCst);
                        r
                    })
                })
                .collect();
            // Only for the connections' setup: the atomics need none.
            let deadline = Instant::now() + Duration::from_secs(120);
            while done.load(Ordering::SeqCst) < 2 {
                assert!(Instant::now() < deadline, "timed out");
                t.progress();
            }
            hs.into_iter()
                .map(|h| h.join().expect("initiator"))
                .collect()
        });
        // The model: the same operands, in any order.
        let (mut fx, mut px, mut or) = (0u64, 0u64, 0u32);
        for seed in seeds {
            let mut g = Gen(seed);
            for _ in 0..N {
                fx ^= g.next();
                px ^= g.next();
                or |= g.next() as u32;
            }
        }
        let w0 = m.load_u64(0).unwrap().to_ne_bytes();
        let half = |i: usize| u32::from_ne_bytes(w0[i..i + 4].try_into().unwrap());
        let n2 = 2 * N as u32;
        assert_eq!((half(0), half(4)), (n2, n2), "{}: no add lost", f.tls);
        for (i, mut all) in [
            olds.iter().flat_map(|o| o.0.clone()).collect::<Vec<_>>(),
            olds.iter().flat_map(|o| o.1.clone()).collect(),
        ]
        .into_iter()
        .enumerate()
        {
            all.sort_unstable();
            let want: Vec<u64> = (0..u64::from(n2)).collect();
            assert_eq!(all, want, "{}: half {i}: each old value once", f.tls);
        }
        assert_eq!(m.load_u64(8).unwrap(), fx, "{}: fetching xors", f.tls);
        assert_eq!(m.load_u64(16).unwrap(), px, "{}: posted xors", f.tls);
        let w24 = m.load_u64(24).unwrap().to_ne_bytes();
        let hi = u32::from_ne_bytes(w24[4..8].try_into().unwrap());
        let lo = u32::from_ne_bytes(w24[0..4].try_into().unwrap());
        assert_eq!(
            (lo, hi),
            (0, or),
            "{}: 32-bit ors, the other half untouched",
            f.tls
        );
        drop(m);
    }
}

#[test]
fn a_32_bit_word_needs_its_8_byte_word_in_range() {
    let _g = serial();
    for f in fabrics() {
        let mut p = pair(&f, "device");
        // Bytes 4..60 of the backing: the first and last 4-byte words'
        // 8-byte words reach outside.
        let (_b, m, k) = map_at(&p.tctx, &p.a, p.at, 4, 56);
        let u = AtomicValue::U32(3);
        for addr in [k.addr(), k.addr() + 52] {
            let msg = unsupported(p.fetch(AtomicOp::Or, u, 0, addr, &k));
            assert!(
                msg.contains("for32") && msg.contains("8-byte word"),
                "{msg}"
            );
            unsupported(p.post(AtomicOp::Add, u, addr, &k));
        }
        // Misaligned words are refused before any lane is looked at.
        for (addr, v) in [(k.addr() + 6, u), (k.addr(), AtomicValue::U64(1))] {
            let r = p.fetch(AtomicOp::Add, v, 0, addr, &k);
            assert!(matches!(r, Err(Error::InvalidParam(_))), "{r:?}");
        }
        for w in 0..6 {
            assert_eq!(
                m.load_u64(4 + w * 8).unwrap(),
                0,
                "{}: nothing written",
                f.tls
            );
        }
        // A 32-bit word whose 8-byte word lies inside works.
        assert_eq!(p.fetch(AtomicOp::Or, u, 0, k.addr() + 4, &k).unwrap(), 0);
        assert_eq!(p.fetch(AtomicOp::Swap, u, 0, k.addr() + 48, &k).unwrap(), 0);
        assert_ne!(m.load_u64(4).unwrap(), 0);
        assert_ne!(m.load_u64(44).unwrap(), 0);
        drop(m);
    }
}

#[test]
fn an_endpoint_failing_mid_loop_fails_the_request() {
    let _g = serial();
    for (fetch, value) in [(true, AtomicValue::U64(2)), (false, AtomicValue::U32(2))] {
        let mut p = pair(&double_fabric(), "device");
        let (_b, m, k) = p.map();
        // A word the first compare-and-swap (which guesses 0) misses.
        let a = k.addr();
        p.fetch(AtomicOp::Add, AtomicValue::U64(5), 0, a, &k)
            .unwrap();
        // The first step executes; the connection breaks under the second.
        double::BREAK_AT.store(executed() + 1, Ordering::SeqCst);
        let r = if fetch {
            p.fetch(AtomicOp::Xor, value, 0, a, &k).map(|_| ())
        } else {
            p.post(AtomicOp::Or, value, a, &k)
        };
        let left = double::BREAK_AT.swap(usize::MAX, Ordering::SeqCst);
        assert_eq!(
            left,
            usize::MAX,
            "fetch {fetch}: the second step was posted"
        );
        assert!(
            matches!(&r, Err(Error::EndpointFailed { .. })),
            "fetch {fetch}: {r:?}"
        );
        assert_eq!(m.load_u64(0).unwrap(), 5, "fetch {fetch}: nothing written");
        // The endpoint stays failed.
        let r = p.fetch(AtomicOp::Add, AtomicValue::U64(1), 0, a, &k);
        assert!(r.is_err(), "{r:?}");
        assert_eq!(m.load_u64(0).unwrap(), 5);
        assert_eq!(p.a.requests_outstanding(), 0, "nothing left behind");
        drop(m);
    }
}
