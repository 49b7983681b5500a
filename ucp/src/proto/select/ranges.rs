//! Sets of message sizes as sorted, disjoint, inclusive ranges.

use super::envelope::overlay;

/// A set of sizes: sorted, disjoint, non-touching inclusive ranges.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Ranges {
    v: Vec<(usize, usize)>,
}

impl Ranges {
    /// No size.
    pub fn none() -> Ranges {
        Ranges::default()
    }

    /// Every size.
    pub fn all() -> Ranges {
        Ranges::from_range(0, usize::MAX)
    }

    /// `start..=end` (empty if `start > end`).
    pub fn from_range(start: usize, end: usize) -> Ranges {
        Ranges::from_sorted([(start, end)])
    }

    /// From ranges sorted by start and disjoint; touching ones are joined,
    /// empty ones dropped, out-of-order ones ignored.
    pub fn from_sorted(it: impl IntoIterator<Item = (usize, usize)>) -> Ranges {
        let mut r = Ranges::none();
        for (s, e) in it {
            r.push(s, e);
        }
        r
    }

    fn push(&mut self, s: usize, e: usize) {
        if s > e {
            return;
        }
        match self.v.last_mut() {
            Some(l) if l.1 >= s => {}
            Some(l) if l.1 + 1 == s => l.1 = e,
            _ => self.v.push((s, e)),
        }
    }

    /// The ranges, sorted.
    pub fn as_slice(&self) -> &[(usize, usize)] {
        &self.v
    }

    /// Whether the set is empty.
    pub fn is_empty(&self) -> bool {
        self.v.is_empty()
    }

    /// Whether `size` is in the set.
    pub fn contains(&self, size: usize) -> bool {
        let i = self.v.partition_point(|r| r.1 < size);
        self.v.get(i).is_some_and(|r| r.0 <= size)
    }

    /// Sizes in both sets.
    pub fn intersect(&self, other: &Ranges) -> Ranges {
        let mut out = Ranges::none();
        overlay(&self.v, &other.v, |s, e, a, b| {
            if a.is_some() && b.is_some() {
                out.push(s, e);
            }
        });
        out
    }

    /// Sizes in either set.
    pub fn union(&self, other: &Ranges) -> Ranges {
        let mut out = Ranges::none();
        overlay(&self.v, &other.v, |s, e, _, _| out.push(s, e));
        out
    }

    /// Sizes in `self` but not in `other`.
    pub fn subtract(&self, other: &Ranges) -> Ranges {
        let mut out = Ranges::none();
        overlay(&self.v, &other.v, |s, e, a, b| {
            if a.is_some() && b.is_none() {
                out.push(s, e);
            }
        });
        out
    }

    /// Sizes not in the set.
    pub fn complement(&self) -> Ranges {
        Ranges::all().subtract(self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn set_operations() {
        let a = Ranges::from_sorted([(0, 9), (20, 29)]);
        let b = Ranges::from_sorted([(5, 24)]);
        assert_eq!(a.intersect(&b).as_slice(), &[(5, 9), (20, 24)]);
        assert_eq!(a.union(&b).as_slice(), &[(0, 29)]);
        assert_eq!(a.subtract(&b).as_slice(), &[(0, 4), (25, 29)]);
        assert_eq!(a.complement().as_slice(), &[(10, 19), (30, usize::MAX)]);
        assert!(Ranges::all().complement().is_empty());
        assert_eq!(Ranges::none().complement(), Ranges::all());
        assert!(a.contains(29) && !a.contains(30) && !a.contains(15));
    }

    #[test]
    fn touching_ranges_join() {
        let r = Ranges::from_sorted([(0, 4), (5, 9), (11, 11)]);
        assert_eq!(r.as_slice(), &[(0, 9), (11, 11)]);
        assert!(Ranges::from_range(3, 2).is_empty());
    }
}
