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
    let mut lines = vec!["capi_listener: ok".to_string()];
    for ip in ["ipv4", "ipv6"] {
        lines.extend([
            format!("{ip} tag both ways: ok"),
            format!("{ip} rejected client: Operation rejected by remote peer"),
            // Refused: the error handler ran with UCS_ERR_UNREACHABLE.
            format!("{ip} no listener: Destination is unreachable"),
            format!("{ip} address in use: Device is busy"),
            format!("{ip} address in time-wait: Device is busy"),
            format!("{ip} sends posted while connecting: ok"),
            format!(
                "{ip} deferred sends: failed with the connect (Destination is unreachable), canceled by a close"
            ),
        ]);
    }
    run_over_tls(
        &exe,
        120,
        &lines.iter().map(String::as_str).collect::<Vec<_>>(),
    );
    let _ = std::fs::remove_dir_all(dir);
}

/// Operations on a client endpoint the server has not accepted yet
/// (`tests/c/capi_connecting.c`, one thread; the server accepts from its
/// main loop, outside its connection handler): a remote key unpacked on
/// it, `ucp_ep_query`, `ucp_put_nbx`, `ucp_get_nbx`, `ucp_atomic_op_nbx`
/// and `ucp_ep_flush_nbx` return at once and complete once accepted (the
/// `_nbi` calls and `ucp_atomic_post` too, and `ucp_worker_flush_nbx`
/// waits for them); they
/// fail with a connect that fails (a flush-mode close of it completes,
/// no error handler runs) and are canceled by a forced close; a
/// flush-mode close waits for the connect and delivers a send posted
/// before it; blocking `ucp_put` and `ucp_ep_flush` progress the worker
/// while they wait. As UCX 1.13 behaves.
#[test]
fn operations_while_connecting_from_c() {
    let (dir, exe) = match build_c_test("connecting", "capi_connecting") {
        Ok(v) => v,
        Err(e) => return common::skip_or_fail(&e),
    };
    run_over_tls(
        &exe,
        120,
        &[
            "query while connecting: Success",
            "one-sided operations posted while connecting: ok",
            "implicit operations and a worker flush while connecting: ok",
            "failed with the connect: ",
            "flush-mode close of a failing connect: ok",
            "canceled by a forced close: ok",
            "flush-mode close while connecting: ok",
            "blocking calls progress the worker: ok",
            "capi_connecting: ok",
        ],
    );
    let _ = std::fs::remove_dir_all(dir);
}
