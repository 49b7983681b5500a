use super::*;

fn sample() -> TestParams {
    TestParams {
        test: TestKind::TagBw,
        msg_sizes: vec![16, 48, 8192],
        iters: 12345,
        warmup: 77,
        outstanding: 9,
        percentile: 99.5,
        validate: true,
        err_handling: true,
        sockaddr: true,
        iov: (true, false),
        threads: 1,
        busy_target: false,
        worker_per_thread: false,
    }
}

#[test]
fn round_trip() {
    for p in [sample(), TestParams::new(TestKind::TagLat)] {
        let block = p.encode();
        assert_eq!(
            block.len(),
            HEADER_LEN + 8 * p.msg_sizes.len() + TRAILER_LEN
        );
        assert_eq!(TestParams::decode(&block).unwrap(), p);
    }
}

#[test]
fn flags_round_trip_one_by_one() {
    for bits in 0..32u32 {
        let (validate, err_handling, sockaddr) = (bits & 1 != 0, bits & 2 != 0, bits & 4 != 0);
        let p = TestParams {
            validate,
            err_handling,
            sockaddr,
            iov: (bits & 8 != 0, bits & 16 != 0),
            ..sample()
        };
        let block = p.encode();
        let flags = u32::from_le_bytes(block[8..12].try_into().unwrap());
        assert_eq!(flags, bits);
        assert_eq!(TestParams::decode(&block).unwrap(), p);
    }
}

#[test]
fn defaults_follow_ucx() {
    let p = TestParams::new(TestKind::TagLat);
    assert_eq!(
        (p.iters, p.warmup, p.message_size()),
        (1_000_000, 10_000, 8)
    );
    assert_eq!(p.outstanding, 1);
    assert_eq!(TestParams::new(TestKind::TagBw).outstanding, 32);
    assert_eq!(p.warmup_iters(), 10_000);
    let short = TestParams {
        iters: 95,
        ..p.clone()
    };
    assert_eq!(short.warmup_iters(), 10);
    let endless = TestParams { iters: 0, ..p };
    assert_eq!(endless.warmup_iters(), 0);
    assert_eq!(sample().message_size(), 16 + 48 + 8192);
    assert_eq!(sample().buffer_slots(), 9);
}

#[test]
fn every_truncation_is_an_error() {
    let block = sample().encode();
    for len in 0..block.len() {
        assert!(TestParams::decode(&block[..len]).is_err(), "len {len}");
    }
    let mut long = block.clone();
    long.push(0);
    assert!(TestParams::decode(&long).is_err());
}

fn patched(offset: usize, bytes: &[u8]) -> Vec<u8> {
    let mut block = sample().encode();
    block[offset..offset + bytes.len()].copy_from_slice(bytes);
    block
}

#[test]
fn bad_fields_are_errors() {
    let cases: Vec<(&str, Vec<u8>)> = vec![
        ("magic", patched(0, b"XXXX")),
        ("version", patched(4, &1u16.to_le_bytes())),
        ("test id", patched(6, &999u16.to_le_bytes())),
        ("flags", patched(8, &0x8000_0000u32.to_le_bytes())),
        ("outstanding 0", patched(28, &0u32.to_le_bytes())),
        (
            "outstanding big",
            patched(28, &(MAX_OUTSTANDING + 1).to_le_bytes()),
        ),
        (
            "percentile nan",
            patched(32, &f64::NAN.to_bits().to_le_bytes()),
        ),
        (
            "percentile 101",
            patched(32, &101f64.to_bits().to_le_bytes()),
        ),
        ("count 0", patched(40, &0u32.to_le_bytes())),
        ("count 2", patched(40, &2u32.to_le_bytes())),
        ("count huge", patched(40, &u32::MAX.to_le_bytes())),
        ("size huge", patched(44, &u64::MAX.to_le_bytes())),
        (
            "size over limit",
            patched(44, &(MAX_MESSAGE_SIZE + 1).to_le_bytes()),
        ),
    ];
    for (what, block) in cases {
        assert!(TestParams::decode(&block).is_err(), "{what}");
    }
}

#[test]
fn one_sided_size_rules() {
    let with = |test, sizes: Vec<usize>| TestParams {
        msg_sizes: sizes,
        ..TestParams::new(test)
    };
    for test in [
        TestKind::Add,
        TestKind::Fadd,
        TestKind::Swap,
        TestKind::Cswap,
    ] {
        with(test, vec![4]).check().unwrap();
        with(test, vec![8]).check().unwrap();
        with(test, vec![4, 4]).check().unwrap();
        for bad in [vec![0], vec![1], vec![16], vec![7]] {
            let e = with(test, bad.clone()).check().unwrap_err().to_string();
            assert!(e.contains("32 or 64 bit"), "{test:?} {bad:?}: {e}");
            assert!(TestParams::decode(&with(test, bad).encode()).is_err());
        }
    }
    for test in [TestKind::PutLat, TestKind::PutBw, TestKind::Get] {
        with(test, vec![1]).check().unwrap();
        let e = with(test, vec![0]).check().unwrap_err().to_string();
        assert!(e.contains("at least 1"), "{e}");
    }
    with(TestKind::TagLat, vec![0]).check().unwrap();
}

