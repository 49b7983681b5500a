//! rucx's `libucp.so` in `UCS_THREAD_MODE_MULTI` (`tests/c/capi_threads.c`):
//! four threads send messages on one endpoint of one worker at once, by
//! each of the send calls that try the endpoint's own send path
//! (`ucp_tag_send_nbx`, `_nb`, `_nbr`, and `ucp_am_send_nbx` without a
//! user header); every thread's messages arrive in order with their
//! bytes. Over shared memory most 8-byte sends take the endpoint's own
//! send path, past the worker's lock (counted in `ucp_worker_print_info`);
//! over tcp none can.

mod capi_common;
mod common;

use capi_common::*;

/// The count the program printed: sends that took the endpoint's path.
fn path_sends(stdout: &str) -> u64 {
    let line = stdout
        .lines()
        .find_map(|l| l.strip_prefix("endpoint path sends: "))
        .expect("the count of endpoint path sends");
    line.split_whitespace()
        .next()
        .and_then(|n| n.parse().ok())
        .expect("a number")
}

#[test]
fn threads_send_on_one_endpoint_of_a_multi_mode_worker() {
    let (dir, exe) = match build_c_test("threads", "capi_threads") {
        Ok(v) => v,
        Err(e) => return common::skip_or_fail(&e),
    };
    for call in ["nbx", "nb", "nbr", "am"] {
        for (env, out) in run_over_tls_with(&exe, &[call], 300, &["capi_threads: ok"]) {
            let stdout = String::from_utf8_lossy(&out.stdout);
            let n = path_sends(&stdout);
            println!("{call} {env:?}: {n} sends by the endpoint's path");
            match env.first() {
                Some((_, "tcp")) => assert_eq!(n, 0, "{call} {env:?}: tcp has no such path"),
                Some((_, "shm")) => {
                    assert!(n > 0, "{call} {env:?}: no send took the path: {stdout}")
                }
                _ => {}
            }
        }
    }
    let _ = std::fs::remove_dir_all(dir);
}
