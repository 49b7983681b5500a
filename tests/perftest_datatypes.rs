//! `rucx-perftest -D`: the iovec data layout of the sender and of the
//! receiver in tag, stream and active message tests, every received byte
//! checked (`-V`), over TCP and shared memory; and a clear usage error
//! where it does not apply.

mod perftest_util;

use perftest_util::*;

/// Tests that carry messages.
const TESTS: [&str; 6] = [
    "tag_lat",
    "tag_bw",
    "stream_lat",
    "stream_bw",
    "ucp_am_lat",
    "ucp_am_bw",
];

#[test]
fn every_layout_pair_delivers_every_byte() {
    for tls in ["tcp", "posix,cma"] {
        for layout in ["iov", "iov,iov", "contig,iov"] {
            for test in TESTS {
                // Entries of uneven sizes, one of them above the
                // rendezvous threshold of the bandwidth tests' lanes.
                let args = [
                    "--pair",
                    "-t",
                    test,
                    "-D",
                    layout,
                    "-s",
                    "16,48,70000,14",
                    "-n",
                    "200",
                    "-V",
                    "-f",
                ];
                let out = run_on(tls, &args);
                assert!(
                    out.status.success(),
                    "{tls} {test} -D {layout}: {}",
                    String::from_utf8_lossy(&out.stderr)
                );
                check_success(&out, 200.0);
            }
        }
    }
}

#[test]
fn a_wrong_layout_or_test_is_a_usage_error() {
    for (args, says) in [
        (
            &["--pair", "-t", "tag_lat", "-D", "sgl"][..],
            "contig or iov",
        ),
        (
            &["--pair", "-t", "tag_lat", "-D", "iov,strided"][..],
            "contig or iov",
        ),
        (
            &["--pair", "-t", "ucp_put_bw", "-D", "iov"][..],
            "not ucp_put_bw",
        ),
    ] {
        let out = run(args);
        assert!(!out.status.success(), "{args:?} succeeded");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(says), "{args:?}: {err}");
    }
}
