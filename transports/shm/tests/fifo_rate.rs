//! Raw FIFO message rate between two threads (one producer, one consumer),
//! the ceiling for the posix transport's small messages. Run with
//! `cargo test -p rucx-shm --release --test fifo_rate -- --ignored
//! --nocapture`; it prints figures and asserts nothing about them.

use std::time::Instant;

use rucx_shm::{AlignedBlock, Fifo, FifoConfig};

#[test]
#[ignore = "measurement; prints the FIFO's message rate"]
fn fifo_message_rate() {
    for len in [8usize, 32, 100, 1024, 8192] {
        let cfg = FifoConfig::default();
        let fifo =
            Fifo::new_in(AlignedBlock::zeroed_buffer(cfg.region_size().unwrap()), cfg).unwrap();
        let n = 5_000_000u64;
        let msg = vec![7u8; len];
        let t = Instant::now();
        std::thread::scope(|s| {
            s.spawn(|| {
                let mut p = fifo.producer();
                for _ in 0..n {
                    while !p.try_push(1, &[&msg]).unwrap() {
                        std::hint::spin_loop();
                    }
                }
            });
            let mut c = fifo.consumer().unwrap();
            let mut got = 0;
            let mut sink = vec![0u8; len];
            while got < n {
                if c.poll(|_, d| sink.copy_from_slice(d)).unwrap().is_some() {
                    got += 1;
                }
            }
        });
        let secs = t.elapsed().as_secs_f64();
        println!(
            "{len:>5} bytes: {:6.1} M msg/s, {:7.0} MB/s",
            n as f64 / secs / 1e6,
            n as f64 * len as f64 / secs / 1e6
        );
    }
}
