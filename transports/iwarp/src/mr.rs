//! Protection domains and the memory-region table of a device.
//!
//! A steering tag (STag) is `index << 8 | key`. A slot has a 14-bit
//! generation that grows every time the slot is reused: the key byte is
//! its upper 8 bits, and the 24-bit index is `(generation & 0x3f) << 18 |
//! (slot + 1)` through the device's keyed permutation (`stag.rs`), so that
//! neither other regions' STags nor earlier STags of the same slot tell a
//! peer the next one. The index finds the slot, the generation must match,
//! so a stale STag finds nothing. STags are never 0, and no index is 0. The lkey and the rkey of a
//! region are the same STag.
//!
//! [`LOCAL_LKEY`] (slot bits 0) names any memory of this process, as a
//! local scatter/gather entry only: a peer can never use it.
//!
//! The table sits behind the device's lock; the engine holds the read lock
//! while it touches registered memory for a peer, so a deregistration
//! (write lock) waits for such an access and refuses every later one.

use crate::stag::Scramble;
use rucx_rdma::{Access, PdId, Sge};

/// The key valid for any local memory (never accepted from a peer).
pub(crate) const LOCAL_LKEY: u32 = 0xff;

/// Bits of the slot number in an index.
const SLOT_BITS: u32 = 18;
/// Largest slot count (slot numbers are stored plus one).
const MAX_SLOTS: usize = (1 << SLOT_BITS) - 1;
/// Generations of a slot before they repeat.
const GEN_MASK: u16 = 0x3fff;

/// A registration.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct MrEntry {
    pub(crate) addr: u64,
    pub(crate) len: u64,
    pub(crate) access: Access,
    pub(crate) pd: PdId,
    /// False once a peer's SEND with Invalidate named it.
    pub(crate) valid: bool,
}

impl MrEntry {
    /// Whether `[to, to + len)` lies inside the region (no overflow).
    pub(crate) fn contains(&self, to: u64, len: u64) -> bool {
        let Some(end) = to.checked_add(len) else {
            return false;
        };
        to >= self.addr && end <= self.addr + self.len
    }
}

/// Why a peer's access to a region is refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum RemoteRefusal {
    /// No such STag, stale or invalidated.
    InvalidStag,
    /// The region belongs to another protection domain.
    NotAssociated,
    /// The region does not grant the access.
    AccessRights,
    /// The range is not inside the region.
    Bounds,
}

#[derive(Debug)]
struct Slot {
    gen: u16,
    entry: Option<MrEntry>,
}

#[derive(Debug, Default)]
struct PdSlot {
    alive: bool,
    regions: u32,
    qps: u32,
}

/// PDs and MRs of a device.
#[derive(Debug, Default)]
pub(crate) struct Tables {
    slots: Vec<Slot>,
    free: Vec<u32>,
    pds: Vec<PdSlot>,
    scramble: Scramble,
}

impl Tables {
    /// The slot and generation an STag names (not checked against the
    /// table).
    fn slot_of(&self, stag: u32) -> Option<(usize, u16)> {
        let index = stag >> 8;
        if index == 0 {
            return None;
        }
        let combo = self.scramble.decode(index);
        let slot = (combo & ((1 << SLOT_BITS) - 1)).checked_sub(1)?;
        let gen = ((stag & 0xff) << 6) as u16 | (combo >> SLOT_BITS) as u16;
        Some((slot as usize, gen))
    }

    /// The STag of slot `idx` in generation `gen`; `None` when its index
    /// would be 0.
    fn stag_of(&self, idx: usize, gen: u16) -> Option<u32> {
        let combo = (u32::from(gen & 0x3f) << SLOT_BITS) | (idx as u32 + 1);
        let index = self.scramble.encode(combo);
        (index != 0).then_some((index << 8) | u32::from(gen >> 6))
    }

    pub(crate) fn alloc_pd(&mut self) -> PdId {
        if let Some(i) = self.pds.iter().position(|p| !p.alive) {
            self.pds[i] = PdSlot {
                alive: true,
                ..PdSlot::default()
            };
            return PdId(i as u32);
        }
        self.pds.push(PdSlot {
            alive: true,
            ..PdSlot::default()
        });
        PdId(self.pds.len() as u32 - 1)
    }

    fn pd_mut(&mut self, pd: PdId) -> Option<&mut PdSlot> {
        self.pds.get_mut(pd.0 as usize).filter(|p| p.alive)
    }

