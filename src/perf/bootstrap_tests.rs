use super::*;
use std::net::TcpStream;

fn no_progress() -> Result<()> {
    Ok(())
}

/// A connected pair: (server side, client side).
fn pair() -> (Bootstrap, Bootstrap) {
    let l = Listener::bind(0, true).unwrap();
    let port = l.port().unwrap();
    let t = thread::spawn(move || l.accept(Some(Duration::from_secs(10))).unwrap());
    let c = Bootstrap::connect("127.0.0.1", port, Duration::from_secs(5)).unwrap();
    (t.join().unwrap(), c)
}

/// A server side and the raw socket of its client.
fn raw_pair() -> (Bootstrap, TcpStream) {
    let l = Listener::bind(0, true).unwrap();
    let port = l.port().unwrap();
    let raw = TcpStream::connect(("127.0.0.1", port)).unwrap();
    (l.accept(Some(Duration::from_secs(10))).unwrap(), raw)
}

const T: Duration = Duration::from_secs(5);

#[test]
fn frames_cross_in_both_directions() {
    let (mut s, mut c) = pair();
    c.send(FrameKind::Params, b"hello").unwrap();
    assert_eq!(
        s.recv(FrameKind::Params, T, &mut no_progress).unwrap(),
        b"hello"
    );
    s.send_outcome(FrameKind::Accept, Err("no".into())).unwrap();
    assert_eq!(
        c.recv_outcome(FrameKind::Accept, T, &mut no_progress)
            .unwrap(),
        Err("no".to_string())
    );
    s.send_outcome(FrameKind::Status, Ok(())).unwrap();
    assert_eq!(
        c.recv_outcome(FrameKind::Status, T, &mut no_progress)
            .unwrap(),
        Ok(())
    );
    let big = vec![7u8; 100_000];
    s.send(FrameKind::Wireup, &big).unwrap();
    assert_eq!(c.recv(FrameKind::Wireup, T, &mut no_progress).unwrap(), big);
}

#[test]
fn barriers_match_and_progress_runs_while_waiting() {
    let (mut s, mut c) = pair();
    let t = thread::spawn(move || {
        thread::sleep(Duration::from_millis(50));
        for _ in 0..3 {
            c.barrier(T, &mut no_progress).unwrap();
        }
    });
    let mut calls = 0;
    for _ in 0..3 {
        s.barrier(T, &mut || {
            calls += 1;
            Ok(())
        })
        .unwrap();
    }
    t.join().unwrap();
    assert!(calls > 0, "progress was never called while waiting");
}

#[test]
fn progress_error_stops_the_wait() {
    let (mut s, _c) = pair();
    let r = s.barrier(T, &mut || Err(PerfError::PeerGone("endpoint".into())));
    assert!(matches!(r, Err(PerfError::PeerGone(_))), "{r:?}");
}

#[test]
fn abort_frame_is_reported() {
    let (mut s, mut c) = pair();
    c.abort("validation failed");
    match s.barrier(T, &mut no_progress) {
        Err(PerfError::PeerAborted(msg)) => assert_eq!(msg, "validation failed"),
        other => panic!("{other:?}"),
    }
}

#[test]
fn closed_connection_is_peer_gone() {
    let (mut s, c) = pair();
    drop(c);
    let start = Instant::now();
    let r = s.recv(FrameKind::Params, Duration::from_secs(30), &mut no_progress);
    assert!(matches!(r, Err(PerfError::PeerGone(_))), "{r:?}");
    assert!(start.elapsed() < Duration::from_secs(10));
}

#[test]
fn silence_times_out() {
    let (mut s, _c) = pair();
    let r = s.recv(
        FrameKind::Params,
        Duration::from_millis(50),
        &mut no_progress,
    );
    assert!(matches!(r, Err(PerfError::Timeout(_))), "{r:?}");
}

