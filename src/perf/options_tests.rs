use super::*;

fn args(line: &str) -> Vec<OsString> {
    line.split_whitespace().map(OsString::from).collect()
}

fn run(line: &str) -> Options {
    match parse(args(line)) {
        Ok(Parsed::Run(o)) => o,
        other => panic!("{line}: {other:?}"),
    }
}

fn err(line: &str) -> String {
    match parse(args(line)) {
        Err(UsageError(msg)) => msg,
        other => panic!("{line}: expected an error, got {other:?}"),
    }
}

#[test]
fn no_arguments_is_a_server_with_defaults() {
    let o = run("");
    assert_eq!(o, Options::default());
    assert_eq!(o.role, Role::Server);
    assert_eq!(o.port, 13337);
    assert_eq!(
        (o.iters, o.warmup, o.msg_sizes.clone()),
        (1_000_000, 10_000, vec![8])
    );
}

#[test]
fn server_accepts_only_a_port() {
    let o = run("-p 4000");
    assert_eq!((o.role, o.port), (Role::Server, 4000));
    let o = run("-p0");
    assert_eq!(o.port, 0);
}

#[test]
fn client_as_vs_ucx_calls_it() {
    let o = run("localhost -p 4000 -t tag_lat -s 8 -f -n 1000 -w 100");
    assert_eq!(o.role, Role::Client("localhost".into()));
    assert_eq!(o.port, 4000);
    assert_eq!(o.test, Some(TestKind::TagLat));
    assert_eq!(o.msg_sizes, vec![8]);
    assert!(o.output.final_only);
    assert_eq!((o.iters, o.warmup), (1000, 100));
}

#[test]
fn host_may_come_anywhere() {
    let a = run("-t tag_bw host1 -n 5");
    let b = run("host1 -t tag_bw -n 5");
    let c = run("-t tag_bw -n 5 -- host1");
    assert_eq!(a, b);
    assert_eq!(b, c);
    assert_eq!(a.role, Role::Client("host1".into()));
}

#[test]
fn each_option() {
    let o = run("-l -t tag_bw -s 16,48,8192 -n 77 -w 7 -O 4 -R 99.9 -V -f -v -N");
    assert_eq!(o.role, Role::Loopback);
    assert_eq!(o.test, Some(TestKind::TagBw));
    assert_eq!(o.msg_sizes, vec![16, 48, 8192]);
    assert_eq!((o.iters, o.warmup, o.outstanding), (77, 7, 4));
    assert_eq!(o.percentile, 99.9);
    assert!(o.validate);
    assert_eq!(
        o.output,
        OutputFlags {
            final_only: true,
            csv: true,
            numeric: true
        }
    );
    let p = o.test_params().unwrap();
    assert_eq!(p.message_size(), 16 + 48 + 8192);
    assert_eq!(p.outstanding, 4);
}

#[test]
fn grouped_and_attached_forms() {
    let a = run("--pair -fNV -ttag_lat -n10 -s64");
    assert_eq!(a.role, Role::Pair);
    assert!(a.output.final_only && a.output.numeric && a.validate);
    assert_eq!((a.iters, a.msg_sizes.clone()), (10, vec![64]));
    // A group ends at the first letter that takes an argument.
    let b = run("--pair -Vn10 -t tag_lat");
    assert!(b.validate);
    assert_eq!(b.iters, 10);
}

#[test]
fn outstanding_zero_takes_test_default() {
    let lat = run("--pair -t tag_lat -O 0").test_params().unwrap();
    let bw = run("--pair -t tag_bw").test_params().unwrap();
    assert_eq!((lat.outstanding, bw.outstanding), (1, 32));
}

#[test]
fn help() {
    assert_eq!(parse(args("-h")), Ok(Parsed::Help));
    assert_eq!(parse(args("--help")), Ok(Parsed::Help));
    assert_eq!(parse(args("-t tag_lat -h")), Ok(Parsed::Help));
    let text = usage("rucx-perftest");
    for needle in [
        "-t <test>",
        "tag_lat",
        "tag_bw",
        "-V",
        "--pair",
        "-N",
        "13337",
    ] {
        assert!(text.contains(needle), "{needle}");
    }
}

#[test]
fn unknown_options_are_errors() {
    assert!(err("-x").contains("invalid option -- 'x'"));
    assert!(err("-fq").contains("'q'"));
    assert!(err("--bogus").contains("--bogus"));
    assert!(err("-t").contains("requires an argument"));
    assert!(err("localhost -t tag_lat -n").contains("requires an argument -- 'n'"));
}

