//! Command-line options of `rucx-perftest`, parsed like `getopt(3)` does
//! for `ucx_perftest`: single-dash letters that may be grouped (`-fN`), an
//! option argument either attached (`-n100`) or as the next word
//! (`-n 100`), the server host as the one operand, anywhere on the line,
//! and `--` to end the options. Long options: `--pair`, `--sockaddr`,
//! `--busy-target`, `--help`.

use super::catalog::{TestKind, NOT_YET, TESTS};
use super::params::{TestParams, MAX_OUTSTANDING, MAX_SIZE_ENTRIES, MAX_THREADS};
use super::report::OutputFlags;
use std::ffi::OsString;
use std::fmt::Write as _;

/// Default TCP port of the bootstrap connection, as in UCX.
pub const DEFAULT_PORT: u16 = 13337;

/// A command line that cannot be run; the program prints it with the usage
/// text and exits with status 2.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct UsageError(pub String);

/// What this process does.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Role {
    /// Wait for a client on the port, take its parameters, run one test.
    Server,
    /// Connect to the server at this host and run the test.
    Client(String),
    /// Run the test against a worker of this same process (`-l`).
    Loopback,
    /// Start a server as a child process and be its client (`--pair`).
    Pair,
    /// The child of `--pair`: a loopback-only server on a free port that
    /// reports its port on the first line of standard output.
    PairServer,
}

/// Everything the command line says.
#[derive(Debug, Clone, PartialEq)]
pub struct Options {
    /// The role.
    pub role: Role,
    /// Bootstrap TCP port (`-p`).
    pub port: u16,
    /// The test (`-t`); clients, loopback and pair runs need one.
    pub test: Option<TestKind>,
    /// Message size entries (`-s`).
    pub msg_sizes: Vec<usize>,
    /// Iterations (`-n`).
    pub iters: u64,
    /// Warm-up iterations (`-w`).
    pub warmup: u64,
    /// Operations in flight (`-O`); 0 takes the test's default.
    pub outstanding: u32,
    /// Percentile rank (`-R`).
    pub percentile: f64,
    /// Data validation (`-V`).
    pub validate: bool,
    /// Endpoints with error handling (`-e`).
    pub err_handling: bool,
    /// Endpoints through the server's listener (`--sockaddr`).
    pub sockaddr: bool,
    /// `-D`: iovec layouts of the sender and the receiver.
    pub iov: (bool, bool),
    /// Threads (`-T`).
    pub threads: u32,
    /// `--busy-target`: the server computes instead of progressing.
    pub busy_target: bool,
    /// `--worker-per-thread`: each thread of `-T` has a worker of its own.
    pub worker_per_thread: bool,
    /// Output format (`-f`, `-v`, `-N`).
    pub output: OutputFlags,
}

/// Result of parsing a command line.
#[derive(Debug, Clone, PartialEq)]
pub enum Parsed {
    /// Run with these options.
    Run(Options),
    /// `-h`: print the usage text and exit successfully.
    Help,
}

impl Default for Options {
    fn default() -> Options {
        Options {
            role: Role::Server,
            port: DEFAULT_PORT,
            test: None,
            msg_sizes: vec![8],
            iters: 1_000_000,
            warmup: 10_000,
            outstanding: 0,
            percentile: 50.0,
            validate: false,
            err_handling: false,
            sockaddr: false,
            iov: (false, false),
            threads: 1,
            busy_target: false,
            worker_per_thread: false,
            output: OutputFlags::default(),
        }
    }
}

impl Options {
    /// The test parameters a client sends, checked.
    pub fn test_params(&self) -> Result<TestParams, UsageError> {
        let test = self
            .test
            .ok_or_else(|| UsageError("missing test name (-t)".into()))?;
        let outstanding = match self.outstanding {
            0 => test.info().window,
            n => n,
        };
        let params = TestParams {
            test,
            msg_sizes: self.msg_sizes.clone(),
            iters: self.iters,
            warmup: self.warmup,
            outstanding,
            percentile: self.percentile,
            validate: self.validate,
            err_handling: self.err_handling,
            sockaddr: self.sockaddr,
            iov: self.iov,
            threads: self.threads,
            busy_target: self.busy_target,
            worker_per_thread: self.worker_per_thread,
        };
        params.check().map_err(|e| UsageError(e.to_string()))?;
        Ok(params)
    }
}

