//! Output in `ucx_perftest`'s formats: the test box a server prints, the
//! results table, report rows, CSV, and the final row of `-f` that scripts
//! parse (the last line made of exactly eight numbers).

use super::catalog::TestInfo;
use super::measure::PerfResult;
use super::params::TestParams;
use std::fmt::Write as _;

/// Output format chosen on the command line.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct OutputFlags {
    /// `-f`: print only the final row.
    pub final_only: bool,
    /// `-v`: comma-separated values.
    pub csv: bool,
    /// `-N`: thousands separators in counts and rates.
    pub numeric: bool,
}

const BOX_RULE: &str = "+----------------------------------------------------------------------------------------------------------+";
const TABLE_RULE_TOP: &str = "+--------------+--------------+------------------------------+---------------------+-----------------------+";
const TABLE_RULE: &str = "+--------------+--------------+----------+---------+---------+----------+----------+-----------+-----------+";

/// The box describing the test, which a server prints once it has the
/// parameters. Ends with a closing rule when `closed` (no results table
/// follows it).
pub fn test_box(info: &TestInfo, params: &TestParams, closed: bool) -> String {
    let mut s = String::new();
    let line = |s: &mut String, label: &str, value: &dyn std::fmt::Display| {
        let _ = writeln!(s, "| {label:<14}{:<91}|", value.to_string());
    };
    let _ = writeln!(s, "{BOX_RULE}");
    line(&mut s, "API:", &"protocol layer");
    line(&mut s, "Test:", &info.desc);
    line(&mut s, "Data layout:", &"(automatic)");
    line(&mut s, "Send memory:", &"host");
    line(&mut s, "Recv memory:", &"host");
    line(&mut s, "Message size:", &params.message_size());
    line(&mut s, "Window size:", &params.outstanding);
    if closed {
        let _ = writeln!(s, "{BOX_RULE}");
    }
    s
}

/// The header of the results: a table, or the CSV column names.
pub fn table_header(flags: OutputFlags, info: &TestInfo, percentile: f64) -> String {
    let mut s = String::new();
    if flags.csv {
        let _ = writeln!(
            s,
            "iterations,{percentile:.1}_percentile_lat,avg_lat,overall_lat,avg_bw,overall_bw,avg_mr,overall_mr"
        );
        return s;
    }
    let stage = if flags.final_only { "Test" } else { "Stage" };
    let _ = writeln!(s, "{TABLE_RULE_TOP}");
    let _ = writeln!(
        s,
        "|              |              |       {:>8} (usec)        |   bandwidth (MB/s)  |  message rate (msg/s) |",
        info.time_label
    );
    let _ = writeln!(s, "{TABLE_RULE}");
    let _ = writeln!(
        s,
        "|    {stage:>5}     | # iterations | {percentile:>4.1}%ile | average | overall |  average |  overall |  average  |  overall  |"
    );
    let _ = writeln!(s, "{TABLE_RULE}");
    s
}

/// One row of results (no newline). `is_final` selects the final row's
/// prefix: `Final:` in a table, blank test name with `-f`.
pub fn format_row(r: &PerfResult, flags: OutputFlags, is_final: bool) -> String {
    const US: f64 = 1e6;
    const MB: f64 = 1024.0 * 1024.0;
    let v = [
        r.iters as f64,
        r.lat_percentile * US,
        r.lat_moment_avg * US,
        r.lat_total_avg * US,
        r.bw_moment_avg / MB,
        r.bw_total_avg / MB,
        r.msgrate_moment_avg,
        r.msgrate_total_avg,
    ];
    let mut s = String::new();
    if flags.csv {
        let _ = write!(
            s,
            "{:.0},{:.3},{:.3},{:.3},{:.2},{:.2},{:.0},{:.0}",
            v[0], v[1], v[2], v[3], v[4], v[5], v[6], v[7]
        );
        return s;
    }
    if is_final {
        final_prefix(&mut s, flags);
    }
    let n = flags.numeric;
    let _ = write!(
        s,
        "{} {:10.3} {:9.3} {:9.3} {:11.2} {:10.2} {} {}",
        count(v[0], 18, n),
        v[1],
        v[2],
        v[3],
        v[4],
        v[5],
        count(v[6], 11, n),
        count(v[7], 11, n)
    );
    s
}

