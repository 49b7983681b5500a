//! The host's memcpy bandwidth: the ceiling for shared-memory transfers.
//! Run with `cargo test -p rucx-shm --release --test memcpy -- --ignored
//! --nocapture`; it prints figures and asserts nothing about them.

use std::time::Instant;

fn bandwidth(size: usize, total: usize) -> f64 {
    let src = vec![0x5au8; size];
    let mut dst = vec![0u8; size];
    let rounds = (total / size).max(1);
    // Warm-up: fault the pages in.
    dst.copy_from_slice(&src);
    let mut best = f64::MAX;
    for _ in 0..5 {
        let t = Instant::now();
        for _ in 0..rounds {
            dst.copy_from_slice(std::hint::black_box(&src));
            std::hint::black_box(&mut dst);
        }
        best = best.min(t.elapsed().as_secs_f64());
    }
    (rounds * size) as f64 / best
}

#[test]
#[ignore = "measurement; prints the host's memcpy bandwidth"]
fn memcpy_bandwidth() {
    for size in [64 << 10, 1 << 20, 64 << 20] {
        let bw = bandwidth(size, 1 << 30);
        println!("memcpy {:>9} bytes: {:8.0} MB/s", size, bw / 1e6);
    }
}