/// Option letters that take an argument.
const WITH_ARG: &str = "tsnwpORDT";
/// Option letters without an argument.
const FLAGS: &str = "lfvNVeh";

/// Parses the arguments after the program name.
pub fn parse<I>(args: I) -> Result<Parsed, UsageError>
where
    I: IntoIterator<Item = OsString>,
{
    let args: Vec<String> = args
        .into_iter()
        .map(|a| {
            a.into_string()
                .map_err(|a| UsageError(format!("argument {a:?} is not valid UTF-8")))
        })
        .collect::<Result<_, _>>()?;
    let mut opts = Options::default();
    let mut operands = Vec::new();
    let (mut loopback, mut pair, mut pair_server) = (false, false, false);
    let mut i = 0;
    while i < args.len() {
        let arg = &args[i];
        i += 1;
        if arg == "--" {
            operands.extend(args[i..].iter().cloned());
            break;
        }
        if let Some(long) = arg.strip_prefix("--") {
            if let Some((name, _)) = long.split_once('=') {
                if [
                    "pair",
                    "sockaddr",
                    "busy-target",
                    "worker-per-thread",
                    "help",
                ]
                .contains(&name)
                {
                    return Err(UsageError(format!(
                        "option '--{name}' doesn't allow an argument"
                    )));
                }
            }
            match long {
                "pair" => pair = true,
                "sockaddr" => opts.sockaddr = true,
                "busy-target" => opts.busy_target = true,
                "worker-per-thread" => opts.worker_per_thread = true,
                "pair-server" => pair_server = true,
                "help" => return Ok(Parsed::Help),
                _ => return Err(UsageError(format!("unrecognized option '{arg}'"))),
            }
            continue;
        }
        if arg.len() < 2 || !arg.starts_with('-') {
            operands.push(arg.clone());
            continue;
        }
        // A group of letters; the first that takes an argument ends it.
        let group = &arg[1..];
        for (pos, c) in group.char_indices() {
            if WITH_ARG.contains(c) {
                let rest = &group[pos + c.len_utf8()..];
                let value = if !rest.is_empty() {
                    rest.to_string()
                } else if i < args.len() {
                    i += 1;
                    args[i - 1].clone()
                } else {
                    return Err(UsageError(format!("option requires an argument -- '{c}'")));
                };
                apply_value(&mut opts, c, &value)?;
                break;
            }
            match c {
                'l' => loopback = true,
                'f' => opts.output.final_only = true,
                'v' => opts.output.csv = true,
                'N' => opts.output.numeric = true,
                'V' => opts.validate = true,
                'e' => opts.err_handling = true,
                'h' => return Ok(Parsed::Help),
                _ => {
                    debug_assert!(!FLAGS.contains(c));
                    return Err(UsageError(format!("invalid option -- '{c}'")));
                }
            }
        }
    }
    if operands.len() > 1 {
        return Err(UsageError(format!(
            "more than one server address: {}",
            operands.join(" ")
        )));
    }
    let host = operands.pop();
    opts.role = match (host, loopback, pair, pair_server) {
        (None, false, false, false) => Role::Server,
        (Some(h), false, false, false) => Role::Client(h),
        (None, true, false, false) => Role::Loopback,
        (None, false, true, false) => Role::Pair,
        (None, false, false, true) => Role::PairServer,
        (Some(_), true, _, _) => {
            return Err(UsageError(
                "a server address is not allowed in loopback (-l) mode".into(),
            ))
        }
        (Some(_), _, true, _) => {
            return Err(UsageError(
                "a server address is not allowed with --pair".into(),
            ))
        }
        _ => {
            return Err(UsageError(
                "choose one of -l, --pair and a server address".into(),
            ))
        }
    };
    if opts.role == Role::Loopback && opts.threads > 1 {
        return Err(UsageError(
            "-T with more than one thread needs a server: not in loopback (-l) mode".into(),
        ));
    }
    if opts.role == Role::Loopback && opts.busy_target {
        return Err(UsageError(
            "--busy-target needs a server (the target): not in loopback (-l) mode".into(),
        ));
    }
    if matches!(opts.role, Role::Client(_) | Role::Loopback | Role::Pair) {
        opts.test_params()?;
    }
    if matches!(opts.role, Role::Client(_)) && opts.port == 0 {
        return Err(UsageError("a client needs a port other than 0 (-p)".into()));
    }
    Ok(Parsed::Run(opts))
}

