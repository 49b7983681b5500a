//! `rucx-info` prints devices, configuration and protocol tables; bad
//! options are usage errors.

use std::process::Command;

fn info(args: &[&str], env: &[(&str, &str)]) -> std::process::Output {
    let mut c = Command::new(env!("CARGO_BIN_EXE_rucx-info"));
    c.args(args);
    for (k, v) in env {
        c.env(k, v);
    }
    c.output().expect("run rucx-info")
}

/// What `rucx-info args` prints with `env`, which must succeed.
fn stdout_of(args: &[&str], env: &[(&str, &str)]) -> String {
    let out = info(args, env);
    assert!(out.status.success(), "rucx-info {args:?} failed: {out:?}");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Fails unless `text` contains every one of `wants`.
fn assert_contains_all(text: &str, wants: &[&str]) {
    for want in wants {
        assert!(text.contains(want), "missing {want:?} in:\n{text}");
    }
}

/// The row of operation `op` in the one-sided table of `text`.
fn op_line(text: &str, op: &str) -> String {
    text.lines()
        .find(|l| l.starts_with(&format!("| {op} ")))
        .unwrap_or_else(|| panic!("no {op} line in:\n{text}"))
        .to_string()
}

#[test]
fn endpoint_tables() {
    let text = stdout_of(&["-e"], &[("RUCX_TLS", "tcp")]);
    assert_contains_all(
        &text,
        &[
            "tag send",
            "tag send sync",
            "eager short",
            "tcp/lo",
            "..inf",
            "one-sided",
        ],
    );
    // One-sided operations over TCP: put by the transport's put, get and
    // atomics executed by the target.
    let line = |op: &str| op_line(&text, op);
    assert!(line("put").contains("zero-copy write") && line("put").contains("tcp/lo"));
    assert!(line("get").contains("emulated") && line("atomic").contains("emulated"));
    let out = info(
        &["-e"],
        &[
            ("RUCX_TLS", "tcp"),
            ("RUCX_ZCOPY_THRESH", "inf"),
            ("RUCX_RNDV_THRESH", "inf"),
        ],
    );
    let text = String::from_utf8_lossy(&out.stdout);
    let tag_tables = text.split("one-sided").next().unwrap_or_default();
    assert!(
        !tag_tables.contains("zero-copy"),
        "zero-copy despite inf:\n{text}"
    );
}

#[test]
fn rc_iwarp_device_and_tables() {
    let text = stdout_of(&["-d"], &[("RUCX_TLS", "rc_iwarp")]);
    assert_contains_all(
        &text,
        &[
            "# Memory domain: iwarp_lo",
            "RDMA transport: iWARP",
            "max_sge_rd: 1",
            "atomics: no",
            "Transport: rc_iwarp",
            "Device: iwarp_lo",
            "get_zcopy:",
            "put_zcopy:",
        ],
    );
    let text = stdout_of(&["-e"], &[("RUCX_TLS", "rc_iwarp")]);
    let line = |op: &str| op_line(&text, op);
    // RDMA WRITE and READ for put and get; no atomics on iWARP: emulated.
    assert!(line("put").contains("zero-copy write") && line("put").contains("rc_iwarp/iwarp_lo"));
    assert!(line("get").contains("zero-copy read"));
    assert!(line("atomic").contains("emulated"));
    assert!(
        text.contains("rendezvous zero-copy read from remote"),
        "{text}"
    );
    // `rc` selects it too.
    let out = info(&["-e"], &[("RUCX_TLS", "rc")]);
    assert!(String::from_utf8_lossy(&out.stdout).contains("rc_iwarp/iwarp_lo"));
}

#[test]
fn devices_and_config() {
    let out = info(&["-d"], &[]);
    assert!(out.status.success());
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("Transport: tcp") && text.contains("Transport: self"),
        "{text}"
    );
    let out = info(&["-c"], &[]);
    let text = String::from_utf8_lossy(&out.stdout);
    for var in [
        "RUCX_TLS=",
        "RUCX_RNDV_THRESH=",
        "RUCX_TCP_NODELAY=",
        "RUCX_LOG_LEVEL=",
    ] {
        assert!(text.contains(var), "missing {var} in -c output");
    }
}

