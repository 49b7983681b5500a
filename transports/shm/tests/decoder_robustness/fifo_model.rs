//! A model of a FIFO region's bytes: the layout and protocol documented in
//! `rucx_shm::fifo` (header, element control words, descriptors; claim,
//! publish, consume, release, arm, skip), applied to a plain copy of the
//! region. After every operation the real region must hold exactly the
//! model's bytes, and the operation must return what the model returns.
//!
//! The control word is the FIFO's wire format: the consumer decodes words
//! that another process wrote, so the model decodes them too, from the
//! documented bit layout, and predicts which are messages, padding or
//! corrupt.

#![allow(dead_code)]

/// Offset of the producers' claim counter.
pub(crate) const HEAD: usize = 0;
/// Offset of the consumer's released position.
pub(crate) const TAIL: usize = 64;
/// Offset of the magic number (u32).
pub(crate) const MAGIC_AT: usize = 72;
/// Offset of the element size, capacity and descriptor size (u32 each).
pub(crate) const GEOMETRY_AT: usize = 76;
/// Offset of element 0.
pub(crate) const ELEMS: usize = 128;
/// The magic number of an initialised region.
pub(crate) const MAGIC: u32 = 0x5246_4902;

/// Control word bits.
pub(crate) const OWNER: u64 = 1;
/// Payload inline in the element.
pub(crate) const INLINE: u64 = 2;
/// Payload in the element's descriptor.
pub(crate) const DESC: u64 = 4;
/// No message.
pub(crate) const PAD: u64 = 8;
const RESERVED: u64 = 0xf0;
/// `head` bit: the consumer is about to sleep.
pub(crate) const ARMED: u64 = 1 << 63;

/// What a poll finds, as the model decodes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Polled {
    /// Nothing ready.
    Empty,
    /// A message: am id, source, payload.
    Msg(u8, u16, Vec<u8>),
    /// A corrupt element at a position, with its control word.
    Corrupt(u64, u64),
}

/// A consumer's private state.
#[derive(Debug, Clone, Copy)]
pub(crate) struct ConsumerState {
    pub(crate) read: u64,
    pub(crate) released: u64,
}

/// The expected bytes of a region and the geometry they are read with.
#[derive(Debug, Clone)]
pub(crate) struct Region {
    pub(crate) bytes: Vec<u8>,
    pub(crate) elem: usize,
    pub(crate) cap: usize,
    pub(crate) desc: usize,
    pub(crate) release_every: u64,
}

impl Region {
    /// An initialised, empty region of `len` bytes.
    pub(crate) fn init(len: usize, elem: usize, cap: usize, desc: usize, release: usize) -> Self {
        let mut r = Region {
            bytes: vec![0; len],
            elem,
            cap,
            desc,
            release_every: release as u64,
        };
        r.set_u32(MAGIC_AT, MAGIC);
        r.set_u32(GEOMETRY_AT, elem as u32);
        r.set_u32(GEOMETRY_AT + 4, cap as u32);
        r.set_u32(GEOMETRY_AT + 8, desc as u32);
        r
    }

    pub(crate) fn u64_at(&self, at: usize) -> u64 {
        let mut b = [0u8; 8];
        b.copy_from_slice(&self.bytes[at..at + 8]);
        u64::from_ne_bytes(b)
    }

    pub(crate) fn set_u64(&mut self, at: usize, v: u64) {
        self.bytes[at..at + 8].copy_from_slice(&v.to_ne_bytes());
    }

    pub(crate) fn u32_at(&self, at: usize) -> u32 {
        let mut b = [0u8; 4];
        b.copy_from_slice(&self.bytes[at..at + 4]);
        u32::from_ne_bytes(b)
    }

    fn set_u32(&mut self, at: usize, v: u32) {
        self.bytes[at..at + 4].copy_from_slice(&v.to_ne_bytes());
    }

    pub(crate) fn max_inline(&self) -> usize {
        self.elem - 8
    }

    pub(crate) fn max_payload(&self) -> usize {
        self.max_inline().max(self.desc)
    }

    pub(crate) fn index(&self, pos: u64) -> usize {
        (pos % self.cap as u64) as usize
    }

    /// Owner bit of a word written for position `pos`: lap 0 writes 1.
    pub(crate) fn owner(&self, pos: u64) -> u64 {
        ((pos / self.cap as u64) & 1) ^ 1
    }

    /// Offset of the control word of element `index`.
    pub(crate) fn ctl_at(&self, index: usize) -> usize {
        ELEMS + index * self.elem
    }

    fn desc_off(&self) -> usize {
        (ELEMS + self.cap * self.elem).next_multiple_of(64)
    }

    fn payload_at(&self, index: usize, desc: bool) -> usize {
        if desc {
            self.desc_off() + index * self.desc
        } else {
            self.ctl_at(index) + 8
        }
    }

    /// Offsets of the bytes the protocol reads: `head`, `tail`, elements
    /// and descriptors (not the geometry header or the padding).
    pub(crate) fn is_protocol_byte(&self, at: usize) -> bool {
        at < 8 || (TAIL..TAIL + 8).contains(&at) || at >= ELEMS
    }

    /// What `attach_raw` must say: `Ok`, or the magic found, or the
    /// geometry found.
    pub(crate) fn attach(&self) -> Result<(), (u32, Option<[usize; 3]>)> {
        let magic = self.u32_at(MAGIC_AT);
        if magic != MAGIC {
            return Err((magic, None));
        }
        let g = [0, 4, 8].map(|o| self.u32_at(GEOMETRY_AT + o) as usize);
        if g != [self.elem, self.cap, self.desc] {
            return Err((magic, Some(g)));
        }
        Ok(())
    }

