//! The ifaces of this process, by key: a connection to one of them ends
//! with this process whatever happens, so sends on it may be buffered
//! before the connection opens.

use std::sync::Mutex;

use crate::wire::Key;

/// Keys of this process's open ifaces (a few; looked up only on the
/// slow path of a connection that is not open yet).
static KEYS: Mutex<Vec<Key>> = Mutex::new(Vec::new());

fn keys() -> std::sync::MutexGuard<'static, Vec<Key>> {
    KEYS.lock().unwrap_or_else(|e| e.into_inner())
}

/// Whether `key` is an iface of this process.
pub(crate) fn is_local(key: Key) -> bool {
    keys().contains(&key)
}

/// An iface's entry in the table, removed when dropped.
#[derive(Debug)]
pub(crate) struct LocalKey(Key);

impl LocalKey {
    pub(crate) fn register(key: Key) -> LocalKey {
        keys().push(key);
        LocalKey(key)
    }

    /// Takes the entry out early, as if the iface were in another
    /// process (tests).
    #[cfg(test)]
    pub(crate) fn forget(&self) {
        keys().retain(|k| *k != self.0);
    }
}

impl Drop for LocalKey {
    fn drop(&mut self) {
        let mut keys = keys();
        if let Some(i) = keys.iter().position(|k| *k == self.0) {
            keys.swap_remove(i);
        }
    }
}
