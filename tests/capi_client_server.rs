//! UCX's own example, `ucp_client_server.c` from Debian's libucx-dev,
//! built unchanged against the UCP headers and rucx's `libucp.so`, run as
//! a server and a client process on this host: listener, connection
//! request, client endpoint by socket address, messages from client to
//! server (on a port its listener picks: `-p 0`, which it prints). In
//! each of its modes (`-c stream`, `-c tag`, `-c am`): the
//! defaults (one 16-byte message, two clients one after the other: the
//! server serves clients until it is killed), 4 buffers of an iovec
//! (`-v 4`), 1 MiB and 16 MiB (`-s`), 5 iterations (`-i 5`) and 3 buffers
//! of 100000 bytes 3 times. Both sides print every byte of what they sent
//! and received on their first and last iteration, which the test checks
//! against the string the example generates, with the success lines,
//! standard error and exit codes that the example prints and returns over
//! UCX 1.13 itself.
//!
//! Two behaviours are the example's own and UCX gives them too: it copies
//! each buffer to the stack to print it (`alloca`), so 16 MiB needs a
//! stack above the usual 8 MiB (the processes run with 256 MiB; with
//! 8 MiB the client dies of SIGSEGV over UCX and rucx alike); and in
//! `am` mode with more than one iteration the server can miss a message
//! (its handler's flag is set again before the server waits for it) and
//! then waits forever, so there only the client is checked.

mod capi_common;
mod common;

use capi_common::*;
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

const EXAMPLES: &str = "/usr/share/doc/libucx-dev/examples";

/// The example's `PRINT_INTERVAL`: iterations it prints besides the first
/// and the last.
const PRINT_INTERVAL: usize = 2000;

/// One run of the example: its options, as numbers too.
struct Case {
    mode: &'static str,
    iov: usize,
    size: usize,
    iters: usize,
    clients: usize,
}

impl Case {
    fn args(&self) -> Vec<String> {
        let mut a = vec!["-c".to_string(), self.mode.to_string()];
        for (flag, v, default) in [
            ("-v", self.iov, 1),
            ("-s", self.size, 16),
            ("-i", self.iters, 1),
        ] {
            if v != default {
                a.push(flag.to_string());
                a.push(v.to_string());
            }
        }
        a
    }

    fn name(&self) -> String {
        self.args().join(" ")
    }

    /// Iterations each side prints.
    fn printed(&self) -> usize {
        (0..self.iters)
            .filter(|i| *i == 0 || *i == self.iters - 1 || (i + 1) % PRINT_INTERVAL == 0)
            .count()
    }

    /// The line printed for each buffer: the test string, `size - 1`
    /// letters, and the period after it.
    fn line(&self) -> String {
        let s: String = (0..self.size.saturating_sub(1))
            .map(|i| (b'A' + (i % 26) as u8) as char)
            .collect();
        format!("{s}.")
    }

    /// Whether the server is checked (see the module doc).
    fn server_checked(&self) -> bool {
        !(self.mode == "am" && self.iters > 1)
    }
}

/// A command that runs `exe` with `args` and a 256 MiB stack: the server
/// (`secs` None) with line-buffered output where `stdbuf` exists, so that
/// its log is there when it is killed; a client killed after `secs`.
fn command(exe: &Path, args: &[String], secs: Option<u64>) -> Command {
    let (mut c, run) = match secs {
        Some(s) => {
            let mut c = Command::new("timeout");
            c.arg(s.to_string()).arg("/bin/sh");
            (c, "exec \"$@\"")
        }
        None => match Path::new("/usr/bin/stdbuf").exists() {
            true => (Command::new("/bin/sh"), "exec /usr/bin/stdbuf -oL \"$@\""),
            false => (Command::new("/bin/sh"), "exec \"$@\""),
        },
    };
    c.arg("-c")
        .arg(format!("ulimit -s 262144 && {run}"))
        .arg("sh")
        .arg(exe)
        .args(args);
    for k in ["RUCX_TLS", "UCX_TLS", "RUCX_NET_DEVICES", "UCX_NET_DEVICES"] {
        c.env_remove(k);
    }
    c
}

/// How many lines of `text` are `line`.
fn lines(text: &str, line: &str) -> usize {
    text.lines().filter(|l| *l == line).count()
}

/// What the server prints on standard error once it listens, before
/// its port.
const LISTENING: &str = "server is listening on IP 0.0.0.0 port ";

