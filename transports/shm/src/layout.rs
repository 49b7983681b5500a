//! Byte layout of a FIFO region and the element control word.
//!
//! ```text
//! offset 0    head: u64      producers' claim counter (CAS)          line 0
//! offset 8    (unused up to 64)
//! offset 64   tail: u64      consumer's released position            line 1
//! offset 72   magic: u32     FIFO_MAGIC once initialised
//! offset 76   elem_size: u32
//! offset 80   capacity: u32
//! offset 84   (unused up to 128)
//! offset 128  element[0] .. element[capacity - 1], elem_size bytes each
//!
//! element:  offset 0  ctl: u64   (see below)
//!           offset 8  payload: elem_size - 8 bytes
//!
//! ctl:  bit 0       OWNER  (lap parity, flips every lap)
//!       bit 1       INLINE (payload is inline; must be set)
//!       bits 2..8   reserved, zero
//!       bits 8..16  am id
//!       bits 16..32 reserved, zero
//!       bits 32..64 payload length
//! ```
//!
//! All fields are native-endian: the region is shared within one host only.

use crate::fifo::FifoError;

/// Cache line size the header is laid out for.
pub(crate) const CACHE_LINE: usize = 64;
/// Offset of the producers' `head` counter.
#[cfg_attr(all(loom, test), allow(dead_code))] // the loom region has no bytes
pub(crate) const HEAD_OFF: usize = 0;
/// Offset of the consumer's `tail` counter.
#[cfg_attr(all(loom, test), allow(dead_code))] // the loom region has no bytes
pub(crate) const TAIL_OFF: usize = CACHE_LINE;
/// Offset of the magic number.
#[cfg_attr(all(loom, test), allow(dead_code))] // the loom region has no bytes
pub(crate) const MAGIC_OFF: usize = CACHE_LINE + 8;
/// Offset of the element size.
#[cfg_attr(all(loom, test), allow(dead_code))] // the loom region has no bytes
pub(crate) const ELEM_SIZE_OFF: usize = CACHE_LINE + 12;
/// Offset of the capacity.
#[cfg_attr(all(loom, test), allow(dead_code))] // the loom region has no bytes
pub(crate) const CAPACITY_OFF: usize = CACHE_LINE + 16;
/// Size of the header; elements start here.
pub(crate) const HEADER_SIZE: usize = 2 * CACHE_LINE;
/// Size of the per-element control word.
pub(crate) const ELEM_HEADER_SIZE: usize = 8;
/// "rucxfifo" folded to 32 bits, version 1 in the low byte.
#[cfg_attr(all(loom, test), allow(dead_code))] // the loom region has no bytes
pub(crate) const FIFO_MAGIC: u32 = 0x5246_4901;

/// Smallest element size: the control word plus 8 payload bytes.
pub(crate) const MIN_ELEM_SIZE: usize = 16;
/// Largest element size (keeps lengths far below `u32::MAX`).
pub(crate) const MAX_ELEM_SIZE: usize = 1 << 16;
/// Smallest capacity.
pub(crate) const MIN_CAPACITY: usize = 2;
/// Largest capacity.
pub(crate) const MAX_CAPACITY: usize = 1 << 20;

pub(crate) const OWNER: u64 = 1 << 0;
pub(crate) const INLINE: u64 = 1 << 1;
const RESERVED: u64 = 0xffff_00fc;
const AM_SHIFT: u32 = 8;
const LEN_SHIFT: u32 = 32;

/// Validated geometry of a FIFO, copied to local memory at construction so
/// that nothing about the shape is ever re-read from the shared region.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Geometry {
    pub(crate) elem_size: usize,
    pub(crate) capacity: usize,
    /// `log2(capacity)`: bit of a position that gives the lap parity.
    pub(crate) lap_shift: u32,
    pub(crate) release_every: u64,
}

