use std::ptr::NonNull;

use super::*;
use crate::layout::{encode, ELEM_HEADER_SIZE, HEADER_SIZE, INLINE};
use crate::sync::Ordering;

fn config(elem_size: usize, capacity: usize, release_every: usize) -> FifoConfig {
    FifoConfig {
        elem_size,
        capacity,
        release_every,
        desc_size: 0,
    }
}

fn fifo(cfg: FifoConfig) -> Fifo {
    let buf = AlignedBlock::zeroed_buffer(cfg.region_size().unwrap());
    Fifo::new_in(buf, cfg).unwrap()
}

fn pop(c: &mut Consumer<&Fifo>) -> Option<(u8, Vec<u8>)> {
    c.poll(|am, data| (am, data.to_vec())).unwrap()
}

fn tail(f: &Fifo) -> u64 {
    f.region.tail().load(Ordering::Relaxed)
}

#[test]
fn push_then_poll_in_order_with_parts() {
    let f = fifo(config(64, 4, 2));
    let mut p = f.producer();
    let mut c = f.consumer().unwrap();
    assert_eq!(pop(&mut c), None);
    assert!(p.try_push(7, &[b"ab", b"", b"cde"]).unwrap());
    assert!(p.try_push(8, &[]).unwrap());
    assert_eq!(pop(&mut c), Some((7, b"abcde".to_vec())));
    assert_eq!(pop(&mut c), Some((8, Vec::new())));
    assert_eq!(pop(&mut c), None);
}

#[test]
fn wraps_around_many_laps() {
    let f = fifo(config(32, 4, 2));
    let max = f.max_payload();
    assert_eq!(max, 24);
    let mut p = f.producer();
    let mut c = f.consumer().unwrap();
    // 1000 laps, with the FIFO between 1 and 3 elements full.
    let mut next_out = 0u32;
    for i in 0..4000u32 {
        let len = i as usize % (max + 1);
        let msg: Vec<u8> = (0..len).map(|k| (i as usize + k) as u8).collect();
        assert!(p.try_push(i as u8, &[&msg]).unwrap(), "push {i}");
        if i % 3 != 0 || i > 3990 {
            while let Some((am, data)) = pop(&mut c) {
                let len = next_out as usize % (max + 1);
                let want: Vec<u8> = (0..len).map(|k| (next_out as usize + k) as u8).collect();
                assert_eq!((am, data), (next_out as u8, want));
                next_out += 1;
            }
        }
    }
    assert_eq!(next_out, 4000);
    assert_eq!(f.region.head().load(Ordering::Relaxed), 4000);
}

#[test]
fn full_fifo_refuses_until_release() {
    let f = fifo(config(32, 4, 2));
    let mut p = f.producer();
    for i in 0..4 {
        assert!(p.try_push(i, &[&[i]]).unwrap());
    }
    assert!(!p.try_push(9, &[b"x"]).unwrap());
    assert!(!f.producer().try_push(9, &[b"x"]).unwrap());
    let mut c = f.consumer().unwrap();
    // One consumed but not released yet: still full for producers.
    assert_eq!(pop(&mut c), Some((0, vec![0])));
    assert!(!p.try_push(9, &[b"x"]).unwrap());
    // Second one releases two slots.
    assert_eq!(pop(&mut c), Some((1, vec![1])));
    assert!(p.try_push(4, &[&[4]]).unwrap());
    assert!(p.try_push(5, &[&[5]]).unwrap());
    assert!(!p.try_push(9, &[b"x"]).unwrap());
    for i in 2..6 {
        assert_eq!(pop(&mut c), Some((i, vec![i])));
    }
    assert_eq!(pop(&mut c), None);
}

#[test]
fn tail_is_released_in_batches() {
    let f = fifo(config(32, 16, 4));
    let mut p = f.producer();
    let mut c = f.consumer().unwrap();
    for i in 0..10 {
        assert!(p.try_push(i, &[]).unwrap());
    }
    let mut seen = Vec::new();
    for _ in 0..10 {
        assert!(pop(&mut c).is_some());
        seen.push(tail(&f));
    }
    assert_eq!(seen, [0, 0, 0, 4, 4, 4, 4, 8, 8, 8]);
    // Dropping the consumer releases the rest; a new one resumes there.
    drop(c);
    assert_eq!(tail(&f), 10);
    assert!(p.try_push(42, &[b"z"]).unwrap());
    let mut c = f.consumer().unwrap();
    assert_eq!(pop(&mut c), Some((42, b"z".to_vec())));
}

#[test]
fn one_consumer_at_a_time() {
    let f = fifo(FifoConfig::default());
    let c = f.consumer().unwrap();
    assert_eq!(f.consumer().unwrap_err(), FifoError::ConsumerTaken);
    drop(c);
    assert!(f.consumer().is_ok());
}

