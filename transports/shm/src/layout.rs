//! Byte layout of a FIFO region and the element control word.
//!
//! ```text
//! offset 0    head: u64      producers' claim counter (CAS); bit 63 is
//!                            ARMED: the consumer sleeps, the next claimer
//!                            must wake it                              line 0
//! offset 8    (unused up to 64)
//! offset 64   tail: u64      consumer's released position            line 1
//! offset 72   magic: u32     FIFO_MAGIC once initialised
//! offset 76   elem_size: u32
//! offset 80   capacity: u32
//! offset 84   desc_size: u32 bytes of each element's descriptor (0: none)
//! offset 88   (unused up to 128)
//! offset 128  element[0] .. element[capacity - 1], elem_size bytes each
//! then, 64-aligned: descriptor[0] .. descriptor[capacity - 1], desc_size
//!             bytes each; descriptor i belongs to element i
//!
//! element:  offset 0  ctl: u64   (see below)
//!           offset 8  payload: elem_size - 8 bytes
//!
//! ctl:  bit 0       OWNER  (lap parity, flips every lap)
//!       bit 1       INLINE (payload is in the element)
//!       bit 2       DESC   (payload is in the element's descriptor)
//!       bit 3       PAD    (no message: the consumer skipped a position
//!                           whose producer died; only the consumer writes it)
//!       bits 4..8   reserved, zero
//!       bits 8..16  am id
//!       bits 16..32 source id (the producer's, opaque to the FIFO)
//!       bits 32..64 payload length
//! ```
//!
//! Exactly one of INLINE, DESC and PAD is set in a ready word. All fields
//! are native-endian: the region is shared within one host only.

use crate::error::FifoError;

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
/// Offset of the descriptor size.
#[cfg_attr(all(loom, test), allow(dead_code))] // the loom region has no bytes
pub(crate) const DESC_SIZE_OFF: usize = CACHE_LINE + 20;
/// Size of the header; elements start here.
pub(crate) const HEADER_SIZE: usize = 2 * CACHE_LINE;
/// Size of the per-element control word.
pub(crate) const ELEM_HEADER_SIZE: usize = 8;
/// "rucxfifo" folded to 32 bits, layout version 2 in the low byte.
#[cfg_attr(all(loom, test), allow(dead_code))] // the loom region has no bytes
pub(crate) const FIFO_MAGIC: u32 = 0x5246_4902;

/// Smallest element size: the control word plus 8 payload bytes.
pub(crate) const MIN_ELEM_SIZE: usize = 16;
/// Largest element size (keeps lengths far below `u32::MAX`).
pub(crate) const MAX_ELEM_SIZE: usize = 1 << 16;
/// Smallest capacity.
pub(crate) const MIN_CAPACITY: usize = 2;
/// Largest capacity.
pub(crate) const MAX_CAPACITY: usize = 1 << 20;
/// Largest descriptor.
pub(crate) const MAX_DESC_SIZE: usize = 1 << 20;
/// Bit of `head` saying that the consumer is (about to be) asleep.
pub(crate) const ARMED: u64 = 1 << 63;

pub(crate) const OWNER: u64 = 1 << 0;
pub(crate) const INLINE: u64 = 1 << 1;
pub(crate) const DESC: u64 = 1 << 2;
pub(crate) const PAD: u64 = 1 << 3;
const RESERVED: u64 = 0xf0;
const AM_SHIFT: u32 = 8;
const SRC_SHIFT: u32 = 16;
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
    /// Bytes of each element's descriptor; 0 when there are none.
    pub(crate) desc_size: usize,
}

impl Geometry {
    pub(crate) fn new(
        elem_size: usize,
        capacity: usize,
        release_every: usize,
        desc_size: usize,
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
        if desc_size % CACHE_LINE != 0 || desc_size > MAX_DESC_SIZE {
            return Err(FifoError::BadDescSize { desc_size });
        }
        Ok(Self {
            elem_size,
            capacity,
            lap_shift: capacity.trailing_zeros(),
            release_every: release_every as u64,
            desc_size,
        })
    }

    /// Bytes a region needs for this geometry (bounded by the limits above,
    /// so no overflow: at most 192 + 2^36 + 2^40).
    pub(crate) fn region_size(&self) -> usize {
        self.desc_off() + self.capacity * self.desc_size
    }

    /// Offset of descriptor 0: after the elements, on a cache line.
    pub(crate) fn desc_off(&self) -> usize {
        (HEADER_SIZE + self.capacity * self.elem_size).next_multiple_of(CACHE_LINE)
    }

    /// Largest payload carried inline in an element.
    pub(crate) fn max_inline(&self) -> usize {
        self.elem_size - ELEM_HEADER_SIZE
    }

