//! Which ifaces live in this process: a process-wide set of their
//! addresses (keys), so that a transport can tell a peer that ends with
//! this process (whatever happens to it) from one in another process.
//!
//! A send to another process must not be reported done while it only
//! waits in this process for its connection to open (the process may exit
//! or stop progressing right after, and the message would be lost); to an
//! iface of the same process it may, which lets one thread drive both ends
//! of a connection. Lookups take a lock: they are for the slow path of a
//! connection that is not open yet.

use std::sync::{Mutex, MutexGuard};

/// A process-wide set of keys; a `static` of each transport.
#[derive(Debug)]
pub struct LocalKeys<K: 'static>(Mutex<Vec<K>>);

impl<K: PartialEq + Copy + 'static> LocalKeys<K> {
    /// An empty set (for a `static`).
    pub const fn new() -> LocalKeys<K> {
        LocalKeys(Mutex::new(Vec::new()))
    }

    fn keys(&self) -> MutexGuard<'_, Vec<K>> {
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Whether `key` belongs to an iface of this process.
    pub fn contains(&self, key: &K) -> bool {
        self.keys().contains(key)
    }

    /// Adds `key` until the returned entry is dropped.
    pub fn register(&'static self, key: K) -> LocalKey<K> {
        self.keys().push(key);
        LocalKey { set: self, key }
    }

    fn remove(&self, key: &K) {
        let mut keys = self.keys();
        if let Some(i) = keys.iter().position(|k| k == key) {
            keys.swap_remove(i);
        }
    }
}

impl<K: PartialEq + Copy + 'static> Default for LocalKeys<K> {
    fn default() -> LocalKeys<K> {
        LocalKeys::new()
    }
}

/// An iface's entry in a [`LocalKeys`], removed when dropped.
#[derive(Debug)]
pub struct LocalKey<K: PartialEq + Copy + 'static> {
    set: &'static LocalKeys<K>,
    key: K,
}

impl<K: PartialEq + Copy + 'static> LocalKey<K> {
    /// Takes the entry out early, as if the iface were in another process
    /// (for tests).
    pub fn forget(&self) {
        self.set.remove(&self.key);
    }
}

impl<K: PartialEq + Copy + 'static> Drop for LocalKey<K> {
    fn drop(&mut self) {
        self.set.remove(&self.key);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    static SET: LocalKeys<u32> = LocalKeys::new();

    #[test]
    fn entries_last_as_long_as_their_guard() {
        let a = SET.register(1);
        let b = SET.register(2);
        assert!(SET.contains(&1) && SET.contains(&2) && !SET.contains(&3));
        drop(a);
        assert!(!SET.contains(&1) && SET.contains(&2));
        b.forget();
        assert!(!SET.contains(&2));
        drop(b);
        assert!(!SET.contains(&2));
    }
}
