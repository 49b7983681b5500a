//! UCX's own example, `ucp_hello_world.c` from Debian's libucx-dev,
//! built unchanged against the UCP headers and rucx's `libucp.so`, run in
//! its tag mode between a server and a client process on this host, in
//! its three progress modes: busy polling (`-b`, the default),
//! `ucp_worker_wait` (`-w`) and the event fd (`-f`).

mod capi_common;
mod common;

use capi_common::*;
use std::path::Path;
use std::process::{Command, Stdio};
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
