//! UCM's entry points that programs call to report released memory:
//! `ucm_set_external_event`, `ucm_test_events`,
//! `ucm_test_external_events`, `ucm_vm_munmap` (`ucm/api/ucm.h`).
//!
//! rucx installs no memory hooks (no `munmap`/`brk` interception): what
//! rendezvous transfers registered stays cached (with
//! `RUCX_RCACHE_ENABLE`) until the program says the memory goes away. So
//! `ucp_init` turns the cache off unless the program declared that it
//! reports unmaps ([`unmaps_reported`]) or set `RUCX_RCACHE_ENABLE`
//! itself.
//! `ucm_vm_munmap` is that report: the range is invalidated in the
//! registration caches of every live context ([`rucx::Context::rcache_invalidate`]).
//! Programs report from memory hooks that can run inside `malloc`'s own
//! trimming (Open MPI's do, on `sbrk`), where allocating or freeing
//! deadlocks; so `ucm_vm_munmap` only records the range in a fixed table,
//! and [`drain`], called by every worker entry point (through
//! `Worker::with`) and by the memory calls, invalidates it.
//! The contexts are kept in a process-wide list of weak handles, so the
//! list never keeps one alive; [`register`] adds one (the memory calls of
//! `rkey.rs` do it for the context they are given, which covers the
//! programs that map memory; a context that does neither is added when
//! `ucp_init` calls [`register`]).

use crate::status::{self, guard, guard_status};
use crate::types::StatusCode;
use parking_lot::Mutex;
use rucx::ucp::WeakContext;
use std::ffi::{c_int, c_void};
use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};

/// `UCM_EVENT_VM_UNMAPPED`.
pub const UCM_EVENT_VM_UNMAPPED: c_int = 1 << 17;

/// The live contexts, weakly held.
static CONTEXTS: Mutex<Vec<WeakContext>> = Mutex::new(Vec::new());

/// Events the program said it reports itself (`ucm_set_external_event`).
static EXTERNAL: AtomicI32 = AtomicI32::new(0);

/// Adds `ctx` to the contexts `ucm_vm_munmap` reaches (once; dead
/// entries are dropped on the way).
pub fn register(ctx: &rucx::ucp::Context) {
    let mut list = CONTEXTS.lock();
    list.retain(|w| w.upgrade().is_some());
    if !list.iter().any(|w| w.is(ctx)) {
        list.push(ctx.downgrade());
    }
}

/// The events declared external so far.
pub fn external_events() -> c_int {
    EXTERNAL.load(Ordering::Relaxed)
}

/// Whether the program said it reports unmapped memory
/// (`UCM_EVENT_VM_UNMAPPED`): `ucp_init` keeps the registration cache's
/// `auto` only then, and turns it off otherwise.
pub fn unmaps_reported() -> bool {
    external_events() & UCM_EVENT_VM_UNMAPPED != 0
}

/// Invalidates `len` bytes at `addr` in every live context; how many
/// contexts it reached.
pub fn invalidate(addr: *const u8, len: usize) -> usize {
    // Upgrade under the lock, invalidate outside it: a context dropped
    // meanwhile is still whole through its upgraded handle.
    let live: Vec<_> = {
        let mut list = CONTEXTS.lock();
        list.retain(|w| w.upgrade().is_some());
        list.iter().filter_map(|w| w.upgrade()).collect()
    };
    for c in &live {
        c.rcache_invalidate(addr, len);
    }
    live.len()
}

/// `ucm_set_external_event`: the program reports `events` itself
/// (`UCM_EVENT_VM_UNMAPPED` through `ucm_vm_munmap`). Recorded; rucx has
/// no hooks to turn off.
///
/// # Safety
///
/// None: any value is accepted.
#[no_mangle]
pub unsafe extern "C" fn ucm_set_external_event(events: c_int) {
    guard((), || {
        EXTERNAL.fetch_or(events, Ordering::Relaxed);
    })
}

/// `ucm_test_events`: `UCS_OK` (rucx relies on no hooks, so there are
/// none that could be missing).
///
/// # Safety
///
/// None: any value is accepted.
#[no_mangle]
pub unsafe extern "C" fn ucm_test_events(_events: c_int) -> StatusCode {
    guard_status(|| status::OK)
}