fn apply_value(opts: &mut Options, opt: char, value: &str) -> Result<(), UsageError> {
    let bad = |what: &str| {
        UsageError(format!(
            "invalid argument '{value}' for -{opt}: expected {what}"
        ))
    };
    match opt {
        't' => {
            opts.test = Some(TestKind::from_name(value).ok_or_else(|| {
                if NOT_YET.contains(&value) {
                    UsageError(format!("test '{value}' is not implemented yet"))
                } else {
                    UsageError(format!("invalid argument '{value}' for -t: unknown test"))
                }
            })?);
        }
        's' => {
            let sizes: Option<Vec<usize>> = value.split(',').map(parse_unsigned).collect();
            let sizes = sizes.ok_or_else(|| bad("sizes in bytes separated by commas"))?;
            if sizes.len() > MAX_SIZE_ENTRIES {
                return Err(bad("at most 256 sizes"));
            }
            opts.msg_sizes = sizes;
        }
        'D' => {
            let layout = |l: &str| match l {
                "contig" => Ok(false),
                "iov" => Ok(true),
                _ => Err(bad("contig or iov, for the sender[,receiver]")),
            };
            opts.iov = match value.split_once(',') {
                None => (layout(value)?, false),
                Some((s, r)) => (layout(s)?, layout(r)?),
            };
        }
        'n' => opts.iters = parse_unsigned(value).ok_or_else(|| bad("a count"))? as u64,
        'w' => opts.warmup = parse_unsigned(value).ok_or_else(|| bad("a count"))? as u64,
        'p' => {
            opts.port = parse_unsigned(value)
                .and_then(|p| u16::try_from(p).ok())
                .ok_or_else(|| bad("a port number 0..65535"))?;
        }
        'O' => {
            opts.outstanding = parse_unsigned(value)
                .and_then(|n| u32::try_from(n).ok())
                .filter(|&n| n <= MAX_OUTSTANDING)
                .ok_or_else(|| bad("a count 1..65536 (0 for the test's default)"))?;
        }
        'T' => {
            opts.threads = parse_unsigned(value)
                .and_then(|n| u32::try_from(n).ok())
                .filter(|n| (1..=MAX_THREADS).contains(n))
                .ok_or_else(|| bad("a thread count 1..64"))?;
        }
        'R' => {
            opts.percentile = value
                .parse::<f64>()
                .ok()
                .filter(|r| (0.0..=100.0).contains(r))
                .ok_or_else(|| bad("a rank between 0 and 100"))?;
        }
        _ => return Err(UsageError(format!("invalid option -- '{opt}'"))),
    }
    Ok(())
}

/// A decimal number without sign or suffix.
fn parse_unsigned(s: &str) -> Option<usize> {
    if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    s.parse().ok()
}