fn run_case(exe: &Path, dir: &Path, case: &Case) {
    let name = case.name();
    // Port 0: the server's listener picks one and the server prints it
    // (no race with other processes for a port chosen beforehand).
    let mut server_args = case.args();
    server_args.extend(["-p".to_string(), "0".to_string()]);
    let log = dir.join(format!("server-{}.out", name.replace([' ', '-'], "_")));
    let err_log = log.with_extension("err");
    let mut server = common::ChildGuard(
        command(exe, &server_args, None)
            .stdout(std::fs::File::create(&log).expect("server log"))
            .stderr(std::fs::File::create(&err_log).expect("server log"))
            .spawn()
            .expect("server"),
    );
    let server_log = || {
        let mut t = std::fs::read_to_string(&log).unwrap_or_default();
        t += &std::fs::read_to_string(&err_log).unwrap_or_default();
        t
    };
    let deadline = Instant::now() + Duration::from_secs(20);
    let port = loop {
        let err = std::fs::read_to_string(&err_log).unwrap_or_default();
        let port = err
            .lines()
            .find_map(|l| l.strip_prefix(LISTENING))
            .and_then(|p| p.parse::<u16>().ok());
        if let (Some(p), true) = (port, err.ends_with('\n')) {
            break p;
        }
        assert!(
            Instant::now() < deadline,
            "{name}: server never listened: {}",
            server_log()
        );
        if let Some(st) = server.0.try_wait().expect("server") {
            panic!("{name}: server exited ({st}): {}", server_log());
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    assert!(listening(port), "{name}: port {port}: {}", server_log());
    let mut client_args = case.args();
    client_args.extend([
        "-p".to_string(),
        port.to_string(),
        "-a".to_string(),
        "127.0.0.1".to_string(),
    ]);
    let line = case.line();
    let printed = case.printed();
    for i in 0..case.clients {
        let client = command(exe, &client_args, Some(60))
            .output()
            .expect("client");
        let stdout = String::from_utf8_lossy(&client.stdout);
        let short = || {
            let mut t = text(&client);
            t.truncate(4000);
            t
        };
        assert!(client.status.success(), "{name} #{i}: client: {}", short());
        // Nothing on its standard error, as over UCX.
        assert!(client.stderr.is_empty(), "{name} #{i}: client: {}", short());
        assert_eq!(
            stdout.matches("Client: iteration #").count(),
            printed,
            "{name} #{i}: {}",
            short()
        );
        assert!(
            stdout.contains(&format!("Client: iteration #{}\n", case.iters)),
            "{name} #{i}: {}",
            short()
        );
        assert_eq!(
            lines(&stdout, &line),
            printed * case.iov,
            "{name} #{i}: {}",
            short()
        );
    }
    assert!(
        server.0.try_wait().expect("server").is_none(),
        "{name}: server exited"
    );
    if !case.server_checked() || !Path::new("/usr/bin/stdbuf").exists() {
        return;
    }
    // Each client served: its iterations printed, then the server waits
    // for the next.
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let out = std::fs::read_to_string(&log).unwrap_or_default();
        let served = out.matches("Waiting for connection...").count() == case.clients + 1;
        if served {
            let n = case.clients * printed;
            // Its one line on standard error, as over UCX.
            assert_eq!(
                std::fs::read_to_string(&err_log).unwrap_or_default(),
                format!("{LISTENING}{port}\n"),
                "{name}"
            );
            assert_eq!(
                out.matches("----- UCP TEST SUCCESS -------").count(),
                n,
                "{name}"
            );
            assert_eq!(out.matches("Server: iteration #").count(), n, "{name}");
            assert_eq!(lines(&out, &line), n * case.iov, "{name}: the data printed");
            break;
        }
        let mut short = out.clone();
        short.truncate(4000);
        assert!(Instant::now() < deadline, "{name}: server: {short}");
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(
        server.0.try_wait().expect("server").is_none(),
        "{name}: server exited"
    );
}

#[test]
fn ucx_client_server_runs_in_every_mode() {
    let src = Path::new(EXAMPLES).join("ucp_client_server.c");
    if !src.exists() {
        return common::skip_or_fail("needs libucx-dev's examples (ucp_client_server.c)");
    }
    let lib = match lib_dir() {
        Ok(d) => d,
        Err(e) => return common::skip_or_fail(&e),
    };
    if cc().is_none() {
        return common::skip_or_fail("needs cc");
    }
    let dir = scratch("client-server");
    let exe = dir.join("ucp_client_server");
    compile(&[src], &[EXAMPLES.into()], &lib, &exe).expect("compile ucp_client_server.c");
    for mode in ["stream", "tag", "am"] {
        let base = Case {
            mode,
            iov: 1,
            size: 16,
            iters: 1,
            clients: 1,
        };
        for case in [
            Case { clients: 2, ..base },
            Case { iov: 4, ..base },
            Case {
                size: 1 << 20,
                ..base
            },
            Case {
                size: 16 << 20,
                ..base
            },
            Case { iters: 5, ..base },
            Case {
                iov: 3,
                size: 100_000,
                iters: 3,
                ..base
            },
        ] {
            let start = Instant::now();
            run_case(&exe, &dir, &case);
            eprintln!("{}: {:?}", case.name(), start.elapsed());
        }
    }
    let _ = std::fs::remove_dir_all(dir);
}
