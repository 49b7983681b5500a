//! `RUCX_TCP_*` options, and the limits derived from them.

use uct::ucs;
use uct::ucs::config::{ConfigValue, MemUnits, Time};
use uct::ucs::netif::AfPrio;
use uct::ucs::sock::{KeepCount, Keepalive, UserTimeout};
use uct::ucs::{Error, Result};

use crate::wire::{FRAME_HDR, HELLO_MAX};

/// Largest `am_zcopy` header.
pub(crate) const MAX_HDR: usize = 128;
/// Most `am_zcopy` iov entries.
pub(crate) const MAX_IOV: usize = 16;
/// Largest `am_short` message, header included: `max_short` is this minus 8.
const SHORT_LIMIT: usize = 8 << 10;
/// Largest frame payload a configuration may ask for (keeps lengths far
/// from `u32::MAX` and receive buffers sane).
const FRAME_LIMIT: usize = 64 << 20;

/// Ports for listening sockets: `0` (any free port) or `lo-hi`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PortRange {
    /// First port tried; 0 means an ephemeral port.
    pub first: u16,
    /// Last port tried.
    pub last: u16,
}

impl ConfigValue for PortRange {
    const KIND: &'static str = "port range";
    const SYNTAX: &'static str = "0 (any free port) or <first>-<last>, e.g. 13000-13100";

    fn parse(text: &str) -> std::result::Result<Self, String> {
        let t = text.trim();
        if t == "0" {
            return Ok(PortRange { first: 0, last: 0 });
        }
        let (a, b) = t
            .split_once('-')
            .ok_or_else(|| "expected 0 or <first>-<last>".to_string())?;
        let first = u16::parse(a).map_err(|e| format!("first port: {e}"))?;
        let last = u16::parse(b).map_err(|e| format!("last port: {e}"))?;
        if first == 0 || first > last {
            return Err("expected 1 <= first <= last <= 65535".to_string());
        }
        Ok(PortRange { first, last })
    }

    fn to_text(&self) -> String {
        if self.first == 0 {
            "0".to_string()
        } else {
            format!("{}-{}", self.first, self.last)
        }
    }
}

ucs::config_table! {
    /// Options of the TCP transport, from `RUCX_TCP_*`.
    pub struct TcpConfig in TCP_TABLE ("tcp", "TCP_") {
        /// Set TCP_NODELAY on every connection, so that small messages
        /// leave at once.
        NODELAY nodelay: bool = "y",
        /// Batch small sends: a small send to a connection that already
        /// wrote to its socket since the last progress call waits, in the
        /// order posted, for the next progress call, which writes all that
        /// waited with one system call (a request of such a send completes
        /// then). n writes every send at once, as UCX's tcp does.
        TX_BATCH tx_batch: bool = "y",
        /// Receive buffer of a busy connection (allocated on demand, given
        /// back when the connection is quiet). It grows up to the largest
        /// frame when a frame needs more.
        RX_SEG_SIZE rx_seg_size: MemUnits = "64k",
        /// Largest am_bcopy message; also the most a connection buffers of
        /// copy sends the socket did not take (allocated on demand).
        TX_SEG_SIZE tx_seg_size: MemUnits = "64k",
        /// Largest am_zcopy payload. A receiver buffers a whole frame, so
        /// this also bounds a connection's receive buffer. Also the
        /// largest put_zcopy (whose data is not buffered).
        MAX_ZCOPY max_zcopy: MemUnits = "1m",
        /// Kernel send buffer of a connection (SO_SNDBUF); auto keeps the
        /// kernel's autotuning.
        SNDBUF sndbuf: MemUnits = "auto",
        /// Kernel receive buffer of a connection (SO_RCVBUF); auto keeps
        /// the kernel's autotuning.
        RCVBUF rcvbuf: MemUnits = "auto",
        /// Listening port: 0 for any free port, or a range first-last tried
        /// in order.
        PORT_RANGE port_range: PortRange = "0",
        /// Backlog of the listening socket.
        BACKLOG backlog: u32 = "1024",
        /// Time a connection may take to be established before its endpoint
        /// fails. Establishing includes the peer's acceptance, which happens
        /// when the peer calls progress; inf (the default) waits as long as
        /// the peer's host answers, as a peer busy computing must not be
        /// taken for a dead one (keepalive detects dead hosts).
        CONN_TIMEOUT conn_timeout: Time = "inf",
        /// Address families in order of preference: the iface of a
        /// network device listens on the device's first address of the
        /// first family in this list it has an address of (inet: IPv4,
        /// inet6: IPv6); a device with none is not listed.
        AF_PRIO af_prio: AfPrio = "inet,inet6",
        /// Idle time before TCP keepalive probes start on a connection
        /// (TCP_KEEPIDLE, whole seconds, at most 32767s); inf disables
        /// keepalive.
        KEEPIDLE keepidle: Time = "10s",
        /// Interval between TCP keepalive probes (TCP_KEEPINTVL, whole
        /// seconds, at most 32767s).
        KEEPINTVL keepintvl: Time = "2s",
        /// Keepalive probes without an answer before the connection fails
        /// (TCP_KEEPCNT): auto (3) or 1 to 127. With the defaults a silent
        /// idle peer is given up after 10s + 3 x 2s.
        KEEPCNT keepcnt: KeepCount = "auto",
        /// Longest time sent data may stay unacknowledged before the
        /// connection fails (TCP_USER_TIMEOUT, whole milliseconds), so a
        /// peer that disappears with data in flight is noticed; off (or 0)
        /// keeps the kernel's retransmission limit (about 15 minutes).
        USER_TIMEOUT user_timeout: UserTimeout = "30s",
    }
}

