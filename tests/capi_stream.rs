//! rucx's `libucp.so` from C, in one process (`tests/c/capi_stream.c`):
//! two workers with an endpoint each way; stream sends and receives
//! posted before and after the data, with and without
//! `UCP_STREAM_RECV_FLAG_WAITALL`, partial receives of 4 MiB, iovec,
//! generic and 4-byte contiguous datatypes, `ucp_stream_recv_data_nb` and
//! `ucp_stream_data_release`, `ucp_stream_worker_poll`, the legacy `_nb`
//! calls, `ucp_stream_recv_request_test`, `UCP_OP_ATTR_FLAG_NO_IMM_CMPL`,
//! a request in the application's memory, a canceled receive and wrong
//! arguments, every byte checked. Over the default transports, TCP and
//! shared memory (chosen with `UCX_TLS`, read as `RUCX_TLS`).

mod capi_common;
mod common;

use capi_common::*;

#[test]
fn streams_from_c() {
    let (dir, exe) = match build_c_test("stream", "capi_stream") {
        Ok(v) => v,
        Err(e) => return common::skip_or_fail(&e),
    };
    run_over_tls(
        &exe,
        120,
        &[
            "bad arguments: ok",
            "data first: ok",
            "posted first, waitall: ok",
            "large and partial: ok",
            "iov: ok",
            "generic, contig(4): ok",
            "legacy: ok",
            "request memory, no immediate completion: ok",
            "cancel: ok",
            "capi_stream: ok",
        ],
    );
    let _ = std::fs::remove_dir_all(dir);
}
