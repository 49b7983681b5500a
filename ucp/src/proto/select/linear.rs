//! Cost functions of message size: linear pieces over ranges of sizes.
//!
//! A [`PiecewiseLinear`] is a *partial* function: a sorted list of disjoint
//! inclusive size ranges, each with its own `c0 + c1 * size` (seconds).
//! Sizes outside every range have no cost because the protocol cannot send
//! them at all; every operation treats them as infinitely expensive.
//! Coefficients are always finite: whatever would make them infinite or NaN
//! (a zero bandwidth, say) removes the range instead.

use super::envelope::{overlay, split_by, Span};

/// `c0 + c1 * size`: `c0` in seconds, `c1` in seconds per byte.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Linear {
    /// Fixed part, seconds.
    pub c0: f64,
    /// Part per byte, seconds per byte.
    pub c1: f64,
}

impl Linear {
    /// No cost.
    pub const ZERO: Linear = Linear { c0: 0.0, c1: 0.0 };

    /// `c0 + c1 * size`.
    pub const fn new(c0: f64, c1: f64) -> Linear {
        Linear { c0, c1 }
    }

    /// A fixed cost of `c0` seconds.
    pub const fn constant(c0: f64) -> Linear {
        Linear { c0, c1: 0.0 }
    }

    /// The cost of `size` bytes, seconds.
    #[inline]
    pub fn at(self, size: usize) -> f64 {
        self.c0 + self.c1 * size as f64
    }

    /// Both coefficients finite (neither infinite nor NaN).
    pub fn is_finite(self) -> bool {
        self.c0.is_finite() && self.c1.is_finite()
    }

    /// Both costs together, one after the other.
    // A method, not `ops::Add`, so that it reads like the other cost
    // operations (`scale`, `max`) in the protocol formulas.
    #[allow(clippy::should_implement_trait)]
    pub fn add(self, other: Linear) -> Linear {
        Linear::new(self.c0 + other.c0, self.c1 + other.c1)
    }

    /// The cost multiplied by `k`.
    pub fn scale(self, k: f64) -> Linear {
        Linear::new(self.c0 * k, self.c1 * k)
    }
}

/// One range of a [`PiecewiseLinear`]: `f` over sizes `start..=end`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Segment {
    /// First size of the range.
    pub start: usize,
    /// Last size of the range (inclusive; `usize::MAX` for "and above").
    pub end: usize,
    /// The cost over the range.
    pub f: Linear,
}

impl Span for Segment {
    fn start(&self) -> usize {
        self.start
    }
    fn end(&self) -> usize {
        self.end
    }
}

/// A cost function of message size made of linear pieces; see the module
/// doc. Invariants: segments sorted, disjoint, `start <= end`, finite
/// coefficients, and no two touching segments with the same function.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct PiecewiseLinear {
    segs: Vec<Segment>,
}

impl PiecewiseLinear {
    /// Defined nowhere.
    pub fn empty() -> PiecewiseLinear {
        PiecewiseLinear::default()
    }

    /// `f` over `start..=end`; empty if the range is empty or `f` is not
    /// finite.
    pub fn new(start: usize, end: usize, f: Linear) -> PiecewiseLinear {
        let mut p = PiecewiseLinear::empty();
        p.push(start, end, f);
        p
    }

    /// Builds from segments in any order. Returns `None` if two overlap;
    /// empty or non-finite segments are dropped.
    pub fn from_segments(mut segs: Vec<Segment>) -> Option<PiecewiseLinear> {
        segs.sort_by_key(|s| s.start);
        let mut p = PiecewiseLinear::empty();
        for s in segs {
            if s.start > s.end || !s.f.is_finite() {
                continue;
            }
            if p.segs.last().is_some_and(|l| l.end >= s.start) {
                return None;
            }
            p.push(s.start, s.end, s.f);
        }
        Some(p)
    }

    /// Appends a segment after the last one; ignored if it is empty, not
    /// finite, or not after the last segment. Merges with the last segment
    /// when they touch and have the same function.
    pub(crate) fn push(&mut self, start: usize, end: usize, f: Linear) {
        if start > end || !f.is_finite() {
            return;
        }
        match self.segs.last_mut() {
            Some(l) if l.end >= start => {}
            Some(l) if l.end.checked_add(1) == Some(start) && l.f == f => l.end = end,
            _ => self.segs.push(Segment { start, end, f }),
        }
    }

    /// The segments, sorted by size.
    pub fn segments(&self) -> &[Segment] {
        &self.segs
    }

    /// Whether the function is defined nowhere.
    pub fn is_empty(&self) -> bool {
        self.segs.is_empty()
    }

