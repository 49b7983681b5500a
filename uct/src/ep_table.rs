//! The endpoint table every iface keeps: an [`EpId`] is an index into it,
//! and ids of destroyed endpoints are reused.

use crate::iface::EpId;
use crate::{Error, Result};

/// Endpoint slots of one iface.
#[derive(Debug)]
pub struct EpTable<T> {
    slots: Vec<Option<T>>,
    free: Vec<u32>,
    live: usize,
}

impl<T> Default for EpTable<T> {
    fn default() -> Self {
        EpTable::new()
    }
}

impl<T> EpTable<T> {
    /// An empty table.
    pub const fn new() -> EpTable<T> {
        EpTable {
            slots: Vec::new(),
            free: Vec::new(),
            live: 0,
        }
    }

    /// Stores `ep` under a free id. `NoMemory` once 2^32 ids are in use.
    pub fn insert(&mut self, ep: T) -> Result<EpId> {
        let id = match self.free.pop() {
            Some(i) => {
                self.slots[i as usize] = Some(ep);
                i
            }
            None => {
                let i = u32::try_from(self.slots.len())
                    .map_err(|_| Error::NoMemory("endpoint table full".into()))?;
                self.slots.push(Some(ep));
                i
            }
        };
        self.live += 1;
        Ok(EpId(id))
    }

    /// The endpoint `ep`, if it exists.
    pub fn get(&self, ep: EpId) -> Option<&T> {
        self.slots.get(ep.0 as usize).and_then(Option::as_ref)
    }

    /// The endpoint `ep`, mutably, if it exists.
    pub fn get_mut(&mut self, ep: EpId) -> Option<&mut T> {
        self.slots.get_mut(ep.0 as usize).and_then(Option::as_mut)
    }

    /// Removes endpoint `ep`; its id may be handed out again.
    pub fn remove(&mut self, ep: EpId) -> Option<T> {
        let v = self.slots.get_mut(ep.0 as usize)?.take()?;
        self.free.push(ep.0);
        self.live -= 1;
        Some(v)
    }

    /// Number of endpoints.
    pub fn len(&self) -> usize {
        self.live
    }

    /// Whether there are no endpoints.
    pub fn is_empty(&self) -> bool {
        self.live == 0
    }

    /// The endpoints with their ids.
    pub fn iter(&self) -> impl Iterator<Item = (EpId, &T)> {
        self.slots
            .iter()
            .enumerate()
            .filter_map(|(i, s)| Some((EpId(i as u32), s.as_ref()?)))
    }

    /// The endpoints with their ids, mutably.
    pub fn iter_mut(&mut self) -> impl Iterator<Item = (EpId, &mut T)> {
        self.slots
            .iter_mut()
            .enumerate()
            .filter_map(|(i, s)| Some((EpId(i as u32), s.as_mut()?)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_reused_and_counted() {
        let mut t = EpTable::new();
        let a = t.insert('a').unwrap();
        let b = t.insert('b').unwrap();
        assert_eq!((a, b, t.len()), (EpId(0), EpId(1), 2));
        assert_eq!(t.remove(a), Some('a'));
        assert_eq!(t.remove(a), None);
        assert_eq!(t.get(a), None);
        assert_eq!(t.insert('c').unwrap(), a);
        *t.get_mut(b).unwrap() = 'B';
        let all: Vec<_> = t.iter().map(|(id, v)| (id.0, *v)).collect();
        assert_eq!(all, [(0, 'c'), (1, 'B')]);
        assert_eq!(t.remove(EpId(99)), None);
        assert!(!t.is_empty());
    }
}
