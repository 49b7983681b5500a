//! `RUCX_IWARP_*` options, and the settings a device derives from them.

use std::time::Duration;

use uct::ucs;
use uct::ucs::config::Time;
use uct::ucs::netif::AfPrio;
use uct::ucs::sock::{KeepCount, Keepalive, UserTimeout};
use uct::ucs::{Error, Result};

/// Smallest segment size Linux accepts for TCP_MAXSEG.
const MIN_MSS: u32 = 88;
/// Largest segment size Linux accepts for TCP_MAXSEG (its `MAX_TCP_WINDOW`).
const MAX_MSS: u32 = 32767;

/// Most RDMA READs a queue pair issues or serves at once (as siw).
pub(crate) const MAX_RD: u32 = 128;

ucs::config_table! {
    /// Options of the userspace iWARP engine, from `RUCX_IWARP_*`.
    pub struct IwarpConfig in IWARP_TABLE ("iwarp", "IWARP_") {
        /// MPA revision of the connection requests this side sends: 1
        /// (RFC 5044) or 2 (RFC 6581: the IRD/ORD word, and peer-to-peer
        /// mode). As responder, requests of revision 1 and 2 are accepted.
        MPA_REV mpa_rev: u32 = "2",
        /// Ask for a CRC32c on every FPDU. CRC is used in both directions
        /// when either side asks for it. Off by default, as in Linux siw:
        /// TCP's checksum already covers the stream, and the CRC is a pass
        /// over every byte on both sides (about 10 GB/s on one core).
        MPA_CRC mpa_crc: bool = "n",
        /// Peer-to-peer mode (RFC 6581, revision 2 only): as initiator, ask
        /// the responder to wait for a ready-to-receive message (a
        /// zero-length RDMA WRITE or READ) before it sends anything.
        P2P p2p: bool = "y",
        /// RDMA READs a connection issues at once (ORD) when the caller
        /// gives 0, and what a revision 1 peer is assumed to offer.
        ORD ord: u32 = "32",
        /// RDMA READs a connection serves at once (IRD) when the caller
        /// gives 0, and what a revision 1 peer is assumed to offer.
        IRD ird: u32 = "32",
        /// Time the MPA exchange (request, reply and ready-to-receive
        /// message) may take before the connection fails.
        MPA_TIMEOUT mpa_timeout: Time = "10s",
        /// Largest TCP segment of a connection (TCP_MAXSEG, set before
        /// connecting and on the listener), so FPDUs fit a path with a
        /// smaller MTU than the interface's; 0 keeps the path's own.
        MSS mss: u32 = "0",
        /// Kernel send buffer of a connection (SO_SNDBUF); auto keeps the
        /// kernel's autotuning.
        SNDBUF sndbuf: ucs::config::MemUnits = "auto",
        /// Kernel receive buffer of a connection (SO_RCVBUF); auto keeps
        /// the kernel's autotuning.
        RCVBUF rcvbuf: ucs::config::MemUnits = "auto",
        /// TCP congestion control of the connections (TCP_CONGESTION), or
        /// `system` for the system's default. iWARP NICs run their own
        /// TCP, with Reno-style control; on the short round trips of a
        /// host or a rack, BBR (a common system default) keeps an RDMA
        /// stream's window small and caps its bandwidth.
        CONGESTION congestion: String = "reno",
        /// Address families in order of preference: the device of a
        /// network interface uses the interface's first address of the
        /// first family in this list it has an address of (inet: IPv4,
        /// inet6: IPv6), and connects only to peers of that family; an
        /// interface with none is not a device.
        AF_PRIO af_prio: AfPrio = "inet,inet6",
        /// Idle time before TCP keepalive probes start on a connection
        /// (TCP_KEEPIDLE, whole seconds, at most 32767s); inf disables
        /// keepalive.
        KEEPIDLE keepidle: Time = "10s",
        /// Interval between TCP keepalive probes (TCP_KEEPINTVL, whole
        /// seconds, at most 32767s).
        KEEPINTVL keepintvl: Time = "2s",
        /// Keepalive probes without an answer before the connection fails
        /// (TCP_KEEPCNT): auto (3) or 1 to 127.
        KEEPCNT keepcnt: KeepCount = "auto",
        /// Longest time sent data may stay unacknowledged before the
        /// connection fails with a timeout (TCP_USER_TIMEOUT, whole
        /// milliseconds), so a peer that disappears with data in flight is
        /// noticed; off (or 0) keeps the kernel's retransmission limit
        /// (about 15 minutes).
        USER_TIMEOUT user_timeout: UserTimeout = "30s",
        /// Give each context a thread of its own that drives its
        /// connections whenever the worker does not, as a NIC would:
        /// peers' RDMA WRITEs are placed and their READs answered while
        /// the application computes, without a progress call or a worker
        /// progress thread. Off by default: the thread costs a wake-up per
        /// burst of traffic while the worker sleeps or computes.
        THREAD thread: bool = "n",
    }
}

