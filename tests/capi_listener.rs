//! rucx's `libucp.so` listeners from C, in one process
//! (`tests/c/capi_listener.c`): `ucp_listener_create` on 127.0.0.1 and
//! on ::1 with port 0, `ucp_listener_query` for the bound port, a client
//! endpoint by socket address (`UCP_EP_PARAMS_FLAGS_CLIENT_SERVER`) on a
//! second worker (`ucp_ep_create` returns at once; sends posted before
//! the server answered get requests and go out in order once connected,
//! one posted on a connect that fails fails with it, one on an endpoint
//! closed before it connected is canceled), the connection handler's
//! `ucp_conn_request_query` and accept (`UCP_EP_PARAM_FIELD_CONN_REQUEST`),
//! tag messages both ways, a client rejected with `ucp_listener_reject`
//! (its error handler sees `UCS_ERR_REJECTED`), a connect to a port with
//! no listener (`UCS_ERR_UNREACHABLE` through the error handler),
//! `ucp_listener_destroy`, and a listener on a port in use (another
//! socket listens on it, or a closed connection holds it in TIME_WAIT):
//! `UCS_ERR_BUSY`, as UCX 1.13's. Over the default transports, TCP
//! and shared memory (chosen with `UCX_TLS`, which the library reads as
//! `RUCX_TLS`).

mod capi_common;
mod common;

use capi_common::*;

#[test]
fn listeners_from_c() {
    let (dir, exe) = match build_c_test("listener", "capi_listener") {
        Ok(v) => v,
        Err(e) => return common::skip_or_fail(&e),
    };
    for env in [vec![], vec![("UCX_TLS", "tcp")], vec![("UCX_TLS", "shm")]] {
        let out = run(&exe, &[], &env, 120);
        let t = text(&out);
        assert!(out.status.success(), "{env:?}: {t}");
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(stdout.contains("capi_listener: ok"), "{env:?}: {t}");
        for ip in ["ipv4", "ipv6"] {
            assert!(
                stdout.contains(&format!("{ip} tag both ways: ok")),
                "{env:?}: {t}"
            );
            assert!(
                stdout.contains(&format!(
                    "{ip} rejected client: Operation rejected by remote peer"
                )),
                "{env:?}: {t}"
            );
            // Refused: the error handler ran with UCS_ERR_UNREACHABLE.
            assert!(
                stdout.contains(&format!("{ip} no listener: Destination is unreachable")),
                "{env:?}: {t}"
            );
            for line in [
                format!("{ip} address in use: Device is busy"),
                format!("{ip} address in time-wait: Device is busy"),
                format!("{ip} sends posted while connecting: ok"),
                format!(
                    "{ip} deferred sends: failed with the connect (Destination is unreachable), canceled by a close"
                ),
            ] {
                assert!(stdout.contains(&line), "{env:?}: no {line:?}: {t}");
            }
        }
    }
    let _ = std::fs::remove_dir_all(dir);
}
