//! UCX's `ucp_hello_world.c` (Debian's libucx-dev) on rucx's `libucp.so`
//! in its peer-failure modes, `-e send`, `-e recv` and `-e keepalive`
//! (`UCP_ERR_HANDLING_MODE_PEER`; one side kills itself with `SIGKILL`),
//! each in the three progress modes `-b`, `-w` and `-f`. The lines and
//! exit codes checked are those UCX 1.13 gives on this host:
//!
//! * `send`: the server dies after the client's address arrived; the
//!   client's failure handler gets `-80 (Endpoint timeout)`, it prints
//!   `Failed to receive data: EP disconnected` and exits with 255;
//! * `recv`: the client dies after sending its address; after its 5 s
//!   sleep the server's failure handler gets `-80`, its send fails
//!   (`unable to send UCX data message (Endpoint timeout)`), and it
//!   exits with 255 (the example's own convention in this mode);
//! * `keepalive`: the client dies after the server's message arrived; the
//!   server's handler gets `-80`, its flush ends with
//!   `flush_ep completed with status -80 (Endpoint timeout)` and it exits
//!   with 0.
//!
//! UCX finds the dead peer at once (its tcp connection closes), not by a
//! keepalive round; so does rucx (the shared-memory peer's process exit
//! wakes a sleeping worker), with the default keepalive interval (20 s,
//! as UCX's): no variable shortens it here. Each mode also runs with
//! `-b` over tcp alone. The twelve runs go in parallel (the `recv` ones
//! sleep 5 s in the example).

mod capi_common;
mod common;

use capi_common::*;
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::{ExitStatus, Output};
use std::time::{Duration, Instant};

const EXAMPLES: &str = "/usr/share/doc/libucx-dev/examples";

/// `ucp_hello_world.c` built against rucx, or why not.
fn build(name: &str) -> Result<(PathBuf, PathBuf), String> {
    let src = Path::new(EXAMPLES).join("ucp_hello_world.c");
    if !src.exists() {
        return Err("needs libucx-dev's examples (ucp_hello_world.c)".into());
    }
    let lib = lib_dir()?;
    if cc().is_none() {
        return Err("needs cc".into());
    }
    let dir = scratch(name);
    let exe = dir.join("ucp_hello_world");
    compile(&[src], &[EXAMPLES.into()], &lib, &exe)?;
    Ok((dir, exe))
}

/// Killed by `SIGKILL` (through `timeout`, which exits with 128 + 9).
fn killed(st: ExitStatus) -> bool {
    st.signal() == Some(9) || st.code() == Some(137)
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

const HANDLER: &str = "failure handler called with status -80 (Endpoint timeout)";

/// Checks one failure mode's outputs against UCX's.
fn check(failure: &str, mode: &str, server: &Output, client: &Output) {
    let both = format!(
        "-e {failure} {mode}\n=== server\n{}\n=== client\n{}",
        text(server),
        text(client)
    );
    for o in [server, client] {
        assert!(!stderr(o).contains("failed to close ep"), "{both}");
    }
    match failure {
        "send" => {
            assert!(killed(server.status), "{both}");
            assert!(
                stderr(server).contains("Emulating unexpected failure on server side"),
                "{both}"
            );
            assert_eq!(client.status.code(), Some(255), "{both}");
            assert!(
                stdout(client).contains("finish to send UCX address message"),
                "{both}"
            );
            assert!(stdout(client).contains(HANDLER), "{both}");
            assert!(
                stderr(client).contains("Failed to receive data: EP disconnected"),
                "{both}"
            );
        }
        "recv" => {
            assert!(killed(client.status), "{both}");
            assert!(
                stderr(client).contains("Emulating failure before receive operation"),
                "{both}"
            );
            assert_eq!(server.status.code(), Some(255), "{both}");
            assert!(stdout(server).contains(HANDLER), "{both}");
            assert!(
                stderr(server).contains("unable to send UCX data message (Endpoint timeout)"),
                "{both}"
            );
            assert!(!stdout(server).contains("flush_ep"), "{both}");
        }
        "keepalive" => {
            assert!(killed(client.status), "{both}");
            assert!(
                stderr(client).contains("Emulating unexpected failure after receive completion"),
                "{both}"
            );
            assert_eq!(server.status.code(), Some(0), "{both}");
            let out = stdout(server);
            assert!(out.contains("finish to send UCX data message"), "{both}");
            assert!(out.contains(HANDLER), "{both}");
            assert!(
                out.contains("flush_ep completed with status -80 (Endpoint timeout)"),
                "{both}"
            );
            assert!(
                stderr(server).contains("Waiting for client is terminated"),
                "{both}"
            );
        }
        _ => unreachable!(),
    }
}

#[test]
fn ucx_hello_world_peer_failures() {
    let (dir, exe) = match build("hello-errors") {
        Ok(b) => b,
        Err(e) => return common::skip_or_fail(&e),
    };
    let started = Instant::now();
    std::thread::scope(|s| {
        let mut runs = Vec::new();
        for failure in ["send", "recv", "keepalive"] {
            // The three progress modes with the default transports, and
            // busy polling over tcp alone, where the client's first send
            // must have left before it reports done (`-e recv`).
            for (mode, env) in [
                ("-b", &[][..]),
                ("-w", &[][..]),
                ("-f", &[][..]),
                ("-b", &[("UCX_TLS", "tcp")][..]),
            ] {
                let exe = &exe;
                runs.push((
                    failure,
                    mode,
                    env,
                    s.spawn(move || run_pair(exe, &[mode, "-e", failure], env)),
                ));
            }
        }
        for (failure, mode, env, h) in runs {
            let (server, client) = h.join().expect("run");
            check(failure, &format!("{mode} {env:?}"), &server, &client);
        }
    });
    // The failures are found at once (the recv runs sleep 5 s in the
    // example), not after a keepalive interval.
    assert!(
        started.elapsed() < Duration::from_secs(15),
        "{:?}",
        started.elapsed()
    );
    let _ = std::fs::remove_dir_all(dir);
}