    /// The segment holding `size`, if any.
    pub fn segment_at(&self, size: usize) -> Option<&Segment> {
        let i = self.segs.partition_point(|s| s.end < size);
        self.segs.get(i).filter(|s| s.start <= size)
    }

    /// The cost of `size` bytes, or `None` where the function is undefined.
    pub fn eval(&self, size: usize) -> Option<f64> {
        self.segment_at(size).map(|s| s.f.at(size))
    }

    /// The sum of two costs paid one after the other; defined where both
    /// are.
    // Named like `max` and `restrict`; `ops::Add` would take operands by
    // value.
    #[allow(clippy::should_implement_trait)]
    pub fn add(&self, other: &PiecewiseLinear) -> PiecewiseLinear {
        let mut out = PiecewiseLinear::empty();
        overlay(&self.segs, &other.segs, |s, e, a, b| {
            if let (Some(a), Some(b)) = (a, b) {
                out.push(s, e, a.f.add(b.f));
            }
        });
        out
    }

    /// Adds `f` to every segment.
    pub fn add_linear(&self, f: Linear) -> PiecewiseLinear {
        let mut out = PiecewiseLinear::empty();
        for s in &self.segs {
            out.push(s.start, s.end, s.f.add(f));
        }
        out
    }

    /// The upper envelope: the cost of two resources used at the same time
    /// (the slower one decides); defined where both are.
    pub fn max(&self, other: &PiecewiseLinear) -> PiecewiseLinear {
        let mut out = PiecewiseLinear::empty();
        overlay(&self.segs, &other.segs, |s, e, a, b| {
            if let (Some(a), Some(b)) = (a, b) {
                let (p, q) = (a.f, b.f);
                for (s, e, p_wins) in split_by(s, e, |x| p.at(x) >= q.at(x)) {
                    out.push(s, e, if p_wins { p } else { q });
                }
            }
        });
        out
    }

    /// The function restricted to `start..=end`.
    pub fn restrict(&self, start: usize, end: usize) -> PiecewiseLinear {
        let mut out = PiecewiseLinear::empty();
        for s in &self.segs {
            out.push(s.start.max(start), s.end.min(end), s.f);
        }
        out
    }

    /// The function restricted to a set of ranges.
    pub fn restrict_to(&self, ranges: &super::ranges::Ranges) -> PiecewiseLinear {
        let mut out = PiecewiseLinear::empty();
        overlay(&self.segs, ranges.as_slice(), |s, e, a, b| {
            if let (Some(a), Some(_)) = (a, b) {
                out.push(s, e, a.f);
            }
        });
        out
    }

    /// The sizes where the function is defined.
    pub fn domain(&self) -> super::ranges::Ranges {
        super::ranges::Ranges::from_sorted(self.segs.iter().map(|s| (s.start, s.end)))
    }

    /// The same function in at most `max_ranges` segments (at least one),
    /// never below the original: touching segments are merged, the pair
    /// whose merge adds the least cost first, into the line through the
    /// merged range's end points raised until it is above both parts.
    /// Segments separated by a gap are never merged, so a function with
    /// more gaps than `max_ranges` keeps one segment per gap-free part.
    pub fn limit_ranges(&self, max_ranges: usize) -> PiecewiseLinear {
        let mut segs = self.segs.clone();
        let max_ranges = max_ranges.max(1);
        while segs.len() > max_ranges {
            let best = segs
                .windows(2)
                .enumerate()
                .filter_map(|(i, w)| merge_up(&w[0], &w[1]).map(|(f, err)| (i, f, err)))
                .min_by(|x, y| x.2.total_cmp(&y.2));
            let Some((i, f, _)) = best else { break };
            let end = segs[i + 1].end;
            segs[i] = Segment {
                start: segs[i].start,
                end,
                f,
            };
            segs.remove(i + 1);
        }
        PiecewiseLinear { segs }
    }
}

