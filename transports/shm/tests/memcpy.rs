//! The host's memcpy bandwidth: the ceiling for shared-memory transfers.
//! Run with `cargo test -p rucx-shm --release --test memcpy -- --ignored
//! --nocapture`; it prints figures and asserts nothing about them. Beside
//! the library `memcpy` it measures `copy_large`, the copy of one-sided
//! operations on mapped memory.

use std::time::Instant;

use rucx_ucs::copy::copy_large;

/// A page-aligned buffer of `size` bytes, all `byte`.
fn page_aligned(size: usize, byte: u8) -> &'static mut [u8] {
    let layout = std::alloc::Layout::from_size_align(size, 4096).unwrap();
    // SAFETY: `size` is not zero; the memory is written before it is read
    // and leaked (a measurement program).
    unsafe {
        let p = std::alloc::alloc(layout);
        assert!(!p.is_null());
        std::ptr::write_bytes(p, byte, size);
        std::slice::from_raw_parts_mut(p, size)
    }
}

/// Bytes per second `copy` moves between two page-aligned buffers of
/// `size` bytes.
fn bandwidth(size: usize, total: usize, copy: fn(&[u8], &mut [u8])) -> f64 {
    let src: &[u8] = page_aligned(size, 0x5a);
    let dst = page_aligned(size, 0);
    let rounds = (total / size).max(1);
    // Warm-up: fault the pages in.
    copy(src, dst);
    let mut best = f64::MAX;
    for _ in 0..5 {
        let t = Instant::now();
        for _ in 0..rounds {
            copy(std::hint::black_box(src), dst);
            std::hint::black_box(&mut *dst);
        }
        best = best.min(t.elapsed().as_secs_f64());
    }
    (rounds * size) as f64 / best
}

#[test]
#[ignore = "measurement; prints the host's memcpy bandwidth"]
fn memcpy_bandwidth() {
    fn library(src: &[u8], dst: &mut [u8]) {
        dst.copy_from_slice(src);
    }
    fn large(src: &[u8], dst: &mut [u8]) {
        assert_eq!(src.len(), dst.len());
        // SAFETY: two distinct buffers of the same length.
        unsafe { copy_large(src.as_ptr(), dst.as_mut_ptr(), src.len()) }
    }
    for size in [64 << 10, 1 << 20, 64 << 20] {
        let bw = bandwidth(size, 1 << 30, library);
        let lg = bandwidth(size, 1 << 30, large);
        println!(
            "memcpy {:>9} bytes: {:8.0} MB/s   copy_large: {:8.0} MB/s",
            size,
            bw / 1e6,
            lg / 1e6
        );
    }
}
