//! The lower envelope of candidate cost functions, remembering which
//! candidate wins each range, and the walks over ranges it is built from.

use super::linear::{Linear, PiecewiseLinear};

/// Something covering `start()..=end()`.
pub(crate) trait Span {
    fn start(&self) -> usize;
    fn end(&self) -> usize;
}

impl Span for (usize, usize) {
    fn start(&self) -> usize {
        self.0
    }
    fn end(&self) -> usize {
        self.1
    }
}

/// Walks two sorted lists of disjoint spans together, calling `emit` once
/// for every maximal range `s..=e` over which neither list changes, with
/// the span of each list covering it (if any). Ranges covered by neither
/// list are skipped.
pub(crate) fn overlay<A: Span, B: Span>(
    a: &[A],
    b: &[B],
    mut emit: impl FnMut(usize, usize, Option<&A>, Option<&B>),
) {
    let (mut i, mut j) = (0, 0);
    let mut pos = 0usize;
    loop {
        while a.get(i).is_some_and(|s| s.end() < pos) {
            i += 1;
        }
        while b.get(j).is_some_and(|s| s.end() < pos) {
            j += 1;
        }
        let (na, nb) = (a.get(i), b.get(j));
        let a_on = na.filter(|s| s.start() <= pos);
        let b_on = nb.filter(|s| s.start() <= pos);
        if a_on.is_none() && b_on.is_none() {
            // Jump to the next span of either list (both start after pos).
            match (na, nb) {
                (None, None) => return,
                (Some(x), None) => pos = x.start(),
                (None, Some(y)) => pos = y.start(),
                (Some(x), Some(y)) => pos = x.start().min(y.start()),
            }
            continue;
        }
        let mut end = usize::MAX;
        if let Some(x) = na {
            // An inactive span starts after pos >= 0, so start() >= 1.
            end = end.min(if a_on.is_some() {
                x.end()
            } else {
                x.start() - 1
            });
        }
        if let Some(y) = nb {
            end = end.min(if b_on.is_some() {
                y.end()
            } else {
                y.start() - 1
            });
        }
        emit(pos, end, a_on, b_on);
        if end == usize::MAX {
            return;
        }
        pos = end + 1;
    }
}

/// Splits `s..=e` where the predicate changes, assuming it changes at most
/// once (true for comparisons of two linear functions): returns up to two
/// ranges with the predicate's value on each.
pub(crate) fn split_by(
    s: usize,
    e: usize,
    pred: impl Fn(usize) -> bool,
) -> impl Iterator<Item = (usize, usize, bool)> {
    let (ps, pe) = (pred(s), pred(e));
    let mut out = [None, None];
    if ps == pe {
        out[0] = Some((s, e, ps));
    } else {
        // Largest x with pred(x) == ps, by bisection: pred(lo) == ps and
        // pred(hi) != ps throughout.
        let (mut lo, mut hi) = (s, e);
        while hi - lo > 1 {
            let mid = lo + (hi - lo) / 2;
            if pred(mid) == ps {
                lo = mid;
            } else {
                hi = mid;
            }
        }
        out[0] = Some((s, lo, ps));
        out[1] = Some((hi, e, pe));
    }
    out.into_iter().flatten()
}

/// One range of an [`Envelope`]: the winning candidate `tag` and its cost.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Piece<T> {
    /// First size of the range.
    pub start: usize,
    /// Last size of the range (inclusive).
    pub end: usize,
    /// The winner's cost over the range.
    pub f: Linear,
    /// Which candidate wins.
    pub tag: T,
}

impl<T> Span for Piece<T> {
    fn start(&self) -> usize {
        self.start
    }
    fn end(&self) -> usize {
        self.end
    }
}

/// The lower envelope of candidate cost functions: per size range, the
/// cheapest candidate and its cost. Defined wherever some candidate is.
#[derive(Debug, Clone, PartialEq)]
pub struct Envelope<T> {
    pieces: Vec<Piece<T>>,
}

