//! Several producer threads and one consumer on one FIFO: every message
//! arrives once, intact, and in order per producer.

use rucx_shm::{AlignedBlock, Fifo, FifoConfig};

const PRODUCERS: usize = 3;
const MESSAGES: u32 = 100_000;

/// Message `seq` of producer `id`: 4-byte sequence number, then a length
/// that varies with `seq` and a pattern derived from both.
fn message(id: usize, seq: u32, max: usize, out: &mut Vec<u8>) {
    out.clear();
    out.extend_from_slice(&seq.to_le_bytes());
    let extra = (seq as usize * 7 + id * 13) % (max - 3);
    out.extend((0..extra).map(|k| (k as u32 ^ seq ^ (id as u32 * 31)) as u8));
}

#[test]
fn three_producers_one_consumer() {
    let cfg = FifoConfig {
        elem_size: 64,
        capacity: 64,
        release_every: 16,
        desc_size: 512,
    };
    let buf = AlignedBlock::zeroed_buffer(cfg.region_size().unwrap());
    let fifo = Fifo::new_in(buf, cfg).unwrap();
    let max = fifo.max_payload();

    std::thread::scope(|s| {
        for id in 0..PRODUCERS {
            let fifo = &fifo;
            s.spawn(move || {
                let mut p = fifo.producer();
                let mut msg = Vec::new();
                for seq in 0..MESSAGES {
                    message(id, seq, max, &mut msg);
                    // Split in two parts to exercise gathering.
                    let (a, b) = msg.split_at(msg.len() / 2);
                    while !p.try_push(id as u8, &[a, b]).unwrap() {
                        std::thread::yield_now();
                    }
                }
            });
        }

        let mut c = fifo.consumer().unwrap();
        let mut next = [0u32; PRODUCERS];
        let mut want = Vec::new();
        let mut received = 0;
        while received < PRODUCERS * MESSAGES as usize {
            let got = c
                .poll(|am, data| {
                    let id = am as usize;
                    assert!(id < PRODUCERS, "am id {am}");
                    message(id, next[id], max, &mut want);
                    assert_eq!(data, &want[..], "producer {id} message {}", next[id]);
                    next[id] += 1;
                })
                .unwrap();
            match got {
                Some(()) => received += 1,
                None => std::thread::yield_now(),
            }
        }
        assert_eq!(next, [MESSAGES; PRODUCERS]);
        assert_eq!(c.poll(|_, _| ()).unwrap(), None);
    });
}