/// The keepalive and user timeout of every connection, checked.
pub(crate) fn keepalive(c: &TcpConfig) -> Result<Keepalive> {
    Keepalive::from_config(
        "RUCX_TCP_",
        c.keepidle,
        c.keepintvl,
        c.keepcnt,
        c.user_timeout,
    )
}

/// Sizes an iface works with, checked and derived from a [`TcpConfig`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Limits {
    pub(crate) max_short: usize,
    pub(crate) max_bcopy: usize,
    pub(crate) max_zcopy: usize,
    /// Largest `put_zcopy`, sent and accepted (its data is not buffered,
    /// so it does not count in `max_frame`).
    pub(crate) max_put: usize,
    /// Largest frame payload accepted from a peer.
    pub(crate) max_frame: usize,
    /// Most bytes of copy sends a connection's backlog holds.
    pub(crate) tx_buf: usize,
    /// Receive buffer of a busy connection (see `rx.rs`).
    pub(crate) rx_buf: usize,
}

fn size(name: &str, v: MemUnits, min: usize, max: usize) -> Result<usize> {
    match v.bytes() {
        Some(n) if n >= min as u64 && n <= max as u64 => Ok(n as usize),
        _ => Err(Error::InvalidParam(format!(
            "RUCX_TCP_{name}={}: expected a size from {min} to {max} bytes",
            v.to_text()
        ))),
    }
}

