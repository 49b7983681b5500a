//! A table of local memory registrations, for memory domains that check
//! remote accesses themselves (`self`, the TCP put emulation, `virt`).
//!
//! A registration is a slot of a slab: its index and the slot's generation
//! name it, in the [`MemHandle`] id (generation in the high 32 bits, index
//! in the low) and in packed keys. Deregistering bumps the generation, so
//! keys of the old registration name nothing even after the slot is reused
//! (also for the same memory). A slot whose generation would wrap is
//! retired instead of reused.
//!
//! One `RwLock` guards the table. Operations hold it for reading while they
//! copy ([`with_range`]), registration and deregistration take it for
//! writing: deregistration therefore waits for copies in progress, and no
//! copy starts on a range after its deregistration returned. The lock is
//! taken once per operation, not per byte or per iov entry.

use crate::{Access, Error, MemHandle, Result};
use parking_lot::RwLock;

/// The registered pointer, kept with its provenance.
#[derive(Debug, Clone, Copy)]
struct RegPtr(*mut u8);

// SAFETY: the pointer is only an address here; it is dereferenced only by
// `put_zcopy`/`get_zcopy`, under the table lock, within the registered
// range, relying on `mem_reg`'s contract that the memory stays valid until
// `mem_dereg` (which waits for the lock).
unsafe impl Send for RegPtr {}
// SAFETY: as for `Send`: shared access only reads the address.
unsafe impl Sync for RegPtr {}

/// One live registration.
#[derive(Debug)]
struct Entry {
    ptr: RegPtr,
    len: usize,
    access: Access,
}

#[derive(Debug)]
struct Slot {
    generation: u32,
    entry: Option<Entry>,
}

/// A slab of registrations with generations.
#[derive(Debug)]
struct Table {
    slots: Vec<Slot>,
    /// Indexes of empty slots that may be reused.
    free: Vec<u32>,
}

impl Table {
    const fn new() -> Table {
        Table {
            slots: Vec::new(),
            free: Vec::new(),
        }
    }

    /// Stores `entry`; returns its index and generation.
    fn insert(&mut self, entry: Entry) -> Result<(u32, u32)> {
        if let Some(i) = self.free.pop() {
            let slot = &mut self.slots[i as usize];
            slot.entry = Some(entry);
            return Ok((i, slot.generation));
        }
        let i = u32::try_from(self.slots.len())
            .map_err(|_| Error::NoMemory("registration table full".into()))?;
        self.slots.push(Slot {
            generation: 0,
            entry: Some(entry),
        });
        Ok((i, 0))
    }

    /// The live registration `index` of `generation`.
    fn live(&self, index: u32, generation: u32) -> Option<&Entry> {
        let slot = self.slots.get(index as usize)?;
        if slot.generation != generation {
            return None;
        }
        slot.entry.as_ref()
    }

    /// Ends a registration; the slot's next one gets a new generation.
    fn remove(&mut self, index: u32, generation: u32) -> Option<Entry> {
        let slot = self.slots.get_mut(index as usize)?;
        if slot.generation != generation {
            return None;
        }
        let entry = slot.entry.take()?;
        if let Some(next) = slot.generation.checked_add(1) {
            slot.generation = next;
            self.free.push(index);
        }
        Some(entry)
    }
}

fn handle_id(index: u32, generation: u32) -> u64 {
    (u64::from(generation) << 32) | u64::from(index)
}

fn split_id(id: u64) -> (u32, u32) {
    (id as u32, (id >> 32) as u32)
}

fn not_live(owner: &str) -> Error {
    Error::InvalidParam(format!("{owner}: not a live registration of this process"))
}

/// What a remote key names, once its owner decoded it: a registration
/// (slot and generation) and the range and rights declared when packing.
/// Operations check the live registration, not the declared fields.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KeyFields {
    /// Slot of the registration in the table.
    pub index: u32,
    /// Generation of that slot when the registration was made.
    pub generation: u32,
    /// Declared start address.
    pub addr: u64,
    /// Declared length.
    pub len: u64,
    /// Declared rights.
    pub access: Access,
}

/// Registrations of one owner (a memory domain, or every `self` iface of
/// the process), each named by slot and generation.
#[derive(Debug)]
pub struct RegTable {
    /// Names the owner in errors.
    owner: &'static str,
    table: RwLock<Table>,
}

/// Whether `entry` is the registration `memh` describes.
fn matches(entry: &Entry, memh: &MemHandle) -> bool {
    entry.ptr.0.addr() == memh.addr && entry.len == memh.len && entry.access == memh.access
}

impl RegTable {
    /// An empty table; `owner` names it in errors.
    pub const fn new(owner: &'static str) -> RegTable {
        RegTable {
            owner,
            table: parking_lot::const_rwlock(Table::new()),
        }
    }