/// Checked settings of a device.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Settings {
    /// MPA revision of our requests (1 or 2).
    pub(crate) rev: u8,
    /// Whether we ask for CRC.
    pub(crate) crc: bool,
    /// Whether we ask for peer-to-peer mode (revision 2 only).
    pub(crate) p2p: bool,
    /// Default ORD.
    pub(crate) ord: u32,
    /// Default IRD.
    pub(crate) ird: u32,
    /// Limit of the MPA exchange.
    pub(crate) timeout: Duration,
    /// TCP_MAXSEG to set (0: none).
    pub(crate) mss: u32,
    /// SO_SNDBUF and SO_RCVBUF to set.
    pub(crate) bufs: ucs::sock::BufSizes,
    /// TCP congestion control to set (None: the system's default).
    pub(crate) congestion: Option<String>,
    /// Keepalive and user timeout of every connection.
    pub(crate) keepalive: Keepalive,
    /// Each context has an engine thread (`engine_thread.rs`).
    pub(crate) thread: bool,
}

impl Settings {
    pub(crate) fn from_config(c: &IwarpConfig) -> Result<Settings> {
        if !(1..=2).contains(&c.mpa_rev) {
            return Err(Error::InvalidParam(format!(
                "RUCX_IWARP_MPA_REV={}: expected 1 or 2",
                c.mpa_rev
            )));
        }
        for (name, v) in [("ORD", c.ord), ("IRD", c.ird)] {
            if v == 0 || v > MAX_RD {
                return Err(Error::InvalidParam(format!(
                    "RUCX_IWARP_{name}={v}: expected 1 to {MAX_RD}"
                )));
            }
        }
        if c.mss != 0 && !(MIN_MSS..=MAX_MSS).contains(&c.mss) {
            return Err(Error::InvalidParam(format!(
                "RUCX_IWARP_MSS={}: expected 0 or {MIN_MSS} to {MAX_MSS}",
                c.mss
            )));
        }
        let timeout = c.mpa_timeout.finite().ok_or_else(|| {
            Error::InvalidParam("RUCX_IWARP_MPA_TIMEOUT=inf: expected a finite time".into())
        })?;
        let congestion = match c.congestion.as_str() {
            "system" => None,
            name if is_cc_name(name) => Some(name.to_string()),
            name => {
                return Err(Error::InvalidParam(format!(
                    "RUCX_IWARP_CONGESTION={name:?}: expected `system` or an algorithm's name"
                )))
            }
        };
        let keepalive = Keepalive::from_config(
            "RUCX_IWARP_",
            c.keepidle,
            c.keepintvl,
            c.keepcnt,
            c.user_timeout,
        )?;
        Ok(Settings {
            keepalive,
            rev: c.mpa_rev as u8,
            crc: c.mpa_crc,
            p2p: c.p2p && c.mpa_rev == 2,
            ord: c.ord,
            ird: c.ird,
            timeout,
            mss: c.mss,
            bufs: ucs::sock::BufSizes::from_config(c.sndbuf, c.rcvbuf),
            congestion,
            thread: c.thread,
        })
    }
}