/// A report row of thread `thread` of a run with threads (`-T`), as UCX
/// prints it: `[thread N]` before the row.
pub fn format_thread_row(thread: usize, r: &PerfResult, flags: OutputFlags) -> String {
    format!("[thread {thread}]{}", format_row(r, flags, false))
}

/// The final row of a run with threads (`-T`), as UCX prints it: four
/// figures of the threads together ([`aggregate`]): iterations of one
/// thread, overall latency (the threads' average), overall bandwidth and
/// overall message rate (the threads' sums), under the overall columns.
///
/// [`aggregate`]: super::measure::aggregate
pub fn format_threads_final(r: &PerfResult, flags: OutputFlags) -> String {
    const US: f64 = 1e6;
    const MB: f64 = 1024.0 * 1024.0;
    let (iters, lat, bw, mr) = (
        r.iters as f64,
        r.lat_total_avg * US,
        r.bw_total_avg / MB,
        r.msgrate_total_avg,
    );
    if flags.csv {
        return format!("{iters:.0},{lat:.3},{bw:.2},{mr:.0}");
    }
    let mut s = String::new();
    final_prefix(&mut s, flags);
    let n = flags.numeric;
    let _ = write!(
        s,
        "{} {lat:29.3} {bw:22.2} {}",
        count(iters, 18, n),
        count(mr, if n { 24 } else { 23 }, n)
    );
    s
}

/// A whole number right-aligned in `width`, with thousands separators when
/// `grouped`.
fn count(x: f64, width: usize, grouped: bool) -> String {
    let plain = format!("{x:.0}");
    if !grouped || !x.is_finite() {
        return format!("{plain:>width$}");
    }
    let (sign, digits) = match plain.strip_prefix('-') {
        Some(d) => ("-", d),
        None => ("", plain.as_str()),
    };
    let mut out = String::with_capacity(digits.len() + digits.len() / 3 + 1);
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(c);
    }
    format!("{:>width$}", format!("{sign}{out}"))
}

