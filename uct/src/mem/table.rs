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
//! Index and generation are small numbers that anyone can guess, so every
//! registration also gets a random 64-bit secret ([`KeyFields::secret`]),
//! which keys carry and [`RegTable::with_range`] compares: a peer that knows
//! the key of one registration cannot name another by guessing its slot. A
//! wrong secret is refused exactly like a registration that ended, so a
//! guess does not even tell whether the slot is live. Secrets come from a
//! counter (the thread's number and its own count) hashed with SipHash
//! under keys drawn once per process from the standard library's random
//! source (`RandomState`).
//!
//! Each table also has an id, unique in the process, that its handles
//! carry ([`MemHandle::table`]): a handle of another table (another memory
//! domain) is refused, even if a registration with the same slot and
//! generation is live here.
//!
//! The table is split into shards, each a slab under its own `RwLock`; a
//! registration's index says its shard (the low bits) and its slot there.
//! Each thread registers into one shard (threads take them in turn), so
//! threads that register, pack keys and copy at once (the workers of one
//! context, each driven by its own thread) mostly take different locks.
//! Operations hold a registration's shard lock for reading while they
//! copy ([`RegTable::with_range`]), registration and deregistration take
//! it for writing: deregistration therefore waits for copies in progress,
//! and no copy starts on a range after its deregistration returned. The
//! lock is taken once per operation, not per byte or per iov entry.

use crate::ucs::AccessDenied;
use crate::{Access, Error, MemHandle, Result};
use parking_lot::RwLock;
use std::cell::Cell;
use std::collections::hash_map::RandomState;
use std::hash::{BuildHasher, Hasher};
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::OnceLock;

/// A fresh random secret: a process-wide unique input (this thread's
/// number and its own count, so that threads share no counter) hashed with
/// SipHash under random keys fixed for the life of the process. Distinct
/// inputs give unrelated outputs, so seeing some secrets tells nothing of
/// the others.
fn new_secret() -> u64 {
    static KEYS: OnceLock<RandomState> = OnceLock::new();
    /// Threads numbered so far; `u64::MAX` numbers the fallback below.
    static THREADS: AtomicU64 = AtomicU64::new(0);
    /// The count of threads whose own one is gone (exiting).
    static EXITING: AtomicU64 = AtomicU64::new(0);
    thread_local! {
        static MINE: Cell<Option<(u64, u64)>> = const { Cell::new(None) };
    }
    let (thread, count) = MINE
        .try_with(|m| {
            let (t, n) = m
                .get()
                .unwrap_or_else(|| (THREADS.fetch_add(1, Ordering::Relaxed), 0));
            m.set(Some((t, n + 1)));
            (t, n)
        })
        .unwrap_or_else(|_| (u64::MAX, EXITING.fetch_add(1, Ordering::Relaxed)));
    let mut h = KEYS.get_or_init(RandomState::new).build_hasher();
    h.write_u64(thread);
    h.write_u64(count);
    h.finish()
}

/// Shards of a table (a power of two).
const SHARDS: u32 = 8;

/// The shard this thread registers into: threads take them in turn.
fn home_shard() -> u32 {
    static NEXT: AtomicU32 = AtomicU32::new(0);
    thread_local! {
        static HOME: Cell<Option<u32>> = const { Cell::new(None) };
    }
    HOME.try_with(|h| {
        let home = h
            .get()
            .unwrap_or_else(|| NEXT.fetch_add(1, Ordering::Relaxed) % SHARDS);
        h.set(Some(home));
        home
    })
    .unwrap_or(0)
}

/// A table id not given to any other table of the process (never 0).
fn new_table_id() -> u64 {
    static NEXT: AtomicU64 = AtomicU64::new(1);
    NEXT.fetch_add(1, Ordering::Relaxed)
}

/// The registered pointer, kept with its provenance.
#[derive(Debug, Clone, Copy)]
struct RegPtr(*mut u8);