#[test]
fn payload_too_long_is_an_error() {
    let f = fifo(config(64, 4, 2));
    let mut p = f.producer();
    let big = [0u8; 57];
    assert_eq!(
        p.try_push(1, &[&big]),
        Err(FifoError::PayloadTooLong { len: 57, max: 56 })
    );
    assert_eq!(
        p.try_push(1, &[&big[..30], &big[..27]]),
        Err(FifoError::PayloadTooLong { len: 57, max: 56 })
    );
    assert!(p.try_push(1, &[&big[..56]]).unwrap());
}

#[test]
fn corrupt_elements_are_rejected_and_skipped() {
    let f = fifo(config(64, 4, 4));
    let mut p = f.producer();
    let mut c = f.consumer().unwrap();
    for i in 0..4 {
        assert!(p.try_push(i, &[b"ok"]).unwrap());
    }
    // Lap 0 owner bit is 1. Length one past the element, huge length,
    // reserved bit set; element 3 stays good.
    let bad = [
        encode(1, INLINE, 0, 0, 57),
        encode(1, INLINE, 0, 0, 0) | (u64::from(u32::MAX) << 32),
        encode(1, INLINE, 0, 0, 2) | 1 << 4,
    ];
    for (i, w) in bad.iter().enumerate() {
        f.region.ctl(i).store(*w, Ordering::Relaxed);
    }
    for (i, w) in bad.iter().enumerate() {
        assert_eq!(
            c.poll(|_, _| panic!("handler called on corrupt element")),
            Err(FifoError::Corrupt {
                position: i as u64,
                word: *w
            })
        );
    }
    assert_eq!(pop(&mut c), Some((3, b"ok".to_vec())));
    // Skipped elements were released like consumed ones.
    assert_eq!(tail(&f), 4);
}

#[test]
fn corrupt_counters_never_leave_the_region() {
    let f = fifo(config(32, 4, 1));
    let mut p = f.producer();
    for i in 0..4 {
        assert!(p.try_push(i, &[]).unwrap());
    }
    // Full, so the producer reloads tail: one ahead of head reads as full.
    f.region.tail().store(1000, Ordering::Relaxed);
    assert!(!p.try_push(1, &[b"x"]).unwrap());
    // Huge head and tail (positions have 63 bits; bit 63 is ARMED):
    // indices are masked, so pushing stays in bounds, and the counter
    // wraps within 63 bits.
    let top = (1u64 << 63) - 1;
    f.region.head().store(top - 1, Ordering::Relaxed);
    f.region.tail().store(top - 2, Ordering::Relaxed);
    assert!(p.try_push(1, &[b"x"]).unwrap());
    assert!(p.try_push(2, &[b"y"]).unwrap());
    assert_eq!(f.region.head().load(Ordering::Relaxed), 0);
    // All bits set: reads as full, never as a claimable position.
    f.region.head().store(u64::MAX, Ordering::Relaxed);
    f.region.tail().store(0, Ordering::Relaxed);
    assert!(!f.producer().try_push(1, &[b"x"]).unwrap());
}

#[test]
fn construction_validates_geometry_and_region() {
    let ok = config(128, 8, 4);
    let needed = ok.region_size().unwrap();
    assert_eq!(needed, HEADER_SIZE + 8 * 128);
    assert_eq!(ok.max_payload().unwrap(), 128 - ELEM_HEADER_SIZE);
    for bad in [
        config(100, 8, 4),
        config(8, 8, 4),
        config(128, 6, 4),
        config(128, 8, 9),
    ] {
        let buf = AlignedBlock::zeroed_buffer(needed);
        assert!(Fifo::new_in(buf, bad).is_err(), "{bad:?}");
    }
    let small = AlignedBlock::zeroed_buffer(needed - 64);
    assert_eq!(
        Fifo::new_in(small, ok).unwrap_err(),
        FifoError::RegionTooSmall {
            len: needed - 64,
            needed
        }
    );
    assert_eq!(fifo(ok).config(), ok);
}

#[test]
fn raw_init_and_attach_share_one_region() {
    let cfg = config(64, 8, 4);
    let len = cfg.region_size().unwrap();
    let mut buf = AlignedBlock::zeroed_buffer(len + 64);
    let base = NonNull::new(buf.as_mut_ptr().cast::<u8>()).unwrap();

    // SAFETY: `buf` outlives every Fifo below and is not otherwise touched
    // while they exist.
    unsafe {
        assert!(matches!(
            Fifo::attach_raw(base, len, cfg),
            Err(FifoError::BadMagic { found: 0 })
        ));
        assert!(matches!(
            Fifo::from_raw(NonNull::new(base.as_ptr().add(8)).unwrap(), len, cfg),
            Err(FifoError::Misaligned { .. })
        ));
        let owner = Fifo::from_raw(base, len, cfg).unwrap();
        assert_eq!(
            Fifo::attach_raw(base, len, config(64, 4, 4)).unwrap_err(),
            FifoError::GeometryMismatch {
                elem_size: 64,
                capacity: 8,
                desc_size: 0,
            }
        );
        let sender = Fifo::attach_raw(base, len, cfg).unwrap();
        assert!(sender.producer().try_push(3, &[b"hello"]).unwrap());
        let mut c = owner.consumer().unwrap();
        assert_eq!(pop(&mut c), Some((3, b"hello".to_vec())));
    }
}