/// What a final row starts with: "Final:", or in batch runs the test's
/// name (there are none, so blank).
fn final_prefix(s: &mut String, flags: OutputFlags) {
    if flags.final_only {
        s.push_str(&format!("{:>10}", ""));
    } else {
        s.push_str("Final:    ");
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::perf::catalog::TestKind;

    fn sample() -> PerfResult {
        PerfResult {
            iters: 1_234_567,
            bytes: 9_876_536,
            elapsed: 2.5,
            lat_percentile: 1.25e-6,
            lat_moment_avg: 1.5e-6,
            lat_total_avg: 1.625e-6,
            bw_moment_avg: 5.0 * 1024.0 * 1024.0,
            bw_total_avg: 4.5 * 1024.0 * 1024.0,
            msgrate_moment_avg: 654_321.4,
            msgrate_total_avg: 612_345.6,
        }
    }

    /// What vs-ucx does: the last line of exactly eight numbers once
    /// commas are removed.
    fn final_numbers(text: &str) -> Option<Vec<f64>> {
        text.lines().rev().find_map(|line| {
            let cleaned = line.replace(',', "");
            let parts: Vec<&str> = cleaned.split_whitespace().collect();
            if parts.len() != 8 {
                return None;
            }
            parts.iter().map(|p| p.parse::<f64>().ok()).collect()
        })
    }

    #[test]
    fn final_row_parses_as_eight_numbers() {
        let expect = [1234567.0, 1.25, 1.5, 1.625, 5.0, 4.5, 654321.0, 612346.0];
        for numeric in [false, true] {
            let flags = OutputFlags {
                final_only: true,
                csv: false,
                numeric,
            };
            let info = TestKind::TagLat.info();
            let mut out = table_header(flags, info, 50.0);
            out.push_str(&format_row(&sample(), flags, true));
            out.push('\n');
            let nums = final_numbers(&out).expect("a final row");
            assert_eq!(nums, expect, "numeric={numeric}");
        }
    }

    #[test]
    fn row_layout_matches_ucx_widths() {
        let flags = OutputFlags::default();
        let row = format_row(&sample(), flags, false);
        assert_eq!(
            row,
            "           1234567      1.250     1.500     1.625        5.00       4.50      654321      612346"
        );
        let fin = format_row(&sample(), flags, true);
        assert!(fin.starts_with("Final:    "));
        assert!(fin.ends_with(&row));
        let f = format_row(
            &sample(),
            OutputFlags {
                final_only: true,
                ..flags
            },
            true,
        );
        assert_eq!(f, format!("          {row}"));
    }

    #[test]
    fn thread_rows_follow_ucx() {
        let flags = OutputFlags::default();
        let row = format_thread_row(1, &sample(), flags);
        assert_eq!(
            row,
            format!("[thread 1]{}", format_row(&sample(), flags, false))
        );
        let fin = format_threads_final(&sample(), flags);
        // UCX 1.13: "%18.0f %29.3f %22.2f %23.0f" after "Final:    ".
        assert_eq!(
            fin,
            format!(
                "Final:    {:>18} {:>29} {:>22} {:>23}",
                1234567, "1.625", "4.50", 612346
            )
        );
        let f = format_threads_final(
            &sample(),
            OutputFlags {
                final_only: true,
                ..flags
            },
        );
        assert_eq!(f, format!("          {}", &fin[10..]));
        let words: Vec<&str> = f.split_whitespace().collect();
        assert_eq!(words, ["1234567", "1.625", "4.50", "612346"]);
        let csv = OutputFlags { csv: true, ..flags };
        assert_eq!(
            format_threads_final(&sample(), csv),
            "1234567,1.625,4.50,612346"
        );
        let numeric = OutputFlags {
            numeric: true,
            ..flags
        };
        let n = format_threads_final(&sample(), numeric);
        assert!(n.ends_with(&format!(" {:>24}", "612,346")), "{n:?}");
        assert!(
            n.starts_with(&format!("Final:    {:>18} ", "1,234,567")),
            "{n:?}"
        );
    }

    #[test]
    fn numeric_groups_thousands() {
        let flags = OutputFlags {
            numeric: true,
            ..Default::default()
        };
        let row = format_row(&sample(), flags, false);
        assert!(row.starts_with("         1,234,567 "), "{row:?}");
        assert!(row.ends_with("    654,321     612,346"), "{row:?}");
        assert_eq!(count(999.0, 5, true), "  999");
        assert_eq!(count(1000.0, 5, true), "1,000");
        assert_eq!(count(0.0, 3, true), "  0");
        assert_eq!(count(-1234.0, 6, true), "-1,234");
    }

    #[test]
    fn csv_header_and_row() {
        let flags = OutputFlags {
            csv: true,
            ..Default::default()
        };
        let header = table_header(flags, TestKind::TagBw.info(), 50.0);
        assert_eq!(
            header,
            "iterations,50.0_percentile_lat,avg_lat,overall_lat,avg_bw,overall_bw,avg_mr,overall_mr\n"
        );
        let row = format_row(&sample(), flags, true);
        assert_eq!(row, "1234567,1.250,1.500,1.625,5.00,4.50,654321,612346");
        assert_eq!(row.split(',').count(), 8);
        let csv_95 = table_header(flags, TestKind::TagBw.info(), 99.0);
        assert!(csv_95.starts_with("iterations,99.0_percentile_lat,"));
    }

    #[test]
    fn table_and_box_are_rectangular() {
        let info = TestKind::TagBw.info();
        let header = table_header(OutputFlags::default(), info, 50.0);
        assert!(header.contains("overhead (usec)"));
        assert!(header.contains("| 50.0%ile |"));
        assert!(header.contains("Stage"));
        let widths: Vec<usize> = header.lines().map(|l| l.chars().count()).collect();
        assert!(widths.iter().all(|&w| w == widths[0]), "{widths:?}");
        let params = TestParams::new(TestKind::TagBw);
        let b = test_box(info, &params, true);
        assert!(b.contains("tag match bandwidth"));
        assert!(b.contains("| Window size:  32 "));
        let bw: Vec<usize> = b.lines().map(|l| l.chars().count()).collect();
        assert!(bw.iter().all(|&w| w == widths[0]), "{bw:?}");
        assert_eq!(b.lines().count(), 9);
        assert_eq!(test_box(info, &params, false).lines().count(), 8);
    }
}