impl<T: Copy + Ord> Envelope<T> {
    /// The envelope of no candidates: defined nowhere.
    pub fn empty() -> Envelope<T> {
        Envelope { pieces: Vec::new() }
    }

    /// The lower envelope of `cands`. Where two cost the same, the smaller
    /// tag wins (candidates are tagged in registration order, so the
    /// earlier-registered one wins a tie).
    pub fn lower(cands: &[(T, &PiecewiseLinear)]) -> Envelope<T> {
        let mut env = Envelope::empty();
        for &(tag, f) in cands {
            env = env.min_with(tag, f);
        }
        env
    }

    /// The lower envelope of `self` and candidate `f` tagged `tag`.
    pub fn min_with(&self, tag: T, f: &PiecewiseLinear) -> Envelope<T> {
        let mut out = Envelope::empty();
        overlay(&self.pieces, f.segments(), |s, e, a, b| match (a, b) {
            (Some(a), None) => out.push(s, e, a.f, a.tag),
            (None, Some(b)) => out.push(s, e, b.f, tag),
            (Some(a), Some(b)) => {
                let (p, pt, q) = (a.f, a.tag, b.f);
                let p_wins = |x: usize| {
                    let (vp, vq) = (p.at(x), q.at(x));
                    vp < vq || (vp == vq && pt < tag)
                };
                for (s, e, pw) in split_by(s, e, p_wins) {
                    if pw {
                        out.push(s, e, p, pt);
                    } else {
                        out.push(s, e, q, tag);
                    }
                }
            }
            (None, None) => {}
        });
        out
    }

    fn push(&mut self, start: usize, end: usize, f: Linear, tag: T) {
        match self.pieces.last_mut() {
            Some(l) if l.tag == tag && l.f == f && l.end.checked_add(1) == Some(start) => {
                l.end = end;
            }
            _ => self.pieces.push(Piece { start, end, f, tag }),
        }
    }

    /// Appends the pieces of `other` that lie in gaps of `self`.
    pub fn fill_gaps(&self, other: &Envelope<T>) -> Envelope<T> {
        let mut out = Envelope::empty();
        overlay(&self.pieces, &other.pieces, |s, e, a, b| {
            if let Some(p) = a.or(b) {
                out.push(s, e, p.f, p.tag);
            }
        });
        out
    }

    /// The pieces, sorted by size.
    pub fn pieces(&self) -> &[Piece<T>] {
        &self.pieces
    }

    /// The winner at `size` and its cost, if any candidate covers `size`.
    pub fn eval(&self, size: usize) -> Option<(T, f64)> {
        let i = self.pieces.partition_point(|p| p.end < size);
        let p = self.pieces.get(i).filter(|p| p.start <= size)?;
        Some((p.tag, p.f.at(size)))
    }

