//! A peer that scribbles over a FIFO region while this process produces
//! into it and consumes from it.
//!
//! The region lives in a buffer of the harness's own, between two guard
//! zones. A case is a script of operations: pushes by several producers
//! (some on handles attached with `Fifo::attach_raw`), polls, arming,
//! skipping, consumers dropped and re-created, and writes of arbitrary
//! bytes anywhere in the region (the header, `head` and `tail`, control
//! words, payloads, descriptors), never outside it. The checks:
//!
//! * no panic, no hang: every operation is one call, and the script and
//!   the final drain are bounded;
//! * every message the handler sees has at most `max_payload` bytes, and
//!   every error is the one [`FifoError`] the operation may report
//!   (`PayloadTooLong` from a push, `Corrupt` from a poll, `BadMagic` or
//!   `GeometryMismatch` from an attach, `ConsumerTaken`);
//! * the region model (`fifo_model.rs`) predicts each result and the
//!   region's bytes after each operation exactly, scribbles or not, and
//!   the guard zones stay untouched;
//! * as long as no scribble has changed a byte the protocol reads, the
//!   FIFO is a queue: every message pushed comes out intact and in order.
//!
//! Shared by the `decoder_robustness` test and the `shm_fifo_region` fuzz
//! target, so it uses the public API only.

#![allow(dead_code)]

use std::collections::VecDeque;
use std::ptr::NonNull;
use std::sync::Arc;

use rucx_shm::{AlignedBlock, Consumer, Fifo, FifoConfig, FifoError, Producer, Push};

#[path = "fifo_model.rs"]
pub(crate) mod fifo_model;

use fifo_model::{ConsumerState, Polled, Region, ARMED, HEAD, MAGIC_AT, TAIL};

/// The shapes a case may pick: descriptors of several sizes or none, one
/// to all elements per release.
pub(crate) const SHAPES: [FifoConfig; 4] = [
    FifoConfig {
        elem_size: 64,
        capacity: 8,
        release_every: 4,
        desc_size: 256,
    },
    FifoConfig {
        elem_size: 16,
        capacity: 2,
        release_every: 1,
        desc_size: 0,
    },
    FifoConfig {
        elem_size: 32,
        capacity: 4,
        release_every: 4,
        desc_size: 64,
    },
    FifoConfig {
        elem_size: 64,
        capacity: 16,
        release_every: 3,
        desc_size: 128,
    },
];

/// Most producers and attached handles a case creates.
const MAX_PRODUCERS: usize = 6;
const MAX_HANDLES: usize = 3;
/// Bytes of each guard zone around the region.
const GUARD: usize = 64;
const GUARD_BEFORE: u8 = 0xa5;
const GUARD_AFTER: u8 = 0x5a;

/// A word of the region a scribble may aim at.
#[derive(Debug, Clone, Copy)]
pub(crate) enum WordAt {
    Head,
    Tail,
    /// The control word of element `i % capacity`.
    Ctl(u8),
    /// The magic and element size (`false`), or capacity and descriptor
    /// size (`true`).
    Header(bool),
}

/// The new value of such a word.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Value {
    Set(u64),
    /// Wrapping add of a signed value.
    Add(i16),
    Xor(u64),
    /// A control word built from its fields: flags (owner, place,
    /// reserved bits), am id, source, length.
    Ctl(u8, u8, u16, u32),
}

/// One step of a case.
#[derive(Debug, Clone)]
pub(crate) enum Op {
    /// A push by producer `producer` (modulo the number of producers) of
    /// `len` bytes (modulo `max_payload + 2`, so one too long is
    /// possible), in two parts split at `split`.
    Push {
        producer: u8,
        am: u8,
        src: u16,
        len: u16,
        split: u8,
    },
    Poll,
    /// Bytes written at `at` (modulo the region's length), cut at its end.
    Scribble {
        at: u32,
        bytes: Vec<u8>,
    },
    Word {
        at: WordAt,
        value: Value,
    },
    /// A new consumer, after dropping the current one or (refused) beside it.
    NewConsumer {
        drop_first: bool,
    },
    Arm,
    SkipStuck,
    /// A new handle from `attach_raw` and a producer on it.
    Attach,
    NewProducer,
    HasRoom(u8),
}

