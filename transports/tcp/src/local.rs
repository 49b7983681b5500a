//! The ifaces of this process, by key: a connection to one of them ends
//! with this process whatever happens, so sends on it may be buffered
//! before the connection opens (see [`uct::ucs::local`]).

use uct::ucs::local::{LocalKey as Entry, LocalKeys};

use crate::wire::Key;

/// Keys of this process's open ifaces.
static KEYS: LocalKeys<Key> = LocalKeys::new();

/// Whether `key` is an iface of this process.
pub(crate) fn is_local(key: Key) -> bool {
    KEYS.contains(&key)
}

/// An iface's entry in the table, removed when dropped.
pub(crate) type LocalKey = Entry<Key>;

/// Adds an iface's key to the table.
pub(crate) fn register(key: Key) -> LocalKey {
    KEYS.register(key)
}
