//! The `rucx-perftest` program, minus the choice of communication layer:
//! parse the command line, run the role, turn the outcome into an exit
//! status (0 success, 1 failure, 2 bad command line).

use super::bootstrap::Listener;
use super::error::Result;
use super::options::{self, Options, Parsed, Role};
use super::pair::{self, CHILD_ACCEPT_TIMEOUT, PORT_LINE_PREFIX};
use super::session;
use super::worker::ThreadedWorker;
use std::ffi::OsString;
use std::io::{self, Write};

/// Exit status of a successful run.
pub const EXIT_OK: i32 = 0;
/// Exit status of a failed run.
pub const EXIT_FAILURE: i32 = 1;
/// Exit status of a command line that cannot be run.
pub const EXIT_USAGE: i32 = 2;

/// Runs the program with `args` (without the program name), creating
/// workers with `make_worker`. Results go to standard output; errors and
/// usage problems to standard error.
pub fn main<W: ThreadedWorker>(
    program: &str,
    args: impl IntoIterator<Item = OsString>,
    make_worker: impl FnOnce() -> Result<W>,
) -> i32 {
    let opts = match options::parse(args) {
        Ok(Parsed::Run(opts)) => opts,
        Ok(Parsed::Help) => {
            print!("{}", options::usage(program));
            return EXIT_OK;
        }
        Err(e) => {
            eprintln!("{program}: {e}");
            eprint!("{}", options::usage(program));
            return EXIT_USAGE;
        }
    };
    let label = if opts.role == Role::PairServer {
        format!("{program} (server)")
    } else {
        program.to_string()
    };
    let stdout = io::stdout();
    let mut out = stdout.lock();
    match run(&opts, make_worker, &mut out) {
        Ok(()) => EXIT_OK,
        Err(e) => {
            let _ = out.flush();
            eprintln!("{label}: error: {e}");
            EXIT_FAILURE
        }
    }
}

fn run<W: ThreadedWorker>(
    opts: &Options,
    make_worker: impl FnOnce() -> Result<W>,
    out: &mut dyn Write,
) -> Result<()> {
    let params = || {
        opts.test_params()
            .map_err(|e| super::error::PerfError::Params(e.0))
    };
    match &opts.role {
        Role::Server => {
            let listener = Listener::bind(opts.port, false)?;
            if opts.port == 0 {
                let _ = writeln!(out, "Listening on port {}", listener.port()?);
            }
            session::server(
                &listener,
                None,
                opts.err_handling,
                opts.busy_target,
                make_worker,
                out,
            )
        }
        Role::PairServer => {
            let listener = Listener::bind(0, true)?;
            let _ = writeln!(out, "{PORT_LINE_PREFIX}{}", listener.port()?);
            let _ = out.flush();
            session::server(
                &listener,
                Some(CHILD_ACCEPT_TIMEOUT),
                opts.err_handling,
                opts.busy_target,
                make_worker,
                out,
            )
        }
        Role::Client(host) => session::client(
            host,
            opts.port,
            &params()?,
            opts.output,
            false,
            make_worker,
            out,
        )
        .map(drop),
        Role::Loopback => session::loopback(&params()?, opts.output, make_worker, out).map(drop),
        Role::Pair => {
            let exe = std::env::current_exe().map_err(|e| {
                super::error::PerfError::bootstrap("find this program's executable", e)
            })?;
            pair::run(&exe, &params()?, opts.output, make_worker, out)
        }
    }
}
