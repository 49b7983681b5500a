//! A tiny deterministic generator (splitmix64) for fault injection.
//!
//! Statistical quality far beyond what choosing jitter and losses needs;
//! what matters is that one seed always gives one sequence, on every
//! platform.

/// Splitmix64: a 64-bit counter passed through a mixing function.
#[derive(Debug, Clone)]
pub(super) struct Rng {
    state: u64,
}

impl Rng {
    pub(super) fn new(seed: u64) -> Rng {
        Rng { state: seed }
    }

    pub(super) fn next_u64(&mut self) -> u64 {
        self.state = self.state.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.state;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Uniform in `0..=max`.
    pub(super) fn up_to(&mut self, max: u64) -> u64 {
        match max.checked_add(1) {
            // Multiply-shift: the high half of x * n is uniform enough in
            // 0..n for fault injection (bias below 2^-64 * n).
            Some(n) => ((u128::from(self.next_u64()) * u128::from(n)) >> 64) as u64,
            None => self.next_u64(),
        }
    }

    /// True with probability `p` (0 and 1 exact).
    pub(super) fn chance(&mut self, p: f64) -> bool {
        // 53 random bits as a float in [0, 1).
        let x = (self.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64);
        x < p
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn same_seed_same_sequence() {
        let mut a = Rng::new(42);
        let mut b = Rng::new(42);
        let mut c = Rng::new(43);
        let xs: Vec<u64> = (0..16).map(|_| a.next_u64()).collect();
        let ys: Vec<u64> = (0..16).map(|_| b.next_u64()).collect();
        let zs: Vec<u64> = (0..16).map(|_| c.next_u64()).collect();
        assert_eq!(xs, ys);
        assert_ne!(xs, zs);
    }

    #[test]
    fn ranges_and_chances() {
        let mut r = Rng::new(7);
        let mut seen = [false; 4];
        for _ in 0..1000 {
            let x = r.up_to(3);
            assert!(x <= 3);
            seen[x as usize] = true;
        }
        assert!(seen.iter().all(|&s| s), "every value of 0..=3 shows up");
        assert_eq!(r.up_to(0), 0);
        let _ = r.up_to(u64::MAX);
        assert!((0..100).all(|_| !r.chance(0.0)));
        assert!((0..100).all(|_| r.chance(1.0)));
        let hits = (0..10_000).filter(|_| r.chance(0.25)).count();
        assert!((2000..3000).contains(&hits), "{hits} hits of 10000 at 0.25");
    }
}