/// What a case did, to show that the checks were not vacuous.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Stats {
    pub(crate) delivered: usize,
    pub(crate) corrupt: usize,
    pub(crate) full: usize,
    pub(crate) too_long: usize,
    pub(crate) attached: usize,
    pub(crate) attach_refused: usize,
    pub(crate) skipped: usize,
    /// No scribble changed a byte the protocol reads.
    pub(crate) clean: bool,
}

/// The harness's buffer: a guard zone, the region, a guard zone. Accessed
/// only through raw pointers, like the memory of another process.
#[derive(Debug)]
struct Buffer {
    blocks: NonNull<[AlignedBlock]>,
    len: usize,
}

impl Buffer {
    fn new(len: usize) -> Buffer {
        let mut b = AlignedBlock::zeroed_buffer(GUARD + len + GUARD);
        let n = b.len();
        for (i, block) in b.iter_mut().enumerate() {
            if i < GUARD / 64 {
                block.0.fill(GUARD_BEFORE);
            } else if i >= n - GUARD / 64 {
                block.0.fill(GUARD_AFTER);
            }
        }
        Buffer {
            blocks: NonNull::from(Box::leak(b)),
            len,
        }
    }

    fn base(&self) -> *mut u8 {
        self.blocks.as_ptr().cast()
    }

    fn total(&self) -> usize {
        GUARD + self.len + GUARD
    }

    /// The region: 64-byte aligned, `len` bytes.
    fn region(&self) -> NonNull<u8> {
        // SAFETY: GUARD is less than the allocation's size, so the pointer
        // stays inside it (and is not null).
        unsafe { NonNull::new_unchecked(self.base().add(GUARD)) }
    }

    fn read_all(&self) -> Vec<u8> {
        let mut v = vec![0u8; self.total()];
        // SAFETY: the allocation is `total` bytes, and no reference into
        // it exists: the FIFOs hold raw pointers and create references to
        // it only inside their calls, which do not run now (one thread).
        unsafe { std::ptr::copy_nonoverlapping(self.base(), v.as_mut_ptr(), v.len()) };
        v
    }

    fn region_bytes(&self) -> Vec<u8> {
        self.read_all()[GUARD..GUARD + self.len].to_vec()
    }

    /// Writes `bytes` at offset `at` of the region (the caller keeps it
    /// inside).
    fn write(&self, at: usize, bytes: &[u8]) {
        assert!(
            at + bytes.len() <= self.len,
            "harness: write outside the region"
        );
        // SAFETY: inside the region (checked above); no reference into the
        // buffer is live, as in `read_all`.
        unsafe {
            std::ptr::copy_nonoverlapping(bytes.as_ptr(), self.base().add(GUARD + at), bytes.len());
        }
    }

    fn guards_intact(&self) -> bool {
        let all = self.read_all();
        all[..GUARD].iter().all(|&b| b == GUARD_BEFORE)
            && all[GUARD + self.len..].iter().all(|&b| b == GUARD_AFTER)
    }
}

impl Drop for Buffer {
    fn drop(&mut self) {
        // SAFETY: `blocks` came from `Box::leak` in `new` and is freed once,
        // here; the FIFOs using it were dropped before (they borrow the
        // buffer's owner in `run`).
        drop(unsafe { Box::from_raw(self.blocks.as_ptr()) });
    }
}

/// The payload of the `seq`th push: `len` bytes no other push repeats.
fn payload(seq: u32, len: usize) -> Vec<u8> {
    (0..len)
        .map(|i| (seq.wrapping_mul(31) as usize ^ i.wrapping_mul(7)) as u8)
        .collect()
}