/// `ucm_test_external_events`: `UCS_OK`.
///
/// # Safety
///
/// None: any value is accepted.
#[no_mangle]
pub unsafe extern "C" fn ucm_test_external_events(_events: c_int) -> StatusCode {
    guard_status(|| status::OK)
}

/// `ucm_vm_munmap`: `length` bytes at `addr` are about to be released;
/// registrations cached over them end in every live context, before any
/// worker or memory call uses a cache again (the range is recorded here
/// and invalidated by [`drain`]: this may run inside the allocator). The
/// memory itself is not touched (nor unmapped).
///
/// # Safety
///
/// None: the range is only compared with cached ones.
#[no_mangle]
pub unsafe extern "C" fn ucm_vm_munmap(addr: *mut c_void, length: usize) {
    guard((), || {
        if length > 0 {
            defer(addr as usize, length);
        }
    })
}

/// Ranges reported and not invalidated yet, at most this many; beyond,
/// the next [`drain`] invalidates everything.
const PENDING_MAX: usize = 64;

/// Ranges `ucm_vm_munmap` recorded for the next [`drain`].
struct Pending {
    ranges: [(usize, usize); PENDING_MAX],
    n: usize,
    overflow: bool,
}

/// The reports not handled yet. A `std` mutex: locking it never
/// allocates, and nothing that allocates runs while it is held.
static PENDING: std::sync::Mutex<Pending> = std::sync::Mutex::new(Pending {
    ranges: [(0, 0); PENDING_MAX],
    n: 0,
    overflow: false,
});

/// Whether [`PENDING`] holds anything (checked without the lock).
static HAS_PENDING: AtomicBool = AtomicBool::new(false);

/// Records a released range without allocating or freeing: programs
/// (Open MPI's memory hooks) report from inside `malloc`'s trimming, with
/// the allocator's lock held, where a call to `malloc` or `free` would
/// deadlock. The caches see it at the next [`drain`].
fn defer(addr: usize, len: usize) {
    let mut p = PENDING.lock().unwrap_or_else(|e| e.into_inner());
    if p.n < PENDING_MAX {
        let n = p.n;
        p.ranges[n] = (addr, len);
        p.n += 1;
    } else {
        p.overflow = true;
    }
    HAS_PENDING.store(true, Ordering::Release);
}

/// Invalidates the ranges `ucm_vm_munmap` reported so far in every live
/// context (everything, if more were reported than were kept). Called
/// before the worker and memory calls use a registration cache; cheap
/// when nothing is pending.
#[inline]
pub fn drain() {
    if HAS_PENDING.load(Ordering::Relaxed) {
        drain_pending();
    }
}

