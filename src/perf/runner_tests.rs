use super::*;
use crate::perf::catalog::TestKind;
use crate::perf::error::PerfError;
use crate::perf::mock::{MockNet, MockWorker};
use crate::perf::params::TestParams;
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

/// A two-party barrier that a party can leave for good, releasing the
/// other with an error.
#[derive(Debug, Default)]
struct Meet {
    /// (arrivals at the current meeting, meetings so far, someone left)
    state: std::sync::Mutex<(u32, u64, bool)>,
    cv: std::sync::Condvar,
}

impl Meet {
    fn wait(&self) -> Result<()> {
        let mut g = self.state.lock().unwrap();
        if g.2 {
            return Err(PerfError::PeerGone("left".into()));
        }
        g.0 += 1;
        if g.0 == 2 {
            *g = (0, g.1 + 1, false);
            self.cv.notify_all();
            return Ok(());
        }
        let n = g.1;
        let g = self.cv.wait_while(g, |g| g.1 == n && !g.2).unwrap();
        if g.1 == n {
            return Err(PerfError::PeerGone("left".into()));
        }
        Ok(())
    }

    fn leave(&self) {
        self.state.lock().unwrap().2 = true;
        self.cv.notify_all();
    }
}

/// Runs `runs` runs of a one-sided test between a server and a client in
/// two threads, exposing, preparing and meeting at a barrier before each
/// run as the session does. Returns the last run's figures.
fn rma_pair(
    p: TestParams,
    runs: usize,
    tweak: impl FnOnce(&mut MockWorker, &mut MockWorker),
) -> (Result<PerfResult>, Result<PerfResult>) {
    let net = MockNet::default();
    let mut s = net.worker("server");
    let mut c = net.worker("client");
    s.connect(b"client").unwrap();
    c.connect(b"server").unwrap();
    let len = LoopState::<usize>::new(&p).unwrap().exposed_len().unwrap();
    let se = s.expose(len).unwrap();
    let ce = c.expose(len).unwrap();
    s.set_remote(ce.addr, &ce.rkey).unwrap();
    c.set_remote(se.addr, &se.rkey).unwrap();
    tweak(&mut s, &mut c);
    let meet = std::sync::Arc::new(Meet::default());
    let spawn = |mut w: MockWorker, p: TestParams, role: Side, name: &'static str| {
        let net = net.clone();
        let meet = meet.clone();
        thread::spawn(move || {
            let one = |w: &mut MockWorker, st: &mut LoopState<usize>| {
                prepare(w, st)?;
                meet.wait()?;
                let mut meter = Meter::new(p.iters, false, p.percentile, None);
                run(w, &mut NoWatch, st, role, &mut meter, &mut |_| {})?;
                Ok(meter.result())
            };
            let mut st = LoopState::new(&p)?;
            let mut out = Err(PerfError::Params("no run".into()));
            for _ in 0..runs {
                out = one(&mut w, &mut st);
                if out.is_err() {
                    // As a process exit would: the peer stops waiting.
                    net.kill(name);
                    meet.leave();
                    break;
                }
            }
            out
        })
    };
    let server = spawn(s, p.clone(), Side::Server, "server");
    let client = spawn(c, p, Side::Client, "client");
    (server.join().unwrap(), client.join().unwrap())
}

const ONE_SIDED: [(TestKind, usize); 7] = [
    (TestKind::PutLat, 8),
    (TestKind::PutBw, 1000),
    (TestKind::Get, 64),
    (TestKind::Add, 8),
    (TestKind::Fadd, 4),
    (TestKind::Swap, 8),
    (TestKind::Cswap, 4),
];

#[test]
fn one_sided_tests_count_every_iteration_twice() {
    for (test, size) in ONE_SIDED {
        for validate in [false, true] {
            // Two runs, as warm-up and measured run: the markers re-arm.
            let (s, c) = rma_pair(params(test, size, 300, validate), 2, |_, _| {});
            let (s, c) = (s.unwrap(), c.unwrap());
            assert_eq!((s.iters, c.iters), (300, 300), "{test:?}");
            assert_eq!(c.bytes, 300 * size as u64, "{test:?}");
        }
    }
}

#[test]
fn one_sided_tests_with_windows_and_odd_sizes() {
    // 257 iterations: the ping-pong's 8-bit sequence number wraps.
    for (test, size, window) in [
        (TestKind::PutLat, 1, 3),
        (TestKind::PutLat, 13, 1),
        (TestKind::PutBw, 1, 4),
        (TestKind::Get, 9, 5),
        (TestKind::Fadd, 8, 7),
        (TestKind::Cswap, 8, 2),
        (TestKind::Add, 4, 16),
    ] {
        let mut p = params(test, size, 257, true);
        p.outstanding = window;
        let (s, c) = rma_pair(p, 1, |_, _| {});
        assert_eq!(c.unwrap().iters, 257, "{test:?}");
        s.unwrap();
    }
}

#[test]
fn one_sided_loopback() {
    for (test, size) in ONE_SIDED {
        for validate in [false, true] {
            let p = params(test, size, 100, validate);
            let net = MockNet::default();
            let mut w = net.worker("self");
            w.connect(b"self").unwrap();
            let mut st = LoopState::new(&p).unwrap();
            let e = w.expose(st.exposed_len().unwrap()).unwrap();
            w.set_remote(e.addr, &e.rkey).unwrap();
            for _ in 0..2 {
                prepare(&mut w, &mut st).unwrap();
                let mut meter = Meter::new(100, false, 50.0, None);
                run(
                    &mut w,
                    &mut NoWatch,
                    &mut st,
                    Side::Loopback,
                    &mut meter,
                    &mut |_| {},
                )
                .unwrap();
                assert_eq!(meter.iters(), 100, "{test:?}");
            }
        }
    }
}

#[test]
fn corrupted_puts_fail_validation() {
    // Ping-pong: the server checks the client's 8th message.
    let (s, c) = rma_pair(params(TestKind::PutLat, 32, 40, true), 1, |_, c| {
        c.corrupt = Some(7)
    });
    match s {
        Err(PerfError::Validation {
            iter: 7,
            offset: 15,
            ..
        }) => {}
        other => panic!("{other:?}"),
    }
    assert!(c.is_err());
    // Stream: the server checks its buffer at the end.
    let (s, c) = rma_pair(params(TestKind::PutBw, 32, 40, true), 1, |_, c| {
        c.corrupt = Some(40)
    });
    match s {
        Err(PerfError::Validation {
            iter: 40,
            offset: 15,
            ..
        }) => {}
        other => panic!("{other:?}"),
    }
    c.unwrap();
    // Without -V nothing is checked.
    let (s, c) = rma_pair(params(TestKind::PutLat, 32, 40, false), 1, |_, c| {
        c.corrupt = Some(7)
    });
    assert!(s.is_ok() && c.is_ok());
}

#[test]
fn one_sided_test_without_a_remote_buffer_fails() {
    let net = MockNet::default();
    let mut c = net.worker("client");
    let _s = net.worker("server");
    c.connect(b"server").unwrap();
    let p = params(TestKind::Fadd, 8, 10, false);
    let mut st = LoopState::new(&p).unwrap();
    let mut meter = Meter::new(10, false, 50.0, None);
    let r = run(
        &mut c,
        &mut NoWatch,
        &mut st,
        Side::Client,
        &mut meter,
        &mut |_| {},
    );
    assert!(matches!(r, Err(PerfError::Params(_))), "{r:?}");
}
