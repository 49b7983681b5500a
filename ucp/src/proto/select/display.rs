//! Printing selection tables in the style of `UCX_PROTO_INFO`.

use super::lanes::LaneSet;
use super::ranges::Ranges;
use super::table::SelectionTable;
use std::fmt;

/// A size in compact form: `inf` for `usize::MAX`, `K`/`M`/`G` suffixes for
/// exact multiples of 1024, 1024², 1024³, plain bytes otherwise.
pub fn size_text(n: usize) -> String {
    if n == usize::MAX {
        return "inf".to_string();
    }
    if n > 0 {
        for (unit, shift) in [("G", 30), ("M", 20), ("K", 10)] {
            if n % (1usize << shift) == 0 {
                return format!("{}{unit}", n >> shift);
            }
        }
    }
    n.to_string()
}

/// Ranges as `a..b, c..d`.
pub(crate) fn ranges_text(r: &Ranges) -> String {
    let v: Vec<_> = r
        .as_slice()
        .iter()
        .map(|&(s, e)| format!("{}..{}", size_text(s), size_text(e)))
        .collect();
    v.join(", ")
}

/// The lanes of a choice: `tcp/lo`, or `67% on a/x and 33% on b/y`.
fn lanes_text(set: &LaneSet, names: &[String]) -> String {
    let name = |i: usize| names.get(i).map_or("?", |s| s.as_str());
    if set.len() <= 1 {
        return set.iter().next().map_or("", |(i, _)| name(i)).to_string();
    }
    let parts: Vec<_> = set
        .iter()
        .map(|(i, w)| format!("{:.0}% on {}", w * 100.0, name(i)))
        .collect();
    parts.join(" and ")
}

/// One printed row: range bounds, description, lanes.
struct Row {
    start: String,
    end: String,
    desc: &'static str,
    lanes: String,
}

impl SelectionTable {
    /// Rows as printed: neighbouring ranges with the same protocol and
    /// lanes are joined.
    fn rows(&self) -> Vec<Row> {
        let mut rows: Vec<(usize, usize, usize)> = Vec::new();
        for (k, c) in self.choices.iter().enumerate() {
            if let Some(r) = rows.last_mut() {
                let p = &self.choices[r.2];
                if p.proto == c.proto && p.lanes == c.lanes {
                    r.1 = c.end;
                    continue;
                }
            }
            rows.push((c.start, c.end, k));
        }
        rows.into_iter()
            .map(|(s, e, k)| Row {
                start: size_text(s),
                end: size_text(e),
                desc: self.choices[k].proto.description(),
                lanes: lanes_text(&self.choices[k].lanes, &self.lane_names),
            })
            .collect()
    }
}

impl fmt::Display for SelectionTable {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let rows = self.rows();
        let title = self.op.description();
        let all_lanes = self.lane_names.join(", ");
        let w_start = rows.iter().map(|r| r.start.len()).max().unwrap_or(0);
        let w_end = rows.iter().map(|r| r.end.len()).max().unwrap_or(0);
        let w1 = (w_start + 2 + w_end + 2).max(title.len());
        let w2 = rows
            .iter()
            .map(|r| r.desc.len() + 3 + r.lanes.len())
            .chain([all_lanes.len()])
            .max()
            .unwrap_or(0);
        let rule = format!("+{}+{}+", "-".repeat(w1 + 2), "-".repeat(w2 + 2));
        writeln!(f, "{rule}")?;
        writeln!(f, "| {title:<w1$} | {all_lanes:<w2$} |")?;
        writeln!(f, "{rule}")?;
        for r in &rows {
            let range = format!("{:>w_start$}..{:<w_end$}", r.start, r.end);
            let gap = w2 - r.desc.len();
            writeln!(f, "| {range:>w1$} | {}{:>gap$} |", r.desc, r.lanes)?;
        }
        write!(f, "{rule}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_are_compact() {
        assert_eq!(size_text(0), "0");
        assert_eq!(size_text(8184), "8184");
        assert_eq!(size_text(8192), "8K");
        assert_eq!(size_text(65536), "64K");
        assert_eq!(size_text(3 << 20), "3M");
        assert_eq!(size_text(1 << 30), "1G");
        assert_eq!(size_text((1 << 20) + 1024), "1025K");
        assert_eq!(size_text(usize::MAX), "inf");
        let r = Ranges::from_sorted([(0, 0), (1024, usize::MAX)]);
        assert_eq!(ranges_text(&r), "0..0, 1K..inf");
    }
}
