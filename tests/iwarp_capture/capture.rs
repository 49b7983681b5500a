//! A tshark capture to a pcapng file, known to be running before the
//! traffic starts and known to hold all of it when it stops.
//!
//! tshark's "Capturing on" does not promise that: packets reach dumpcap in
//! blocks about every quarter second, a file it writes is buffered, and on
//! SIGINT it stops at once, losing the block in progress without counting
//! it as dropped. So tshark writes the capture to a pipe (which dumpcap
//! flushes per block), a thread copies it into the file and watches for
//! probes: TCP SYNs to port 9 (discard) that the test sends through the
//! captured interface. The capture runs once a probe shows up; it has all
//! the traffic before a probe once that probe shows up.

use super::check::tshark_version;
use crate::common::wait_exit;
use crate::hosts::procs::{Host, Logged, Scratch};
use std::io::{Read, Write};
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// The port probes go to; nothing listens there, the SYN is all we need.
const PROBE_PORT: u16 = 9;

/// A running capture.
pub(crate) struct Capture {
    tshark: Logged,
    file: PathBuf,
    copier: Option<JoinHandle<()>>,
    /// Probe SYNs seen in the capture so far.
    probes: Arc<AtomicUsize>,
    /// Where probes are sent from, and to.
    host: Host,
    target: String,
}

impl Capture {
    /// Captures the packets of interface `iface` on `host` that match the
    /// capture filter `filter` (which must let TCP to port 9 through) into
    /// `<name>.pcapng` in `dir`. Probes go from `host` to `target`, an
    /// address whose packets cross `iface`. `Err(why)` when tshark is
    /// missing or may not capture here (the test then skips).
    pub(crate) fn start(
        host: &Host,
        iface: &str,
        filter: &str,
        target: &str,
        dir: &Scratch,
        name: &str,
    ) -> Result<Capture, String> {
        if tshark_version().is_none() {
            return Err("tshark not installed".into());
        }
        let file = dir.path(&format!("{name}.pcapng"));
        let mut cmd = host.command("tshark");
        // A 64 MiB kernel buffer: loopback bandwidth runs come in bursts
        // faster than dumpcap writes them out.
        cmd.args(["-i", iface, "-f", filter, "-B", "64", "-w", "-"]);
        let mut tshark = Logged::spawn_piped(cmd, dir, &format!("{name}.tshark"));
        let pipe = tshark
            .child
            .stdout
            .take()
            .expect("tshark's stdout is piped");
        let probes = Arc::new(AtomicUsize::new(0));
        let out = std::fs::File::create(&file).expect("create the capture file");
        let seen = probes.clone();
        let copier = std::thread::spawn(move || copy_pcapng(pipe, out, &seen));
        let mut capture = Capture {
            tshark,
            file,
            copier: Some(copier),
            probes,
            host: host.clone(),
            target: target.to_string(),
        };
        let started = capture
            .tshark
            .wait_line(true, 30, |l| l.contains("Capturing on").then_some(()));
        if let Err(e) = started {
            return Err(format!("tshark cannot capture on {iface}: {e}"));
        }
        if !capture.probe_through(Duration::from_secs(20)) {
            let err = capture.tshark.stderr();
            return Err(format!("tshark on {iface} never saw a probe:\n{err}"));
        }
        Ok(capture)
    }

    /// Sends probes until one more shows up in the capture; false when
    /// none did within `limit`.
    fn probe_through(&self, limit: Duration) -> bool {
        let before = self.probes.load(Ordering::Acquire);
        let deadline = Instant::now() + limit;
        while Instant::now() < deadline {
            // Refused at once; only the SYN matters.
            let connect = format!("exec 3<>/dev/tcp/{}/{PROBE_PORT}", self.target);
            let probe = self
                .host
                .command("bash")
                .args(["-c", &connect])
                .stdout(std::process::Stdio::null())
                .stderr(std::process::Stdio::null())
                .status();
            probe.unwrap_or_else(|e| panic!("capture probes need bash: {e}"));
            let wait = Instant::now() + Duration::from_secs(1);
            while Instant::now() < wait {
                if self.probes.load(Ordering::Acquire) > before {
                    return true;
                }
                std::thread::sleep(Duration::from_millis(20));
            }
        }
        false
    }

    /// Stops tshark once everything sent so far is in the capture, and
    /// returns the capture file. Fails when tshark reports dropped packets:
    /// the check would then see holes that are not on the wire.
    pub(crate) fn stop(mut self) -> PathBuf {
        assert!(
            self.probe_through(Duration::from_secs(60)),
            "the capture never caught up:\n{}",
            self.tshark.stderr()
        );
        let pid = self.tshark.child.id() as libc::pid_t;
        // SAFETY: kill(2) only sends a signal, to our own child, which has
        // not been waited for yet (so the pid is not reused).
        let rc = unsafe { libc::kill(pid, libc::SIGINT) };
        assert_eq!(rc, 0, "signal tshark: {}", std::io::Error::last_os_error());
        let status = wait_exit(&mut self.tshark.child, 30);
        let err = self.tshark.stderr();
        assert!(status.success(), "tshark exited with {status}:\n{err}");
        if let Some(copier) = self.copier.take() {
            copier.join().expect("the capture copier");
        }
        let dropped = err.lines().find(|l| {
            l.contains("dropped") && l.split_whitespace().next().is_some_and(|n| n != "0")
        });
        assert!(dropped.is_none(), "the capture is incomplete:\n{err}");
        self.file.clone()
    }
}

/// Copies a pcapng stream into `out`, counting the probe SYNs in it.
fn copy_pcapng(mut pipe: impl Read, mut out: std::fs::File, probes: &AtomicUsize) {
    let mut pending = Vec::new();
    let mut buf = vec![0u8; 1 << 16];
    loop {
        let n = match pipe.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        out.write_all(&buf[..n]).expect("write the capture file");
        pending.extend_from_slice(&buf[..n]);
        let used = scan_blocks(&pending, probes);
        pending.drain(..used);
    }
    out.flush().expect("write the capture file");
}

/// Counts the probes in the complete pcapng blocks at the start of `data`
/// (little-endian, as dumpcap writes them on this machine); returns how
/// many bytes those blocks take.
fn scan_blocks(data: &[u8], probes: &AtomicUsize) -> usize {
    let u32_at = |b: &[u8], at: usize| {
        b.get(at..at + 4)
            .map(|x| u32::from_le_bytes([x[0], x[1], x[2], x[3]]))
    };
    let mut at = 0;
    while let Some(len) = u32_at(data, at + 4) {
        let len = len as usize;
        if len < 12 || data.len() < at + len {
            break;
        }
        let block = &data[at..at + len];
        // An Enhanced Packet Block: 28 bytes of header, then the frame.
        if u32_at(block, 0) == Some(6) && is_probe(block.get(28..).unwrap_or_default()) {
            probes.fetch_add(1, Ordering::AcqRel);
        }
        at += len;
    }
    at
}

/// Whether an Ethernet frame is an IPv4 TCP SYN to [`PROBE_PORT`].
fn is_probe(frame: &[u8]) -> bool {
    if frame.get(12..14) != Some(&[0x08, 0x00]) || frame.get(23) != Some(&6) {
        return false;
    }
    let tcp = 14 + usize::from(frame.get(14).map_or(0, |b| b & 0x0f)) * 4;
    let port = frame.get(tcp + 2..tcp + 4);
    let flags = frame.get(tcp + 13).copied().unwrap_or(0);
    port == Some(&PROBE_PORT.to_be_bytes()[..]) && flags & 0x12 == 0x02
}
