//! The connection to each peer iface, found by the peer's key.
//!
//! An open-addressing table of connection slots whose key is the one its
//! connection holds ([`crate::conn::Conn::key`]): an entry is 4 bytes,
//! where a `HashMap` from key to slot holds the 20-byte key again (24
//! bytes and a control byte an entry). Linear probing; a removal leaves a
//! tombstone; the table is rebuilt, doubling when half full of live
//! entries, once live entries and tombstones pass 7/8 of it. Keys come
//! from peers (hellos), so they are hashed with a random seed.
//!
//! The caller keeps the table in step with the connections: a connection
//! in it keeps its key and leaves the table before its slot is freed.

use std::hash::{BuildHasher, RandomState};

use crate::wire::Key;

/// A free slot; probing stops here.
const EMPTY: u32 = u32::MAX;
/// A removed entry; probing goes on past it.
const DEAD: u32 = u32::MAX - 1;
/// Slots of the first table.
const FIRST: usize = 8;

/// Connection slots by the key of their connection.
#[derive(Debug)]
pub(crate) struct PeerTable {
    slots: Vec<u32>,
    live: usize,
    dead: usize,
    seed: RandomState,
}

impl PeerTable {
    /// An empty table; nothing allocated.
    pub(crate) fn new() -> PeerTable {
        PeerTable {
            slots: Vec::new(),
            live: 0,
            dead: 0,
            seed: RandomState::new(),
        }
    }

    /// Number of entries.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.live
    }

    fn home(&self, key: &Key) -> usize {
        (self.seed.hash_one(key) as usize) & (self.slots.len() - 1)
    }

    /// Index in `slots` of the entry whose connection has `key`.
    fn find(&self, key: &Key, key_of: &impl Fn(u32) -> Option<Key>) -> Option<usize> {
        if self.slots.is_empty() {
            return None;
        }
        let mask = self.slots.len() - 1;
        let mut i = self.home(key);
        // At least one slot is empty (see `insert`): the probe ends.
        loop {
            match self.slots[i] {
                EMPTY => return None,
                DEAD => {}
                ci if key_of(ci).as_ref() == Some(key) => return Some(i),
                _ => {}
            }
            i = (i + 1) & mask;
        }
    }

    /// The connection to the peer `key`.
    pub(crate) fn get(&self, key: &Key, key_of: impl Fn(u32) -> Option<Key>) -> Option<u32> {
        self.find(key, &key_of).map(|i| self.slots[i])
    }

    /// Makes `ci` (whose key is `key`) the connection to that peer,
    /// replacing the one there was.
    pub(crate) fn insert(&mut self, key: &Key, ci: u32, key_of: impl Fn(u32) -> Option<Key>) {
        if let Some(i) = self.find(key, &key_of) {
            self.slots[i] = ci;
            return;
        }
        if (self.live + self.dead + 1) * 8 > self.slots.len() * 7 {
            self.rebuild(&key_of);
        }
        let mask = self.slots.len() - 1;
        let mut i = self.home(key);
        while self.slots[i] != EMPTY && self.slots[i] != DEAD {
            i = (i + 1) & mask;
        }
        if self.slots[i] == DEAD {
            self.dead -= 1;
        }
        self.slots[i] = ci;
        self.live += 1;
    }

    /// Forgets `ci` as the connection to the peer `key`, if it is.
    pub(crate) fn remove(&mut self, key: &Key, ci: u32, key_of: impl Fn(u32) -> Option<Key>) {
        if let Some(i) = self.find(key, &key_of).filter(|&i| self.slots[i] == ci) {
            self.slots[i] = DEAD;
            self.live -= 1;
            self.dead += 1;
        }
    }

    /// Rehashes the live entries into a table with room for one more,
    /// dropping the tombstones.
    fn rebuild(&mut self, key_of: &impl Fn(u32) -> Option<Key>) {
        let mut len = self.slots.len().max(FIRST);
        while (self.live + 1) * 2 > len {
            len *= 2;
        }
        let old = std::mem::replace(&mut self.slots, vec![EMPTY; len]);
        self.live = 0;
        self.dead = 0;
        for ci in old.into_iter().filter(|&c| c != EMPTY && c != DEAD) {
            let Some(key) = key_of(ci) else {
                continue;
            };
            let mut i = self.home(&key);
            while self.slots[i] != EMPTY {
                i = (i + 1) & (len - 1);
            }
            self.slots[i] = ci;
            self.live += 1;
        }
    }
}

#[cfg(test)]
mod tests {
    use std::net::SocketAddr;

    use super::*;
    use crate::wire::key;

    fn k(i: u32) -> Key {
        let ip = std::net::Ipv4Addr::from(0x0a00_0000 + i / 1000);
        key(SocketAddr::new(ip.into(), (i % 1000) as u16 + 1))
    }

    #[test]
    fn entries_are_found_by_the_key_of_their_connection() {
        // Connection `ci` has key `k(ci)`, except those in `gone`.
        let mut t = PeerTable::new();
        let n = 3000;
        for ci in 0..n {
            t.insert(&k(ci), ci, |c| Some(k(c)));
        }
        assert_eq!(t.len(), n as usize);
        // Bounded: at most 4 slots an entry past the first table.
        assert!(t.slots.len() <= 4 * n as usize, "{}", t.slots.len());
        for ci in 0..n {
            assert_eq!(t.get(&k(ci), |c| Some(k(c))), Some(ci));
        }
        assert_eq!(t.get(&k(n), |c| Some(k(c))), None);
        // Removing only the connection that is there.
        t.remove(&k(5), 6, |c| Some(k(c)));
        assert_eq!(t.get(&k(5), |c| Some(k(c))), Some(5));
        for ci in (0..n).step_by(2) {
            t.remove(&k(ci), ci, |c| Some(k(c)));
        }
        assert_eq!(t.len(), n as usize / 2);
        for ci in 0..n {
            let want = (ci % 2 == 1).then_some(ci);
            assert_eq!(t.get(&k(ci), |c| Some(k(c))), want, "{ci}");
        }
        // Churn through tombstones: the table does not grow without end.
        let len = t.slots.len();
        for round in 0..10 {
            for ci in (0..n).step_by(2) {
                let c = n * (round + 1) + ci;
                t.insert(&k(c), c, |c| Some(k(c)));
            }
            for ci in (0..n).step_by(2) {
                let c = n * (round + 1) + ci;
                t.remove(&k(c), c, |c| Some(k(c)));
            }
        }
        assert_eq!(t.len(), n as usize / 2);
        assert!(t.slots.len() <= len * 2);
        // Replacing the connection to a peer: a new slot with the same key.
        let key_of = |c: u32| Some(k(if c == 100_000 { 1 } else { c }));
        t.insert(&k(1), 100_000, key_of);
        assert_eq!(t.get(&k(1), key_of), Some(100_000));
        assert_eq!(t.len(), n as usize / 2);
    }
}