    /// The sizes where the envelope is defined.
    pub fn domain(&self) -> super::ranges::Ranges {
        super::ranges::Ranges::from_sorted(self.pieces.iter().map(|p| (p.start, p.end)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn overlay_walks_every_change() {
        let a = [(0usize, 9usize), (20, 29)];
        let b = [(5usize, 24usize), (40, usize::MAX)];
        let mut got = Vec::new();
        overlay(&a, &b, |s, e, x, y| {
            got.push((s, e, x.is_some(), y.is_some()))
        });
        let want = vec![
            (0, 4, true, false),
            (5, 9, true, true),
            (10, 19, false, true),
            (20, 24, true, true),
            (25, 29, true, false),
            (40, usize::MAX, false, true),
        ];
        assert_eq!(got, want);
    }

    #[test]
    fn split_by_finds_the_switch() {
        let v: Vec<_> = split_by(0, 100, |x| x < 37).collect();
        assert_eq!(v, vec![(0, 36, true), (37, 100, false)]);
        let v: Vec<_> = split_by(0, usize::MAX, |x| x < usize::MAX).collect();
        assert_eq!(
            v,
            vec![(0, usize::MAX - 1, true), (usize::MAX, usize::MAX, false)]
        );
        let v: Vec<_> = split_by(3, 3, |_| true).collect();
        assert_eq!(v, vec![(3, 3, true)]);
    }

    #[test]
    fn ties_go_to_the_smaller_tag() {
        let f = PiecewiseLinear::new(0, 100, Linear::new(1.0, 0.0));
        let env = Envelope::lower(&[(2u8, &f), (1u8, &f), (3u8, &f)]);
        assert_eq!(env.pieces().len(), 1);
        assert_eq!(env.eval(50), Some((1, 1.0)));
    }

    #[test]
    fn crossing_lines_switch_winner() {
        let flat = PiecewiseLinear::new(0, usize::MAX, Linear::new(10.0, 0.0));
        let steep = PiecewiseLinear::new(0, usize::MAX, Linear::new(0.0, 1.0));
        let env = Envelope::lower(&[(0u8, &flat), (1u8, &steep)]);
        // steep < flat below 10, equal at 10 (tie to tag 0), flat above.
        assert_eq!(env.eval(9), Some((1, 9.0)));
        assert_eq!(env.eval(10), Some((0, 10.0)));
        assert_eq!(env.eval(usize::MAX), Some((0, 10.0)));
        assert_eq!(env.pieces().len(), 2);
    }

    fn arb_fn() -> impl Strategy<Value = PiecewiseLinear> {
        prop::collection::vec(
            (0usize..5000, 0usize..5000, 0.0f64..1e-3, 0.0f64..1e-6),
            1..4,
        )
        .prop_map(|v| {
            let mut segs: Vec<_> = v
                .into_iter()
                .map(|(a, b, c0, c1)| (a.min(b), a.max(b), c0, c1))
                .collect();
            segs.sort_by_key(|s| s.0);
            let mut p = PiecewiseLinear::empty();
            let mut next = 0usize;
            for (s, e, c0, c1) in segs {
                let s = s.max(next);
                if s <= e {
                    p.push(s, e, Linear::new(c0, c1));
                    next = e + 1;
                }
            }
            // Sometimes reach to the top of the size range.
            if p.segments().len() % 2 == 1 {
                p.push(next.max(6000), usize::MAX, Linear::new(1e-3, 1e-9));
            }
            p
        })
    }

    fn sizes() -> impl Strategy<Value = Vec<usize>> {
        prop::collection::vec(
            prop_oneof![0usize..7000, Just(usize::MAX), any::<usize>()],
            1..40,
        )
    }

    proptest! {
        #[test]
        fn envelope_is_min_and_equals_winner(
            fs in prop::collection::vec(arb_fn(), 1..6),
            xs in sizes(),
        ) {
            let cands: Vec<(usize, &PiecewiseLinear)> = fs.iter().enumerate().collect();
            let env = Envelope::lower(&cands);
            for x in xs {
                let best = fs.iter().filter_map(|f| f.eval(x)).fold(None, |m: Option<f64>, v| {
                    Some(m.map_or(v, |m| m.min(v)))
                });
                match (env.eval(x), best) {
                    (None, None) => {}
                    (Some((tag, v)), Some(best)) => {
                        // Equal to the winner's own cost, exactly.
                        prop_assert_eq!(fs[tag].eval(x), Some(v));
                        // Never above any candidate (up to rounding of
                        // nearly equal costs at a crossing).
                        prop_assert!(v <= best + best.abs() * 1e-12, "x={} v={} best={}", x, v, best);
                    }
                    (e, b) => prop_assert!(false, "x={x}: envelope {e:?}, best {b:?}"),
                }
            }
        }

        #[test]
        fn max_is_the_upper_envelope(a in arb_fn(), b in arb_fn(), xs in sizes()) {
            let m = a.max(&b);
            for x in xs {
                let want = match (a.eval(x), b.eval(x)) {
                    (Some(p), Some(q)) => Some(p.max(q)),
                    _ => None,
                };
                match (m.eval(x), want) {
                    (Some(v), Some(w)) => prop_assert!((v - w).abs() <= w.abs() * 1e-12),
                    (v, w) => prop_assert_eq!(v, w),
                }
            }
        }
    }
}
