//! `rucx-scale`: how rucx behaves with many endpoints and under incast.
//!
//! * Endpoint mode (`-n N [-P PROCS]`): one worker creates N endpoints to
//!   N workers spread over PROCS child processes and does one echo round
//!   trip on each, twice; it prints creation time per endpoint (over all,
//!   the first and the last tenth), the median first and warm round trip,
//!   and memory (resident kB) and descriptors per endpoint on both sides.
//! * Incast mode (`--incast M`): M sender processes stream tag messages to
//!   one receiver that takes `--rate` a second for `--seconds`, then
//!   drains; it prints the receiver's peak memory growth, after checking
//!   that every message arrived in order per sender.
//!
//! The transports are the context's (`RUCX_TLS`, `RUCX_NET_DEVICES`). The
//! same output comes from `ucx-scale.c` (built against UCX) for a side by
//! side comparison. It does not pin processes or repeat runs: run it
//! several times and compare medians.

mod children;
mod endpoints;
mod hex;
mod incast;
mod remote;
mod sys;

/// Active message id of the driver's requests.
const ECHO: u16 = 1;
/// Active message id of the answers.
const ANSWER: u16 = 2;

/// What an endpoint run measured.
#[derive(Debug, Clone)]
pub(crate) struct Report {
    pub(crate) n: usize,
    pub(crate) procs: usize,
    pub(crate) create_us: f64,
    pub(crate) create_first_us: f64,
    pub(crate) create_last_us: f64,
    pub(crate) rtt_first_us: f64,
    pub(crate) rtt_warm_us: f64,
    pub(crate) kb_per_ep: f64,
    pub(crate) fds_per_ep: f64,
    pub(crate) remote_kb_per_ep: f64,
    pub(crate) remote_fds_per_ep: f64,
}

const USAGE: &str = "\
usage: rucx-scale [-n ENDPOINTS] [-P PROCESSES] [-H]
       rucx-scale --incast SENDERS [--seconds S] [--rate MSGS_PER_S] [--size BYTES] [-H]

  -n N          endpoints from one worker, each to its own remote worker (default 1000)
  -P P          child processes holding the remote workers (default 4)
  --incast M    M senders streaming to one slow receiver instead
  --seconds S   how long the senders send (default 5)
  --rate R      messages the receiver takes per second meanwhile (default 1000)
  --size B      message size, at least 8 (default 64)
  -H            no header line
The transports are chosen by RUCX_TLS and RUCX_NET_DEVICES as for any rucx program.";

/// Runs the program on `args` (without the program name); the exit code.
pub fn main(args: impl Iterator<Item = String>) -> i32 {
    match run(args.collect()) {
        Ok(()) => 0,
        Err(e) => {
            eprintln!("rucx-scale: {e}");
            1
        }
    }
}

fn run(args: Vec<String>) -> Result<(), String> {
    let mut it = args.iter().map(String::as_str);
    let (mut n, mut procs, mut incast) = (1000usize, 4usize, None);
    let (mut secs, mut rate, mut size, mut header) = (5.0f64, 1000.0f64, 64usize, true);
    while let Some(a) = it.next() {
        let mut value = |name: &str| it.next().ok_or(format!("{name} needs a value\n{USAGE}"));
        match a {
            "-n" => n = parse(value("-n")?, "-n")?,
            "-P" => procs = parse(value("-P")?, "-P")?,
            "--incast" => incast = Some(parse(value("--incast")?, "--incast")?),
            "--seconds" => secs = parse(value("--seconds")?, "--seconds")?,
            "--rate" => rate = parse(value("--rate")?, "--rate")?,
            "--size" => size = parse(value("--size")?, "--size")?,
            "-H" => header = false,
            "-h" | "--help" => {
                println!("{USAGE}");
                return Ok(());
            }
            // The children's entry points.
            "--serve" => return remote::serve(parse(value("--serve")?, "--serve")?),
            "--send" => {
                let addr = value("--send")?;
                let s = parse(value("--send")?, "--send")?;
                let b = parse(value("--send")?, "--send")?;
                let i = parse(value("--send")?, "--send")?;
                return incast::send(addr, s, b, i);
            }
            other => return Err(format!("unknown option {other:?}\n{USAGE}")),
        }
    }
    let tls = std::env::var("RUCX_TLS").unwrap_or_else(|_| "all".into());
    if let Some(m) = incast {
        let r = incast::run(m, secs, size, rate)?;
        if header {
            println!(
                "# tls        senders   messages    peak_rss_kB    kB/1k_msgs   drain_ms  peak_unexp_kB"
            );
        }
        let per = r.peak_kb as f64 * 1000.0 / r.messages.max(1) as f64;
        println!(
            "{tls:<12} {:>7} {:>10} {:>14} {:>13.1} {:>10.1} {:>14}",
            r.senders, r.messages, r.peak_kb, per, r.drain_ms, r.peak_unexp_kb
        );
        return Ok(());
    }
    let r = endpoints::run(n, procs)?;
    if header {
        println!(
            "# tls       endpoints procs  create_us first10_us last10_us  rtt1_us  rtt2_us   kB/ep  fds/ep  remote_kB/ep remote_fds/ep"
        );
    }
    println!(
        "{tls:<12} {:>8} {:>5} {:>10.2} {:>10.2} {:>9.2} {:>8.2} {:>8.2} {:>7.2} {:>7.2} {:>13.2} {:>13.2}",
        r.n,
        r.procs,
        r.create_us,
        r.create_first_us,
        r.create_last_us,
        r.rtt_first_us,
        r.rtt_warm_us,
        r.kb_per_ep,
        r.fds_per_ep,
        r.remote_kb_per_ep,
        r.remote_fds_per_ep
    );
    Ok(())
}

fn parse<T: std::str::FromStr>(v: &str, name: &str) -> Result<T, String> {
    v.parse()
        .map_err(|_| format!("{name}: bad value {v:?}\n{USAGE}"))
}