    /// Records a registration. `InvalidParam` for a null pointer, a range that
    /// wraps around the address space or exceeds `isize::MAX` bytes, or
    /// unknown access bits. Never dereferences the range.
    pub fn register(&self, ptr: *mut u8, len: usize, access: Access) -> Result<MemHandle> {
        if ptr.is_null() {
            return Err(Error::InvalidParam(format!(
                "{}: mem_reg of a null pointer",
                self.owner
            )));
        }
        if len > isize::MAX as usize || ptr.addr().checked_add(len).is_none() {
            return Err(Error::InvalidParam(format!(
                "{}: mem_reg of {len} bytes at {:#x} overflows",
                self.owner,
                ptr.addr()
            )));
        }
        if Access::from_bits(access.bits()).is_none() {
            return Err(Error::InvalidParam(format!(
                "{}: mem_reg with unknown access bits {:#x}",
                self.owner,
                access.bits()
            )));
        }
        let entry = Entry {
            ptr: RegPtr(ptr),
            len,
            access,
        };
        let (index, generation) = self.table.write().insert(entry)?;
        Ok(MemHandle {
            addr: ptr.addr(),
            len,
            access,
            id: handle_id(index, generation),
        })
    }

    /// Ends the registration of `memh`, after any copy in progress on it.
    /// `InvalidParam` if it is not live (never registered here, already
    /// deregistered, or a handle whose fields were changed).
    pub fn deregister(&self, memh: &MemHandle) -> Result<()> {
        let (index, generation) = split_id(memh.id);
        let mut t = self.table.write();
        match t.live(index, generation) {
            Some(e) if matches(e, memh) => {
                t.remove(index, generation);
                Ok(())
            }
            _ => Err(not_live(self.owner)),
        }
    }

    /// The fields to pack for the live registration `memh`.
    pub fn key_fields(&self, memh: &MemHandle) -> Result<KeyFields> {
        let (index, generation) = split_id(memh.id);
        let t = self.table.read();
        match t.live(index, generation) {
            Some(e) if matches(e, memh) => Ok(KeyFields {
                index,
                generation,
                addr: e.ptr.0.addr() as u64,
                len: e.len as u64,
                access: e.access,
            }),
            _ => Err(not_live(self.owner)),
        }
    }

