//! Helpers of the C API tests: the built `libucp.so`, headers and a C
//! compiler.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::OnceLock;

#[path = "../port_util/mod.rs"]
mod port_util;
#[allow(unused_imports)]
pub(crate) use port_util::free_port;

/// The target directory and cargo profile of this test binary
/// (`target/<profile>/deps/<test>`).
fn target_and_profile() -> Option<(PathBuf, String)> {
    let exe = std::env::current_exe().ok()?;
    let profile_dir = exe.parent()?.parent()?;
    let profile = profile_dir.file_name()?.to_str()?.to_string();
    Some((profile_dir.parent()?.to_path_buf(), profile))
}

/// A directory holding `libucp.so` and `libucp.so.0` (links to the
/// library built by `cargo build -p rucx-capi` in this test's profile,
/// which this builds first: `cargo test` builds the crate's rlib, not
/// necessarily the shared library). `Err` says why there is none.
pub(crate) fn lib_dir() -> Result<PathBuf, String> {
    static DIR: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    DIR.get_or_init(build_lib).clone()
}

fn build_lib() -> Result<PathBuf, String> {
    let (target, profile) = target_and_profile().ok_or("no target directory")?;
    let cargo = option_env!("CARGO").unwrap_or("cargo");
    let mut cmd = Command::new(cargo);
    cmd.args(["build", "-p", "rucx-capi", "--lib", "--target-dir"])
        .arg(&target)
        .current_dir(env!("CARGO_MANIFEST_DIR"));
    match profile.as_str() {
        "debug" => {}
        "release" => {
            cmd.arg("--release");
        }
        p => {
            cmd.args(["--profile", p]);
        }
    }
    let st = cmd.status().map_err(|e| format!("cargo: {e}"))?;
    if !st.success() {
        return Err(format!("cargo build -p rucx-capi: {st}"));
    }
    let so = target.join(&profile).join("libucp.so");
    if !so.exists() {
        return Err(format!("{} was not built", so.display()));
    }
    let dir = std::env::temp_dir().join(format!("rucx-capi-lib-{}", std::process::id()));
    std::fs::create_dir_all(&dir).map_err(|e| e.to_string())?;
    for name in ["libucp.so", "libucp.so.0"] {
        let link = dir.join(name);
        let _ = std::fs::remove_file(&link);
        std::os::unix::fs::symlink(&so, &link).map_err(|e| e.to_string())?;
    }
    Ok(dir)
}

/// The C compiler (`cc`), if there is one.
pub(crate) fn cc() -> Option<PathBuf> {
    let out = Command::new("cc").arg("--version").output().ok()?;
    out.status.success().then(|| PathBuf::from("cc"))
}

/// Where `<ucp/api/ucp.h>` comes from: rucx's own headers
/// (`capi/include`) once they are complete, else Debian's UCX headers
/// (`libucx-dev`), which are ABI-identical by design.
pub(crate) fn include_dir() -> Option<PathBuf> {
    let own = Path::new(env!("CARGO_MANIFEST_DIR")).join("capi/include");
    let system = PathBuf::from("/usr/include");
    [own, system]
        .into_iter()
        .find(|d| d.join("ucp/api/ucp.h").exists())
}

/// The C sources of these tests.
pub(crate) fn c_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/c")
}

/// Compiles `sources` into executable `out` against `libucp.so` from
/// `lib`, with `includes` searched after the UCP headers.
pub(crate) fn compile(
    sources: &[PathBuf],
    includes: &[PathBuf],
    lib: &Path,
    out: &Path,
) -> Result<(), String> {
    let cc = cc().ok_or("no C compiler (cc)")?;
    let inc = include_dir().ok_or("no UCP headers (capi/include or libucx-dev)")?;
    let mut cmd = Command::new(cc);
    cmd.arg("-Wall").arg("-O1").arg("-I").arg(&inc);
    for i in includes {
        cmd.arg("-I").arg(i);
    }
    cmd.args(sources)
        .arg("-o")
        .arg(out)
        .arg("-L")
        .arg(lib)
        .arg(format!("-Wl,-rpath,{}", lib.display()))
        .args(["-lucp", "-lpthread"]);
    let o = cmd.output().map_err(|e| format!("cc: {e}"))?;
    if !o.status.success() {
        return Err(format!(
            "cc failed:\n{}",
            String::from_utf8_lossy(&o.stderr)
        ));
    }
    Ok(())
}

/// Builds `tests/c/<source>.c` against the built `libucp.so` into a
/// scratch directory `name`: the directory and the executable, or why it
/// cannot be built here (no library, compiler or headers: the test skips
/// or fails as `RUCX_REQUIRE_ALL` says). A compile error panics.
pub(crate) fn build_c_test(name: &str, source: &str) -> Result<(PathBuf, PathBuf), String> {
    let lib = lib_dir()?;
    if cc().is_none() || include_dir().is_none() {
        return Err("needs cc and UCP headers (capi/include or libucx-dev)".into());
    }
    let dir = scratch(name);
    let exe = dir.join(source);
    let src = c_dir().join(format!("{source}.c"));
    if let Err(e) = compile(&[src], &[], &lib, &exe) {
        panic!("compile {source}.c: {e}");
    }
    Ok((dir, exe))
}

