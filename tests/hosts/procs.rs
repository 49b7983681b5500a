//! Processes of the wire tests: where they run (this network namespace or
//! another), a scratch folder for their output, and waiting for a line of
//! that output.

use crate::common::ChildGuard;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Where a process runs: in the test's own network namespace or in
/// another (`ip netns exec`), with extra environment for every process
/// started there (a host's device selection, say).
#[derive(Debug, Clone, Default)]
pub(crate) struct Host {
    netns: Option<String>,
    env: Vec<(String, String)>,
}

impl Host {
    /// The test's own network namespace.
    pub(crate) fn local() -> Host {
        Host::default()
    }

    /// The network namespace `name`.
    pub(crate) fn netns(name: &str) -> Host {
        Host {
            netns: Some(name.to_string()),
            env: Vec::new(),
        }
    }

    /// This host, with `var=value` in the environment of what it runs.
    pub(crate) fn with_env(mut self, var: &str, value: &str) -> Host {
        self.env.push((var.to_string(), value.to_string()));
        self
    }

    /// A command that runs `program` on this host.
    pub(crate) fn command(&self, program: &str) -> Command {
        let mut cmd = match &self.netns {
            None => Command::new(program),
            Some(ns) => {
                let mut cmd = Command::new("ip");
                cmd.args(["netns", "exec", ns, program]);
                cmd
            }
        };
        cmd.envs(self.env.iter().map(|(k, v)| (k, v)));
        cmd
    }
}

/// A folder for captures and process output, removed when the test
/// passes and kept (its path printed) when it fails.
#[derive(Debug)]
pub(crate) struct Scratch(PathBuf);

impl Scratch {
    pub(crate) fn new(name: &str) -> Scratch {
        let dir = std::env::temp_dir().join(format!("rucx-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("create the scratch folder");
        Scratch(dir)
    }

    pub(crate) fn path(&self, file: &str) -> PathBuf {
        self.0.join(file)
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        if std::thread::panicking() {
            eprintln!("captures and process output kept in {}", self.0.display());
        } else {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }
}

/// A child whose standard output and error go to `<name>.out` and
/// `<name>.err` in a scratch folder (no pipe to drain, and the files stay
/// for a look when the test fails).
pub(crate) struct Logged {
    pub(crate) child: ChildGuard,
    pub(crate) out: PathBuf,
    pub(crate) err: PathBuf,
}

impl Logged {
    pub(crate) fn spawn(cmd: Command, dir: &Scratch, name: &str) -> Logged {
        Logged::start(cmd, dir, name, false)
    }

    /// As [`Logged::spawn`], with standard output a pipe for the caller
    /// to read (`<name>.out` stays empty).
    pub(crate) fn spawn_piped(cmd: Command, dir: &Scratch, name: &str) -> Logged {
        Logged::start(cmd, dir, name, true)
    }

    fn start(mut cmd: Command, dir: &Scratch, name: &str, pipe: bool) -> Logged {
        let (out, err) = (
            dir.path(&format!("{name}.out")),
            dir.path(&format!("{name}.err")),
        );
        let file = |p: &Path| std::fs::File::create(p).expect("create an output file");
        let stdout = if pipe {
            Stdio::piped()
        } else {
            file(&out).into()
        };
        cmd.stdin(Stdio::null()).stdout(stdout).stderr(file(&err));
        let child = cmd.spawn().unwrap_or_else(|e| panic!("start {cmd:?}: {e}"));
        Logged {
            child: ChildGuard(child),
            out,
            err,
        }
    }

    /// Standard output so far.
    pub(crate) fn stdout(&self) -> String {
        std::fs::read_to_string(&self.out).unwrap_or_default()
    }

    /// Standard error so far.
    pub(crate) fn stderr(&self) -> String {
        std::fs::read_to_string(&self.err).unwrap_or_default()
    }

    /// Waits up to `secs` for a line of standard output (`stderr` false)
    /// or error for which `pick` gives a value. Fails with the process's
    /// output when it exits first or time runs out.
    pub(crate) fn wait_line<T>(
        &mut self,
        stderr: bool,
        secs: u64,
        pick: impl Fn(&str) -> Option<T>,
    ) -> Result<T, String> {
        let deadline = Instant::now() + Duration::from_secs(secs);
        loop {
            let text = if stderr { self.stderr() } else { self.stdout() };
            if let Some(v) = text.lines().find_map(&pick) {
                return Ok(v);
            }
            let exited = self.child.try_wait().ok().flatten();
            if exited.is_some() || Instant::now() >= deadline {
                let why = exited.map_or(format!("nothing after {secs} s"), |s| s.to_string());
                return Err(format!(
                    "{why}; stdout:\n{}\nstderr:\n{}",
                    self.stdout(),
                    self.stderr()
                ));
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}
