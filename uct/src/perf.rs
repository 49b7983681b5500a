//! Performance model of an iface, as the protocol layer reads it.

/// Latency, overhead and bandwidth of an iface, like UCX's
/// `uct_iface_attr.latency/overhead/bandwidth`.
///
/// The time to send `n` bytes one way is modelled as
/// `overhead + latency + n / bandwidth`; the time between two messages
/// posted back to back is `overhead + n / bandwidth`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PerfModel {
    /// One-way latency, seconds.
    pub latency: f64,
    /// Sender CPU time per message, seconds.
    pub overhead: f64,
    /// Bytes per second.
    pub bandwidth: f64,
}

impl PerfModel {
    /// Modelled one-way time for a message of `len` bytes, seconds.
    pub fn time(&self, len: usize) -> f64 {
        self.overhead + self.latency + len as f64 / self.bandwidth
    }

    /// Score for choosing a latency lane: lower is better.
    pub fn latency_score(&self) -> f64 {
        self.latency + self.overhead
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn time_adds_parts() {
        let m = PerfModel {
            latency: 1e-6,
            overhead: 1e-7,
            bandwidth: 1e9,
        };
        let t = m.time(1000);
        assert!((t - (1e-6 + 1e-7 + 1e-6)).abs() < 1e-12);
        assert!((m.latency_score() - 1.1e-6).abs() < 1e-12);
    }
}