#[test]
fn one_sided_slots() {
    let slots = |test, outstanding, validate| {
        TestParams {
            outstanding,
            validate,
            ..TestParams::new(test)
        }
        .buffer_slots()
    };
    assert_eq!(slots(TestKind::PutBw, 32, false), 1);
    assert_eq!(slots(TestKind::PutBw, 32, true), 32);
    assert_eq!(slots(TestKind::Add, 8, false), 1);
    assert_eq!(slots(TestKind::Get, 4, false), 4);
    assert_eq!(slots(TestKind::Fadd, 3, false), 3);
    assert_eq!(slots(TestKind::PutLat, 2, false), 2);
    assert_eq!(slots(TestKind::TagBw, 32, false), 1);
}

#[test]
fn buffer_limit_counts_validation_slots() {
    let mut p = sample();
    p.msg_sizes = vec![1 << 30];
    p.outstanding = 64;
    assert!(p.check().is_err());
    p.validate = false;
    p.check().unwrap();
}

#[test]
fn garbage_never_panics() {
    // A cheap deterministic byte generator.
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    for len in 0..200 {
        let mut block = Vec::with_capacity(len);
        for _ in 0..len {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            block.push(x as u8);
        }
        let _ = TestParams::decode(&block);
        // Same with a valid header in front.
        let mut framed = sample().encode()[..12].to_vec();
        framed.extend_from_slice(&block);
        let _ = TestParams::decode(&framed);
    }
}

#[test]
fn threads_and_busy_target_round_trip() {
    let p = TestParams {
        threads: 7,
        busy_target: true,
        ..TestParams::new(TestKind::PutBw)
    };
    let block = p.encode();
    assert_eq!(block.len(), HEADER_LEN + 8 + TRAILER_LEN);
    assert_eq!(&block[block.len() - 4..], &7u32.to_le_bytes());
    let flags = u32::from_le_bytes(block[8..12].try_into().unwrap());
    assert_eq!(flags, FLAG_BUSY_TARGET);
    assert_eq!(TestParams::decode(&block).unwrap(), p);
}

#[test]
fn worker_per_thread_round_trips_and_needs_threads() {
    let p = TestParams {
        threads: 2,
        worker_per_thread: true,
        ..TestParams::new(TestKind::TagBw)
    };
    let block = p.encode();
    let flags = u32::from_le_bytes(block[8..12].try_into().unwrap());
    assert_eq!(flags, FLAG_WORKER_PER_THREAD);
    assert_eq!(TestParams::decode(&block).unwrap(), p);
    let one = TestParams { threads: 1, ..p };
    let e = one.check().unwrap_err().to_string();
    assert!(e.contains("-T 2 or more"), "{e}");
    assert!(TestParams::decode(&one.encode()).is_err());
}

#[test]
fn thread_rules() {
    let with = |test, threads| TestParams {
        threads,
        ..TestParams::new(test)
    };
    for test in [
        TestKind::TagLat,
        TestKind::TagBw,
        TestKind::PutBw,
        TestKind::Get,
    ] {
        with(test, 1).check().unwrap();
        with(test, 2).check().unwrap();
        with(test, MAX_THREADS).check().unwrap();
        for bad in [0, MAX_THREADS + 1] {
            let e = with(test, bad).check().unwrap_err().to_string();
            assert!(e.contains("threads (-T)"), "{e}");
            let mut block = with(test, 1).encode();
            let n = block.len();
            block[n - 4..].copy_from_slice(&bad.to_le_bytes());
            assert!(TestParams::decode(&block).is_err(), "{bad}");
        }
    }
    for test in [
        TestKind::StreamBw,
        TestKind::StreamLat,
        TestKind::AmLat,
        TestKind::AmBw,
    ] {
        with(test, 1).check().unwrap();
        let e = with(test, 2).check().unwrap_err().to_string();
        assert!(e.contains("more than one thread"), "{e}");
    }
    let iov = TestParams {
        iov: (true, true),
        ..with(TestKind::TagBw, 2)
    };
    assert!(iov.check().unwrap_err().to_string().contains("-D iov"));
}

#[test]
fn busy_target_only_for_one_sided_tests() {
    let busy = |test| TestParams {
        busy_target: true,
        ..TestParams::new(test)
    };
    for test in [
        TestKind::PutLat,
        TestKind::PutBw,
        TestKind::Get,
        TestKind::Fadd,
    ] {
        busy(test).check().unwrap();
    }
    for test in [TestKind::TagLat, TestKind::TagBw, TestKind::StreamBw] {
        let e = busy(test).check().unwrap_err().to_string();
        assert!(e.contains("--busy-target"), "{e}");
        assert!(TestParams::decode(&busy(test).encode()).is_err());
    }
}