    /// Largest payload of any message: inline or in a descriptor.
    pub(crate) fn max_payload(&self) -> usize {
        self.max_inline().max(self.desc_size)
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

/// Builds a published control word; `place` is [`INLINE`] or [`DESC`].
pub(crate) fn encode(owner: u64, place: u64, am_id: u8, src: u16, len: usize) -> u64 {
    owner
        | place
        | (u64::from(am_id) << AM_SHIFT)
        | (u64::from(src) << SRC_SHIFT)
        | ((len as u64) << LEN_SHIFT)
}

/// A control word decoded and checked against the geometry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Ctl {
    pub(crate) am_id: u8,
    pub(crate) src: u16,
    pub(crate) len: usize,
    /// Payload in the descriptor, not inline.
    pub(crate) desc: bool,
    /// No message (a padding element).
    pub(crate) pad: bool,
}

/// Checks a ready control word read from shared memory. `None` means the
/// element is corrupt (unknown flags or a length beyond the element).
pub(crate) fn decode(word: u64, geom: &Geometry) -> Option<Ctl> {
    if word & RESERVED != 0 {
        return None;
    }
    let len = (word >> LEN_SHIFT) as usize;
    let limit = match word & (INLINE | DESC | PAD) {
        INLINE => geom.max_inline(),
        // A FIFO without descriptors has no DESC messages.
        DESC if geom.desc_size > 0 => geom.desc_size,
        PAD => 0,
        _ => return None,
    };
    if len > limit {
        return None;
    }
    Some(Ctl {
        am_id: (word >> AM_SHIFT) as u8,
        src: (word >> SRC_SHIFT) as u16,
        len,
        desc: word & DESC != 0,
        pad: word & PAD != 0,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn geometry_validation() {
        assert!(Geometry::new(128, 256, 128, 0).is_ok());
        assert!(Geometry::new(16, 2, 1, 64).is_ok());
        assert!(Geometry::new(MAX_ELEM_SIZE, MAX_CAPACITY, 1, MAX_DESC_SIZE).is_ok());
        for bad in [1, 63, 100, MAX_DESC_SIZE + 64] {
            assert_eq!(
                Geometry::new(128, 256, 1, bad),
                Err(FifoError::BadDescSize { desc_size: bad })
            );
        }
        for bad in [0, 8, 100, 129, MAX_ELEM_SIZE * 2] {
            assert_eq!(
                Geometry::new(bad, 256, 1, 0),
                Err(FifoError::BadElemSize { elem_size: bad })
            );
        }
        for bad in [0, 1, 3, 255, MAX_CAPACITY * 2] {
            assert_eq!(
                Geometry::new(128, bad, 1, 0),
                Err(FifoError::BadCapacity { capacity: bad })
            );
        }
        for bad in [0, 257] {
            assert!(matches!(
                Geometry::new(128, 256, bad, 0),
                Err(FifoError::BadReleaseInterval { .. })
            ));
        }
    }

    #[test]
    fn owner_flips_per_lap() {
        let g = Geometry::new(64, 4, 2, 0).unwrap();
        let owners: Vec<u64> = (0..12).map(|p| g.owner(p)).collect();
        assert_eq!(owners, [1, 1, 1, 1, 0, 0, 0, 0, 1, 1, 1, 1]);
        assert_eq!(g.index(5), 1);
        assert_eq!(g.region_size(), 128 + 4 * 64);
        let d = Geometry::new(16, 2, 1, 128).unwrap();
        assert_eq!(d.desc_off(), 192);
        assert_eq!(d.region_size(), 192 + 2 * 128);
        assert_eq!((d.max_inline(), d.max_payload()), (8, 128));
    }

    #[test]
    fn control_word_round_trip_and_rejection() {
        let g = Geometry::new(64, 4, 2, 128).unwrap();
        let w = encode(1, INLINE, 0xab, 0x1234, 56);
        assert_eq!(w & OWNER, 1);
        let ctl = |am_id, src, len, desc| Ctl {
            am_id,
            src,
            len,
            desc,
            pad: false,
        };
        assert_eq!(decode(w, &g), Some(ctl(0xab, 0x1234, 56, false)));
        assert_eq!(
            decode(encode(0, DESC, 3, 9, 128), &g),
            Some(ctl(3, 9, 128, true))
        );
        assert!(decode(encode(0, PAD, 0, 0, 0), &g).is_some_and(|c| c.pad));
        // One byte beyond the element or the descriptor.
        assert_eq!(decode(encode(1, INLINE, 1, 0, 57), &g), None);
        assert_eq!(decode(encode(1, DESC, 1, 0, 129), &g), None);
        assert_eq!(decode(encode(1, PAD, 1, 0, 1), &g), None);
        let no_desc = Geometry::new(64, 4, 2, 0).unwrap();
        assert_eq!(decode(encode(1, DESC, 1, 0, 0), &no_desc), None);
        // Huge length, no place flag, two place flags, reserved bits.
        assert_eq!(decode(u64::MAX, &g), None);
        assert_eq!(decode(encode(1, 0, 1, 0, 8), &g), None);
        assert_eq!(decode(encode(1, INLINE | DESC, 1, 0, 8), &g), None);
        assert_eq!(decode(encode(0, INLINE, 1, 0, 8) | 1 << 5, &g), None);
    }
}
