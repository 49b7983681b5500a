//! The remote side of the endpoint benchmark: a child process holding
//! many workers, each answering every echo request on its reply endpoint.
//!
//! It talks to the driver by lines: on standard output `addr <hex>` per
//! worker, then `ready <rss kB> <fds>`; on standard input `report`
//! (answered with `report <rss kB> <fds>`) and `exit` (or end of input).

use std::io::{Read, Write};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::time::{Duration, Instant};

use super::{hex, sys, ANSWER, ECHO};
use crate::ucp::Armed;
use crate::ucp::{AmParams, Posted};
use crate::{Context, Worker};

/// Serves `count` workers until told to stop; returns the exit code.
pub(crate) fn serve(count: usize) -> Result<(), String> {
    sys::raise_nofile();
    let ctx = Context::new().map_err(|e| format!("context: {e}"))?;
    let mut workers: Vec<Worker> = Vec::with_capacity(count);
    let mut out = std::io::stdout().lock();
    for i in 0..count {
        let mut w = ctx
            .create_worker()
            .map_err(|e| format!("worker {i} of {count}: {e}"))?;
        w.am_set_handler(ECHO, |w, msg| {
            let Some(back) = msg.reply_ep() else {
                return;
            };
            match w.am_send(back, ANSWER, &[], msg.data(), AmParams::new()) {
                Ok(Posted::InFlight(id)) => w.request_release(id),
                Ok(Posted::Done(..)) => {}
                Err(e) => eprintln!("rucx-scale: answer failed: {e}"),
            }
        });
        writeln!(out, "addr {}", hex::encode(&w.address())).map_err(|e| e.to_string())?;
        workers.push(w);
    }
    // Each worker's event fd in one epoll set, so that an answer waits
    // only for the worker that has work, not for a sweep over all of them.
    let poll = Epoll::new()?;
    for (i, w) in workers.iter_mut().enumerate() {
        let fd = w
            .event_fd()
            .map_err(|e| format!("event fd of worker {i}: {e}"))?;
        poll.add(fd, i as u64)?;
    }
    poll.add(0, STDIN)?;
    writeln!(out, "ready {} {}", sys::rss_kb(), sys::fds()).map_err(|e| e.to_string())?;
    out.flush().map_err(|e| e.to_string())?;
    sys::stdin_nonblocking().map_err(|e| format!("stdin: {e}"))?;
    let mut stdin = std::io::stdin().lock();
    let mut line = Vec::new();
    let mut buf = [0u8; 256];
    let mut ready = Vec::new();
    let mut last_sweep = Instant::now();
    // Workers whose last arm said busy: progressed again without waiting.
    let mut busy: Vec<usize> = (0..workers.len()).collect();
    loop {
        let timeout = if busy.is_empty() { 10 } else { 0 };
        poll.wait(&mut ready, timeout)?;
        if last_sweep.elapsed() >= SWEEP {
            // Timers (keepalive) and failures only found by looking.
            last_sweep = Instant::now();
            busy.extend(0..workers.len());
        }
        let mut read_stdin = false;
        for &tok in &ready {
            if tok == STDIN {
                read_stdin = true;
            } else {
                busy.push(tok as usize);
            }
        }
        busy.sort_unstable();
        busy.dedup();
        for i in std::mem::take(&mut busy) {
            let w = &mut workers[i];
            while w.progress() > 0 {}
            if w.arm().map_err(|e| format!("arming worker {i}: {e}"))? == Armed::Busy {
                busy.push(i);
            }
        }
        if !read_stdin {
            continue;
        }
        match stdin.read(&mut buf) {
            Ok(0) => return Ok(()),
            Ok(n) => line.extend_from_slice(&buf[..n]),
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => continue,
            Err(e) => return Err(format!("stdin: {e}")),
        }
        while let Some(at) = line.iter().position(|&b| b == b'\n') {
            let cmd: Vec<u8> = line.drain(..=at).collect();
            match cmd.trim_ascii() {
                b"report" => {
                    writeln!(out, "report {} {}", sys::rss_kb(), sys::fds())
                        .and_then(|()| out.flush())
                        .map_err(|e| e.to_string())?;
                }
                b"exit" => return Ok(()),
                other => {
                    return Err(format!(
                        "unknown command {:?}",
                        String::from_utf8_lossy(other)
                    ))
                }
            }
        }
    }
}

/// Token of standard input in the epoll set.
const STDIN: u64 = u64::MAX;
/// How often every worker is progressed whether or not it signalled.
const SWEEP: Duration = Duration::from_millis(100);

/// An epoll set (level-triggered).
struct Epoll(OwnedFd);

impl Epoll {
    fn new() -> Result<Epoll, String> {
        // SAFETY: epoll_create1 has no memory effects; the result is checked.
        let fd = unsafe { libc::epoll_create1(libc::EPOLL_CLOEXEC) };
        if fd < 0 {
            return Err(format!(
                "epoll_create1: {}",
                std::io::Error::last_os_error()
            ));
        }
        // SAFETY: a new descriptor nothing else owns.
        Ok(Epoll(unsafe { OwnedFd::from_raw_fd(fd) }))
    }

    fn add(&self, fd: RawFd, token: u64) -> Result<(), String> {
        let mut ev = libc::epoll_event {
            events: libc::EPOLLIN as u32,
            u64: token,
        };
        // SAFETY: `ev` is a valid event for the duration of the call.
        let rc = unsafe { libc::epoll_ctl(self.0.as_raw_fd(), libc::EPOLL_CTL_ADD, fd, &mut ev) };
        if rc != 0 {
            return Err(format!("epoll_ctl: {}", std::io::Error::last_os_error()));
        }
        Ok(())
    }

    /// Waits up to `ms` milliseconds; the tokens of ready descriptors.
    fn wait(&self, out: &mut Vec<u64>, ms: i32) -> Result<(), String> {
        let mut evs = [libc::epoll_event { events: 0, u64: 0 }; 256];
        // SAFETY: `evs` is writable for its length.
        let n =
            unsafe { libc::epoll_wait(self.0.as_raw_fd(), evs.as_mut_ptr(), evs.len() as i32, ms) };
        out.clear();
        if n < 0 {
            let e = std::io::Error::last_os_error();
            if e.kind() == std::io::ErrorKind::Interrupted {
                return Ok(());
            }
            return Err(format!("epoll_wait: {e}"));
        }
        out.extend(evs[..n as usize].iter().map(|e| e.u64));
        Ok(())
    }
}
