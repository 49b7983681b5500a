//! `--pair`: a server in a child process (this same program) on a free
//! loopback port, and this process as its client.

use super::error::{PerfError, Result};
use super::params::TestParams;
use super::report::OutputFlags;
use super::session;
use super::worker::ThreadedWorker;
use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::mpsc;
use std::thread;
use std::time::{Duration, Instant};

/// The child server's first line of output: this prefix and its port.
pub const PORT_LINE_PREFIX: &str = "rucx-perftest-port: ";
/// How long the child server waits for its client.
pub const CHILD_ACCEPT_TIMEOUT: Duration = Duration::from_secs(30);
/// How long the parent waits for the child to report its port, and to
/// exit after the test.
const CHILD_TIMEOUT: Duration = Duration::from_secs(20);

/// Runs the test of `params` against a server started from `exe` with the
/// `--pair-server` option. The child inherits the environment (`RUCX_*`)
/// and standard error; its standard output is read for the port and
/// otherwise discarded.
pub fn run<W: ThreadedWorker>(
    exe: &Path,
    params: &TestParams,
    flags: OutputFlags,
    make_worker: impl FnOnce() -> Result<W>,
    out: &mut dyn Write,
) -> Result<()> {
    params.check()?;
    let mut child = Command::new(exe)
        .arg("--pair-server")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .map_err(|e| PerfError::bootstrap(format!("start {}", exe.display()), e))?;
    let (tx, rx) = mpsc::channel();
    let reader = child.stdout.take().map(|stdout| {
        thread::spawn(move || {
            let mut tx = Some(tx);
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if let Some(port) = line.strip_prefix(PORT_LINE_PREFIX) {
                    if let Some(tx) = tx.take() {
                        let _ = tx.send(port.trim().parse::<u16>().ok());
                    }
                }
            }
        })
    });
    let port = match rx.recv_timeout(CHILD_TIMEOUT) {
        Ok(Some(port)) if port != 0 => port,
        _ => {
            stop(&mut child);
            return Err(PerfError::PeerGone(
                "the server process did not report its port".into(),
            ));
        }
    };
    let result = session::client("127.0.0.1", port, params, flags, true, make_worker, out);
    let status = wait(&mut child, CHILD_TIMEOUT);
    if let Some(reader) = reader {
        let _ = reader.join();
    }
    result?;
    match status {
        Some(s) if s.success() => Ok(()),
        Some(s) => Err(PerfError::PeerAborted(format!(
            "the server process failed ({s})"
        ))),
        None => Err(PerfError::Timeout(
            "the server process did not exit after the test".into(),
        )),
    }
}

/// Waits up to `timeout` for the child; kills it if it is still running.
fn wait(child: &mut Child, timeout: Duration) -> Option<ExitStatus> {
    let deadline = Instant::now() + timeout;
    loop {
        match child.try_wait() {
            Ok(Some(status)) => return Some(status),
            Ok(None) if Instant::now() < deadline => thread::sleep(Duration::from_millis(10)),
            _ => {
                stop(child);
                return None;
            }
        }
    }
}

fn stop(child: &mut Child) {
    let _ = child.kill();
    let _ = child.wait();
}