/// [`drain`] once something was reported.
#[cold]
fn drain_pending() {
    if !HAS_PENDING.swap(false, Ordering::Acquire) {
        return;
    }
    let (ranges, n, overflow) = {
        let mut p = PENDING.lock().unwrap_or_else(|e| e.into_inner());
        let out = (p.ranges, p.n, p.overflow);
        p.n = 0;
        p.overflow = false;
        out
    };
    if overflow {
        invalidate(std::ptr::null(), usize::MAX);
    } else {
        for &(addr, len) in &ranges[..n] {
            invalidate(addr as *const u8, len);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rucx::ucp::UcpConfig;
    use rucx::{Op, Posted};

    fn context() -> rucx::Context {
        let cfg = UcpConfig::from_lookup(|k| match k {
            "RUCX_TLS" => Some("shm".into()),
            "RUCX_RNDV_THRESH" => Some("16k".into()),
            "RUCX_RCACHE_ENABLE" => Some("yes".into()),
            "RUCX_RNDV_SPLIT_THRESH" => Some("inf".into()),
            _ => None,
        })
        .expect("config");
        rucx::Context::with_config(cfg).expect("context")
    }

    /// Sends `src` to `dst` by rendezvous, driving both workers.
    fn transfer(a: &mut rucx::Worker, b: &mut rucx::Worker, ep: rucx::Ep, src: &[u8]) {
        let mut dst = vec![0u8; src.len()];
        // SAFETY: both buffers outlive the operations, completed below.
        let r = unsafe { b.tag_recv_raw(dst.as_mut_ptr(), dst.len(), 1, u64::MAX, Op::new()) };
        // SAFETY: as above.
        let s = unsafe { a.tag_send_raw(ep, src.as_ptr(), src.len(), 1, Op::new()) };
        let ids: Vec<_> = [(true, r.unwrap()), (false, s.unwrap())]
            .into_iter()
            .filter_map(|(recv, p)| match p {
                Posted::InFlight(id) => Some((recv, id)),
                Posted::Done(..) => None,
            })
            .collect();
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
        let mut left = ids;
        while !left.is_empty() {
            left.retain(|&(recv, id)| {
                let w = if recv { &mut *b } else { &mut *a };
                match w.request_test(id) {
                    Some(r) => {
                        r.expect("transfer");
                        false
                    }
                    None => true,
                }
            });
            assert!(std::time::Instant::now() < deadline, "timed out");
            a.progress();
            b.progress();
        }
        assert!(dst == src);
    }

    #[test]
    fn vm_munmap_invalidates_cached_registrations_of_live_contexts() {
        let ctx = context();
        register(&ctx);
        register(&ctx);
        let mut a = ctx.create_worker().unwrap();
        let mut b = ctx.create_worker().unwrap();
        let ep = a.connect(&b.address()).unwrap();
        let src: Vec<u8> = (0..200_000u32).map(|i| i as u8).collect();
        transfer(&mut a, &mut b, ep, &src);
        let before = ctx.rcache_stats();
        assert!(before.regions >= 1, "the send registered: {before:?}");
        // SAFETY: any arguments are accepted.
        unsafe {
            ucm_set_external_event(UCM_EVENT_VM_UNMAPPED);
            assert_eq!(ucm_test_events(UCM_EVENT_VM_UNMAPPED), status::OK);
            assert_eq!(ucm_test_external_events(UCM_EVENT_VM_UNMAPPED), status::OK);
            // Elsewhere: nothing ends.
            ucm_vm_munmap(8usize as *mut c_void, 8);
        }
        drain();
        assert_eq!(
            external_events() & UCM_EVENT_VM_UNMAPPED,
            UCM_EVENT_VM_UNMAPPED
        );
        assert_eq!(ctx.rcache_stats().regions, before.regions);
        // SAFETY: as above.
        unsafe { ucm_vm_munmap(src.as_ptr() as *mut c_void, src.len()) };
        // Recorded only; the caches see it at the next drain.
        assert_eq!(ctx.rcache_stats().regions, before.regions);
        drain();
        let after = ctx.rcache_stats();
        assert!(
            after.invalidations > before.invalidations && after.regions == 0,
            "{before:?} -> {after:?}"
        );
        // Registered twice, listed once; a dropped context is not upgraded.
        let weak = ctx.downgrade();
        assert_eq!(CONTEXTS.lock().iter().filter(|w| w.is(&ctx)).count(), 1);
        drop((a, b, ctx));
        assert!(weak.upgrade().is_none());
        // Nothing left to reach through it.
        invalidate(src.as_ptr(), 1);
    }

    #[test]
    fn ucp_init_lists_the_context_before_any_mapping() {
        use crate::context::{ucp_cleanup, ucp_init_version, Context, API_MAJOR};
        use crate::types::Params;
        let params = Params {
            field_mask: 0,
            features: 0,
            request_size: 0,
            request_init: None,
            request_cleanup: None,
            tag_sender_mask: 0,
            mt_workers_shared: 0,
            estimated_num_eps: 0,
            estimated_num_ppn: 0,
            name: std::ptr::null(),
        };
        let mut c: *mut Context = std::ptr::null_mut();
        // SAFETY: valid parameters, no configuration, a writable result.
        let st = unsafe { ucp_init_version(API_MAJOR, 0, &params, std::ptr::null(), &mut c) };
        assert_eq!(st, status::OK);
        // SAFETY: the context just made, alive until ucp_cleanup below.
        let ctx = unsafe { &(*c).ctx };
        assert_eq!(CONTEXTS.lock().iter().filter(|w| w.is(ctx)).count(), 1);
        let weak = ctx.downgrade();
        // SAFETY: made above, not used after.
        unsafe { ucp_cleanup(c) };
        assert!(weak.upgrade().is_none());
    }
}