/// The usage text (`-h`, and after a usage error).
pub fn usage(program: &str) -> String {
    let d = Options::default();
    let mut s = String::new();
    let _ = writeln!(s, "  Usage: {program} [ server-hostname ] [ options ]");
    let _ = writeln!(s, "         {program} --pair -t <test> [ options ]");
    s.push('\n');
    s.push_str("  Without a server hostname the program waits for one client, takes the\n");
    s.push_str("  test parameters from it, runs the test once and exits.\n\n");
    s.push_str("  Common options:\n");
    s.push_str("     -t <test>      test to run:\n");
    for t in TESTS {
        let _ = writeln!(s, "    {:>13} - {}", t.name, t.desc);
    }
    let _ = writeln!(
        s,
        "     -s <size>      message size in bytes, or a list whose sum is the size ({})",
        d.msg_sizes[0]
    );
    let _ = writeln!(
        s,
        "     -n <iters>     number of iterations to run, 0 for no limit ({})",
        d.iters
    );
    let _ = writeln!(
        s,
        "     -w <iters>     number of warm-up iterations, at most a tenth of -n ({})",
        d.warmup
    );
    s.push_str("     -O <count>     most uncompleted outstanding operations (test default:\n");
    s.push_str("                    1 for latency tests, 32 for bandwidth tests)\n");
    let _ = writeln!(
        s,
        "     -R <rank>      percentile rank of the latency column ({:.1})",
        d.percentile
    );
    let _ = writeln!(
        s,
        "     -p <port>      TCP port of the bootstrap connection; 0 lets a server\n\
         \x20                   pick a free one and print it ({})",
        d.port
    );
    s.push_str("     -D <layout>[,<layout>]\n");
    s.push_str("                    data layout of the sender[, and the receiver] in tag,\n");
    s.push_str("                    stream and active message tests (contig):\n");
    s.push_str("                        contig - one contiguous buffer\n");
    s.push_str("                        iov    - scatter-gather list whose entries are the\n");
    s.push_str("                                 -s sizes\n");
    s.push_str("     -l             loopback: the process runs the test with itself\n");
    s.push_str("     -V             fill every message with a pattern and check every\n");
    s.push_str("                    received byte; a mismatch fails the run\n");
    s.push_str("     -e             create endpoints with error handling support: a failure\n");
    s.push_str("                    reported on the endpoint ends the run (a server uses\n");
    s.push_str("                    it if it or its client has it)\n");
    s.push_str("     --pair         run a server as a child process on a free port and\n");
    s.push_str("                    be its client\n");
    s.push_str("     --sockaddr     create the endpoints through a listener of the server\n");
    s.push_str("                    (a socket address: the server listens on a free port\n");
    s.push_str("                    and sends it over the bootstrap connection) instead of\n");
    s.push_str("                    from worker addresses; a server follows its client\n");
    s.push_str("     --busy-target  rucx extension: the server's side of a one-sided test\n");
    s.push_str("                    (ucp_put_lat, ucp_put_bw, ucp_get, the atomics) computes\n");
    s.push_str("                    after setup and never progresses its worker; a progress\n");
    s.push_str("                    thread, started for it whatever RUCX_ASYNC_PROGRESS says,\n");
    s.push_str("                    serves the client's operations (a client sends it to its\n");
    s.push_str("                    server; a server's own adds to its client's)\n");
    s.push_str("     -h, --help     show this help message\n");
    s.push('\n');
    s.push_str("  UCP only:\n");
    let _ = writeln!(
        s,
        "     -T <threads>   number of threads in the test, 1..{MAX_THREADS} ({}); they share\n\
         \x20                   one worker (thread mode multi) and its endpoint, each\n\
         \x20                   with its own tag and buffers; the final row sums their\n\
         \x20                   bandwidth and message rate and averages their latency.\n\
         \x20                   Not for stream and active message tests, -D iov or -l",
        d.threads
    );
    s.push_str("     --worker-per-thread\n");
    s.push_str("                    rucx extension: with -T, each thread has a worker of its\n");
    s.push_str("                    own (thread mode multi) on one context, with its own\n");
    s.push_str("                    endpoint to its peer thread's worker, as UCX's perftest\n");
    s.push_str("                    runs -T (a client sends it to its server)\n");
    s.push('\n');
    s.push_str("  Output format:\n");
    s.push_str("     -N             use numeric formatting (thousands separator)\n");
    s.push_str("     -f             print only final numbers\n");
    s.push_str("     -v             print CSV-formatted output\n");
    s.push('\n');
    s.push_str("  Transports and devices come from the environment: RUCX_TLS,\n");
    s.push_str("  RUCX_NET_DEVICES and the other RUCX_* variables (see rucx-info -c).\n");
    s
}

#[cfg(test)]
#[path = "options_tests.rs"]
mod tests;
