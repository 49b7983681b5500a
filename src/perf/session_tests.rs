use super::*;
use crate::perf::bootstrap::Wireup;
use crate::perf::catalog::TestKind;
use crate::perf::mock::MockNet;
use std::thread;
use std::time::Instant;

fn params(test: TestKind, size: usize, iters: u64, validate: bool) -> TestParams {
    TestParams {
        msg_sizes: vec![size],
        iters,
        warmup: 5,
        validate,
        ..TestParams::new(test)
    }
}

struct Run {
    server: Result<()>,
    server_out: String,
    client: Result<PerfResult>,
    client_out: String,
}

fn run_pair(p: TestParams, flags: OutputFlags, corrupt_client: Option<u64>) -> Run {
    let net = MockNet::default();
    let listener = Listener::bind(0, true).unwrap();
    let port = listener.port().unwrap();
    let snet = net.clone();
    let server = thread::spawn(move || {
        let mut out = Vec::new();
        let r = server(
            &listener,
            Some(Duration::from_secs(10)),
            false,
            false,
            || Ok(snet.worker("server")),
            &mut out,
        );
        if r.is_err() {
            snet.kill("server");
        }
        (r, String::from_utf8(out).unwrap())
    });
    let mut out = Vec::new();
    let client = client(
        "127.0.0.1",
        port,
        &p,
        flags,
        false,
        || {
            let mut w = net.worker("client");
            w.corrupt = corrupt_client;
            Ok(w)
        },
        &mut out,
    );
    if client.is_err() {
        net.kill("client");
    }
    let (server, server_out) = server.join().unwrap();
    Run {
        server,
        server_out,
        client,
        client_out: String::from_utf8(out).unwrap(),
    }
}

fn last_eight_numbers(text: &str) -> Option<Vec<f64>> {
    text.lines().rev().find_map(|line| {
        let cleaned = line.replace(',', "");
        let parts: Vec<&str> = cleaned.split_whitespace().collect();
        if parts.len() != 8 {
            return None;
        }
        parts.iter().map(|p| p.parse::<f64>().ok()).collect()
    })
}

#[test]
fn client_and_server_run_both_tests() {
    let flags = OutputFlags {
        final_only: true,
        ..Default::default()
    };
    for test in [TestKind::TagLat, TestKind::TagBw] {
        for validate in [false, true] {
            let r = run_pair(params(test, 64, 300, validate), flags, None);
            r.server.unwrap();
            let res = r.client.unwrap();
            assert_eq!(res.iters, 300);
            assert!(r.server_out.starts_with("Waiting for connection...\n"));
            assert!(r.server_out.contains(test.info().desc));
            let nums = last_eight_numbers(&r.client_out).expect("final row");
            assert_eq!(nums[0], 300.0);
            assert!(
                r.client_out.contains("|     Test     |"),
                "{}",
                r.client_out
            );
        }
    }
}

#[test]
fn client_and_server_run_one_sided_tests() {
    let flags = OutputFlags {
        final_only: true,
        ..Default::default()
    };
    for (test, size) in [
        (TestKind::PutLat, 8),
        (TestKind::PutBw, 4096),
        (TestKind::Get, 100),
        (TestKind::Add, 8),
        (TestKind::Fadd, 4),
        (TestKind::Swap, 8),
        (TestKind::Cswap, 8),
    ] {
        for validate in [false, true] {
            let r = run_pair(params(test, size, 200, validate), flags, None);
            r.server.unwrap();
            assert_eq!(r.client.unwrap().iters, 200);
            assert!(r.server_out.contains(test.info().desc));
            let nums = last_eight_numbers(&r.client_out).expect("final row");
            assert_eq!(nums[0], 200.0);
            assert!(
                r.client_out
                    .contains(&format!("{} (usec)", test.info().time_label)),
                "{}",
                r.client_out
            );
        }
    }
}

