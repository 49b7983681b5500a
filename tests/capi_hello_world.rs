//! UCX's own example, `ucp_hello_world.c` from Debian's libucx-dev,
//! built unchanged against the UCP headers and rucx's `libucp.so`, run in
//! its tag mode between a server and a client process on this host, in
//! its three progress modes: busy polling (`-b`, the default),
//! `ucp_worker_wait` (`-w`) and the event fd (`-f`); with large strings
//! (`-s`, 1 and 16 MiB: rendezvous, probed then received by
//! `ucp_tag_msg_recv_nb`) and printing the configuration (`-c`). Its
//! peer-failure modes (`-e`) are in `capi_hello_world_errors.rs`.

mod capi_common;
mod common;

use capi_common::*;
use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

const EXAMPLES: &str = "/usr/share/doc/libucx-dev/examples";

#[test]
fn ucx_hello_world_runs_in_every_mode() {
    let src = Path::new(EXAMPLES).join("ucp_hello_world.c");
    if !src.exists() {
        return common::skip_or_fail("needs libucx-dev's examples (ucp_hello_world.c)");
    }
    let lib = match lib_dir() {
        Ok(d) => d,
        Err(e) => return common::skip_or_fail(&e),
    };
    if cc().is_none() {
        return common::skip_or_fail("needs cc");
    }
    let dir = scratch("hello");
    let exe = dir.join("ucp_hello_world");
    compile(&[src], &[EXAMPLES.into()], &lib, &exe).expect("compile ucp_hello_world.c");
    for mode in ["-b", "-w", "-f"] {
        let port = free_port().to_string();
        let mut server = common::ChildGuard(
            Command::new(&exe)
                .args([mode, "-p", &port])
                .env_remove("RUCX_TLS")
                .env_remove("UCX_TLS")
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .expect("server"),
        );
        // The client does not retry, and the server takes the first
        // connection as its client's: wait until it listens, unconnected.
        let deadline = Instant::now() + Duration::from_secs(20);
        while !listening(port.parse().unwrap()) {
            assert!(Instant::now() < deadline, "{mode}: server never listened");
            std::thread::sleep(Duration::from_millis(20));
        }
        let client = run(&exe, &[mode, "-p", &port, "-n", "localhost"], &[], 60);
        let t = text(&client);
        assert!(client.status.success(), "{mode}: client: {t}");
        let stdout = String::from_utf8_lossy(&client.stdout);
        assert!(
            stdout.contains("----- UCP TEST SUCCESS ----"),
            "{mode}: {t}"
        );
        assert!(stdout.contains("ABCDEFGHIJKLMNO"), "{mode}: {t}");
        let st = common::wait_exit(&mut server, 30);
        let out = server.0.wait_with_output_now();
        assert!(st.success(), "{mode}: server: {st}\n{out}");
        assert!(
            out.contains("flush_ep completed with status 0 (Success)"),
            "{mode}: {out}"
        );
    }
    let _ = std::fs::remove_dir_all(dir);
}

/// `-s SIZE` (the client prints the SIZE - 1 letters the server
/// generated, as with UCX) and `-c` (each side prints its configuration,
/// one `NAME=value` a line: `RUCX_` names, which `UCX_` variables
/// also set, where UCX prints its `UCX_` ones).
#[test]
fn ucx_hello_world_large_strings_and_config() {
    let src = Path::new(EXAMPLES).join("ucp_hello_world.c");
    if !src.exists() {
        return common::skip_or_fail("needs libucx-dev's examples (ucp_hello_world.c)");
    }
    let lib = match lib_dir() {
        Ok(d) => d,
        Err(e) => return common::skip_or_fail(&e),
    };
    if cc().is_none() {
        return common::skip_or_fail("needs cc");
    }
    let dir = scratch("hello-sizes");
    let exe = dir.join("ucp_hello_world");
    compile(&[src], &[EXAMPLES.into()], &lib, &exe).expect("compile ucp_hello_world.c");
    let cases: [&[&str]; 4] = [
        &["-b", "-s", "1048576"],
        &["-w", "-s", "16777216"],
        &["-f", "-s", "16777216"],
        &["-c"],
    ];
    let outs: Vec<_> = std::thread::scope(|s| {
        let hs: Vec<_> = cases
            .iter()
            .map(|args| {
                let exe = &exe;
                s.spawn(move || run_pair(exe, args, &[]))
            })
            .collect();
        hs.into_iter().map(|h| h.join().expect("run")).collect()
    });
    for (args, (server, client)) in cases.iter().zip(outs) {
        let short = |o: &Output| {
            let t = text(o);
            match t.len() > 4000 {
                true => format!("{}...{}", &t[..2000], &t[t.len() - 2000..]),
                false => t,
            }
        };
        let both = format!(
            "{args:?}\n=== server\n{}\n=== client\n{}",
            short(&server),
            short(&client)
        );
        assert!(server.status.success(), "{both}");
        assert!(client.status.success(), "{both}");
        let sout = String::from_utf8_lossy(&server.stdout);
        let cout = String::from_utf8_lossy(&client.stdout);
        assert!(
            sout.contains("flush_ep completed with status 0 (Success)"),
            "{both}"
        );
        assert!(cout.contains("----- UCP TEST SUCCESS ----"), "{both}");
        if let ["-c"] = args {
            for out in [&sout, &cout] {
                let config: Vec<&str> = out
                    .lines()
                    .take_while(|l| !l.contains("local address length"))
                    .collect();
                assert!(config.len() > 5, "{both}");
                // The variables UCX has under UCX's names, rucx's own
                // under RUCX_ (one of which shows the library is rucx's).
                for l in &config {
                    let (name, _) = l.split_once('=').unwrap_or_else(|| panic!("{l}\n{both}"));
                    let short = name
                        .strip_prefix("UCX_")
                        .or_else(|| name.strip_prefix("RUCX_"))
                        .unwrap_or_else(|| panic!("{l}\n{both}"));
                    assert!(
                        short
                            .chars()
                            .all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_'),
                        "{l}\n{both}"
                    );
                }
                assert!(config.iter().any(|l| l.starts_with("UCX_TLS=")), "{both}");
                assert!(
                    config.iter().any(|l| l.starts_with("RUCX_UNEXPECTED_MAX=")),
                    "{both}"
                );
            }
            continue;
        }
        let size: usize = args[2].parse().unwrap();
        let want: String = (0..size - 1)
            .map(|i| (b'A' + (i % 26) as u8) as char)
            .collect();
        assert!(
            cout.contains(&format!(
                "receive handler called with status 0 (Success), length {}",
                size + 8
            )),
            "{both}"
        );
        assert!(
            cout.contains(&format!("\n{want}\n")),
            "{args:?}: the client did not print the {} letters",
            size - 1
        );
    }
    let _ = std::fs::remove_dir_all(dir);
}

/// Reading an exited child's output.
trait OutputNow {
    fn wait_with_output_now(&mut self) -> String;
}

impl OutputNow for std::process::Child {
    fn wait_with_output_now(&mut self) -> String {
        use std::io::Read;
        let mut s = String::new();
        if let Some(o) = self.stdout.as_mut() {
            let _ = o.read_to_string(&mut s);
        }
        if let Some(e) = self.stderr.as_mut() {
            let _ = e.read_to_string(&mut s);
        }
        s
    }
}
