//! The control channel between the test and its child processes: a child
//! prints lines `@@<name> <value>` on its standard output and reads
//! commands, one a line, from its standard input.

use crate::common::*;
use rucx::Worker;
use std::io::{BufRead, BufReader, Write};
use std::sync::mpsc::{channel, Receiver, RecvTimeoutError};
use std::time::{Duration, Instant};

/// The verbs transport, with the atomics mode the tests use (device
/// atomics are the NIC's; see `ucp`'s `rma::amo`).
pub(crate) fn verbs_context() -> rucx::Context {
    context_vars(&[("RUCX_TLS", "rc_verbs"), ("RUCX_ATOMIC_MODE", "device")])
}

/// In a child: tells the parent `name` is `value`.
pub(crate) fn say(name: &str, value: &str) {
    println!("@@{name} {value}");
}

/// In a child: the parent's commands, read by a thread.
pub(crate) fn commands() -> Receiver<String> {
    let (tx, rx) = channel();
    std::thread::spawn(move || {
        for l in std::io::stdin().lock().lines().map_while(|l| l.ok()) {
            if tx.send(l.trim().to_string()).is_err() {
                break;
            }
        }
    });
    rx
}

/// In a child: a variable the parent set.
pub(crate) fn var(k: &str) -> String {
    std::env::var(k).unwrap_or_else(|_| panic!("no {k}"))
}

/// A child process and its control lines.
pub(crate) struct Ctl {
    pub(crate) child: ChildGuard,
    lines: Receiver<Option<(String, String)>>,
    name: String,
}

impl Ctl {
    /// Starts test `test` of this binary as a child with `env`.
    pub(crate) fn spawn(test: &str, name: &str, env: &[(&str, String)]) -> Ctl {
        let mut child = spawn_child_with(test, env, &[], false);
        let out = child.0.stdout.take().expect("stdout is piped");
        let (tx, lines) = channel();
        let who = name.to_string();
        std::thread::spawn(move || {
            for l in BufReader::new(out).lines().map_while(|l| l.ok()) {
                println!("{who}: {l}");
                // The harness may print its own words before ours.
                if let Some(at) = l.find("@@") {
                    let (k, v) = l[at + 2..].split_once(' ').unwrap_or((&l[at + 2..], ""));
                    let _ = tx.send(Some((k.to_string(), v.trim().to_string())));
                }
            }
            let _ = tx.send(None);
        });
        Ctl {
            child,
            lines,
            name: name.to_string(),
        }
    }

    /// Sends the child command `line`.
    pub(crate) fn tell(&mut self, line: &str) {
        let stdin = self.child.0.stdin.as_mut().expect("stdin is piped");
        writeln!(stdin, "{line}").expect("write to the child");
        stdin.flush().expect("flush to the child");
    }

    /// The next line `name` of the child, if one came (`None` if not yet);
    /// fails if the child said something else or ended.
    pub(crate) fn poll(&self, name: &str) -> Option<String> {
        match self.lines.try_recv() {
            Ok(Some((k, v))) if k == name => Some(v),
            Ok(Some((k, v))) => panic!("{}: expected @@{name}, got @@{k} {v}", self.name),
            Ok(None) => panic!("{}: ended before saying {name}", self.name),
            Err(_) => None,
        }
    }

    /// Waits (without progress of any worker) for the child's line
    /// `name`, at most `secs` seconds.
    pub(crate) fn expect(&self, name: &str, secs: u64) -> String {
        match self.lines.recv_timeout(Duration::from_secs(secs)) {
            Ok(Some((k, v))) if k == name => v,
            Ok(Some((k, v))) => panic!("{}: expected @@{name}, got @@{k} {v}", self.name),
            Ok(None) => panic!("{}: ended before saying {name}", self.name),
            Err(RecvTimeoutError::Timeout) => {
                panic!("{}: did not say {name} in {secs} s", self.name)
            }
            Err(RecvTimeoutError::Disconnected) => panic!("{}: reader gone", self.name),
        }
    }

    /// As [`Ctl::expect`], progressing `w` meanwhile.
    pub(crate) fn expect_progressing(&self, name: &str, w: &mut Worker, secs: u64) -> String {
        let deadline = Instant::now() + Duration::from_secs(secs);
        loop {
            if let Some(v) = self.poll(name) {
                return v;
            }
            assert!(
                Instant::now() < deadline,
                "{}: did not say {name} in {secs} s",
                self.name
            );
            w.progress();
        }
    }

    /// Waits for the child to exit successfully, progressing `w`.
    pub(crate) fn exits_ok(&mut self, w: &mut Worker, secs: u64) {
        let deadline = Instant::now() + Duration::from_secs(secs);
        let st = loop {
            if let Some(st) = self.child.try_wait().expect("wait child") {
                break st;
            }
            assert!(
                Instant::now() < deadline,
                "{}: did not exit in {secs} s",
                self.name
            );
            w.progress();
        };
        assert!(st.success(), "{}: {st}", self.name);
    }
}

/// Fields joined by spaces, as control values carry them.
pub(crate) fn fields(v: &str) -> Vec<&str> {
    v.split_whitespace().collect()
}