/// The FIFO's handles and the model, side by side.
struct Harness<'b> {
    buf: &'b Buffer,
    cfg: FifoConfig,
    main: Arc<Fifo>,
    handles: Vec<Arc<Fifo>>,
    consumer: Option<Consumer<Arc<Fifo>>>,
    producers: Vec<Producer<Arc<Fifo>>>,
    model: Region,
    state: ConsumerState,
    /// Cached `tail` of each producer, as the model sees it.
    cached: Vec<u64>,
    /// Messages pushed and not yet taken (meaningful while clean).
    queue: VecDeque<(u8, u16, Vec<u8>)>,
    seq: u32,
    stats: Stats,
}

/// Runs one case on a FIFO of shape `SHAPES[shape % 4]`; panics with a
/// description of the first broken property.
pub(crate) fn run(shape: u8, ops: &[Op]) -> Stats {
    let cfg = SHAPES[usize::from(shape) % SHAPES.len()];
    let len = cfg.region_size().expect("a valid shape");
    let buf = Buffer::new(len);
    // SAFETY: the region is `len` bytes of `buf`, which outlives every
    // handle (they live in `h`, dropped at the end of this function, and
    // `buf` is declared first). Within this process the region is used
    // through FIFO handles and through `Buffer`'s raw-pointer reads and
    // writes, which stand for another process's and never overlap a call
    // into the FIFO (one thread, no reference kept); no one else uses it
    // during initialisation.
    let main = Arc::new(unsafe { Fifo::from_raw(buf.region(), len, cfg) }.expect("from_raw"));
    assert_eq!(main.max_payload(), cfg.max_payload().unwrap());
    let model = Region::init(
        len,
        cfg.elem_size,
        cfg.capacity,
        cfg.desc_size,
        cfg.release_every,
    );
    let mut h = Harness {
        buf: &buf,
        cfg,
        consumer: Some(Consumer::new(Arc::clone(&main)).expect("first consumer")),
        producers: vec![Producer::new(Arc::clone(&main))],
        main,
        handles: Vec::new(),
        state: model.new_consumer(),
        model,
        cached: vec![0],
        queue: VecDeque::new(),
        seq: 0,
        stats: Stats {
            clean: true,
            ..Stats::default()
        },
    };
    h.check_bytes("after from_raw");
    for (i, op) in ops.iter().enumerate() {
        h.step(op);
        h.check_bytes(&format!("after step {i} ({op:?})"));
    }
    h.finish();
    let stats = h.stats;
    drop(h);
    assert!(buf.guards_intact(), "bytes outside the region changed");
    stats
}

