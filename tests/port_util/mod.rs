//! TCP ports for test servers that must be given a port before they
//! listen (UCX's example programs, `rucx-perftest`'s out-of-band socket).
#![allow(dead_code)]

use std::net::TcpListener;
use std::sync::atomic::{AtomicU32, Ordering};

/// Lowest port handed out.
const LOW: u32 = 10_000;

/// A TCP port of this host that no socket holds now, taken below the
/// kernel's ephemeral range: a port bound and released from that range
/// can be given by the kernel to any socket bound to port 0 (rucx's and
/// UCX's tcp listeners in parallel tests) before the server binds it.
/// Ports below the range are only ever taken by name, and each call of
/// one process gives another one. Falls back to a released ephemeral
/// port where the range starts too low to leave room.
pub(crate) fn free_port() -> u16 {
    static NEXT: AtomicU32 = AtomicU32::new(0);
    let high = ephemeral_low().min(u16::MAX as u32 + 1);
    if high > LOW + 1_000 {
        let span = high - LOW;
        let start = std::process::id().wrapping_mul(7_919) % span;
        for _ in 0..span {
            let step = NEXT.fetch_add(1, Ordering::Relaxed);
            let port = (LOW + (start + step) % span) as u16;
            if TcpListener::bind(("0.0.0.0", port)).is_ok() {
                return port;
            }
        }
    }
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("free port")
}

/// First port of the kernel's ephemeral range (32768 when unreadable).
fn ephemeral_low() -> u32 {
    std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range")
        .ok()
        .and_then(|s| s.split_whitespace().next()?.parse().ok())
        .unwrap_or(32_768)
}