#[test]
fn bad_values_are_errors() {
    for line in [
        "x -t nosuchtest",
        "x -t tag_lat -n ten",
        "x -t tag_lat -n -5",
        "x -t tag_lat -n 1e3",
        "x -t tag_lat -w 1.5",
        "x -t tag_lat -s 8,",
        "x -t tag_lat -s ,8",
        "x -t tag_lat -s 8k",
        "x -t tag_lat -s 99999999999999999999999",
        "x -t tag_lat -p 70000",
        "x -t tag_lat -p http",
        "x -t tag_lat -O 70000",
        "x -t tag_lat -O -1",
        "x -t tag_lat -R 101",
        "x -t tag_lat -R abc",
        "x -t tag_lat -p 0",
    ] {
        let _ = err(line);
    }
    assert!(err("x -t am_lat").contains("not implemented"));
}

#[test]
fn one_sided_sizes_are_checked() {
    for test in ["ucp_add", "ucp_fadd", "ucp_swap", "ucp_cswap"] {
        let msg = err(&format!("x -t {test} -s 16"));
        assert!(
            msg.contains("Atomic size should be either 32 or 64 bit"),
            "{msg}"
        );
        let _ = err(&format!("x -t {test} -s 3,2"));
        for ok in ["4", "8", "4,4"] {
            assert!(
                parse(args(&format!("x -t {test} -s {ok}"))).is_ok(),
                "{test} {ok}"
            );
        }
    }
    for test in ["ucp_put_lat", "ucp_put_bw", "ucp_get"] {
        assert!(err(&format!("x -t {test} -s 0")).contains("at least 1"));
        assert!(parse(args(&format!("x -t {test} -s 1"))).is_ok());
    }
    // Tag tests still take empty messages.
    assert!(parse(args("x -t tag_lat -s 0")).is_ok());
}

#[test]
fn conflicts_are_errors() {
    assert!(err("host -l -t tag_lat").contains("loopback"));
    assert!(err("host --pair -t tag_lat").contains("--pair"));
    let _ = err("-l --pair -t tag_lat");
    let _ = err("a b -t tag_lat");
}

#[test]
fn runs_that_send_parameters_need_a_test() {
    assert!(err("localhost").contains("missing test"));
    assert!(err("-l").contains("missing test"));
    assert!(err("--pair").contains("missing test"));
    // Too much memory for validation buffers is refused before connecting.
    let _ = err("--pair -t tag_bw -V -O 65536 -s 1073741824");
}

#[test]
fn non_utf8_argument_is_an_error() {
    use std::os::unix::ffi::OsStringExt;
    let bad = OsString::from_vec(vec![b'-', 0xff]);
    assert!(parse(vec![bad]).is_err());
}

#[test]
fn error_handling_reaches_the_parameters_of_every_role() {
    assert!(!run("--pair -t tag_lat").test_params().unwrap().err_handling);
    for line in [
        "--pair -e -t tag_lat",
        "host -t ucp_put_bw -e",
        "-l -t stream_bw -e",
        "-t ucp_am_bw -fe --pair",
        "-eV -t tag_bw --pair",
    ] {
        let o = run(line);
        assert!(o.err_handling, "{line}");
        assert!(o.test_params().unwrap().err_handling, "{line}");
    }
    // A server has its own -e (it adds to its client's).
    let o = run("-e -p 4000");
    assert_eq!((o.role, o.err_handling), (Role::Server, true));
    assert!(usage("p").contains("-e             create endpoints with error handling"));
}

#[test]
fn error_handling_takes_no_argument() {
    // -e is a flag: what follows in its group are more flags.
    assert!(err("--pair -t tag_lat -e5").contains("invalid option -- '5'"));
    assert!(run("--pair -t tag_lat -en 5").iters == 5);
}

#[test]
fn sockaddr_reaches_the_parameters_of_every_role() {
    assert!(!run("--pair -t tag_lat").test_params().unwrap().sockaddr);
    for line in [
        "--pair --sockaddr -t tag_lat",
        "host -t ucp_put_bw --sockaddr -e",
        "--sockaddr -l -t stream_bw",
        "-t ucp_am_bw -f --pair --sockaddr -- ",
    ] {
        let o = run(line);
        assert!(o.sockaddr, "{line}");
        let p = o.test_params().unwrap();
        assert!(p.sockaddr, "{line}");
        assert_eq!(p.err_handling, line.contains("-e"), "{line}");
    }
    // A server takes it and follows its client.
    let o = run("--sockaddr -p 4000");
    assert_eq!((o.role, o.sockaddr), (Role::Server, true));
    assert!(usage("p").contains("--sockaddr     create the endpoints through a listener"));
}

