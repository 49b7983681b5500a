//! Configuration of the protocol layer, and the list of every table.

use crate::proto::select::{
    RndvScheme, SelectConfig, MAX_RNDV_LANES_TEXT, RNDV_FRAG_SIZE, RNDV_SPLIT_THRESH,
};
use crate::ucs::config::{AllowList, ConfigTable, MemUnits, GLOBAL_TABLE};

crate::ucs::config_table! {
    /// Protocol layer options.
    pub struct UcpConfig in UCP_TABLE ("ucp", "") {
        /// Comma-separated list of transports to use (e.g. `tcp,self`); a
        /// leading `^` uses all but those; `all` uses every transport.
        TLS tls: AllowList = "all",
        /// Comma-separated list of network devices to use (e.g. `lo,eth0`),
        /// same syntax as TLS; applies to network transports only.
        NET_DEVICES net_devices: AllowList = "all",
        /// Message size from which rendezvous is used: `auto` (by the
        /// performance model), a size (forced at and above, never below),
        /// or `inf` (never).
        RNDV_THRESH rndv_thresh: MemUnits = "auto",
        /// Message size from which eager sends go zero-copy instead of
        /// copying (`auto`, a size, or `inf`); same priority rules.
        ZCOPY_THRESH zcopy_thresh: MemUnits = "auto",
        /// Message size from which eager sends copy instead of sending
        /// inline (`auto`, a size, or `inf`); same priority rules.
        BCOPY_THRESH bcopy_thresh: MemUnits = "auto",
        /// Rendezvous flavour: auto, get_zcopy, put_zcopy or am. One the
        /// lanes cannot do falls back to one they can (logged at info).
        RNDV_SCHEME rndv_scheme: RndvScheme = "auto",
        /// Largest single put or get of a zero-copy rendezvous; `auto`:
        /// each lane's limit.
        RNDV_FRAG_SIZE rndv_frag_size: MemUnits = "auto",
        /// Message size from which the receiver of a rendezvous by get
        /// reads one half and asks the sender to write the other at the
        /// same time, so both processes copy; each worker of a pair
        /// copies the same half either way (`auto`, a size, or `inf`: the
        /// receiver reads everything).
        RNDV_SPLIT_THRESH rndv_split_thresh: MemUnits = "auto",
        /// Most lanes one rendezvous transfer spreads over.
        MAX_RNDV_LANES max_rndv_lanes: usize = MAX_RNDV_LANES_TEXT,
        /// Print the protocol selection table of every new endpoint
        /// (to standard error), like UCX_PROTO_INFO.
        PROTO_INFO proto_info: bool = "n",
        /// Registration cache for rendezvous buffers: `auto` (for memory
        /// domains whose registration is costly), `yes`, or `no`.
        RCACHE_ENABLE rcache_enable: crate::reg::RcacheMode = "auto",
        /// Most bytes the registration cache keeps registered (`inf`: no
        /// limit).
        RCACHE_MAX_SIZE rcache_max_size: MemUnits = "inf",
        /// Most regions the registration cache keeps registered (a count;
        /// `inf`: no limit).
        RCACHE_MAX_REGIONS rcache_max_regions: MemUnits = "inf",
        /// Interval of the keepalive of endpoints in peer error mode: each
        /// round pings up to KEEPALIVE_NUM_EPS of them, and one that has
        /// not answered for KEEPALIVE_MISSES rounds fails with a timeout
        /// (`inf`: no keepalive). As UCX_KEEPALIVE_INTERVAL.
        KEEPALIVE_INTERVAL keepalive_interval: crate::ucs::config::Time = "20s",
        /// Most endpoints one keepalive round checks (as
        /// UCX_KEEPALIVE_NUM_EPS).
        KEEPALIVE_NUM_EPS keepalive_num_eps: usize = "128",
        /// Rounds without an answer after which an endpoint fails.
        KEEPALIVE_MISSES keepalive_misses: usize = "3",
        /// Whether a shared worker (`SharedWorker`) starts a progress
        /// thread that drives its transports while the application does
        /// not; it sleeps on the worker's event fd when nothing happens.
        ASYNC_PROGRESS async_progress: bool = "n",
        /// Which atomics memory this context maps takes: `cpu` (executed
        /// by the owner's CPU, emulated over active messages), `device`
        /// (executed by RDMA devices only; what the device lacks is built
        /// by the initiator from its 64-bit fetch-add and compare-and-swap)
        /// or `guess` (device if some transport's device does 64-bit
        /// fetch-add and compare-and-swap, else cpu; an endpoint whose
        /// message lane is shared memory, TCP or self then reaches device
        /// memory over an atomic lane of such a transport, connected when
        /// first used). A word never sees both kinds. As UCX_ATOMIC_MODE.
        ATOMIC_MODE atomic_mode: crate::rma::AtomicMode = "guess",
        /// Most bytes of unexpected eager tag messages a worker lets its
        /// peers send: each endpoint sends eagerly only what the receiver
        /// granted from this budget, and by rendezvous beyond it (only the
        /// small announcement can then queue; the data waits at the sender
        /// until a receive matches it). Each peer endpoint may also use
        /// 128 KiB before its first grant. `inf`: no limit, as UCX.
        UNEXPECTED_MAX unexpected_max: MemUnits = "64m",
    }
}

impl UcpConfig {
    /// The settings of protocol selection.
    pub fn select_config(&self) -> SelectConfig {
        SelectConfig {
            rndv_thresh: self.rndv_thresh,
            zcopy_thresh: self.zcopy_thresh,
            bcopy_thresh: self.bcopy_thresh,
            rndv_scheme: self.rndv_scheme,
            rndv_frag_size: self.rndv_frag_size.usize_or(RNDV_FRAG_SIZE),
            max_rndv_lanes: self.max_rndv_lanes,
            rndv_split_thresh: self.rndv_split_thresh.usize_or(RNDV_SPLIT_THRESH),
            ..SelectConfig::default()
        }
    }
}

/// Every configuration table of rucx over the transports of `registry`:
/// global, protocol layer, then each component's.
pub fn config_tables(registry: &crate::uct::Registry) -> Vec<&'static ConfigTable> {
    let mut v = vec![&GLOBAL_TABLE, &UCP_TABLE];
    for c in registry.components() {
        for t in c.config_tables() {
            // Components of one family share tables (every RC provider
            // has `RUCX_RC_*`): each is listed once.
            if !v.iter().any(|seen| std::ptr::eq(*seen, t)) {
                v.push(t);
            }
        }
    }
    v
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::proto::select::MAX_RNDV_LANES;

    #[test]
    fn defaults_parse_and_agree_with_selection() {
        UCP_TABLE.check_defaults().unwrap();
        let cfg = UcpConfig::default();
        assert_eq!(cfg.max_rndv_lanes, MAX_RNDV_LANES);
        assert_eq!(cfg.select_config(), SelectConfig::default());
    }
}
