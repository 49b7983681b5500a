//! `rucx-perftest`: measures rucx's latency, bandwidth and message rate with
//! the options and output of UCX's `ucx_perftest`. Run `rucx-perftest -h`.

use rucx::perf::{app, ucp::UcpWorker};

fn main() {
    let program = "rucx-perftest";
    let code = app::main(program, std::env::args_os().skip(1), UcpWorker::new);
    std::process::exit(code);
}