fn desc_fifo() -> Fifo {
    fifo(FifoConfig {
        desc_size: 256,
        ..config(32, 4, 2)
    })
}

#[test]
fn long_payloads_travel_in_descriptors_with_source_ids() {
    let f = desc_fifo();
    assert_eq!((f.max_inline(), f.max_payload()), (24, 256));
    let mut p = f.producer();
    let mut c = f.consumer().unwrap();
    let long: Vec<u8> = (0..=255).collect();
    for round in 0..5u16 {
        // inline, exactly inline, one past inline, largest
        for (i, len) in [3usize, 24, 25, 256].into_iter().enumerate() {
            let src = round * 10 + i as u16;
            let push = p.try_push_from(i as u8, src, &[&long[..len / 2], &long[len / 2..len]]);
            assert_eq!(push, Ok(Push::Sent { wake: false }));
            let got = c
                .poll_msg(|m| (m.am_id, m.src, m.data.to_vec()))
                .unwrap()
                .unwrap();
            assert_eq!(got, (i as u8, src, long[..len].to_vec()));
        }
    }
    assert_eq!(
        p.try_push_from(1, 1, &[&long, b"x"]),
        Err(FifoError::PayloadTooLong { len: 257, max: 256 })
    );
}

#[test]
fn arming_hands_one_wake_to_the_next_producer() {
    let f = desc_fifo();
    let mut p = f.producer();
    let mut c = f.consumer().unwrap();
    assert!(c.arm(), "empty FIFO arms");
    assert!(c.arm(), "arming twice stays armed");
    assert_eq!(
        p.try_push_from(1, 0, &[b"a"]),
        Ok(Push::Sent { wake: true })
    );
    assert_eq!(
        p.try_push_from(1, 0, &[b"b"]),
        Ok(Push::Sent { wake: false })
    );
    assert!(!c.arm(), "unread messages: do not sleep");
    assert_eq!(pop(&mut c), Some((1, b"a".to_vec())));
    assert_eq!(pop(&mut c), Some((1, b"b".to_vec())));
    assert!(c.arm());
    // A full FIFO still reports a wake once space frees up and a claim
    // succeeds.
    assert_eq!(tail(&f), 2, "arming released the tail");
}

#[test]
fn arming_fails_while_a_claim_is_unpublished_and_skip_recovers() {
    let f = desc_fifo();
    let mut c = f.consumer().unwrap();
    assert!(!c.is_stuck());
    assert!(!c.skip_stuck(), "nothing to skip");
    // A producer that claims and dies before publishing.
    f.region.head().store(1, Ordering::Relaxed);
    assert!(c.is_stuck());
    assert!(!c.arm(), "a claim is outstanding");
    assert_eq!(pop(&mut c), None);
    assert!(c.skip_stuck());
    assert!(!c.is_stuck());
    let mut p = f.producer();
    // Go round twice: the padded element must not look ready a lap later.
    for i in 0..8u8 {
        assert!(p.try_push(i, &[&[i]]).unwrap());
        assert_eq!(pop(&mut c), Some((i, vec![i])));
        assert_eq!(pop(&mut c), None);
    }
}

#[test]
fn short_pushes_match_part_pushes() {
    let f = fifo(config(64, 8, 4));
    let mut p = f.producer();
    let mut c = Consumer::new(&f).unwrap();
    let header = 0x0102_0304_0506_0708u64;
    for len in [0usize, 1, 7, 8, 40] {
        let payload: Vec<u8> = (0..len as u8).collect();
        let short = p.try_push_short(3, 0, header, &payload).unwrap();
        assert_eq!(short, Push::Sent { wake: false });
        assert!(p.try_push(3, &[&header.to_le_bytes(), &payload]).unwrap());
        let a = pop(&mut c).expect("short message");
        let b = pop(&mut c).expect("part message");
        assert_eq!(a, b, "payload of {len} bytes");
        assert_eq!(a.1.len(), 8 + len);
    }
    // 64-byte elements leave 56 bytes inline: 48 fit after the header, 49
    // do not.
    assert!(p.try_push_short(3, 0, header, &[0; 48]).unwrap() != Push::Full);
    assert!(matches!(
        p.try_push_short(3, 0, header, &[0; 49]),
        Err(FifoError::PayloadTooLong { len: 57, max: 56 })
    ));
}
