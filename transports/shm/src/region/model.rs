//! The region as loom objects: the same methods as the raw region, with
//! atomics loom tracks and payload cells whose accesses it checks for races.

use loom::cell::UnsafeCell;

use crate::layout::Geometry;
use crate::sync::AtomicU64;

pub(crate) struct Region {
    head: AtomicU64,
    tail: AtomicU64,
    ctl: Box<[AtomicU64]>,
    payload: Box<[UnsafeCell<Box<[u8]>>]>,
    desc: Box<[UnsafeCell<Box<[u8]>>]>,
}

impl Region {
    pub(crate) fn model(geom: Geometry) -> Self {
        Self {
            head: AtomicU64::new(0),
            tail: AtomicU64::new(0),
            ctl: (0..geom.capacity).map(|_| AtomicU64::new(0)).collect(),
            payload: (0..geom.capacity)
                .map(|_| UnsafeCell::new(vec![0u8; geom.max_inline()].into_boxed_slice()))
                .collect(),
            desc: (0..geom.capacity)
                .map(|_| UnsafeCell::new(vec![0u8; geom.desc_size].into_boxed_slice()))
                .collect(),
        }
    }

    pub(crate) fn head(&self) -> &AtomicU64 {
        &self.head
    }

    pub(crate) fn tail(&self) -> &AtomicU64 {
        &self.tail
    }

    pub(crate) fn ctl(&self, index: usize) -> &AtomicU64 {
        &self.ctl[index]
    }

    /// # Safety
    ///
    /// As the raw region's `write_payload`.
    pub(crate) unsafe fn write_payload(&self, index: usize, desc: bool, parts: &[&[u8]]) {
        let cells = if desc { &self.desc } else { &self.payload };
        cells[index].with_mut(|p| {
            // SAFETY: loom checks that no other access to this cell is
            // concurrent; that check is what the model is for.
            let buf = unsafe { &mut *p };
            let mut off = 0;
            for part in parts {
                buf[off..off + part.len()].copy_from_slice(part);
                off += part.len();
            }
        });
    }

    /// # Safety
    ///
    /// As the raw region's `write_short`.
    pub(crate) unsafe fn write_short(&self, index: usize, header: u64, payload: &[u8]) {
        // SAFETY: forwarded.
        unsafe { self.write_payload(index, false, &[&header.to_le_bytes(), payload]) }
    }

    /// # Safety
    ///
    /// As the raw region's `with_payload`.
    pub(crate) unsafe fn with_payload<R>(
        &self,
        index: usize,
        desc: bool,
        len: usize,
        f: impl FnOnce(&[u8]) -> R,
    ) -> R {
        let cells = if desc { &self.desc } else { &self.payload };
        cells[index].with(|p| {
            // SAFETY: loom checks that no write to this cell is concurrent.
            let buf = unsafe { &*p };
            f(&buf[..len])
        })
    }
}