    /// Runs `op` with a pointer to `remote_addr` in the live registration that
    /// `key` names, once `[remote_addr, remote_addr + len)` is found inside it
    /// and its rights include `need`; the table stays locked (for reading)
    /// until `op` returns, so the registration cannot end meanwhile.
    ///
    /// `InvalidParam` without calling `op` if the registration is gone, the
    /// range is outside it (or wraps), or a right is missing.
    pub fn with_range<R>(
        &self,
        key: &KeyFields,
        remote_addr: u64,
        len: usize,
        need: Access,
        op: impl FnOnce(*mut u8) -> R,
    ) -> Result<R> {
        let t = self.table.read();
        let e = t.live(key.index, key.generation).ok_or_else(|| {
            Error::InvalidParam(format!(
                "{}: remote key names no live registration",
                self.owner
            ))
        })?;
        let start = e.ptr.0.addr() as u64;
        let inside = remote_addr
            .checked_sub(start)
            .and_then(|off| Some((off, off.checked_add(len as u64)?)))
            .filter(|&(_, end)| end <= e.len as u64);
        let Some((off, _)) = inside else {
            return Err(Error::RemoteAccess(format!(
                "{}: {len} bytes at {remote_addr:#x} are outside \
             the registration of {} bytes at {start:#x}",
                self.owner, e.len
            )));
        };
        if !e.access.contains(need) {
            return Err(Error::RemoteAccess(format!(
                "{}: the registration grants {:?}, not {need:?}",
                self.owner, e.access
            )));
        }
        // `off <= e.len`, so it fits in usize and stays within the registered
        // range; `wrapping_add` keeps the registered pointer's provenance.
        Ok(op(e.ptr.0.wrapping_add(off as usize)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Status;

    static TABLE: RegTable = RegTable::new("test");

    fn entry(addr: usize, len: usize) -> Entry {
        Entry {
            ptr: RegPtr(std::ptr::without_provenance_mut(addr)),
            len,
            access: Access::REMOTE_READ,
        }
    }

    #[test]
    fn slots_are_reused_with_a_new_generation() {
        let mut t = Table::new();
        let (a, ga) = t.insert(entry(0x1000, 8)).unwrap();
        let (b, _) = t.insert(entry(0x2000, 8)).unwrap();
        assert_ne!(a, b);
        assert!(t.live(a, ga).is_some());
        assert!(t.live(a, ga + 1).is_none());
        assert!(t.remove(a, ga).is_some());
        assert!(t.remove(a, ga).is_none(), "twice");
        assert!(t.live(a, ga).is_none());
        let (c, gc) = t.insert(entry(0x1000, 8)).unwrap();
        assert_eq!(c, a);
        assert_eq!(gc, ga + 1);
        assert!(t.live(a, ga).is_none(), "stale generation");
        assert!(t.live(99, 0).is_none());
        assert!(t.remove(99, 0).is_none());
    }

    #[test]
    fn a_slot_is_retired_before_its_generation_wraps() {
        let mut t = Table::new();
        let (i, _) = t.insert(entry(0x1000, 8)).unwrap();
        t.slots[i as usize].generation = u32::MAX;
        assert!(t.remove(i, u32::MAX).is_some());
        assert!(t.free.is_empty());
        let (j, g) = t.insert(entry(0x1000, 8)).unwrap();
        assert_ne!(j, i);
        assert_eq!(g, 0);
        assert!(t.live(i, 0).is_none());
    }

    #[test]
    fn ids_split_back() {
        assert_eq!(split_id(handle_id(7, 9)), (7, 9));
        assert_eq!(
            split_id(handle_id(u32::MAX, u32::MAX)),
            (u32::MAX, u32::MAX)
        );
    }

    #[test]
    fn bad_registrations_are_refused() {
        let mut buf = [0u8; 4];
        let p = buf.as_mut_ptr();
        let rw = Access::REMOTE_READ | Access::REMOTE_WRITE;
        let cases: [(*mut u8, usize, Access); 4] = [
            (std::ptr::null_mut(), 0, rw),
            (std::ptr::without_provenance_mut(usize::MAX - 3), 4, rw),
            (p, isize::MAX as usize + 1, rw),
            (p, 4, Access::from_bits_retain(1 << 9)),
        ];
        for (ptr, len, access) in cases {
            let e = TABLE.register(ptr, len, access).unwrap_err();
            assert_eq!(e.status(), Status::InvalidParam, "{ptr:?} {len} {access:?}");
        }
    }

    #[test]
    fn deregistration_checks_the_handle() {
        let mut buf = [0u8; 16];
        let h = TABLE
            .register(buf.as_mut_ptr(), 16, Access::REMOTE_WRITE)
            .unwrap();
        assert_eq!(h.addr, buf.as_ptr().addr());
        for bad in [
            MemHandle {
                addr: h.addr + 1,
                ..h.clone()
            },
            MemHandle {
                len: 15,
                ..h.clone()
            },
            MemHandle {
                access: Access::REMOTE_READ,
                ..h.clone()
            },
            MemHandle {
                id: h.id ^ (1 << 32),
                ..h.clone()
            },
        ] {
            assert!(TABLE.deregister(&bad).is_err(), "{bad:?}");
            assert!(TABLE.key_fields(&bad).is_err(), "{bad:?}");
        }
        let k = TABLE.key_fields(&h).unwrap();
        assert_eq!((k.addr, k.len), (h.addr as u64, 16));
        TABLE.deregister(&h).unwrap();
        assert_eq!(
            TABLE.deregister(&h).unwrap_err().status(),
            Status::InvalidParam
        );
        assert!(TABLE.key_fields(&h).is_err());
    }

    #[test]
    fn with_range_checks_liveness_range_and_rights() {
        let mut buf = [0u8; 16];
        let h = TABLE
            .register(buf.as_mut_ptr(), 16, Access::REMOTE_WRITE)
            .unwrap();
        let k = TABLE.key_fields(&h).unwrap();
        let base = h.addr as u64;
        let ok = |addr: u64, len: usize| {
            TABLE
                .with_range(&k, addr, len, Access::REMOTE_WRITE, |p| p.addr())
                .is_ok()
        };
        assert_eq!(
            TABLE
                .with_range(&k, base + 3, 5, Access::REMOTE_WRITE, |p| p.addr())
                .unwrap(),
            h.addr + 3
        );
        assert!(ok(base, 16));
        assert!(ok(base + 16, 0));
        assert!(!ok(base + 16, 1));
        assert!(!ok(base + 17, 0));
        assert!(!ok(base - 1, 1));
        assert!(!ok(base, 17));
        assert!(!ok(base + 8, usize::MAX));
        assert!(!ok(u64::MAX, 1));
        let read = TABLE.with_range(&k, base, 1, Access::REMOTE_READ, |_| ());
        assert!(read.unwrap_err().to_string().contains("denied"));
        let stale = KeyFields {
            generation: k.generation.wrapping_add(1),
            ..k
        };
        assert!(TABLE
            .with_range(&stale, base, 1, Access::REMOTE_WRITE, |_| ())
            .is_err());
        TABLE.deregister(&h).unwrap();
        let mut called = false;
        assert!(TABLE
            .with_range(&k, base, 1, Access::REMOTE_WRITE, |_| called = true)
            .is_err());
        assert!(!called);
    }

    #[test]
    fn the_table_stays_locked_during_the_operation() {
        let mut buf = [0u8; 8];
        let h = TABLE
            .register(buf.as_mut_ptr(), 8, Access::REMOTE_READ)
            .unwrap();
        let k = TABLE.key_fields(&h).unwrap();
        let locked = TABLE.with_range(&k, h.addr as u64, 8, Access::REMOTE_READ, |_| {
            TABLE.table.try_write().is_none()
        });
        assert!(locked.unwrap(), "a deregistration could run mid-copy");
        TABLE.deregister(&h).unwrap();
    }
}
