//! One-sided operations between two workers of one process, on every
//! transport: put and get of 1 B to 16 MiB with contents checked, every
//! atomic on both widths, flush and fence, and the refusals (out of range,
//! missing rights, forged and stale keys) at the initiator and the target.

mod common;

use common::*;
use rucx::{
    Access, AccessDenied, AtomicOp, AtomicValue, Ep, Error, MemMap, Op, Posted, Rkey, Worker,
};

const ALL: Access = Access::REMOTE_READ
    .union(Access::REMOTE_WRITE)
    .union(Access::REMOTE_ATOMIC);

struct Pair {
    a: Worker,
    b: Worker,
    ab: Ep,
    ctx: rucx::Context,
}

fn pair(tls: &str) -> Pair {
    let ctx = context(tls);
    let mut a = ctx.create_worker().expect("worker a");
    let mut b = ctx.create_worker().expect("worker b");
    let ab = a.connect(&b.address()).expect("a->b");
    let _ba = b.connect(&a.address()).expect("b->a");
    Pair { a, b, ab, ctx }
}

impl Pair {
    /// `b`'s memory as `a` reaches it.
    fn map(&self, len: usize, access: Access) -> (MemMap, Rkey) {
        let m = self.ctx.mem_alloc(len, access).expect("mem_alloc");
        let k = self
            .a
            .rkey_unpack(self.ab, &m.rkey_pack().expect("pack"))
            .expect("unpack");
        (m, k)
    }

    /// `b`'s memory as `a` reaches it, in memory the test allocated (so
    /// never a shared segment: the target executes what it is asked).
    fn map_private(&self, len: usize, access: Access) -> (Vec<u64>, MemMap, Rkey) {
        let mut backing = vec![0u64; len.div_ceil(8)];
        // SAFETY: `backing` comes first in the returned tuple, so a
        // caller's `let (b, m, k)` drops the map before it; while mapped
        // it is only accessed through the map.
        let m =
            unsafe { self.ctx.mem_map(backing.as_mut_ptr().cast(), len, access) }.expect("mem_map");
        let k = self
            .a
            .rkey_unpack(self.ab, &m.rkey_pack().expect("pack"))
            .expect("unpack");
        (backing, m, k)
    }

    /// Progresses both workers until the operation completes.
    fn wait(&mut self, p: rucx::Result<Posted<()>>) -> rucx::Result<usize> {
        let id = match p? {
            Posted::Done(info, ()) => return Ok(info.length),
            Posted::InFlight(id) => id,
        };
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
        loop {
            if let Some(r) = self.a.request_test(id) {
                return r.map(|i| i.length);
            }
            assert!(std::time::Instant::now() < deadline, "timed out");
            self.a.progress();
            self.b.progress();
        }
    }

    fn put(&mut self, data: &[u8], addr: u64, k: &Rkey) -> rucx::Result<usize> {
        // SAFETY: `data` outlives the operation, which `wait` completes.
        let p = unsafe {
            self.a
                .put_raw(self.ab, data.as_ptr(), data.len(), addr, k, Op::new())
        };
        self.wait(p)
    }

    fn get(&mut self, buf: &mut [u8], addr: u64, k: &Rkey) -> rucx::Result<usize> {
        // SAFETY: as for `put`.
        let p = unsafe {
            self.a
                .get_raw(self.ab, buf.as_mut_ptr(), buf.len(), addr, k, Op::new())
        };
        self.wait(p)
    }

    fn fetch(
        &mut self,
        op: AtomicOp,
        v: AtomicValue,
        cmp: u64,
        addr: u64,
        k: &Rkey,
    ) -> rucx::Result<u64> {
        let mut old = 0u64;
        // SAFETY: `old` outlives the operation.
        let p = unsafe {
            self.a
                .atomic_fetch_raw(self.ab, op, v, cmp, &mut old, addr, k, Op::new())
        };
        self.wait(p).map(|_| old)
    }
}