#[test]
fn one_sided_test_on_a_layer_without_it_fails_in_setup() {
    let listener = Listener::bind(0, true).unwrap();
    let port = listener.port().unwrap();
    let net = MockNet::default();
    let snet = net.clone();
    let server = thread::spawn(move || {
        server(
            &listener,
            Some(Duration::from_secs(10)),
            false,
            false,
            || {
                let mut w = snet.worker("server");
                w.no_rma = true;
                Ok(w)
            },
            &mut Vec::new(),
        )
    });
    let r = client(
        "127.0.0.1",
        port,
        &params(TestKind::PutBw, 64, 10, false),
        OutputFlags::default(),
        true,
        || Ok(net.worker("client")),
        &mut Vec::new(),
    );
    match r {
        Err(PerfError::PeerAborted(msg)) => assert!(msg.contains("not supported"), "{msg}"),
        other => panic!("{other:?}"),
    }
    assert!(matches!(
        server.join().unwrap(),
        Err(PerfError::Unsupported(_))
    ));
}

#[test]
fn csv_output_has_header_and_final_row() {
    let flags = OutputFlags {
        csv: true,
        ..Default::default()
    };
    let r = run_pair(params(TestKind::TagBw, 8, 100, false), flags, None);
    r.client.unwrap();
    let lines: Vec<&str> = r.client_out.lines().collect();
    assert!(lines[0].starts_with("iterations,50.0_percentile_lat,"));
    let last = lines.last().unwrap();
    assert_eq!(last.split(',').count(), 8);
    assert!(last.starts_with("100,"));
}

#[test]
fn corrupted_data_fails_both_sides_with_the_reason() {
    let r = run_pair(
        params(TestKind::TagBw, 32, 200, true),
        OutputFlags::default(),
        Some(50),
    );
    // Warm-up sends 5 messages first; the 51st message overall is
    // iteration 45 of the measured run.
    match r.server {
        Err(PerfError::Validation { iter: 45, .. }) => {}
        other => panic!("{other:?}"),
    }
    match r.client {
        Err(PerfError::PeerAborted(msg)) => assert!(msg.contains("validation"), "{msg}"),
        other => panic!("{other:?}"),
    }
}

#[test]
fn server_rejects_a_bad_parameter_block() {
    let listener = Listener::bind(0, true).unwrap();
    let port = listener.port().unwrap();
    let server = thread::spawn(move || {
        let net = MockNet::default();
        server(
            &listener,
            Some(Duration::from_secs(10)),
            false,
            false,
            || Ok(net.worker("s")),
            &mut Vec::new(),
        )
    });
    let mut boot = Bootstrap::connect("127.0.0.1", port, Duration::from_secs(5)).unwrap();
    let mut block = params(TestKind::TagLat, 8, 10, false).encode();
    block[4] = 9; // version
    boot.send(FrameKind::Params, &block).unwrap();
    let answer = boot
        .recv_outcome(FrameKind::Accept, Duration::from_secs(5), &mut no_progress)
        .unwrap();
    assert!(answer.unwrap_err().contains("version"));
    assert!(matches!(
        server.join().unwrap(),
        Err(PerfError::Protocol(_))
    ));
}

#[test]
fn server_stops_when_its_client_vanishes() {
    let listener = Listener::bind(0, true).unwrap();
    let port = listener.port().unwrap();
    let net = MockNet::default();
    let snet = net.clone();
    let server = thread::spawn(move || {
        server(
            &listener,
            Some(Duration::from_secs(10)),
            false,
            false,
            || Ok(snet.worker("server")),
            &mut Vec::new(),
        )
    });
    // A client that sets up, passes the first barrier and disappears.
    let _client_worker = net.worker("client");
    let mut boot = Bootstrap::connect("127.0.0.1", port, Duration::from_secs(5)).unwrap();
    let t = Duration::from_secs(5);
    boot.send(
        FrameKind::Params,
        &params(TestKind::TagLat, 8, 1000, false).encode(),
    )
    .unwrap();
    boot.recv_outcome(FrameKind::Accept, t, &mut no_progress)
        .unwrap()
        .unwrap();
    boot.send_outcome(FrameKind::Status, Ok(())).unwrap();
    boot.recv_outcome(FrameKind::Status, t, &mut no_progress)
        .unwrap()
        .unwrap();
    let wireup = Wireup {
        address: b"client".to_vec(),
        ..Wireup::default()
    };
    boot.send(FrameKind::Wireup, &wireup.encode()).unwrap();
    boot.recv(FrameKind::Wireup, t, &mut no_progress).unwrap();
    boot.send_outcome(FrameKind::Status, Ok(())).unwrap();
    boot.recv_outcome(FrameKind::Status, t, &mut no_progress)
        .unwrap()
        .unwrap();
    boot.barrier(t, &mut no_progress).unwrap();
    let start = Instant::now();
    drop(boot);
    let r = server.join().unwrap();
    assert!(matches!(r, Err(PerfError::PeerGone(_))), "{r:?}");
    assert!(start.elapsed() < Duration::from_secs(10));
}

