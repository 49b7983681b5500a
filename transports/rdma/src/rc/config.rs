//! `RUCX_RC_*` options of the RC transport, and the limits derived from
//! them.

use uct::ucs;
use uct::ucs::config::{ConfigValue, MemUnits};
use uct::ucs::{Error, Result};

ucs::config_table! {
    /// Options of the RC transport, from `RUCX_RC_*`.
    pub struct RcConfig in RC_TABLE ("rc", "RC_") {
        /// Size of a receive buffer: the largest active message (its one-byte
        /// id included) a peer may send. Both sides must agree.
        SEG_SIZE seg_size: MemUnits = "8k",
        /// Most credits a connection's peer may be granted: its window grows
        /// up to this while it uses all of it.
        RX_QUEUE_LEN rx_queue_len: u32 = "64",
        /// Credits a connection's peer starts with: receives of the shared
        /// pool committed to it (one more is committed for credit grants).
        RX_WINDOW rx_window: u32 = "2",
        /// Largest shared receive pool per iface. It grows in registered
        /// chunks while connections need receives; a connection that finds
        /// it full fails (the number of connections is bounded by it).
        RX_POOL_MAX rx_pool_max: MemUnits = "1g",
        /// Send work requests outstanding per connection.
        TX_QUEUE_LEN tx_queue_len: u32 = "256",
        /// Copy-send buffers per iface (shared by its connections).
        TX_BUFS tx_bufs: u32 = "512",
        /// RDMA READs a connection issues at once (ORD), clamped to what the
        /// device and the peer allow.
        MAX_RD_ATOMIC max_rd_atomic: u32 = "64",
        /// Largest put_zcopy and get_zcopy.
        MAX_ZCOPY max_zcopy: MemUnits = "1g",
    }
}

/// Most receives posted per connection (`RX_QUEUE_LEN`, and what a peer
/// may ask for).
pub(crate) const MAX_RX_QUEUE: u32 = 4096;

/// Sizes an iface works with, checked and derived from an [`RcConfig`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Limits {
    /// Receive buffer size.
    pub(crate) seg: usize,
    pub(crate) rx_queue: u32,
    /// Initial window of a connection.
    pub(crate) rx_window: u32,
    /// Most buffers of the receive pool.
    pub(crate) rx_pool_bufs: usize,
    pub(crate) tx_queue: u32,
    pub(crate) tx_bufs: u32,
    pub(crate) ord: u32,
    pub(crate) max_zcopy: usize,
}

fn size(name: &str, v: MemUnits, min: usize, max: usize) -> Result<usize> {
    match v.bytes() {
        Some(n) if n >= min as u64 && n <= max as u64 => Ok(n as usize),
        _ => Err(Error::InvalidParam(format!(
            "RUCX_RC_{name}={}: expected a size from {min} to {max} bytes",
            v.to_text()
        ))),
    }
}

fn count(name: &str, v: u32, min: u32, max: u32) -> Result<u32> {
    if (min..=max).contains(&v) {
        Ok(v)
    } else {
        Err(Error::InvalidParam(format!(
            "RUCX_RC_{name}={v}: expected {min} to {max}"
        )))
    }
}

impl Limits {
    pub(crate) fn from_config(c: &RcConfig) -> Result<Limits> {
        let seg = size("SEG_SIZE", c.seg_size, 256, 1 << 20)?;
        let rx_queue = count("RX_QUEUE_LEN", c.rx_queue_len, 8, MAX_RX_QUEUE)?;
        let pool = match c.rx_pool_max.bytes() {
            None => usize::MAX,
            Some(_) => size("RX_POOL_MAX", c.rx_pool_max, 0, usize::MAX)?,
        };
        Ok(Limits {
            seg,
            rx_queue,
            rx_window: count("RX_WINDOW", c.rx_window, 1, rx_queue)?,
            rx_pool_bufs: pool / seg,
            tx_queue: count("TX_QUEUE_LEN", c.tx_queue_len, 8, 16384)?,
            tx_bufs: count("TX_BUFS", c.tx_bufs, 8, 65536)?,
            ord: count("MAX_RD_ATOMIC", c.max_rd_atomic, 1, 128)?,
            max_zcopy: size("MAX_ZCOPY", c.max_zcopy, 4096, 1 << 30)?,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_and_bad_values() {
        RC_TABLE.check_defaults().unwrap();
        let l = Limits::from_config(&RcConfig::default()).unwrap();
        assert_eq!(l.seg, 8192);
        assert_eq!(l.rx_queue, 64);
        let c = RcConfig::from_lookup(|v| (v == "RUCX_RC_SEG_SIZE").then(|| "10".into())).unwrap();
        assert!(Limits::from_config(&c).is_err());
        let c =
            RcConfig::from_lookup(|v| (v == "RUCX_RC_RX_QUEUE_LEN").then(|| "2".into())).unwrap();
        assert!(Limits::from_config(&c).is_err());
        assert_eq!((l.rx_window, l.rx_pool_bufs), (2, 131072));
        let c = RcConfig::from_lookup(|v| (v == "RUCX_RC_RX_WINDOW").then(|| "65".into())).unwrap();
        assert!(Limits::from_config(&c).is_err());
        let c =
            RcConfig::from_lookup(|v| (v == "RUCX_RC_RX_POOL_MAX").then(|| "1m".into())).unwrap();
        assert_eq!(Limits::from_config(&c).unwrap().rx_pool_bufs, 128);
    }
}