const TLS: [&str; 5] = ["self", "posix", "shm", "tcp", "rc_iwarp"];

fn put_get_sizes(tls: &str) {
    let mut p = pair(tls);
    const MAX: usize = 16 << 20;
    let (m, k) = p.map(MAX + 64, ALL);
    for (i, size) in [1usize, 7, 64, 4095, 8193, 65536, 1 << 20, MAX]
        .into_iter()
        .enumerate()
    {
        let data = pattern(size, i as u64);
        let off = (i * 8) % 64 + 1; // unaligned remote offsets too
        assert_eq!(
            p.put(&data, m.addr() + off as u64, &k).expect("put"),
            size,
            "{tls} put {size}"
        );
        let mut seen = vec![0u8; size];
        m.read(off, &mut seen).unwrap();
        assert!(seen == data, "{tls}: put of {size} bytes landed wrong");
        let mut back = vec![0u8; size];
        p.get(&mut back, m.addr() + off as u64, &k).expect("get");
        assert!(back == data, "{tls}: get of {size} bytes read wrong");
    }
    p.a.ep_flush(p.ab).expect("flush");
}

#[test]
fn put_get_every_size() {
    for tls in TLS {
        put_get_sizes(tls);
    }
}

#[cfg(feature = "verbs")]
#[test]
fn rc_verbs_put_get_every_size() {
    if let Some(tls) = rc_verbs() {
        put_get_sizes(tls);
    }
}

#[test]
fn iov_put_and_get() {
    use rucx::ucp::uct::Iov;
    // Each transport with memory from mem_alloc (a mapped segment on
    // shared memory), and posix also with private memory (emulated: the
    // replies of a get are cut at the ends of the local ranges).
    for (tls, private) in TLS.iter().map(|&t| (t, false)).chain([("posix", true)]) {
        let mut p = pair(tls);
        let (_b, m, k) = if private {
            p.map_private(1 << 16, ALL)
        } else {
            let (m, k) = p.map(1 << 16, ALL);
            (Vec::new(), m, k)
        };
        let parts: Vec<Vec<u8>> = [5usize, 20_000, 300]
            .iter()
            .enumerate()
            .map(|(i, &n)| pattern(n, 40 + i as u64))
            .collect();
        let iov: Vec<Iov> = parts.iter().map(|b| Iov::from_slice(b)).collect();
        // SAFETY: `parts` outlives the operation, which `wait` completes.
        let r = unsafe { p.a.put_iov_raw(p.ab, &iov, m.addr() + 3, &k, Op::new()) };
        assert_eq!(p.wait(r).expect("put_iov"), 20_305, "{tls}");
        let whole: Vec<u8> = parts.concat();
        let mut seen = vec![0u8; whole.len()];
        m.read(3, &mut seen).unwrap();
        assert!(seen == whole, "{tls}: put_iov landed wrong");
        // Read it back into three other ranges of other sizes.
        let mut outs = [vec![0u8; 7000], vec![0u8; 13_000], vec![0u8; 305]];
        let iov: Vec<rucx::ucp::uct::IovMut> = outs
            .iter_mut()
            .map(|b| rucx::ucp::uct::IovMut::from_slice(b))
            .collect();
        // SAFETY: `outs` outlives the operation and is not touched until
        // it completed.
        let r = unsafe { p.a.get_iov_raw(p.ab, &iov, m.addr() + 3, &k, Op::new()) };
        p.wait(r).expect("get_iov");
        assert!(outs.concat() == whole, "{tls}: get_iov read wrong");
    }
}