    /// A push by a producer whose cached `tail` is `*cached`: `None` if
    /// the FIFO is full, else whether the consumer must be woken.
    pub(crate) fn push(&mut self, cached: &mut u64, am: u8, src: u16, data: &[u8]) -> Option<bool> {
        let cap = self.cap as u64;
        let mut raw = self.u64_at(HEAD);
        if (raw & !ARMED).wrapping_sub(*cached) >= cap {
            *cached = self.u64_at(TAIL);
            raw = self.u64_at(HEAD);
            if (raw & !ARMED).wrapping_sub(*cached) >= cap {
                return None;
            }
        }
        let pos = raw & !ARMED;
        self.set_u64(HEAD, pos.wrapping_add(1) & !ARMED);
        let index = self.index(pos);
        let desc = data.len() > self.max_inline();
        let at = self.payload_at(index, desc);
        self.bytes[at..at + data.len()].copy_from_slice(data);
        let place = if desc { DESC } else { INLINE };
        let word = self.owner(pos)
            | place
            | u64::from(am) << 8
            | u64::from(src) << 16
            | (data.len() as u64) << 32;
        let ctl = self.ctl_at(index);
        self.set_u64(ctl, word);
        Some(raw & ARMED != 0)
    }

    /// `has_room` of a producer whose cached `tail` is `*cached`.
    pub(crate) fn has_room(&self, cached: &mut u64) -> bool {
        let cap = self.cap as u64;
        if (self.u64_at(HEAD) & !ARMED).wrapping_sub(*cached) < cap {
            return true;
        }
        *cached = self.u64_at(TAIL);
        (self.u64_at(HEAD) & !ARMED).wrapping_sub(*cached) < cap
    }

    /// A new consumer starts where `tail` says.
    pub(crate) fn new_consumer(&self) -> ConsumerState {
        let read = self.u64_at(TAIL);
        ConsumerState {
            read,
            released: read,
        }
    }

    /// A consumer going away releases what it read.
    pub(crate) fn drop_consumer(&mut self, c: ConsumerState) {
        if c.read != c.released {
            self.set_u64(TAIL, c.read);
        }
    }

    fn advance(&mut self, c: &mut ConsumerState) {
        c.read = c.read.wrapping_add(1);
        if c.read.wrapping_sub(c.released) >= self.release_every {
            self.set_u64(TAIL, c.read);
            c.released = c.read;
        }
    }

    /// Decodes the ready word `word`: `Some((am, src, len, place))`, or
    /// `None` if it is corrupt.
    fn decode(&self, word: u64) -> Option<(u8, u16, usize, u64)> {
        if word & RESERVED != 0 {
            return None;
        }
        let len = (word >> 32) as usize;
        let place = word & (INLINE | DESC | PAD);
        let limit = match place {
            INLINE => self.max_inline(),
            // No descriptors: a DESC word is corrupt.
            DESC if self.desc > 0 => self.desc,
            PAD => 0,
            _ => return None,
        };
        (len <= limit).then_some(((word >> 8) as u8, (word >> 16) as u16, len, place))
    }

    /// One poll.
    pub(crate) fn poll(&mut self, c: &mut ConsumerState) -> Polled {
        // Padding is skipped, but a word cannot be ready in two laps, so
        // one lap of elements ends the loop.
        for _ in 0..=self.cap {
            let pos = c.read;
            let index = self.index(pos);
            let word = self.u64_at(self.ctl_at(index));
            if word & OWNER != self.owner(pos) {
                return Polled::Empty;
            }
            let Some((am, src, len, place)) = self.decode(word) else {
                self.advance(c);
                return Polled::Corrupt(pos, word);
            };
            if place == PAD {
                self.advance(c);
                continue;
            }
            let at = self.payload_at(index, place == DESC);
            let data = self.bytes[at..at + len].to_vec();
            self.advance(c);
            return Polled::Msg(am, src, data);
        }
        panic!("model: a poll went round the whole FIFO");
    }

    /// `arm`: whether the consumer may sleep.
    pub(crate) fn arm(&mut self, c: &mut ConsumerState) -> bool {
        if c.read != c.released {
            self.set_u64(TAIL, c.read);
            c.released = c.read;
        }
        let raw = self.u64_at(HEAD);
        if raw & ARMED != 0 {
            return raw & !ARMED == c.read;
        }
        if raw == c.read {
            self.set_u64(HEAD, raw | ARMED);
            return true;
        }
        false
    }

    /// `is_stuck`.
    pub(crate) fn is_stuck(&self, c: &ConsumerState) -> bool {
        let word = self.u64_at(self.ctl_at(self.index(c.read)));
        let head = self.u64_at(HEAD) & !ARMED;
        word & OWNER != self.owner(c.read) && head.wrapping_sub(c.read) as i64 > 0
    }

    /// `skip_stuck`.
    pub(crate) fn skip_stuck(&mut self, c: &mut ConsumerState) -> bool {
        if !self.is_stuck(c) {
            return false;
        }
        let at = self.ctl_at(self.index(c.read));
        let word = self.owner(c.read) | PAD;
        self.set_u64(at, word);
        self.advance(c);
        true
    }
}