/// A scratch directory for this test's executables.
pub(crate) fn scratch(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("rucx-capi-{name}-{}", std::process::id()));
    std::fs::create_dir_all(&d).expect("scratch dir");
    d
}

/// Runs `exe` with `env` (and no transport selection of the caller's),
/// killed after `secs` seconds.
pub(crate) fn run(exe: &Path, args: &[&str], env: &[(&str, &str)], secs: u64) -> Output {
    let mut cmd = Command::new("timeout");
    cmd.arg(secs.to_string()).arg(exe).args(args);
    // Only the transports the test asks for.
    for k in ["RUCX_TLS", "UCX_TLS", "RUCX_NET_DEVICES", "UCX_NET_DEVICES"] {
        cmd.env_remove(k);
    }
    for (k, v) in env {
        cmd.env(k, v);
    }
    cmd.output().expect("run test program")
}

/// The transport choices the C programs run over: the default, tcp
/// alone and shared memory (`UCX_TLS`, which the library reads as
/// `RUCX_TLS`).
pub(crate) const TLS_CHOICES: [&[(&str, &str)]; 3] =
    [&[], &[("UCX_TLS", "tcp")], &[("UCX_TLS", "shm")]];

/// Runs `exe` over each of [`TLS_CHOICES`], each within `secs` seconds,
/// and checks that it succeeded and printed each of `lines`; returns each
/// choice with its output, for further checks.
pub(crate) fn run_over_tls(
    exe: &Path,
    secs: u64,
    lines: &[&str],
) -> Vec<(&'static [(&'static str, &'static str)], Output)> {
    run_over_tls_with(exe, &[], secs, lines)
}

/// [`run_over_tls`] with arguments `args`.
pub(crate) fn run_over_tls_with(
    exe: &Path,
    args: &[&str],
    secs: u64,
    lines: &[&str],
) -> Vec<(&'static [(&'static str, &'static str)], Output)> {
    TLS_CHOICES
        .iter()
        .map(|&env| {
            let out = run(exe, args, env, secs);
            let t = text(&out);
            assert!(out.status.success(), "{env:?}: {t}");
            let stdout = String::from_utf8_lossy(&out.stdout);
            for line in lines {
                assert!(stdout.contains(line), "{env:?}: no {line:?}: {t}");
            }
            (env, out)
        })
        .collect()
}

/// Standard output and error of `o`, for messages.
pub(crate) fn text(o: &Output) -> String {
    format!(
        "status {}\n--- stdout\n{}\n--- stderr\n{}",
        o.status,
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

/// Whether a socket of this host listens on TCP `port`
/// (`/proc/net/tcp{,6}`, state `0A`).
pub(crate) fn listening(port: u16) -> bool {
    let want = format!(":{port:04X}");
    ["/proc/net/tcp", "/proc/net/tcp6"].iter().any(|f| {
        std::fs::read_to_string(f).is_ok_and(|t| {
            t.lines().skip(1).any(|l| {
                let cols: Vec<&str> = l.split_whitespace().collect();
                cols.len() > 3 && cols[1].ends_with(&want) && cols[3] == "0A"
            })
        })
    })
}

/// Runs UCX's `ucp_hello_world` example `exe` as a server with `args` on
/// a free port, and once it listens as its client (`-n localhost`); both
/// outputs once both exited (each killed after 60 s). Both see `env` and
/// no other transport choice. A server that could not bind its port
/// (another process of the host took it after `free_port` found it
/// free, and the client then met that process) is run again on another
/// port, twice at most.
pub(crate) fn run_pair(exe: &Path, args: &[&str], env: &[(&str, &str)]) -> (Output, Output) {
    let mut attempt = 0;
    loop {
        let (server, client) = run_pair_once(exe, args, env);
        let lost_port = String::from_utf8_lossy(&server.stderr).contains("open server socket");
        if !lost_port || attempt == 2 {
            return (server, client);
        }
        attempt += 1;
    }
}

/// One try of [`run_pair`].
fn run_pair_once(exe: &Path, args: &[&str], env: &[(&str, &str)]) -> (Output, Output) {
    use std::process::Stdio;
    use std::time::{Duration, Instant};
    let port = free_port().to_string();
    let mut sargs = args.to_vec();
    sargs.extend(["-p", &port]);
    let mut cmd = Command::new("timeout");
    cmd.arg("60").arg(exe).args(&sargs);
    for k in ["RUCX_TLS", "UCX_TLS", "RUCX_NET_DEVICES", "UCX_NET_DEVICES"] {
        cmd.env_remove(k);
    }
    for (k, v) in env {
        cmd.env(k, v);
    }
    let server = cmd
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("server");
    // The client does not retry: wait until the server listens.
    let deadline = Instant::now() + Duration::from_secs(20);
    while !listening(port.parse().unwrap()) {
        assert!(Instant::now() < deadline, "{args:?}: server never listened");
        std::thread::sleep(Duration::from_millis(20));
    }
    let mut cargs = sargs.clone();
    cargs.extend(["-n", "localhost"]);
    let client = run(exe, &cargs, env, 60);
    let server = server.wait_with_output().expect("server output");
    (server, client)
}