#[test]
fn client_fails_when_server_setup_fails() {
    let listener = Listener::bind(0, true).unwrap();
    let port = listener.port().unwrap();
    let server = thread::spawn(move || {
        server::<crate::perf::mock::MockWorker>(
            &listener,
            Some(Duration::from_secs(10)),
            false,
            false,
            || Err(PerfError::NoMemory(1)),
            &mut Vec::new(),
        )
    });
    let net = MockNet::default();
    let r = client(
        "127.0.0.1",
        port,
        &params(TestKind::TagLat, 8, 10, false),
        OutputFlags::default(),
        true,
        || Ok(net.worker("client")),
        &mut Vec::new(),
    );
    match r {
        Err(PerfError::PeerAborted(msg)) => assert!(msg.contains("setup"), "{msg}"),
        other => panic!("{other:?}"),
    }
    assert!(matches!(
        server.join().unwrap(),
        Err(PerfError::NoMemory(1))
    ));
}

#[test]
fn loopback_runs_one_sided_tests() {
    for test in [TestKind::PutLat, TestKind::Get, TestKind::Cswap] {
        let net = MockNet::default();
        let mut out = Vec::new();
        let r = loopback(
            &params(test, 8, 50, true),
            OutputFlags::default(),
            || Ok(net.worker("self")),
            &mut out,
        )
        .unwrap();
        assert_eq!(r.iters, 50);
        let text = String::from_utf8(out).unwrap();
        assert!(text.contains(test.info().desc), "{text}");
    }
}

#[test]
fn loopback_prints_box_table_and_final_row() {
    let net = MockNet::default();
    let mut out = Vec::new();
    let r = loopback(
        &params(TestKind::TagLat, 16, 50, true),
        OutputFlags::default(),
        || Ok(net.worker("self")),
        &mut out,
    )
    .unwrap();
    assert_eq!(r.iters, 50);
    let text = String::from_utf8(out).unwrap();
    assert!(text.contains("| Test:         tag match latency"));
    assert!(text.contains("latency (usec)"));
    let last = text.lines().last().unwrap();
    assert!(last.starts_with("Final:    "), "{last}");
}

#[test]
fn a_layer_without_listeners_or_error_handling_fails_in_setup() {
    // Only the server listens: the client hears why.
    let sockaddr = TestParams {
        sockaddr: true,
        ..params(TestKind::TagLat, 8, 10, false)
    };
    let r = run_pair(sockaddr, OutputFlags::default(), None);
    match (&r.server, &r.client) {
        (Err(PerfError::Unsupported(s)), Err(PerfError::PeerAborted(c))) => {
            assert!(s.contains("--sockaddr"), "{s}");
            assert!(c.contains("setup failed on the peer"), "{c}");
            assert!(c.contains("--sockaddr"), "{c}");
        }
        other => panic!("{other:?}"),
    }
    // Both sides make endpoints with error handling.
    let err_handling = TestParams {
        err_handling: true,
        ..params(TestKind::TagBw, 8, 10, false)
    };
    let r = run_pair(err_handling, OutputFlags::default(), None);
    for side in [r.server.map(drop), r.client.map(drop)] {
        match side {
            Err(PerfError::Unsupported(e)) => assert!(e.contains("-e"), "{e}"),
            other => panic!("{other:?}"),
        }
    }
}
