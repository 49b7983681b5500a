//! The harness of the device atomics tests: the devices to run on, an
//! initiator and a target with a mode each, mapped memory, waiting.

use super::double;
#[cfg(feature = "verbs")]
use rucx::ucp::uct::Component;
use rucx::ucp::uct::Registry;
use rucx::ucp::{Context, UcpConfig};
use rucx::{Access, AtomicOp, AtomicValue, Ep, Error, MemMap, Op, Posted, Rkey, Worker};
use std::sync::atomic::Ordering;
use std::sync::Mutex;
use std::time::{Duration, Instant};

pub(crate) const ALL: Access = Access::REMOTE_READ
    .union(Access::REMOTE_WRITE)
    .union(Access::REMOTE_ATOMIC);

/// Tests that count the double's executed atomics run one at a time.
pub(crate) static SERIAL: Mutex<()> = Mutex::new(());

pub(crate) fn serial() -> std::sync::MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}

/// A device to run on: its registry, transport name, and whether its
/// atomics are counted by the double.
#[derive(Clone)]
pub(crate) struct Fabric {
    pub(crate) registry: Registry,
    pub(crate) tls: &'static str,
    pub(crate) counted: bool,
}

pub(crate) fn double_fabric() -> Fabric {
    Fabric {
        registry: Registry::new().with(&double::COMPONENT),
        tls: "rc_amo",
        counted: true,
    }
}

/// `rc_amo`, and `rc_verbs` where a device with atomics exists.
pub(crate) fn fabrics() -> Vec<Fabric> {
    #[allow(unused_mut)] // pushed to with the verbs feature only
    let mut v = vec![double_fabric()];
    #[cfg(feature = "verbs")]
    {
        let found = rucx_verbs::COMPONENT
            .md_open()
            .map(|mds| mds.iter().any(|m| !m.atomic_caps().is_empty()))
            .unwrap_or(false);
        if found {
            v.push(Fabric {
                registry: Registry::new().with(&rucx_verbs::COMPONENT),
                tls: "rc_verbs",
                counted: false,
            });
        } else {
            assert!(
                std::env::var("RUCX_REQUIRE_ALL").as_deref() != Ok("1"),
                "rc_verbs: no RDMA device with atomics (RUCX_REQUIRE_ALL=1)"
            );
            eprintln!("rc_verbs: skipped: no RDMA device");
        }
    }
    v
}

pub(crate) fn context(f: &Fabric, mode: &str) -> Context {
    let tls = f.tls;
    let cfg = UcpConfig::from_lookup(|k| match k {
        "RUCX_TLS" => Some(tls.to_string()),
        "RUCX_ATOMIC_MODE" => Some(mode.to_string()),
        _ => None,
    })
    .expect("config");
    Context::with_registry(cfg, &f.registry).expect("context")
}

pub(crate) fn executed() -> usize {
    double::EXECUTED.load(Ordering::SeqCst)
}

/// An initiator `a` and a target `t`, each of its own context (so each
/// may have its own mode).
pub(crate) struct Pair {
    pub(crate) a: Worker,
    pub(crate) t: Worker,
    pub(crate) at: Ep,
    pub(crate) tctx: Context,
    /// Whether `wait` progresses the target too (device atomics must not
    /// need it once the connection is up).
    pub(crate) target_progress: bool,
}

pub(crate) fn pair_modes(f: &Fabric, a_mode: &str, t_mode: &str) -> Pair {
    let actx = context(f, a_mode);
    let tctx = context(f, t_mode);
    let mut a = actx.create_worker().expect("worker a");
    let mut t = tctx.create_worker().expect("worker t");
    let at = a.connect(&t.address()).expect("a->t");
    let _ta = t.connect(&a.address()).expect("t->a");
    Pair {
        a,
        t,
        at,
        tctx,
        target_progress: true,
    }
}

pub(crate) fn pair(f: &Fabric, mode: &str) -> Pair {
    pair_modes(f, mode, mode)
}

/// 64 bytes of the test's memory, mapped by `tctx`, and its key on `ep`.
pub(crate) fn map(tctx: &Context, w: &Worker, ep: Ep) -> (Box<[u64; 8]>, MemMap, Rkey) {
    map_at(tctx, w, ep, 0, 64)
}

/// 64 bytes of the test's memory of which `len` bytes from byte `off`
/// are mapped by `tctx`, and its key on `ep`.
pub(crate) fn map_at(
    tctx: &Context,
    w: &Worker,
    ep: Ep,
    off: usize,
    len: usize,
) -> (Box<[u64; 8]>, MemMap, Rkey) {
    assert!(off + len <= 64);
    let mut backing = Box::new([0u64; 8]);
    // SAFETY: the map is dropped before the backing (tuple order at the
    // callers' `let`s is backing first, and they drop the map explicitly
    // or at the end of scope in reverse order); while mapped the memory is
    // read only through the map.
    let m = unsafe {
        let p = backing.as_mut_ptr().cast::<u8>().add(off);
        tctx.mem_map(p, len, ALL)
    }
    .expect("mem_map");
    let k = w
        .rkey_unpack(ep, &m.rkey_pack().expect("pack"))
        .expect("unpack");
    (backing, m, k)
}

impl Pair {
    pub(crate) fn map(&self) -> (Box<[u64; 8]>, MemMap, Rkey) {
        map(&self.tctx, &self.a, self.at)
    }

    pub(crate) fn wait(&mut self, p: rucx::Result<Posted<()>>) -> rucx::Result<()> {
        let id = match p? {
            Posted::Done(..) => return Ok(()),
            Posted::InFlight(id) => id,
        };
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            if let Some(r) = self.a.request_test(id) {
                return r.map(|_| ());
            }
            assert!(Instant::now() < deadline, "timed out");
            self.a.progress();
            if self.target_progress {
                self.t.progress();
            }
        }
    }

    pub(crate) fn fetch(
        &mut self,
        op: AtomicOp,
        v: AtomicValue,
        cmp: u64,
        addr: u64,
        k: &Rkey,
    ) -> rucx::Result<u64> {
        let mut old = 0u64;
        // SAFETY: `old` outlives the request, which `wait` completes.
        let p = unsafe {
            self.a
                .atomic_fetch_raw(self.at, op, v, cmp, &mut old, addr, k, Op::new())
        };
        self.wait(p).map(|()| old)
    }

    pub(crate) fn post(
        &mut self,
        op: AtomicOp,
        v: AtomicValue,
        addr: u64,
        k: &Rkey,
    ) -> rucx::Result<()> {
        let p = self.a.atomic_post(self.at, op, v, addr, k, Op::new());
        self.wait(p)
    }
}

/// A target worker in device mode and `n` initiator workers, each in a
/// context of its own, connected both ways: (target's context, target,
/// initiators with their endpoints to the target).
pub(crate) fn target_and_initiators(f: &Fabric, n: usize) -> (Context, Worker, Vec<(Worker, Ep)>) {
    let tctx = context(f, "device");
    let mut t = tctx.create_worker().expect("target");
    let mut inits = Vec::new();
    for _ in 0..n {
        let ctx = context(f, "device");
        let mut w = ctx.create_worker().expect("initiator");
        let ep = w.connect(&t.address()).expect("connect");
        t.connect(&w.address()).expect("connect back");
        inits.push((w, ep));
    }
    (tctx, t, inits)
}

pub(crate) fn unsupported<T: std::fmt::Debug>(r: rucx::Result<T>) -> String {
    match r {
        Err(Error::Unsupported(s)) => s,
        other => panic!("expected an unsupported error, got {other:?}"),
    }
}
