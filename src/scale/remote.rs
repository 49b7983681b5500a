//! The remote side of the endpoint benchmark: a child process holding
//! many workers, each answering every echo request on its reply endpoint.
//!
//! It talks to the driver by lines: on standard output `addr <hex>` per
//! worker, then `ready <rss kB> <fds>`; on standard input `report`
//! (answered with `report <rss kB> <fds>`) and `exit` (or end of input).

use std::io::{Read, Write};

use super::{hex, sys, ANSWER, ECHO};
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
    writeln!(out, "ready {} {}", sys::rss_kb(), sys::fds()).map_err(|e| e.to_string())?;
    out.flush().map_err(|e| e.to_string())?;
    sys::stdin_nonblocking().map_err(|e| format!("stdin: {e}"))?;
    let mut stdin = std::io::stdin().lock();
    let mut line = Vec::new();
    let mut buf = [0u8; 256];
    let mut rounds = 0u32;
    loop {
        for w in &mut workers {
            w.progress();
        }
        rounds = rounds.wrapping_add(1);
        if rounds % 64 != 0 {
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