impl Harness<'_> {
    fn max_payload(&self) -> usize {
        self.model.max_payload()
    }

    fn check_bytes(&self, what: &str) {
        let got = self.buf.region_bytes();
        if got != self.model.bytes {
            let at = got
                .iter()
                .zip(&self.model.bytes)
                .position(|(a, b)| a != b)
                .unwrap_or(0);
            let word = at & !7;
            panic!(
                "{what}: region byte {at} is {:#04x}, the model says {:#04x} \
                 (word at {word}: {:#018x} vs {:#018x})",
                got[at],
                self.model.bytes[at],
                u64::from_ne_bytes(got[word..word + 8].try_into().unwrap()),
                self.model.u64_at(word),
            );
        }
        assert!(
            self.buf.guards_intact(),
            "{what}: bytes outside the region changed"
        );
        if let Some(c) = &self.consumer {
            assert_eq!(c.position(), self.state.read, "{what}: consumer position");
        }
    }

    /// Writes bytes as the scribbling peer; a change to a byte the protocol
    /// reads ends the queue model.
    fn scribble(&mut self, at: usize, bytes: &[u8]) {
        let old = &self.model.bytes[at..at + bytes.len()];
        let touched = old
            .iter()
            .zip(bytes)
            .enumerate()
            .any(|(i, (a, b))| a != b && self.model.is_protocol_byte(at + i));
        if touched {
            self.stats.clean = false;
        }
        self.model.bytes[at..at + bytes.len()].copy_from_slice(bytes);
        self.buf.write(at, bytes);
    }

    fn step(&mut self, op: &Op) {
        match *op {
            Op::Push {
                producer,
                am,
                src,
                len,
                split,
            } => self.push(usize::from(producer), am, src, usize::from(len), split),
            Op::Poll => self.poll(),
            Op::Scribble { at, ref bytes } => {
                let at = at as usize % self.model.bytes.len();
                let n = bytes.len().min(self.model.bytes.len() - at);
                self.scribble(at, &bytes[..n]);
            }
            Op::Word { at, value } => {
                let at = match at {
                    WordAt::Head => HEAD,
                    WordAt::Tail => TAIL,
                    WordAt::Ctl(i) => self.model.ctl_at(usize::from(i) % self.cfg.capacity),
                    WordAt::Header(second) => MAGIC_AT + if second { 8 } else { 0 },
                };
                let old = self.model.u64_at(at);
                let new = match value {
                    Value::Set(v) => v,
                    Value::Add(d) => old.wrapping_add(d as u64),
                    Value::Xor(x) => old ^ x,
                    Value::Ctl(flags, am, src, len) => {
                        u64::from(flags)
                            | u64::from(am) << 8
                            | u64::from(src) << 16
                            | u64::from(len) << 32
                    }
                };
                self.scribble(at, &new.to_ne_bytes());
            }
            Op::NewConsumer { drop_first } => self.new_consumer(drop_first),
            Op::Arm => {
                let c = self.consumer.as_mut().expect("a consumer");
                assert_eq!(c.arm(), self.model.arm(&mut self.state), "arm");
            }
            Op::SkipStuck => {
                let c = self.consumer.as_mut().expect("a consumer");
                assert_eq!(c.is_stuck(), self.model.is_stuck(&self.state), "is_stuck");
                let skipped = c.skip_stuck();
                assert_eq!(
                    skipped,
                    self.model.skip_stuck(&mut self.state),
                    "skip_stuck"
                );
                if skipped {
                    assert!(!self.stats.clean, "a hole without a dead producer");
                    self.stats.skipped += 1;
                }
            }
            Op::Attach => self.attach(),
            Op::NewProducer => {
                if self.producers.len() < MAX_PRODUCERS {
                    self.producers.push(Producer::new(Arc::clone(&self.main)));
                    self.cached.push(0);
                }
            }
            Op::HasRoom(p) => {
                let p = usize::from(p) % self.producers.len();
                let want = self.model.has_room(&mut self.cached[p]);
                assert_eq!(self.producers[p].has_room(), want, "has_room");
                let head = self.model.u64_at(HEAD) & !ARMED;
                assert_eq!(self.main.claimed(), head, "claimed");
            }
        }
    }

    fn push(&mut self, p: usize, am: u8, src: u16, len: usize, split: u8) {
        let p = p % self.producers.len();
        let max = self.max_payload();
        let len = len % (max + 2);
        self.seq = self.seq.wrapping_add(1);
        let data = payload(self.seq, len);
        let (a, b) = data.split_at(usize::from(split) % (len + 1));
        let got = self.producers[p].try_push_from(am, src, &[a, b]);
        if len > max {
            assert_eq!(got, Err(FifoError::PayloadTooLong { len, max }), "push");
            self.stats.too_long += 1;
            return;
        }
        let want = self.model.push(&mut self.cached[p], am, src, &data);
        match (got, want) {
            (Ok(Push::Full), None) => {
                self.stats.full += 1;
                if self.stats.clean {
                    let waiting = self.queue.len() as u64;
                    assert!(
                        waiting + self.model.release_every > self.cfg.capacity as u64,
                        "full with {waiting} messages waiting"
                    );
                }
            }
            (Ok(Push::Sent { wake }), Some(w)) if wake == w => {
                if self.stats.clean {
                    self.queue.push_back((am, src, data));
                    assert!(self.queue.len() <= self.cfg.capacity, "more than capacity");
                }
            }
            (got, want) => panic!("push of {len} bytes: got {got:?}, the model says {want:?}"),
        }
    }

    fn poll(&mut self) {
        let max = self.max_payload();
        let c = self.consumer.as_mut().expect("a consumer");
        let got = c.poll_msg(|m| {
            assert!(
                m.data.len() <= max,
                "a message of {} bytes, max {max}",
                m.data.len()
            );
            (m.am_id, m.src, m.data.to_vec())
        });
        let got = match got {
            Ok(None) => Polled::Empty,
            Ok(Some((am, src, data))) => Polled::Msg(am, src, data),
            Err(FifoError::Corrupt { position, word }) => Polled::Corrupt(position, word),
            Err(e) => panic!("poll: unexpected error {e:?}"),
        };
        let want = self.model.poll(&mut self.state);
        assert_eq!(got, want, "poll");
        match got {
            Polled::Msg(am, src, data) => {
                self.stats.delivered += 1;
                if self.stats.clean {
                    let next = self.queue.pop_front();
                    assert_eq!(
                        next.as_ref(),
                        Some(&(am, src, data)),
                        "delivered out of order or garbled"
                    );
                }
            }
            Polled::Empty => {
                if self.stats.clean {
                    assert!(self.queue.is_empty(), "messages waiting, none ready");
                }
            }
            Polled::Corrupt(..) => {
                assert!(!self.stats.clean, "a corrupt element in a clean FIFO");
                self.stats.corrupt += 1;
            }
        }
    }

    fn new_consumer(&mut self, drop_first: bool) {
        if drop_first {
            if let Some(c) = self.consumer.take() {
                drop(c);
                self.model.drop_consumer(self.state);
            }
        }
        match Consumer::new(Arc::clone(&self.main)) {
            Ok(c) => {
                assert!(self.consumer.is_none(), "a second consumer");
                self.consumer = Some(c);
                self.state = self.model.new_consumer();
            }
            Err(e) => {
                assert_eq!(e, FifoError::ConsumerTaken);
                assert!(self.consumer.is_some(), "refused without a consumer");
            }
        }
    }

    fn attach(&mut self) {
        if self.handles.len() >= MAX_HANDLES || self.producers.len() >= MAX_PRODUCERS {
            return;
        }
        let len = self.model.bytes.len();
        // SAFETY: as for `from_raw` in `run`: the region stays valid for
        // the handle's life (it lives in `self`, dropped before `buf`).
        let got = unsafe { Fifo::attach_raw(self.buf.region(), len, self.cfg) };
        let want = self.model.attach();
        match (got, want) {
            (Ok(fifo), Ok(())) => {
                let fifo = Arc::new(fifo);
                self.producers.push(Producer::new(Arc::clone(&fifo)));
                self.cached.push(0);
                self.handles.push(fifo);
                self.stats.attached += 1;
            }
            (Err(FifoError::BadMagic { found }), Err((magic, None))) if found == magic => {
                self.stats.attach_refused += 1;
            }
            (
                Err(FifoError::GeometryMismatch {
                    elem_size,
                    capacity,
                    desc_size,
                }),
                Err((_, Some(g))),
            ) if [elem_size, capacity, desc_size] == g => self.stats.attach_refused += 1,
            (got, want) => panic!("attach: got {got:?}, the model says {want:?}"),
        }
    }

    /// Polls, pushes and polls again, a bounded number of times each.
    fn finish(&mut self) {
        let cap = self.cfg.capacity;
        for round in 0..2 {
            for _ in 0..2 * cap + 2 {
                self.poll();
                self.check_bytes("after a final poll");
            }
            if round == 0 {
                for i in 0..=cap {
                    self.push(0, 1, i as u16, i * 5, 3);
                    self.check_bytes("after a final push");
                }
            }
        }
        if self.stats.clean {
            assert!(self.queue.is_empty(), "messages left after draining");
        }
    }
}