    /// Frees a PD; `Err` with the reason when it is unknown or in use.
    pub(crate) fn dealloc_pd(&mut self, pd: PdId) -> Result<(), &'static str> {
        let p = self.pd_mut(pd).ok_or("unknown protection domain")?;
        if p.regions > 0 || p.qps > 0 {
            return Err("protection domain still has regions or queue pairs");
        }
        p.alive = false;
        Ok(())
    }

    /// Counts a queue pair in (`true`) or out of `pd`; false if unknown.
    pub(crate) fn pd_use(&mut self, pd: PdId, qp_added: bool) -> bool {
        match self.pd_mut(pd) {
            Some(p) if qp_added => {
                p.qps += 1;
                true
            }
            Some(p) => {
                p.qps = p.qps.saturating_sub(1);
                true
            }
            None => false,
        }
    }

    /// Registers a region; returns its STag.
    pub(crate) fn insert(
        &mut self,
        pd: PdId,
        addr: u64,
        len: u64,
        access: Access,
    ) -> Result<u32, &'static str> {
        let p = self.pd_mut(pd).ok_or("unknown protection domain")?;
        p.regions += 1;
        let entry = MrEntry {
            addr,
            len,
            access,
            pd,
            valid: true,
        };
        let idx = match self.free.pop() {
            Some(i) => {
                let i = i as usize;
                let mut gen = self.slots[i].gen;
                // Skip the one generation whose index would be 0.
                loop {
                    gen = gen.wrapping_add(1) & GEN_MASK;
                    if self.stag_of(i, gen).is_some() {
                        break;
                    }
                }
                let s = &mut self.slots[i];
                s.gen = gen;
                s.entry = Some(entry);
                i
            }
            None if self.slots.len() < MAX_SLOTS => {
                let i = self.slots.len();
                let gen = u16::from(self.stag_of(i, 0).is_none());
                self.slots.push(Slot {
                    gen,
                    entry: Some(entry),
                });
                i
            }
            None => {
                if let Some(p) = self.pd_mut(pd) {
                    p.regions -= 1;
                }
                return Err("memory region table full");
            }
        };
        let gen = self.slots[idx].gen;
        self.stag_of(idx, gen).ok_or("memory region table full")
    }

    fn slot(&self, stag: u32) -> Option<&Slot> {
        let (idx, gen) = self.slot_of(stag)?;
        let s = self.slots.get(idx)?;
        (s.gen == gen && s.entry.is_some()).then_some(s)
    }

    /// Ends a registration (valid or invalidated).
    pub(crate) fn remove(&mut self, stag: u32) -> Result<(), &'static str> {
        self.slot(stag).ok_or("unknown or stale memory key")?;
        let idx = self.slot_of(stag).map_or(0, |(i, _)| i);
        let entry = self.slots[idx].entry.take();
        self.free.push(idx as u32);
        if let Some(p) = entry.and_then(|e| self.pd_mut(e.pd)) {
            p.regions = p.regions.saturating_sub(1);
        }
        Ok(())
    }

    /// The valid region named by `stag`.
    pub(crate) fn get(&self, stag: u32) -> Option<&MrEntry> {
        self.slot(stag)?.entry.as_ref().filter(|e| e.valid)
    }

    /// Checks a peer's access of `len` bytes at `to` through `stag` for a
    /// queue pair of `pd`. A zero-length access is not checked.
    pub(crate) fn check_remote(
        &self,
        stag: u32,
        pd: PdId,
        need: Access,
        to: u64,
        len: u64,
    ) -> Result<(), RemoteRefusal> {
        if len == 0 {
            return Ok(());
        }
        let e = self.get(stag).ok_or(RemoteRefusal::InvalidStag)?;
        if e.pd != pd {
            return Err(RemoteRefusal::NotAssociated);
        }
        if !e.access.contains(need) {
            return Err(RemoteRefusal::AccessRights);
        }
        if !e.contains(to, len) {
            return Err(RemoteRefusal::Bounds);
        }
        Ok(())
    }

    /// Checks a local scatter/gather entry of a queue pair of `pd`;
    /// `write` when the engine writes into it.
    pub(crate) fn check_local(&self, sge: &Sge, pd: PdId, write: bool) -> bool {
        if sge.lkey == LOCAL_LKEY {
            return true;
        }
        let Some(e) = self.get(sge.lkey) else {
            return false;
        };
        e.pd == pd
            && e.contains(sge.addr, u64::from(sge.len))
            && (!write || e.access.contains(Access::LOCAL_WRITE))
    }

    /// A peer's SEND with Invalidate: invalidates `stag` if it is a valid
    /// region of `pd`.
    pub(crate) fn invalidate(&mut self, stag: u32, pd: PdId) -> bool {
        let Some((idx, _)) = self.slot(stag).and(self.slot_of(stag)) else {
            return false;
        };
        match self.slots[idx].entry.as_mut() {
            Some(e) if e.valid && e.pd == pd => {
                e.valid = false;
                true
            }
            _ => false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stags_are_never_zero_and_stale_ones_fail() {
        let mut t = Tables::default();
        let pd = t.alloc_pd();
        let a = t.insert(pd, 0x1000, 100, Access::all()).unwrap();
        assert_ne!(a, 0);
        assert_ne!(a >> 8, 0);
        assert!(t.get(a).is_some());
        t.remove(a).unwrap();
        assert!(t.get(a).is_none());
        assert!(t.remove(a).is_err());
        let b = t.insert(pd, 0x1000, 100, Access::all()).unwrap();
        assert_ne!(a, b);
        assert!(t.get(a).is_none() && t.get(b).is_some());
        assert!(t.get(0).is_none() && t.get(LOCAL_LKEY).is_none() && t.get(u32::MAX).is_none());
    }

    #[test]
    fn remote_checks() {
        let mut t = Tables::default();
        let pd = t.alloc_pd();
        let other = t.alloc_pd();
        let s = t.insert(pd, 0x1000, 0x100, Access::REMOTE_READ).unwrap();
        let r = Access::REMOTE_READ;
        assert_eq!(t.check_remote(s, pd, r, 0x1000, 0x100), Ok(()));
        assert_eq!(
            t.check_remote(s, pd, r, 0x10ff, 2),
            Err(RemoteRefusal::Bounds)
        );
        assert_eq!(
            t.check_remote(s, pd, r, 0xfff, 1),
            Err(RemoteRefusal::Bounds)
        );
        assert_eq!(
            t.check_remote(s, pd, r, u64::MAX, 2),
            Err(RemoteRefusal::Bounds)
        );
        assert_eq!(
            t.check_remote(s, other, r, 0x1000, 1),
            Err(RemoteRefusal::NotAssociated)
        );
        assert_eq!(
            t.check_remote(s, pd, Access::REMOTE_WRITE, 0x1000, 1),
            Err(RemoteRefusal::AccessRights)
        );
        assert_eq!(
            t.check_remote(s + 1, pd, r, 0x1000, 1),
            Err(RemoteRefusal::InvalidStag)
        );
        assert_eq!(
            t.check_remote(LOCAL_LKEY, pd, r, 0x1000, 1),
            Err(RemoteRefusal::InvalidStag)
        );
        // Zero-length accesses are not checked.
        assert_eq!(t.check_remote(7, pd, r, 0, 0), Ok(()));
        assert!(!t.invalidate(s, other));
        assert!(t.invalidate(s, pd));
        assert!(!t.invalidate(s, pd));
        assert_eq!(
            t.check_remote(s, pd, r, 0x1000, 1),
            Err(RemoteRefusal::InvalidStag)
        );
        // An invalidated region still deregisters.
        t.remove(s).unwrap();
    }

    #[test]
    fn pds_in_use_stay() {
        let mut t = Tables::default();
        let pd = t.alloc_pd();
        let s = t.insert(pd, 0, 8, Access::LOCAL_WRITE).unwrap();
        assert!(t.dealloc_pd(pd).is_err());
        t.remove(s).unwrap();
        assert!(t.pd_use(pd, true));
        assert!(t.dealloc_pd(pd).is_err());
        assert!(t.pd_use(pd, false));
        t.dealloc_pd(pd).unwrap();
        assert!(t.dealloc_pd(pd).is_err());
        assert!(t.insert(pd, 0, 8, Access::LOCAL_WRITE).is_err());
    }

    #[test]
    fn local_checks() {
        let mut t = Tables::default();
        let pd = t.alloc_pd();
        let ro = t.insert(pd, 0x1000, 16, Access::REMOTE_READ).unwrap();
        let rw = t.insert(pd, 0x2000, 16, Access::LOCAL_WRITE).unwrap();
        let sge = |addr, len, lkey| Sge { addr, len, lkey };
        assert!(t.check_local(&sge(0x1000, 16, ro), pd, false));
        assert!(!t.check_local(&sge(0x1000, 16, ro), pd, true));
        assert!(t.check_local(&sge(0x2008, 8, rw), pd, true));
        assert!(!t.check_local(&sge(0x2008, 9, rw), pd, true));
        assert!(t.check_local(&sge(0x9999, 1 << 20, LOCAL_LKEY), pd, true));
        assert!(!t.check_local(&sge(0x1000, 1, 0), pd, false));
    }
}