/// Every atomic operation and width, fetching and posting, over `tls`.
fn atomics_on(tls: &str) {
    let mut p = pair(tls);
    let (m, k) = p.map(64, ALL);
    for op in AtomicOp::ALL {
        for wide in [false, true] {
            let (init, v, cmp) = (0xf0f0u64, 0x0ff0u64, 0xf0f0u64);
            m.write(8, &init.to_le_bytes()).unwrap();
            let val = if wide {
                AtomicValue::U64(v)
            } else {
                AtomicValue::U32(v as u32)
            };
            let old = p.fetch(op, val, cmp, m.addr() + 8, &k).expect("atomic");
            assert_eq!(old, init, "{tls} {op:?} old value");
            let want = match op {
                AtomicOp::Add => init + v,
                AtomicOp::And => init & v,
                AtomicOp::Or => init | v,
                AtomicOp::Xor => init ^ v,
                AtomicOp::Swap | AtomicOp::Cswap => v,
            };
            assert_eq!(m.load_u64(8).unwrap(), want, "{tls} {op:?} wide={wide}");
        }
    }
    // Posting forms, then a fence: all of them applied.
    m.write(0, &0u64.to_le_bytes()).unwrap();
    for _ in 0..100 {
        let r = p.a.atomic_post(
            p.ab,
            AtomicOp::Add,
            AtomicValue::U64(3),
            m.addr(),
            &k,
            Op::new(),
        );
        if let Posted::InFlight(id) = r.expect("post") {
            p.a.request_release(id);
        }
    }
    while m.load_u64(0).unwrap() != 300 {
        p.a.progress();
        p.b.progress();
    }
    assert!(p
        .a
        .atomic_post(
            p.ab,
            AtomicOp::Cswap,
            AtomicValue::U64(1),
            m.addr(),
            &k,
            Op::new()
        )
        .is_err());
}

#[test]
fn atomics_every_op_and_width() {
    for tls in TLS {
        atomics_on(tls);
    }
}

#[cfg(feature = "verbs")]
#[test]
fn rc_verbs_atomics() {
    if let Some(tls) = rc_verbs() {
        atomics_on(tls);
    }
}

fn refused<T>(r: rucx::Result<T>) -> bool {
    matches!(r, Err(Error::RemoteAccess { .. }))
}

/// Refused for lack of rights.
fn no_right<T>(r: rucx::Result<T>) -> bool {
    matches!(
        r,
        Err(Error::RemoteAccess {
            reason: AccessDenied::Rights { .. }
        })
    )
}

/// Refused as outside the registration.
fn outside<T>(r: rucx::Result<T>) -> bool {
    matches!(
        r,
        Err(Error::RemoteAccess {
            reason: AccessDenied::OutOfRange { .. }
        })
    )
}

/// What the key of a read-only region does not allow, refused over `tls`.
fn refusals_on(tls: &str) {
    let mut p = pair(tls);
    let (m, k) = p.map(4096, Access::REMOTE_READ);
    m.write(0, &[9; 16]).unwrap();
    assert!(
        no_right(p.put(&[1; 8], m.addr(), &k)),
        "{tls}: put without write rights"
    );
    let mut buf = [0u8; 8];
    assert!(
        outside(p.get(&mut buf, m.addr() + 4090, &k)),
        "{tls}: get past the end"
    );
    assert!(
        outside(p.get(&mut buf, m.addr() - 1, &k)),
        "{tls}: get before the start"
    );
    assert!(
        no_right(p.fetch(AtomicOp::Add, AtomicValue::U64(1), 0, m.addr(), &k)),
        "{tls}: atomic without rights"
    );
    let (_m2, k2) = p.map(64, ALL);
    assert!(
        matches!(
            p.fetch(AtomicOp::Add, AtomicValue::U64(1), 0, k2.addr() + 4, &k2),
            Err(Error::InvalidParam(_))
        ),
        "misaligned"
    );
    let mut seen = [0u8; 16];
    m.read(0, &mut seen).unwrap();
    assert_eq!(seen, [9; 16], "{tls}: memory untouched");
    let bad = b"not a key";
    assert!(p.a.rkey_unpack(p.ab, bad).is_err());
}