#[test]
fn bad_option_is_a_usage_error() {
    let out = info(&["-z"], &[]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("Usage"));
}

#[test]
fn proto_info_prints_on_endpoint_creation() {
    let out = Command::new(env!("CARGO_BIN_EXE_rucx-perftest"))
        .args(["--pair", "-t", "tag_lat", "-n", "10", "-w", "1", "-f"])
        .env("RUCX_TLS", "tcp")
        .env("RUCX_PROTO_INFO", "y")
        .output()
        .expect("run perftest");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("tag send") && err.contains("eager short"),
        "{err}"
    );
}

#[test]
fn devices_list_shared_memory_transports() {
    let out = info(&["-d"], &[]);
    assert!(out.status.success());
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("Memory domain: shm"), "{text}");
    // A transport's block: from its name to the next transport's.
    let block = |tl: &str| -> Option<&str> {
        let at = text.find(&format!("Transport: {tl}\n"))?;
        let rest = &text[at + 1..];
        Some(&text[at..at + 1 + rest.find("Transport: ").unwrap_or(rest.len())])
    };
    let posix = block("posix").unwrap_or_else(|| panic!("no posix in:\n{text}"));
    assert!(
        posix.contains("Device: memory") && posix.contains("Type: intra-node"),
        "{posix}"
    );
    // It opened: its capabilities are listed, not a failure.
    assert!(posix.contains("am_short: <= "), "{posix}");
    match block("cma") {
        Some(cma) => {
            assert!(
                cma.contains("Device: memory") && cma.contains("Type: intra-node"),
                "{cma}"
            );
            assert!(cma.contains("capabilities:"), "{cma}");
        }
        // cma needs the kernel's cross-memory attach and a Yama policy
        // that lets processes attach to their peers.
        None => {
            let why = "rucx-info -d lists no cma transport (cross-memory attach unavailable)";
            if std::env::var("RUCX_REQUIRE_ALL").is_ok_and(|v| v == "1") {
                panic!("required but unavailable: {why}\n{text}");
            }
            println!("skipped: {why}");
        }
    }
}

#[test]
fn split_rendezvous_line() {
    const TAIL: &str =
        ": the receiver reads one half, the sender writes the other (RUCX_RNDV_SPLIT_THRESH)";
    let text = stdout_of(
        &["-e"],
        &[("RUCX_TLS", "shm"), ("RUCX_RNDV_SPLIT_THRESH", "auto")],
    );
    if !text.contains("cma/memory") {
        let why = "no cma lane here (cross-memory attach denied)";
        let required = std::env::var("RUCX_REQUIRE_ALL").as_deref() == Ok("1");
        assert!(!required, "{why}");
        println!("skipped: {why}");
        return;
    }
    // From 32K, or from where rendezvous starts if that is later (the
    // transports' models place it).
    assert!(
        text.lines()
            .any(|l| l.starts_with("# rendezvous by get from ") && l.ends_with(TAIL)),
        "no split line in:\n{text}"
    );
    let text = stdout_of(
        &["-e"],
        &[("RUCX_TLS", "shm"), ("RUCX_RNDV_SPLIT_THRESH", "1m")],
    );
    assert_contains_all(&text, &[&format!("# rendezvous by get from 1M{TAIL}")]);
    for env in [
        [("RUCX_TLS", "shm"), ("RUCX_RNDV_SPLIT_THRESH", "inf")],
        [("RUCX_TLS", "rc_iwarp"), ("RUCX_RNDV_SPLIT_THRESH", "32k")],
        [("RUCX_TLS", "self"), ("RUCX_RNDV_SPLIT_THRESH", "32k")],
    ] {
        let text = stdout_of(&["-e"], &env);
        assert!(!text.contains(TAIL), "{env:?}:\n{text}");
    }
}
