//! The child processes of a benchmark run: spawned from this program's
//! own binary, spoken to by lines (see `remote.rs` and `incast.rs`).

use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};

/// One child process and its pipes.
pub(crate) struct ChildProc {
    child: Child,
    stdin: Option<ChildStdin>,
    stdout: BufReader<ChildStdout>,
}

impl ChildProc {
    /// Starts this program with `args`.
    pub(crate) fn spawn(args: &[String]) -> Result<ChildProc, String> {
        let exe = std::env::current_exe().map_err(|e| format!("own program: {e}"))?;
        let mut child = Command::new(exe)
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .map_err(|e| format!("starting a child: {e}"))?;
        let (Some(stdin), Some(stdout)) = (child.stdin.take(), child.stdout.take()) else {
            let _ = child.kill();
            return Err("a child without pipes".into());
        };
        Ok(ChildProc {
            child,
            stdin: Some(stdin),
            stdout: BufReader::new(stdout),
        })
    }

    /// The next line the child wrote, split at spaces; the child's
    /// failure if it ended instead.
    pub(crate) fn line(&mut self) -> Result<Vec<String>, String> {
        let mut s = String::new();
        match self.stdout.read_line(&mut s) {
            Ok(0) => {
                let status = self.child.wait().map_err(|e| e.to_string())?;
                Err(format!("a child ended early ({status})"))
            }
            Ok(_) => Ok(s.split_whitespace().map(str::to_string).collect()),
            Err(e) => Err(format!("reading a child: {e}")),
        }
    }

    /// The next line, which must start with `word`; its numbers after it.
    pub(crate) fn numbers(&mut self, word: &str) -> Result<Vec<u64>, String> {
        let l = self.line()?;
        if l.first().map(String::as_str) != Some(word) {
            return Err(format!("a child said {l:?}, expected {word}"));
        }
        l[1..]
            .iter()
            .map(|v| v.parse().map_err(|_| format!("a child said {l:?}")))
            .collect()
    }

    /// Sends command `cmd` (a line).
    pub(crate) fn say(&mut self, cmd: &str) -> Result<(), String> {
        let Some(w) = self.stdin.as_mut() else {
            return Err("the child's input is closed".into());
        };
        writeln!(w, "{cmd}")
            .and_then(|()| w.flush())
            .map_err(|e| format!("writing a child: {e}"))
    }

    /// Closes the child's input and waits for it; its failure if it
    /// did not exit cleanly.
    pub(crate) fn finish(mut self) -> Result<(), String> {
        drop(self.stdin.take());
        let status = self.child.wait().map_err(|e| e.to_string())?;
        if status.success() {
            Ok(())
        } else {
            Err(format!("a child exited with {status}"))
        }
    }
}

impl Drop for ChildProc {
    fn drop(&mut self) {
        if self.stdin.is_some() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}
