//! The measurement behind the performance model's constants (`iface.rs`).

use std::time::Instant;

use uct::testing::checks::pattern;
use uct::Access;

use super::{available, ep_to_self, open_seg, rma, Region};

/// Prints what the performance model's constants come from (run with
/// `--release --ignored --nocapture`).
#[test]
#[ignore = "a measurement, not a check"]
fn model_estimate() {
    if !available() {
        return;
    }
    let mut a = open_seg("auto");
    let ep = ep_to_self(&mut *a);
    let big = 64 << 20;
    let src = Region::new(&pattern(1, big), Access::REMOTE_READ);
    let dst = Region::new(&vec![0; big], Access::empty());
    let time = |f: &mut dyn FnMut(), n: usize| {
        f();
        let t = Instant::now();
        for _ in 0..n {
            f();
        }
        t.elapsed().as_secs_f64() / n as f64
    };
    let small = time(
        &mut || rma(&mut *a, ep, false, &[dst.iov(0, 8)], src.addr(0), &src.key).unwrap(),
        100_000,
    );
    let pid = std::process::id() as libc::pid_t;
    let mut scratch = super::super::sys::Scratch::default();
    let raw = time(
        &mut || {
            let iov = [dst.iov(0, 8)];
            // SAFETY: `dst` is valid for writes and unused meanwhile.
            let r = unsafe {
                super::super::sys::copy(
                    pid,
                    super::super::sys::Dir::Read,
                    &iov,
                    src.addr(0),
                    8,
                    8,
                    &mut scratch,
                )
            };
            r.unwrap();
        },
        100_000,
    );
    let large = time(
        &mut || {
            rma(
                &mut *a,
                ep,
                false,
                &[dst.iov(0, big)],
                src.addr(0),
                &src.key,
            )
            .unwrap()
        },
        10,
    );
    let copy = time(
        &mut || {
            // SAFETY: two distinct live buffers of `big` bytes.
            unsafe { std::ptr::copy_nonoverlapping(src.ptr, dst.ptr, big) };
            std::hint::black_box(dst.ptr);
        },
        10,
    );
    println!(
        "get of 8 bytes: {:.2} us (the system call alone {:.2} us); get of 64 MiB: {:.2} GB/s; \
         memcpy of 64 MiB: {:.2} GB/s",
        small * 1e6,
        raw * 1e6,
        big as f64 / large / 1e9,
        big as f64 / copy / 1e9
    );
}