#[test]
fn initiator_refuses_what_the_key_does_not_allow() {
    for tls in TLS {
        refusals_on(tls);
    }
}

#[cfg(feature = "verbs")]
#[test]
fn rc_verbs_initiator_refuses() {
    if let Some(tls) = rc_verbs() {
        refusals_on(tls);
    }
}

/// A key whose declared range and rights were widened by the initiator:
/// the target, which executes the operation, refuses it.
fn forge_wider(packed: &[u8]) -> Vec<u8> {
    let mut f = packed.to_vec();
    f[40..48].copy_from_slice(&(1u64 << 40).to_le_bytes()); // length
    f[48..52].copy_from_slice(&ALL.bits().to_le_bytes());
    f
}

#[test]
fn target_refuses_forged_and_stale_keys() {
    // posix: put and get are emulated, the target checks; tcp: put through
    // the transport's emulation (target checks), get emulated. (Memory of
    // the process's own, not a shared segment, which the initiator would
    // reach directly.)
    for tls in ["posix", "tcp"] {
        let mut p = pair(tls);
        let (_b1, m, _) = p.map_private(64, Access::REMOTE_READ);
        let forged =
            p.a.rkey_unpack(p.ab, &forge_wider(&m.rkey_pack().unwrap()))
                .expect("unpack");
        assert!(
            refused(p.put(&[1; 8], m.addr(), &forged)),
            "{tls}: forged write rights"
        );
        assert!(
            refused(p.fetch(AtomicOp::Swap, AtomicValue::U64(5), 0, m.addr(), &forged)),
            "{tls}: forged atomic rights"
        );
        let mut buf = [0u8; 8];
        assert!(
            refused(p.get(&mut buf, m.addr() + 4096, &forged)),
            "{tls}: forged range"
        );
        let mut seen = [0u8; 64];
        m.read(0, &mut seen).unwrap();
        assert_eq!(seen, [0; 64], "{tls}: memory untouched");

        // Another secret: names nothing.
        let (_b2, m2, _) = p.map_private(64, ALL);
        let mut packed = m2.rkey_pack().unwrap();
        packed[24] ^= 1;
        let guessed = p.a.rkey_unpack(p.ab, &packed).expect("unpack");
        assert!(
            refused(p.fetch(AtomicOp::Add, AtomicValue::U64(1), 0, m2.addr(), &guessed)),
            "{tls}: guessed secret"
        );

        // Stale: the map ended.
        let (_b3, m3, k3) = p.map_private(64, ALL);
        let addr = m3.addr();
        m3.unmap().unwrap();
        assert!(
            refused(p.fetch(AtomicOp::Add, AtomicValue::U64(1), 0, addr, &k3)),
            "{tls}: stale key"
        );
        // The endpoint still works after refusals.
        let (m4, k4) = p.map(64, ALL);
        p.put(b"still fine", m4.addr(), &k4)
            .expect("put after refusals");
    }
}

/// Where the RC transport's key ("rcmk", 32 bytes) sits in a packed rkey.
fn rc_key_at(packed: &[u8]) -> usize {
    packed
        .windows(4)
        .position(|w| w == b"rcmk")
        .expect("an rc key in the packed rkey")
}

