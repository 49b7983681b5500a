use super::*;
use crate::perf::catalog::TestKind;
use crate::perf::mock::{MockNet, MockWorker};
use std::thread;

fn params(test: TestKind, size: usize, iters: u64, validate: bool) -> TestParams {
    TestParams {
        msg_sizes: vec![size],
        iters,
        validate,
        ..TestParams::new(test)
    }
}

/// Runs one side; returns the final figures.
fn side(mut w: MockWorker, p: TestParams, side: Side) -> Result<PerfResult> {
    let mut st = LoopState::new(&p)?;
    let ping_pong = p.test.info().test_type == TestType::PingPong;
    let mut meter = Meter::new(p.iters, ping_pong, p.percentile, None);
    run(&mut w, &mut NoWatch, &mut st, side, &mut meter, &mut |_| {})?;
    Ok(meter.result())
}

/// Runs a server and a client in two threads. A side that fails marks
/// itself dead, as a process exit would, so that the other side stops.
fn pair(
    p: TestParams,
    tweak: impl FnOnce(&mut MockWorker, &mut MockWorker),
) -> (Result<PerfResult>, Result<PerfResult>) {
    let net = MockNet::default();
    let mut s = net.worker("server");
    let mut c = net.worker("client");
    s.connect(b"client").unwrap();
    c.connect(b"server").unwrap();
    tweak(&mut s, &mut c);
    let spawn = |w: MockWorker, p: TestParams, role: Side, name: &'static str| {
        let net = net.clone();
        thread::spawn(move || {
            let r = side(w, p, role);
            if r.is_err() {
                net.kill(name);
            }
            r
        })
    };
    let server = spawn(s, p.clone(), Side::Server, "server");
    let client = spawn(c, p, Side::Client, "client");
    (server.join().unwrap(), client.join().unwrap())
}

#[test]
fn tag_lat_counts_every_iteration() {
    for (size, validate) in [(8, false), (0, false), (1000, true), (3, true)] {
        let p = params(TestKind::TagLat, size, 50, validate);
        let (s, c) = pair(p, |_, _| {});
        let (s, c) = (s.unwrap(), c.unwrap());
        assert_eq!((s.iters, c.iters), (50, 50));
        assert_eq!(c.bytes, 50 * size as u64);
    }
}

#[test]
fn tag_bw_with_windows_and_validation() {
    for (size, validate, window) in [(64, false, 32), (100, true, 4), (1, true, 1), (0, false, 3)] {
        let mut p = params(TestKind::TagBw, size, 200, validate);
        p.outstanding = window;
        let (s, c) = pair(p, |_, _| {});
        let (s, c) = (s.unwrap(), c.unwrap());
        assert_eq!((s.iters, c.iters), (200, 200));
        assert_eq!(s.bytes, 200 * size as u64);
    }
}

#[test]
fn loopback_runs_both_tests() {
    for test in [TestKind::TagLat, TestKind::TagBw] {
        for validate in [false, true] {
            let net = MockNet::default();
            let mut w = net.worker("self");
            w.connect(b"self").unwrap();
            let r = side(w, params(test, 24, 100, validate), Side::Loopback).unwrap();
            assert_eq!(r.iters, 100);
        }
    }
}

#[test]
fn corrupted_data_fails_validation() {
    for test in [TestKind::TagLat, TestKind::TagBw] {
        let p = params(test, 32, 40, true);
        let (s, c) = pair(p.clone(), |_, c| c.corrupt = Some(7));
        // The client's 8th message reaches the server.
        match (test, s) {
            (
                TestKind::TagLat,
                Err(PerfError::Validation {
                    iter: 7,
                    offset: 16,
                    ..
                }),
            ) => {}
            (
                TestKind::TagBw,
                Err(PerfError::Validation {
                    iter: 7,
                    offset: 16,
                    ..
                }),
            ) => {}
            (_, other) => panic!("{test:?}: {other:?}"),
        }
        assert!(matches!(c, Err(PerfError::PeerGone(_))), "{c:?}");
        // Without -V the same corruption goes unnoticed.
        let (s, c) = pair(params(test, 32, 40, false), |_, c| c.corrupt = Some(7));
        assert!(s.is_ok() && c.is_ok());
    }
}

#[test]
fn wrong_length_is_an_error() {
    let p = params(TestKind::TagLat, 16, 20, false);
    let (_, c) = pair(p, |s, _| s.truncate = Some(3));
    match c {
        Err(PerfError::Length {
            iter: 3,
            expected: 16,
            actual: 15,
        }) => {}
        other => panic!("{other:?}"),
    }
}

#[test]
fn dead_peer_ends_the_wait() {
    let net = MockNet::default();
    let mut c = net.worker("client");
    let _s = net.worker("server");
    c.connect(b"server").unwrap();
    net.kill("server");
    let p = params(TestKind::TagLat, 8, 10, false);
    match side(c, p, Side::Client) {
        Err(PerfError::PeerGone(_)) => {}
        other => panic!("{other:?}"),
    }
}

#[test]
fn watch_failure_ends_the_wait() {
    struct Fails;
    impl Watch for Fails {
        fn check(&mut self, _now: bool) -> Result<()> {
            Err(PerfError::PeerAborted("stop".into()))
        }
    }
    let net = MockNet::default();
    let mut c = net.worker("client");
    let _s = net.worker("server");
    c.connect(b"server").unwrap();
    let p = params(TestKind::TagBw, 8, 10, false);
    let mut st = LoopState::new(&p).unwrap();
    let mut meter = Meter::new(10, false, 50.0, None);
    let r = run(
        &mut c,
        &mut Fails,
        &mut st,
        Side::Server,
        &mut meter,
        &mut |_| {},
    );
    assert!(matches!(r, Err(PerfError::PeerAborted(_))), "{r:?}");
}

#[test]
fn reports_arrive_during_the_run() {
    let net = MockNet::default();
    let mut w = net.worker("self");
    w.connect(b"self").unwrap();
    let p = params(TestKind::TagLat, 8, 30, false);
    let mut st = LoopState::new(&p).unwrap();
    let mut meter = Meter::new(30, true, 50.0, Some(std::time::Duration::ZERO));
    let mut rows = 0;
    run(
        &mut w,
        &mut NoWatch,
        &mut st,
        Side::Loopback,
        &mut meter,
        &mut |r| {
            rows += 1;
            assert!(r.iters >= 1);
        },
    )
    .unwrap();
    assert_eq!(rows, 30);
}
