//! A peer that stops taking data (a hung host, or one whose link went
//! down with data in flight) fails the endpoint within the user timeout
//! (`RUCX_TCP_USER_TIMEOUT`): the kernel ends the connection with
//! `ETIMEDOUT`, which takes the route of any socket error: `ep_failed`
//! with `ConnectionLost`, and the operations on it fail.

mod common;

use std::io::Read;
use std::net::TcpListener;
use std::time::{Duration, Instant};

use common::{drive, lo, Recorder};
use rucx_tcp::TcpConfig;
use uct::ucs::config::ConfigValue;
use uct::ucs::sock::UserTimeout;
use uct::Posted;

#[test]
fn a_peer_that_stops_reading_fails_within_the_user_timeout() {
    let cfg = TcpConfig {
        user_timeout: UserTimeout::parse("1s").expect("1s"),
        sndbuf: uct::ucs::config::MemUnits::parse("16k").expect("16k"),
        ..TcpConfig::default()
    };
    let mut a = lo(&cfg);
    let mut sa = Recorder::default();
    // A raw peer that accepts the hello, then never reads again: its
    // window closes and our zero-window probes go unanswered by data.
    let l = TcpListener::bind("127.0.0.1:0").expect("bind");
    let port = l.local_addr().expect("addr").port();
    let dev = a.device_addr().to_vec();
    let ep = a.ep_create(&dev, &port.to_be_bytes()).expect("ep_create");
    let (mut s, _) = l.accept().expect("accept");
    let mut hello = [0u8; 17];
    drive(&mut [(a.as_mut(), &mut sa)], |_| {
        s.set_read_timeout(Some(Duration::from_millis(1))).ok();
        s.read_exact(&mut hello).is_ok()
    });
    std::io::Write::write_all(&mut s, &[0xf0, 0, 0, 0, 0]).expect("accept frame");
    // Fill every buffer on the way.
    let chunk = vec![0x5a; 32 << 10];
    let start = Instant::now();
    let mut refused = 0;
    while sa.ep_failed.is_empty() {
        match a.am().expect("am").am_bcopy(ep, 1, &[&chunk]) {
            Ok((Posted::NoResource, _)) => refused += 1,
            Ok(_) => refused = 0,
            Err(_) => break,
        }
        a.progress(&mut sa);
        if refused > 0 {
            std::thread::sleep(Duration::from_millis(5));
        }
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "no failure 30 s after the peer stopped reading (user timeout 1 s)"
        );
    }
    drive(&mut [(a.as_mut(), &mut sa)], |x| {
        !x[0].1.ep_failed.is_empty()
    });
    let (failed, why) = &sa.ep_failed[0];
    assert_eq!(*failed, ep);
    assert!(why.contains("timed out"), "{why}");
    drop(s);
}
