//! [`Table`]: entries named by 32-bit generational ids (queue pairs,
//! completion queues, connection requests): 20 bits of slot index, 12 bits
//! of generation, so a stale id finds nothing for 4095 reuses of its slot.

const INDEX_BITS: u32 = 20;
const INDEX_MASK: u32 = (1 << INDEX_BITS) - 1;
const GEN_MASK: u32 = (1 << (32 - INDEX_BITS)) - 1;

#[derive(Debug)]
struct Slot<T> {
    gen: u32,
    value: Option<T>,
}

/// Entries of type `T` in reusable slots.
#[derive(Debug)]
pub(crate) struct Table<T> {
    slots: Vec<Slot<T>>,
    free: Vec<u32>,
}

impl<T> Default for Table<T> {
    fn default() -> Self {
        Table {
            slots: Vec::new(),
            free: Vec::new(),
        }
    }
}

impl<T> Table<T> {
    /// Stores `make(id)`; `None` when every slot is taken.
    pub(crate) fn insert_with(&mut self, make: impl FnOnce(u32) -> T) -> Option<u32> {
        let idx = match self.free.pop() {
            Some(i) => i,
            None if self.slots.len() <= INDEX_MASK as usize => {
                self.slots.push(Slot {
                    gen: 0,
                    value: None,
                });
                self.slots.len() as u32 - 1
            }
            None => return None,
        };
        let slot = &mut self.slots[idx as usize];
        let id = (slot.gen << INDEX_BITS) | idx;
        slot.value = Some(make(id));
        Some(id)
    }

    fn slot(&self, id: u32) -> Option<&Slot<T>> {
        self.slots
            .get((id & INDEX_MASK) as usize)
            .filter(|s| s.gen == id >> INDEX_BITS)
    }

    pub(crate) fn get(&self, id: u32) -> Option<&T> {
        self.slot(id)?.value.as_ref()
    }

    pub(crate) fn get_mut(&mut self, id: u32) -> Option<&mut T> {
        let s = self.slots.get_mut((id & INDEX_MASK) as usize)?;
        if s.gen != id >> INDEX_BITS {
            return None;
        }
        s.value.as_mut()
    }

    pub(crate) fn remove(&mut self, id: u32) -> Option<T> {
        let idx = id & INDEX_MASK;
        let s = self.slots.get_mut(idx as usize)?;
        if s.gen != id >> INDEX_BITS || s.value.is_none() {
            return None;
        }
        s.gen = (s.gen + 1) & GEN_MASK;
        self.free.push(idx);
        s.value.take()
    }

    pub(crate) fn values(&self) -> impl Iterator<Item = &T> {
        self.slots.iter().filter_map(|s| s.value.as_ref())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stale_ids_find_nothing() {
        let mut t = Table::default();
        let a = t.insert_with(|id| id).unwrap();
        assert_eq!(t.get(a), Some(&a));
        assert_eq!(t.remove(a), Some(a));
        assert!(t.get(a).is_none() && t.remove(a).is_none());
        let b = t.insert_with(|id| id).unwrap();
        assert_ne!(a, b);
        assert_eq!(a & INDEX_MASK, b & INDEX_MASK);
        assert!(t.get_mut(a).is_none());
        assert_eq!(t.values().count(), 1);
    }
}