impl Geometry {
    pub(crate) fn new(
        elem_size: usize,
        capacity: usize,
        release_every: usize,
    ) -> Result<Self, FifoError> {
        if !elem_size.is_power_of_two() || !(MIN_ELEM_SIZE..=MAX_ELEM_SIZE).contains(&elem_size) {
            return Err(FifoError::BadElemSize { elem_size });
        }
        if !capacity.is_power_of_two() || !(MIN_CAPACITY..=MAX_CAPACITY).contains(&capacity) {
            return Err(FifoError::BadCapacity { capacity });
        }
        if release_every == 0 || release_every > capacity {
            return Err(FifoError::BadReleaseInterval {
                release_every,
                capacity,
            });
        }
        Ok(Self {
            elem_size,
            capacity,
            lap_shift: capacity.trailing_zeros(),
            release_every: release_every as u64,
        })
    }

    /// Bytes a region needs for this geometry (bounded by the limits above,
    /// so no overflow: at most 128 + 2^36).
    pub(crate) fn region_size(&self) -> usize {
        HEADER_SIZE + self.capacity * self.elem_size
    }

    pub(crate) fn max_payload(&self) -> usize {
        self.elem_size - ELEM_HEADER_SIZE
    }

    /// Slot index of a position.
    pub(crate) fn index(&self, pos: u64) -> usize {
        (pos & (self.capacity as u64 - 1)) as usize
    }

    /// Owner bit an element carries once written for position `pos`. Lap 0
    /// uses 1, so a zeroed region holds no ready element.
    pub(crate) fn owner(&self, pos: u64) -> u64 {
        ((pos >> self.lap_shift) & 1) ^ 1
    }
}

/// Builds a published control word.
pub(crate) fn encode(owner: u64, am_id: u8, len: usize) -> u64 {
    owner | INLINE | (u64::from(am_id) << AM_SHIFT) | ((len as u64) << LEN_SHIFT)
}

/// A control word decoded and checked against the geometry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Ctl {
    pub(crate) am_id: u8,
    pub(crate) len: usize,
}

/// Checks a ready control word read from shared memory. `None` means the
/// element is corrupt (unknown flags or a length beyond the element).
pub(crate) fn decode(word: u64, geom: &Geometry) -> Option<Ctl> {
    if word & INLINE == 0 || word & RESERVED != 0 {
        return None;
    }
    let len = (word >> LEN_SHIFT) as usize;
    if len > geom.max_payload() {
        return None;
    }
    Some(Ctl {
        am_id: (word >> AM_SHIFT) as u8,
        len,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn geometry_validation() {
        assert!(Geometry::new(128, 256, 128).is_ok());
        assert!(Geometry::new(16, 2, 1).is_ok());
        assert!(Geometry::new(MAX_ELEM_SIZE, MAX_CAPACITY, 1).is_ok());
        for bad in [0, 8, 100, 129, MAX_ELEM_SIZE * 2] {
            assert_eq!(
                Geometry::new(bad, 256, 1),
                Err(FifoError::BadElemSize { elem_size: bad })
            );
        }
        for bad in [0, 1, 3, 255, MAX_CAPACITY * 2] {
            assert_eq!(
                Geometry::new(128, bad, 1),
                Err(FifoError::BadCapacity { capacity: bad })
            );
        }
        for bad in [0, 257] {
            assert!(matches!(
                Geometry::new(128, 256, bad),
                Err(FifoError::BadReleaseInterval { .. })
            ));
        }
    }

    #[test]
    fn owner_flips_per_lap() {
        let g = Geometry::new(64, 4, 2).unwrap();
        let owners: Vec<u64> = (0..12).map(|p| g.owner(p)).collect();
        assert_eq!(owners, [1, 1, 1, 1, 0, 0, 0, 0, 1, 1, 1, 1]);
        assert_eq!(g.index(5), 1);
        assert_eq!(g.region_size(), 128 + 4 * 64);
    }

    #[test]
    fn control_word_round_trip_and_rejection() {
        let g = Geometry::new(64, 4, 2).unwrap();
        let w = encode(1, 0xab, 56);
        assert_eq!(w & OWNER, 1);
        assert_eq!(
            decode(w, &g),
            Some(Ctl {
                am_id: 0xab,
                len: 56
            })
        );
        // One byte beyond the element.
        assert_eq!(decode(encode(1, 1, 57), &g), None);
        // Huge length, missing INLINE flag, reserved bits.
        assert_eq!(decode(u64::MAX, &g), None);
        assert_eq!(decode(encode(1, 1, 8) & !INLINE, &g), None);
        assert_eq!(decode(encode(0, 1, 8) | 1 << 20, &g), None);
    }
}