#[test]
fn bad_long_options_are_usage_errors() {
    for (line, why) in [
        (
            "--pair --sockaddr=1 -t tag_lat",
            "'--sockaddr' doesn't allow an argument",
        ),
        (
            "--pair=yes -t tag_lat",
            "'--pair' doesn't allow an argument",
        ),
        ("--help=x", "'--help' doesn't allow an argument"),
        ("--pair --sock -t tag_lat", "unrecognized option '--sock'"),
        (
            "--pair --sockaddrs -t tag_lat",
            "unrecognized option '--sockaddrs'",
        ),
        ("host --sockaddr -t tag_lat -p 0", "port other than 0"),
        ("host --sockaddr -l -t tag_lat", "loopback"),
        ("--sockaddr --pair", "missing test"),
    ] {
        assert!(err(line).contains(why), "{line}: {}", err(line));
    }
}

#[test]
fn data_layouts_of_sender_and_receiver() {
    for (line, iov) in [
        ("--pair -t tag_lat", (false, false)),
        ("--pair -t tag_lat -D contig", (false, false)),
        ("--pair -t tag_lat -D iov", (true, false)),
        ("--pair -t stream_bw -D contig,iov", (false, true)),
        ("--pair -t ucp_am_bw -Diov,iov", (true, true)),
    ] {
        let o = run(line);
        assert_eq!(o.iov, iov, "{line}");
        assert_eq!(o.test_params().unwrap().iov, iov, "{line}");
    }
}

#[test]
fn threads_reach_the_parameters() {
    let o = run("host -t tag_bw -T 4");
    assert_eq!(o.threads, 4);
    assert_eq!(o.test_params().unwrap().threads, 4);
    assert_eq!(run("host -t tag_lat -T1").threads, 1);
    assert_eq!(run("--pair -t ucp_put_bw -T 64").threads, 64);
    assert_eq!(run("host -t ucp_get").test_params().unwrap().threads, 1);
    // A server takes its client's count; its own is accepted.
    assert_eq!(run("-T 2").role, Role::Server);
}

#[test]
fn bad_thread_counts_are_usage_errors() {
    for line in [
        "host -t tag_bw -T 0",
        "host -t tag_bw -T 65",
        "host -t tag_bw -T x",
        "host -t tag_bw -T -1",
        "host -t tag_bw -T 99999999999999999999",
        "-T 0",
    ] {
        let e = err(line);
        assert!(e.contains("-T") && e.contains("1..64"), "{line}: {e}");
    }
    assert!(err("host -t tag_bw -T").contains("requires an argument"));
    for test in ["stream_bw", "stream_lat", "ucp_am_lat", "ucp_am_bw"] {
        let e = err(&format!("host -t {test} -T 2"));
        assert!(e.contains("more than one thread"), "{test}: {e}");
    }
    assert!(err("host -t tag_bw -D iov -T 2").contains("-D iov"));
    assert!(err("-l -t tag_bw -T 2").contains("loopback"));
    // Tests of the transport layer are not there at all.
    assert!(err("host -t put_bw -T 2").contains("not implemented"));
}

#[test]
fn busy_target_is_a_flag_of_one_sided_tests() {
    let o = run("--busy-target -p 4000");
    assert!(o.busy_target);
    assert_eq!(o.role, Role::Server);
    let o = run("host -t ucp_put_bw --busy-target");
    assert!(o.test_params().unwrap().busy_target);
    assert!(!run("host -t ucp_put_bw").test_params().unwrap().busy_target);
    for line in [
        "host -t tag_bw --busy-target",
        "--pair -t stream_bw --busy-target",
    ] {
        assert!(err(line).contains("--busy-target"), "{line}");
    }
    assert!(err("--busy-target=3").contains("doesn't allow an argument"));
    assert!(err("-l -t ucp_put_bw --busy-target").contains("loopback"));
    let help = usage("rucx-perftest");
    assert!(help.contains("--busy-target") && help.contains("rucx extension"));
    assert!(help.contains("-T <threads>"));
}

#[test]
fn worker_per_thread_is_a_flag_of_runs_with_threads() {
    let o = run("host -t tag_bw -T 2 --worker-per-thread");
    assert!(o.worker_per_thread);
    assert!(o.test_params().unwrap().worker_per_thread);
    assert!(
        !run("host -t tag_bw -T 2")
            .test_params()
            .unwrap()
            .worker_per_thread
    );
    assert!(err("host -t tag_bw --worker-per-thread").contains("-T 2 or more"));
    assert!(err("host -T 2 --worker-per-thread=1").contains("doesn't allow an argument"));
    assert!(usage("rucx-perftest").contains("--worker-per-thread"));
}