/// Merges touching segments `a` and `b` into one line never below either;
/// returns it and the most it exceeds them by (seconds), or `None` if they
/// do not touch or the line is not finite.
fn merge_up(a: &Segment, b: &Segment) -> Option<(Linear, f64)> {
    if a.end.checked_add(1) != Some(b.start) {
        return None;
    }
    let pts = [
        (a.start, a.f.at(a.start)),
        (a.end, a.f.at(a.end)),
        (b.start, b.f.at(b.start)),
        (b.end, b.f.at(b.end)),
    ];
    let (x0, y0) = pts[0];
    let (x1, y1) = pts[3];
    let c1 = (y1 - y0) / (x1 as f64 - x0 as f64);
    let chord = Linear::new(y0 - c1 * x0 as f64, c1);
    let lift = pts
        .iter()
        .map(|&(x, y)| y - chord.at(x))
        .fold(0.0f64, f64::max);
    let f = Linear::new(chord.c0 + lift, c1);
    let err = pts.iter().map(|&(x, y)| f.at(x) - y).fold(0.0f64, f64::max);
    (f.is_finite() && err.is_finite()).then_some((f, err))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pw(segs: &[(usize, usize, f64, f64)]) -> PiecewiseLinear {
        let v = segs
            .iter()
            .map(|&(start, end, c0, c1)| Segment {
                start,
                end,
                f: Linear::new(c0, c1),
            })
            .collect();
        PiecewiseLinear::from_segments(v).expect("disjoint")
    }

    #[test]
    fn eval_inside_and_outside() {
        let p = pw(&[(0, 10, 1.0, 0.5), (20, usize::MAX, 3.0, 0.0)]);
        assert_eq!(p.eval(0), Some(1.0));
        assert_eq!(p.eval(10), Some(6.0));
        assert_eq!(p.eval(11), None);
        assert_eq!(p.eval(19), None);
        assert_eq!(p.eval(20), Some(3.0));
        assert_eq!(p.eval(usize::MAX), Some(3.0));
    }

    #[test]
    fn degenerate_inputs_are_dropped() {
        assert!(PiecewiseLinear::new(5, 4, Linear::ZERO).is_empty());
        assert!(PiecewiseLinear::new(0, 9, Linear::new(0.0, f64::INFINITY)).is_empty());
        assert!(PiecewiseLinear::new(0, 9, Linear::new(f64::NAN, 0.0)).is_empty());
        let overlapping = vec![
            Segment {
                start: 0,
                end: 5,
                f: Linear::ZERO,
            },
            Segment {
                start: 5,
                end: 9,
                f: Linear::ZERO,
            },
        ];
        assert!(PiecewiseLinear::from_segments(overlapping).is_none());
    }

    #[test]
    fn touching_equal_segments_merge() {
        let p = pw(&[(0, 4, 1.0, 1.0), (5, 9, 1.0, 1.0)]);
        assert_eq!(p.segments().len(), 1);
        assert_eq!(p.segments()[0].end, 9);
    }

    #[test]
    fn add_is_defined_on_the_intersection() {
        let a = pw(&[(0, 100, 1.0, 0.0)]);
        let b = pw(&[(50, 200, 0.0, 1.0)]);
        let s = a.add(&b);
        assert_eq!(s.eval(49), None);
        assert_eq!(s.eval(50), Some(51.0));
        assert_eq!(s.eval(100), Some(101.0));
        assert_eq!(s.eval(101), None);
    }

    #[test]
    fn max_splits_at_the_crossing() {
        // 10 + 0x and 0 + 1x cross at 10.
        let a = pw(&[(0, 100, 10.0, 0.0)]);
        let b = pw(&[(0, 100, 0.0, 1.0)]);
        let m = a.max(&b);
        assert_eq!(m.segments().len(), 2);
        assert_eq!(m.eval(5), Some(10.0));
        assert_eq!(m.eval(10), Some(10.0));
        assert_eq!(m.eval(11), Some(11.0));
        for x in 0..=100 {
            let want = a.eval(x).unwrap().max(b.eval(x).unwrap());
            assert_eq!(m.eval(x), Some(want));
        }
    }

    #[test]
    fn limit_ranges_stays_above_and_shrinks() {
        let p = pw(&[
            (0, 9, 1.0, 0.0),
            (10, 19, 0.0, 0.1),
            (20, 29, 2.0, 0.0),
            (30, 39, 2.0, 0.05),
            (50, 60, 9.0, 0.0),
        ]);
        let q = p.limit_ranges(3);
        assert_eq!(q.segments().len(), 3);
        assert_eq!(q.domain(), p.domain());
        for x in 0..=60 {
            if let Some(v) = p.eval(x) {
                assert!(q.eval(x).unwrap() >= v - 1e-12, "at {x}");
            }
        }
        // Two gap-free parts cannot become one.
        assert_eq!(p.limit_ranges(1).segments().len(), 2);
    }

    #[test]
    fn restrict_cuts_segments() {
        let p = pw(&[(0, 10, 1.0, 0.0), (11, 20, 2.0, 0.0)]);
        let r = p.restrict(5, 15);
        assert_eq!(r.eval(4), None);
        assert_eq!(r.eval(5), Some(1.0));
        assert_eq!(r.eval(15), Some(2.0));
        assert_eq!(r.eval(16), None);
    }
}