#[test]
fn rc_target_refuses_forged_and_stale_steering_tags() {
    // Over RC, put and get are RDMA WRITE and READ that the target's
    // engine checks against its regions: a refused access gets the
    // Terminate of RFC 5040, which ends that connection; the operation
    // fails and the memory is untouched. Each case uses a new pair.
    type Forge = fn(&mut [u8]);
    let cases: [(&str, Forge); 3] = [
        ("declared range and rights widened", |k| {
            k[20..28].copy_from_slice(&(1u64 << 40).to_le_bytes());
            k[28..32].copy_from_slice(&ALL.bits().to_le_bytes());
        }),
        ("another steering tag index", |k| k[9] ^= 0x5a),
        ("another key byte", |k| k[8] ^= 1),
    ];
    for (what, forge) in cases {
        let mut p = pair("rc_iwarp");
        let (_b1, m, _) = p.map_private(64, Access::REMOTE_READ);
        let mut packed = m.rkey_pack().unwrap();
        let at = rc_key_at(&packed);
        forge(&mut packed[at..at + 32]);
        let forged = p.a.rkey_unpack(p.ab, &packed).expect("unpack");
        let put = p.put(&[1; 8], m.addr(), &forged);
        assert!(put.is_err(), "{what}: put accepted");
        let mut seen = [0u8; 64];
        m.read(0, &mut seen).unwrap();
        assert_eq!(seen, [0; 64], "{what}: memory untouched");
    }
    // Reads: out of the region's range (widened key), and a stale key.
    let mut p = pair("rc_iwarp");
    let (_b1, m, _) = p.map_private(64, Access::REMOTE_READ);
    let mut packed = m.rkey_pack().unwrap();
    let at = rc_key_at(&packed);
    packed[at + 20..at + 28].copy_from_slice(&(1u64 << 40).to_le_bytes());
    let forged = p.a.rkey_unpack(p.ab, &packed).expect("unpack");
    let mut buf = [0u8; 8];
    assert!(
        p.get(&mut buf, m.addr() + 4096, &forged).is_err(),
        "get past the region"
    );
    let mut p = pair("rc_iwarp");
    let (_b3, m3, k3) = p.map_private(64, ALL);
    let addr = m3.addr();
    m3.unmap().unwrap();
    assert!(p.get(&mut buf, addr, &k3).is_err(), "stale key");
}

#[test]
fn shared_segments_are_mapped_into_the_peer() {
    for tls in ["posix", "shm"] {
        let mut p = pair(tls);
        let (m, k) = p.map(8192, ALL);
        assert!(m.is_shared(), "{tls}: mem_alloc gives a shared segment");
        let q = k.ptr(m.addr() + 64).expect("rkey_ptr");
        // SAFETY: 8 bytes inside the peer's mapped segment.
        unsafe { q.cast::<u64>().write_volatile(0x1122_3344) };
        assert_eq!(
            m.load_u64(64).unwrap(),
            0x1122_3344,
            "{tls}: a store through rkey_ptr lands"
        );
        assert!(k.ptr(m.addr() + 8192).is_err(), "{tls}: past the end");
        // Put, get and atomics take the mapping: done at once, without
        // the target's progress.
        let v = 5u64.to_le_bytes();
        // SAFETY: `v` outlives the call, which completes at once.
        let r = unsafe { p.a.put_raw(p.ab, v.as_ptr(), 8, m.addr(), &k, Op::new()) }.unwrap();
        assert!(matches!(r, Posted::Done(..)), "{tls}: direct put");
        let mut old = 0u64;
        // SAFETY: `old` outlives the call, which completes at once.
        let r = unsafe {
            p.a.atomic_fetch_raw(
                p.ab,
                AtomicOp::Add,
                AtomicValue::U64(2),
                0,
                &mut old,
                m.addr(),
                &k,
                Op::new(),
            )
        }
        .unwrap();
        assert!(
            matches!(r, Posted::Done(..)) && old == 5,
            "{tls}: direct atomic"
        );
        assert_eq!(m.load_u64(0).unwrap(), 7);
        // The mapping outlives the peer's map: harmless to the peer.
        drop(m);
        // SAFETY: still mapped here.
        assert_eq!(unsafe { q.cast::<u64>().read_volatile() }, 0x1122_3344);
    }
    // Not on one host's shared memory: no pointer.
    let p = pair("tcp");
    let (m, k) = p.map(64, ALL);
    assert!(!m.is_shared());
    assert!(matches!(k.ptr(m.addr()), Err(Error::Unsupported(_))));
}