#[test]
fn malformed_frames_are_errors() {
    let cases: [&[u8]; 3] = [
        &[99, 0, 0, 0, 0],            // unknown kind
        &[1, 0xff, 0xff, 0xff, 0x7f], // too long
        &[5, 0, 0, 0, 0],             // barrier when params expected
    ];
    for bytes in cases {
        let (mut s, mut raw) = raw_pair();
        raw.write_all(bytes).unwrap();
        let r = s.recv(FrameKind::Params, T, &mut no_progress);
        assert!(matches!(r, Err(PerfError::Protocol(_))), "{bytes:?}: {r:?}");
    }
    // A barrier with a wrong number or length.
    for payload in [&5u32.to_le_bytes()[..], &[0u8; 3][..]] {
        let (mut s, mut raw) = raw_pair();
        let mut frame = vec![5u8];
        frame.extend_from_slice(&(payload.len() as u32).to_le_bytes());
        frame.extend_from_slice(payload);
        raw.write_all(&frame).unwrap();
        let r = s.barrier(T, &mut no_progress);
        assert!(matches!(r, Err(PerfError::Protocol(_))), "{r:?}");
    }
    // A truncated frame followed by a close.
    let (mut s, mut raw) = raw_pair();
    raw.write_all(&[1, 10, 0, 0, 0, 1, 2]).unwrap();
    drop(raw);
    let r = s.recv(FrameKind::Params, T, &mut no_progress);
    assert!(matches!(r, Err(PerfError::PeerGone(_))), "{r:?}");
}

#[test]
fn outcome_frames_are_checked() {
    for payload in [&[][..], &[2u8][..], &[0u8, 1][..]] {
        let (mut s, mut raw) = raw_pair();
        let mut frame = vec![FrameKind::Accept as u8];
        frame.extend_from_slice(&(payload.len() as u32).to_le_bytes());
        frame.extend_from_slice(payload);
        raw.write_all(&frame).unwrap();
        let r = s.recv_outcome(FrameKind::Accept, T, &mut no_progress);
        assert!(
            matches!(r, Err(PerfError::Protocol(_))),
            "{payload:?}: {r:?}"
        );
    }
}

#[test]
fn check_alive_sees_close_and_abort_but_keeps_other_frames() {
    let (mut s, mut c) = pair();
    s.check_alive().unwrap();
    c.send(FrameKind::Barrier, &0u32.to_le_bytes()).unwrap();
    thread::sleep(Duration::from_millis(20));
    s.check_alive().unwrap();
    // The barrier frame is still there.
    assert_eq!(
        s.recv(FrameKind::Barrier, T, &mut no_progress).unwrap(),
        0u32.to_le_bytes()
    );
    c.abort("bye");
    thread::sleep(Duration::from_millis(20));
    assert!(matches!(s.check_alive(), Err(PerfError::PeerAborted(m)) if m == "bye"));
    drop(c);
    thread::sleep(Duration::from_millis(20));
    assert!(matches!(s.check_alive(), Err(PerfError::PeerGone(_))));
}

#[test]
fn watch_rate_limits_and_reports() {
    let (mut s, c) = pair();
    drop(c);
    thread::sleep(Duration::from_millis(20));
    let mut w = BootWatch::new(&mut s);
    // Right after creation it does not look yet.
    w.check(false).unwrap();
    assert!(matches!(w.check(true), Err(PerfError::PeerGone(_))));
    w.last -= WATCH_INTERVAL;
    assert!(matches!(w.check(false), Err(PerfError::PeerGone(_))));
}

#[test]
fn connect_to_nothing_fails_after_retrying() {
    let port = Listener::bind(0, true).unwrap().port().unwrap();
    // The listener is gone; nothing listens there now.
    let start = Instant::now();
    let r = Bootstrap::connect("127.0.0.1", port, Duration::from_millis(300));
    assert!(matches!(r, Err(PerfError::Bootstrap { .. })), "{r:?}");
    assert!(start.elapsed() >= Duration::from_millis(250));
    assert!(Bootstrap::connect("no.such.host.invalid", 1, Duration::ZERO).is_err());
}

#[test]
fn accept_times_out() {
    let l = Listener::bind(0, true).unwrap();
    let r = l.accept(Some(Duration::from_millis(50)));
    assert!(matches!(r, Err(PerfError::Timeout(_))), "{r:?}");
}
