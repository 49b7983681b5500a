//! UCX's own example, `ucp_client_server.c` from Debian's libucx-dev,
//! built unchanged against the UCP headers and rucx's `libucp.so`, run as
//! a server and a client process on this host in its tag (`-c tag`) and
//! active message (`-c am`) modes: listener, connection request, client
//! endpoint by socket address, a message from client to server, twice
//! (the server serves one client after the other until it is killed).
//! Its stream mode (`-c stream`) needs `ucp_stream_*`, which the library
//! does not have yet, so it is not run.

mod capi_common;
mod common;

use capi_common::*;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const EXAMPLES: &str = "/usr/share/doc/libucx-dev/examples";

#[test]
fn ucx_client_server_runs_in_tag_and_am_modes() {
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
    for mode in ["tag", "am"] {
        let port = free_port().to_string();
        // The server serves clients until it is killed.
        // Its standard output goes to a file, line-buffered with stdbuf
        // (where there is one) so that it is there when it is killed.
        let log = dir.join(format!("server-{mode}.out"));
        let stdbuf = Path::new("/usr/bin/stdbuf").exists();
        let mut cmd = match stdbuf {
            true => {
                let mut c = Command::new("/usr/bin/stdbuf");
                c.arg("-oL").arg(&exe);
                c
            }
            false => Command::new(&exe),
        };
        let mut server = common::ChildGuard(
            cmd.args(["-c", mode, "-p", &port])
                .env_remove("RUCX_TLS")
                .env_remove("UCX_TLS")
                .stdout(std::fs::File::create(&log).expect("server log"))
                .stderr(Stdio::null())
                .spawn()
                .expect("server"),
        );
        let deadline = Instant::now() + Duration::from_secs(20);
        while !listening(port.parse().unwrap()) {
            assert!(Instant::now() < deadline, "{mode}: server never listened");
            assert!(
                server.0.try_wait().expect("server").is_none(),
                "{mode}: server exited"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        // Two clients, one after the other: the server takes each.
        for i in 0..2 {
            let client = run(&exe, &["-c", mode, "-p", &port, "-a", "127.0.0.1"], &[], 60);
            let t = text(&client);
            assert!(client.status.success(), "{mode} #{i}: client: {t}");
            let stdout = String::from_utf8_lossy(&client.stdout);
            assert!(stdout.contains("Client: iteration #1"), "{mode} #{i}: {t}");
            assert!(stdout.contains("ABCDEFGHIJKLMNO."), "{mode} #{i}: {t}");
        }
        // Still serving: nothing failed on its side.
        assert!(
            server.0.try_wait().expect("server").is_none(),
            "{mode}: server exited"
        );
        if stdbuf {
            let deadline = Instant::now() + Duration::from_secs(20);
            loop {
                let out = std::fs::read_to_string(&log).unwrap_or_default();
                let got = out.matches("----- UCP TEST SUCCESS -------").count();
                if got == 2 && out.matches("ABCDEFGHIJKLMNO.").count() == 2 {
                    break;
                }
                assert!(Instant::now() < deadline, "{mode}: server: {out}");
                std::thread::sleep(Duration::from_millis(20));
            }
        }
    }
    let _ = std::fs::remove_dir_all(dir);
}