#[test]
fn fence_and_flush_order_emulated_and_direct_operations() {
    for tls in TLS {
        let mut p = pair(tls);
        let (m, k) = p.map(4096, ALL);
        // An atomic (emulated), then a fence, then a put over whatever
        // lane: the put's value stays.
        let r =
            p.a.atomic_post(
                p.ab,
                AtomicOp::Swap,
                AtomicValue::U64(1),
                m.addr(),
                &k,
                Op::new(),
            )
            .unwrap();
        if let Posted::InFlight(id) = r {
            p.a.request_release(id);
        }
        // The fence waits for the target's progress, which this thread
        // must drive: poll both until nothing is in flight.
        while p.a.requests_outstanding() > 0 {
            p.a.progress();
            p.b.progress();
        }
        p.a.fence().expect("fence");
        p.put(&7u64.to_le_bytes(), m.addr(), &k).expect("put");
        assert_eq!(m.load_u64(0).unwrap(), 7, "{tls}");
    }
}

/// Over shm, atomics on private memory are executed by the target while a
/// put goes through CMA at once: without a fence the put could land before
/// an earlier swap and be overwritten. The target progresses in its own
/// thread, as a real peer would, so `fence` can wait for it.
#[test]
fn fence_orders_an_emulated_swap_before_a_direct_put() {
    let p = pair("shm");
    let (_b, m, k) = p.map_private(64, ALL);
    let Pair {
        mut a, mut b, ab, ..
    } = p;
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let s2 = stop.clone();
    let target = std::thread::spawn(move || {
        while !s2.load(std::sync::atomic::Ordering::Relaxed) {
            b.progress();
        }
        b
    });
    for round in 0..50u64 {
        let r = a.atomic_post(
            ab,
            AtomicOp::Swap,
            AtomicValue::U64(1),
            m.addr(),
            &k,
            Op::new(),
        );
        if let Posted::InFlight(id) = r.expect("swap") {
            a.request_release(id);
        }
        a.fence().expect("fence");
        let v = (round + 2).to_le_bytes();
        a.put_blocking(ab, &v, m.addr(), &k).expect("put");
        assert_eq!(
            m.load_u64(0).unwrap(),
            round + 2,
            "the put comes after the swap"
        );
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    drop(target.join().expect("target thread"));
}

/// `atomic_fetch_exact_raw` writes exactly the value's width: a 32-bit
/// result leaves the 4 bytes after it alone, on the mapped path (posix)
/// and the emulated ones (self, tcp).
#[test]
fn exact_width_fetch_writes_only_its_width() {
    for tls in ["self", "posix", "tcp"] {
        let mut p = pair(tls);
        let (m, k) = p.map(64, ALL);
        m.write(8, &0x1234_5678u64.to_le_bytes()).unwrap();
        let mut out = [0xaau8; 8];
        // SAFETY: `out` outlives the operation, which `wait` completes.
        let r = unsafe {
            p.a.atomic_fetch_exact_raw(
                p.ab,
                AtomicOp::Add,
                AtomicValue::U32(1),
                0,
                out.as_mut_ptr(),
                m.addr() + 8,
                &k,
                Op::new(),
            )
        };
        p.wait(r).expect("atomic");
        assert_eq!(
            u32::from_ne_bytes(out[..4].try_into().unwrap()),
            0x1234_5678
        );
        assert_eq!(out[4..], [0xaa; 4], "{tls}");
        assert_eq!(m.load_u64(8).unwrap(), 0x1234_5679, "{tls}");
        let mut wide = [0xaau8; 8];
        // SAFETY: as above.
        let r = unsafe {
            p.a.atomic_fetch_exact_raw(
                p.ab,
                AtomicOp::Swap,
                AtomicValue::U64(7),
                0,
                wide.as_mut_ptr(),
                m.addr() + 8,
                &k,
                Op::new(),
            )
        };
        p.wait(r).expect("atomic");
        assert_eq!(u64::from_ne_bytes(wide), 0x1234_5679, "{tls}");
    }
}