/// Whether `name` can name a TCP congestion control algorithm: 1 to 15
/// letters, digits, `_` or `-` (Linux's `TCP_CA_NAME_MAX` is 16 with the
/// terminating zero).
fn is_cc_name(name: &str) -> bool {
    (1..=15).contains(&name.len())
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_parse() {
        IWARP_TABLE.check_defaults().unwrap();
        let s = Settings::from_config(&IwarpConfig::default()).unwrap();
        assert_eq!(s.rev, 2);
        assert!(!s.crc && s.p2p);
        assert_eq!((s.ord, s.ird), (32, 32));
        assert_eq!(s.timeout, Duration::from_secs(10));
        assert_eq!(s.bufs, ucs::sock::BufSizes::default());
        assert_eq!(
            s.congestion.map(|c| c.as_str().to_string()),
            Some("reno".into())
        );
        let k = s.keepalive;
        assert_eq!((k.idle, k.intvl, k.cnt), (Some(10), 2, 3));
        assert_eq!(k.user_timeout_ms, Some(30_000));
        assert!(!s.thread);
    }

    #[test]
    fn bad_values_are_errors() {
        let with = |var: &'static str, val: &'static str| {
            IwarpConfig::from_lookup(move |v| (v == var).then(|| val.to_string()))
        };
        let c = with("RUCX_IWARP_MPA_REV", "3").unwrap();
        assert!(Settings::from_config(&c).is_err());
        let c = with("RUCX_IWARP_ORD", "0").unwrap();
        assert!(Settings::from_config(&c).is_err());
        let c = with("RUCX_IWARP_IRD", "129").unwrap();
        assert!(Settings::from_config(&c).is_err());
        let c = with("RUCX_IWARP_MPA_TIMEOUT", "inf").unwrap();
        assert!(Settings::from_config(&c).is_err());
        assert!(with("RUCX_IWARP_MPA_CRC", "maybe").is_err());
        let c = with("RUCX_IWARP_MSS", "50").unwrap();
        assert!(Settings::from_config(&c).is_err());
        // Linux refuses TCP_MAXSEG above 32767: caught here, not at open.
        let c = with("RUCX_IWARP_MSS", "32768").unwrap();
        assert!(Settings::from_config(&c).is_err());
        let c = with("RUCX_IWARP_MSS", "32767").unwrap();
        assert!(Settings::from_config(&c).is_ok());
        let c = with("RUCX_IWARP_SNDBUF", "64k").unwrap();
        assert_eq!(Settings::from_config(&c).unwrap().bufs.snd, Some(65536));
        assert!(with("RUCX_IWARP_RCVBUF", "lots").is_err());
        let c = with("RUCX_IWARP_CONGESTION", "system").unwrap();
        assert_eq!(Settings::from_config(&c).unwrap().congestion, None);
        for bad in ["", "a-name-of-16-chr", "re no", "reno\0"] {
            let c = IwarpConfig::from_lookup(|v| {
                (v == "RUCX_IWARP_CONGESTION").then(|| bad.to_string())
            })
            .unwrap();
            assert!(Settings::from_config(&c).is_err(), "{bad:?}");
        }
        // Failure detection: unparsable, or beyond what the kernel takes.
        for (var, val) in [
            ("RUCX_IWARP_KEEPCNT", "0"),
            ("RUCX_IWARP_KEEPCNT", "lots"),
            ("RUCX_IWARP_KEEPIDLE", "1 s"),
            ("RUCX_IWARP_USER_TIMEOUT", "never"),
            ("RUCX_IWARP_AF_PRIO", "inet5"),
        ] {
            let err = with(var, val).unwrap_err();
            assert!(err.to_string().contains(var), "{var}={val}: {err}");
        }
        for (var, val) in [
            ("RUCX_IWARP_KEEPINTVL", "inf"),
            ("RUCX_IWARP_KEEPIDLE", "600m"),
            ("RUCX_IWARP_USER_TIMEOUT", "36000m"),
        ] {
            let err = Settings::from_config(&with(var, val).unwrap()).unwrap_err();
            assert!(err.to_string().contains(var), "{var}={val}: {err}");
        }
        let c = with("RUCX_IWARP_USER_TIMEOUT", "off").unwrap();
        assert_eq!(
            Settings::from_config(&c).unwrap().keepalive.user_timeout_ms,
            None
        );
        // Peer-to-peer mode needs revision 2.
        let c = with("RUCX_IWARP_MPA_REV", "1").unwrap();
        assert!(!Settings::from_config(&c).unwrap().p2p);
    }
}