impl Limits {
    pub(crate) fn from_config(c: &TcpConfig) -> Result<Limits> {
        let max_bcopy = size("TX_SEG_SIZE", c.tx_seg_size, 1024, FRAME_LIMIT)?;
        let max_zcopy = size("MAX_ZCOPY", c.max_zcopy, 1024, FRAME_LIMIT)?;
        let rx_seg = size("RX_SEG_SIZE", c.rx_seg_size, 1024, FRAME_LIMIT)?;
        let max_short = SHORT_LIMIT.min(max_bcopy) - 8;
        let max_frame = max_bcopy.max(8 + max_short).max(MAX_HDR + max_zcopy);
        let largest_copy = max_bcopy.max(8 + max_short).max(MAX_HDR);
        Ok(Limits {
            max_short,
            max_bcopy,
            max_zcopy,
            max_put: max_zcopy,
            max_frame,
            tx_buf: FRAME_HDR + largest_copy,
            rx_buf: rx_seg.max(HELLO_MAX + FRAME_HDR),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_parse() {
        TCP_TABLE.check_defaults().unwrap();
        let c = TcpConfig::default();
        assert!(c.nodelay);
        assert_eq!(c.port_range, PortRange { first: 0, last: 0 });
        let l = Limits::from_config(&c).unwrap();
        assert_eq!(l.max_bcopy, 64 << 10);
        assert_eq!(l.max_short, (8 << 10) - 8);
        assert_eq!(l.max_zcopy, 1 << 20);
        assert_eq!(l.max_frame, (1 << 20) + MAX_HDR);
        assert!(l.tx_buf >= FRAME_HDR + l.max_bcopy);
        let k = keepalive(&c).unwrap();
        assert_eq!((k.idle, k.intvl, k.cnt), (Some(10), 2, 3));
        assert_eq!(k.user_timeout_ms, Some(30_000));
        assert_eq!(c.af_prio.to_text(), "inet,inet6");
    }

    #[test]
    fn bad_failure_detection_values_are_errors() {
        let with = |var: &'static str, val: &'static str| {
            TcpConfig::from_lookup(move |v| (v == var).then(|| val.to_string()))
        };
        for (var, val) in [
            ("RUCX_TCP_KEEPCNT", "0"),
            ("RUCX_TCP_KEEPCNT", "128"),
            ("RUCX_TCP_KEEPCNT", "some"),
            ("RUCX_TCP_KEEPIDLE", "soon"),
            ("RUCX_TCP_KEEPINTVL", "-2s"),
            ("RUCX_TCP_USER_TIMEOUT", "30 seconds"),
            ("RUCX_TCP_USER_TIMEOUT", "on"),
            ("RUCX_TCP_AF_PRIO", "inet4"),
            ("RUCX_TCP_AF_PRIO", ""),
        ] {
            let err = with(var, val).unwrap_err();
            assert!(err.to_string().contains(var), "{var}={val}: {err}");
        }
        // Parsed, but out of what the kernel takes.
        for (var, val) in [
            ("RUCX_TCP_KEEPINTVL", "inf"),
            ("RUCX_TCP_KEEPIDLE", "600m"),
            ("RUCX_TCP_KEEPIDLE", "40000"),
            ("RUCX_TCP_USER_TIMEOUT", "36000m"),
            ("RUCX_TCP_USER_TIMEOUT", "3000000s"),
        ] {
            match with(var, val) {
                Ok(c) => {
                    let err = keepalive(&c).unwrap_err();
                    assert!(err.to_string().contains(var), "{var}={val}: {err}");
                }
                Err(e) => assert!(e.to_string().contains(var), "{var}={val}: {e}"),
            }
        }
        let c = with("RUCX_TCP_USER_TIMEOUT", "off").unwrap();
        assert_eq!(keepalive(&c).unwrap().user_timeout_ms, None);
        let c = with("RUCX_TCP_USER_TIMEOUT", "0").unwrap();
        assert_eq!(keepalive(&c).unwrap().user_timeout_ms, None);
        let c = with("RUCX_TCP_KEEPIDLE", "inf").unwrap();
        assert_eq!(keepalive(&c).unwrap().idle, None);
        let c = with("RUCX_TCP_KEEPCNT", "5").unwrap();
        assert_eq!(keepalive(&c).unwrap().cnt, 5);
    }

    #[test]
    fn port_range_parses() {
        assert_eq!(
            PortRange::parse("100-200"),
            Ok(PortRange {
                first: 100,
                last: 200
            })
        );
        for bad in ["", "x", "5", "0-5", "9-8", "1-70000", "-", "1-"] {
            assert!(PortRange::parse(bad).is_err(), "{bad:?}");
        }
        let r = PortRange::parse("7-7").unwrap();
        assert_eq!(PortRange::parse(&r.to_text()), Ok(r));
    }

    #[test]
    fn bad_sizes_are_errors() {
        let c =
            TcpConfig::from_lookup(|v| (v == "RUCX_TCP_TX_SEG_SIZE").then(|| "1".into())).unwrap();
        assert!(Limits::from_config(&c).is_err());
        let c =
            TcpConfig::from_lookup(|v| (v == "RUCX_TCP_MAX_ZCOPY").then(|| "inf".into())).unwrap();
        assert!(Limits::from_config(&c).is_err());
        let c = TcpConfig::from_lookup(|v| (v == "RUCX_TCP_RX_SEG_SIZE").then(|| "auto".into()))
            .unwrap();
        assert!(Limits::from_config(&c).is_err());
        assert!(
            TcpConfig::from_lookup(|v| (v == "RUCX_TCP_NODELAY").then(|| "maybe".into())).is_err()
        );
        let c =
            TcpConfig::from_lookup(|v| (v == "RUCX_TCP_TX_SEG_SIZE").then(|| "4k".into())).unwrap();
        let l = Limits::from_config(&c).unwrap();
        assert_eq!(l.max_short, 4096 - 8);
    }
}