// SAFETY: the pointer is only an address here; it is dereferenced only by
// `put_zcopy`/`get_zcopy`, under its shard's lock, within the registered
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
    /// What keys must carry to name it.
    secret: u64,
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
/// (slot, generation and secret) and the range and rights declared when
/// packing. Operations check the live registration, not the declared
/// fields.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KeyFields {
    /// Slot of the registration in the table.
    pub index: u32,
    /// Generation of that slot when the registration was made.
    pub generation: u32,
    /// The registration's random secret: a key naming the slot and
    /// generation with another secret names nothing.
    pub secret: u64,
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
    /// Process-unique id stamped into handles; 0 until first needed (so
    /// that `new` can be `const`).
    id: AtomicU64,
    /// Slabs of registrations; index `i` of the table is slot
    /// `i / SHARDS` of shard `i % SHARDS`.
    shards: [RwLock<Table>; SHARDS as usize],
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
            id: AtomicU64::new(0),
            shards: [const { parking_lot::const_rwlock(Table::new()) }; SHARDS as usize],
        }
    }

    /// This table's id, in [`MemHandle::table`] of its handles: unique in
    /// the process, never 0.
    pub fn id(&self) -> u64 {
        let id = self.id.load(Ordering::Relaxed);
        if id != 0 {
            return id;
        }
        let fresh = new_table_id();
        match self
            .id
            .compare_exchange(0, fresh, Ordering::Relaxed, Ordering::Relaxed)
        {
            Ok(_) => fresh,
            Err(set) => set,
        }
    }

    /// The shard of table-wide index `index`, and the slot there.
    fn locate(&self, index: u32) -> (&RwLock<Table>, u32) {
        (&self.shards[(index % SHARDS) as usize], index / SHARDS)
    }

    /// The slot and generation of `memh`, if this table issued it.
    fn own(&self, memh: &MemHandle) -> Result<(u32, u32)> {
        if memh.table != self.id() {
            return Err(Error::InvalidParam(format!(
                "{}: handle of another memory domain",
                self.owner
            )));
        }
        Ok(split_id(memh.id))
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
            secret: new_secret(),
        };
        let table = self.id();
        let shard = home_shard();
        let mut t = self.shards[shard as usize].write();
        let (slot, generation) = t.insert(entry)?;
        let Some(index) = slot.checked_mul(SHARDS).and_then(|i| i.checked_add(shard)) else {
            t.remove(slot, generation);
            return Err(Error::NoMemory("registration table full".into()));
        };
        drop(t);
        Ok(MemHandle {
            addr: ptr.addr(),
            len,
            access,
            id: handle_id(index, generation),
            table,
        })
    }

    /// Ends the registration of `memh`, after any copy in progress on it.
    /// `InvalidParam` if it is not live (never registered here, already
    /// deregistered, a handle of another table, or a handle whose fields
    /// were changed).
    pub fn deregister(&self, memh: &MemHandle) -> Result<()> {
        let (index, generation) = self.own(memh)?;
        let (shard, slot) = self.locate(index);
        let mut t = shard.write();
        match t.live(slot, generation) {
            Some(e) if matches(e, memh) => {
                t.remove(slot, generation);
                Ok(())
            }
            _ => Err(not_live(self.owner)),
        }
    }

    /// The fields to pack for the live registration `memh`, secret
    /// included. `InvalidParam` as for [`RegTable::deregister`].
    pub fn key_fields(&self, memh: &MemHandle) -> Result<KeyFields> {
        let (index, generation) = self.own(memh)?;
        let (shard, slot) = self.locate(index);
        let t = shard.read();
        match t.live(slot, generation) {
            Some(e) if matches(e, memh) => Ok(KeyFields {
                index,
                generation,
                secret: e.secret,
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
    /// Without calling `op`: `InvalidParam` if the registration is gone or
    /// the key's secret is not its own (the same error: a guessed key does
    /// not learn whether the slot is live); `RemoteAccess` if the range is
    /// outside it (or wraps) or a right is missing.
    pub fn with_range<R>(
        &self,
        key: &KeyFields,
        remote_addr: u64,
        len: usize,
        need: Access,
        op: impl FnOnce(*mut u8) -> R,
    ) -> Result<R> {
        let (shard, slot) = self.locate(key.index);
        let t = shard.read();
        let e = t
            .live(slot, key.generation)
            .filter(|e| e.secret == key.secret)
            .ok_or_else(|| {
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
            return Err(Error::remote_access(
                self.owner.to_string(),
                AccessDenied::OutOfRange {
                    addr: remote_addr,
                    len,
                    reg_addr: start,
                    reg_len: e.len,
                },
            ));
        };
        if !e.access.contains(need) {
            return Err(Error::remote_access(
                self.owner.to_string(),
                AccessDenied::Rights {
                    granted: format!("{:?}", e.access),
                    needed: format!("{need:?}"),
                },
            ));
        }
        // `off <= e.len`, so it fits in usize and stays within the registered
        // range; `wrapping_add` keeps the registered pointer's provenance.
        Ok(op(e.ptr.0.wrapping_add(off as usize)))
    }
}

#[cfg(test)]
mod tests;
