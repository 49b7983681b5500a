//! Configuration of the protocol layer, and the list of every table.

use crate::ucs::config::{AllowList, ConfigTable, GLOBAL_TABLE};

crate::ucs::config_table! {
    /// Protocol layer options.
    pub struct UcpConfig in UCP_TABLE ("ucp", "") {
        /// Comma-separated list of transports to use (e.g. `tcp,self`); a
        /// leading `^` uses all but those; `all` uses every transport.
        TLS tls: AllowList = "all",
        /// Comma-separated list of network devices to use (e.g. `lo,eth0`),
        /// same syntax as TLS; applies to network transports only.
        NET_DEVICES net_devices: AllowList = "all",
    }
}

/// Every configuration table of rucx: global, protocol layer, transports.
pub fn config_tables() -> Vec<&'static ConfigTable> {
    let mut v = vec![&GLOBAL_TABLE, &UCP_TABLE];
    for c in crate::transports::registry().components() {
        v.extend(c.config_tables());
    }
    v
}
