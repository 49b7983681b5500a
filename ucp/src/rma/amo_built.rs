//! Atomics a device lacks, built at the initiator from the device's own
//! 64-bit fetch-and-add and compare-and-swap, so that device memory only
//! ever sees device atomics (see `amo.rs`).
//!
//! * A 64-bit `add` (posted or fetching) the lane does not offer in that
//!   form is one fetch-and-add, its old value kept or dropped.
//! * A 32-bit `add` on the upper half of its 8-byte word (in the word's
//!   value: the half at offset 4 on a little-endian host) is one 64-bit
//!   fetch-and-add of the operand shifted there: a carry out of the upper
//!   half leaves the word, as it leaves a 32-bit word.
//! * Everything else (`and`, `or`, `xor`, `swap`, `cswap`, and `add` where
//!   the above do not apply, of either width and form) is a
//!   compare-and-swap loop on the naturally aligned 8-byte word that holds
//!   the operand's word: the first compare-and-swap guesses the word is 0
//!   (which reads it where the guess is wrong), each next one expects what
//!   the last one returned, until one succeeds. Where the operation would
//!   leave the value just read unchanged (a `cswap` whose comparison
//!   fails, an `and` with all ones) the read was the operation and the
//!   loop ends without writing. A 32-bit word's other half is written back
//!   as read, so other initiators' loops on it lose nothing.
//!
//! A 32-bit operation needs its 8-byte word to lie within the key's range
//! (the device refuses an access outside the registration);
//! [`Error::Unsupported`] otherwise.
//!
//! Each step is posted like a single device atomic (`Core::push_rma_amo`)
//! and its completion posts the next from the worker's command queue, so
//! a loop never blocks; the request completes after the last step, with
//! the old value of the operand's word at the step that took effect. A
//! failed step (a refusal, the endpoint's failure) ends the loop and fails
//! the request, after what the transport holds has completed.

use super::amo::{Amo, AmoPlan, DeviceLane};
use super::atomic::{AtomicOp, AtomicValue};
use crate::proto::command::Command;
use crate::proto::core::Core;
use crate::request::buf::ResultWord;
use crate::request::{Kind, Request};
use crate::ucs::slab::SlabId;
use crate::uct::{AtomicCaps, RemoteKey};
use crate::{Error, Result};

/// An atomic built from device steps, and where it stands.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Built {
    /// The atomic asked for.
    amo: Amo,
    /// The aligned 8-byte word holding the operand's word.
    word: u64,
    /// Bit position of the operand's word in the 8-byte word's value.
    shift: u32,
    /// One fetch-and-add, rather than a compare-and-swap loop.
    fadd: bool,
    /// What the next compare-and-swap expects the 8-byte word to hold.
    expect: u64,
}

/// A built atomic's state in its request: the lane, the steps, the
/// caller's result word, and the 8 bytes the device writes each step's old
/// value to (boxed with the rest, so they stay put while a step is with
/// the transport).
#[derive(Debug, Clone)]
pub(crate) struct BuiltState {
    pub(crate) lane: DeviceLane,
    pub(crate) built: Built,
    pub(crate) result: Option<ResultWord>,
    pub(crate) slot: [u8; 8],
}

/// The bit position of the 4-byte word at byte `offset` (0 or 4) of an
/// 8-byte word, in the 8-byte word's value.
fn shift_of(offset: u64) -> u32 {
    if cfg!(target_endian = "little") {
        (offset * 8) as u32
    } else {
        ((4 - offset) * 8) as u32
    }
}

impl Built {
    /// How to build `a` from a lane's operations `caps` on the word of
    /// key `key`; `None` if the lane lacks what it needs, an error if the
    /// 8-byte word of a 32-bit operand leaves the key's range.
    pub(crate) fn plan(a: &Amo, caps: AtomicCaps, key: &RemoteKey) -> Result<Option<Built>> {
        let width = a.value.width() as u64;
        let word = a.remote & !7;
        let shift = shift_of(a.remote - word);
        let fadd = a.op == AtomicOp::Add && (width == 8 || shift == 32);
        let need = if fadd {
            AtomicCaps::FADD64
        } else {
            AtomicCaps::CSWAP64
        };
        if !caps.contains(need) {
            return Ok(None);
        }
        let end = key.addr.saturating_add(key.len);
        let inside = word >= key.addr && word.checked_add(8).is_some_and(|e| e <= end);
        if width == 4 && !inside {
            return Err(Error::Unsupported(format!(
                "{}{}: the device does 64-bit atomics only, and the 8-byte word at {word:#x} \
                 holding the 32-bit word at {:#x} is not all inside the key's range \
                 ({:#x}, {} bytes)",
                a.op.name(a.fetch),
                width * 8,
                a.remote,
                key.addr,
                key.len
            )));
        }
        Ok(Some(Built {
            amo: *a,
            word,
            shift,
            fadd,
            expect: 0,
        }))
    }

    /// The operand's word's bits in the 8-byte word's value.
    fn mask(&self) -> u64 {
        match self.amo.value {
            AtomicValue::U64(_) => u64::MAX,
            AtomicValue::U32(_) => u64::from(u32::MAX) << self.shift,
        }
    }

    /// The operand's word in 8-byte word value `w`.
    fn part(&self, w: u64) -> u64 {
        (w & self.mask()) >> self.shift
    }

    /// The operand's word after the operation, from its value `old`.
    fn apply(&self, old: u64) -> u64 {
        let (v, cmp) = match self.amo.value {
            AtomicValue::U64(v) => (v, self.amo.compare),
            AtomicValue::U32(v) => (u64::from(v), u64::from(self.amo.compare as u32)),
        };
        let new = match self.amo.op {
            AtomicOp::Add => old.wrapping_add(v),
            AtomicOp::And => old & v,
            AtomicOp::Or => old | v,
            AtomicOp::Xor => old ^ v,
            AtomicOp::Swap => v,
            AtomicOp::Cswap if old == cmp => v,
            AtomicOp::Cswap => old,
        };
        new & (self.mask() >> self.shift)
    }

    /// 8-byte word value `w` after the operation.
    fn desired(&self, w: u64) -> u64 {
        (w & !self.mask()) | (self.apply(self.part(w)) << self.shift)
    }

    /// The device atomic of the next step.
    pub(crate) fn step(&self) -> Amo {
        let (op, value, compare) = if self.fadd {
            (AtomicOp::Add, self.amo.value.as_u64() << self.shift, 0)
        } else {
            (AtomicOp::Cswap, self.desired(self.expect), self.expect)
        };
        Amo {
            op,
            fetch: true,
            value: AtomicValue::U64(value),
            compare,
            remote: self.word,
        }
    }

    /// A step returned `old`, the 8-byte word before it: the operand
    /// word's old value if the atomic is done, else `None` (the next step
    /// expects `old`).
    pub(crate) fn step_done(&mut self, old: u64) -> Option<u64> {
        if self.fadd || old == self.expect || self.desired(old) == old {
            return Some(self.part(old));
        }
        self.expect = old;
        None
    }
}

impl Core {
    /// A step of built atomic `id` returned the old value in its slot:
    /// finish it (the result to the caller's word) or queue its next step.
    /// Nothing more once the request failed.
    pub(crate) fn built_step_done(&mut self, id: SlabId) {
        let Some(Request {
            kind: Kind::Rma(s),
            result: None,
            ..
        }) = self.reqs.get_mut(id)
        else {
            return;
        };
        if s.error.is_some() {
            return;
        }
        let super::RmaSink::DeviceBuilt(b) = &mut s.sink else {
            return;
        };
        let old = u64::from_ne_bytes(b.slot);
        match b.built.step_done(old) {
            Some(v) => {
                if let Some(w) = b.result {
                    w.write(v);
                }
            }
            None => {
                let (iface, uct_ep, key) = b.lane.clone();
                s.amo = Some(Box::new(AmoPlan::new(iface, uct_ep, key, b.built.step())));
                self.commands.push_back(Command::AmoStep(id));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(addr: u64, len: u64) -> RemoteKey {
        RemoteKey {
            md_name: "t".into(),
            packed: std::sync::Arc::from(&[][..]),
            addr,
            len,
            access: crate::uct::Access::REMOTE_ATOMIC,
        }
    }

    fn amo(op: AtomicOp, value: AtomicValue, compare: u64, remote: u64) -> Amo {
        Amo {
            op,
            fetch: true,
            value,
            compare,
            remote,
        }
    }

    /// Runs `b` against `mem` as a device would, with `interfere` applied
    /// to the word before each of the first steps; returns the result and
    /// the number of steps.
    fn run(mut b: Built, mem: &mut u64, mut interfere: Vec<u64>) -> (u64, usize) {
        let mut n = 0;
        loop {
            if let Some(x) = interfere.pop() {
                *mem ^= x;
            }
            let s = b.step();
            let old = *mem;
            n += 1;
            match s.op {
                AtomicOp::Add => *mem = old.wrapping_add(s.value.as_u64()),
                AtomicOp::Cswap if old == s.compare => *mem = s.value.as_u64(),
                AtomicOp::Cswap => {}
                op => panic!("a step is fadd or cswap, not {op:?}"),
            }
            if let Some(v) = b.step_done(old) {
                return (v, n);
            }
            assert!(n < 100, "the loop ends");
        }
    }

    #[test]
    #[allow(unsafe_code)] // the model is the target's own atomic
    fn every_op_on_both_widths_and_halves() {
        let caps = AtomicCaps::FADD64 | AtomicCaps::CSWAP64;
        let k = key(0x1000, 16);
        for op in AtomicOp::ALL {
            for (off, width) in [(0u64, 8usize), (0, 4), (4, 4)] {
                let start = 0x1234_5678_9abc_def0u64;
                let v = 0x0f0f_0f0f_f0f0_f0f0u64;
                let value = AtomicValue::of_width(width, v).unwrap();
                // cswap: compare against the current value of the word.
                let sh = shift_of(off);
                let cur = if width == 8 {
                    start
                } else {
                    (start >> sh) & 0xffff_ffff
                };
                let b = Built::plan(&amo(op, value, cur, 0x1008 + off), caps, &k)
                    .unwrap()
                    .unwrap();
                let mut mem = start;
                let (old, _) = run(b, &mut mem, vec![]);
                assert_eq!(old, cur, "{op:?} {width} {off}");
                // The model: the target's CPU atomic on the word.
                let mut want = start;
                let p = (&mut want as *mut u64)
                    .cast::<u8>()
                    .wrapping_add(off as usize);
                // SAFETY: a local aligned word (the 4-byte half is aligned).
                unsafe { crate::rma::atomic::apply(p, op, value, cur) };
                assert_eq!(mem, want, "{op:?} {width} {off}");
            }
        }
    }

    #[test]
    fn interference_makes_it_retry_and_no_op_ends_it() {
        let caps = AtomicCaps::CSWAP64;
        let k = key(0, 8);
        let b = Built::plan(&amo(AtomicOp::Xor, AtomicValue::U64(1), 0, 0), caps, &k)
            .unwrap()
            .unwrap();
        let mut mem = 6;
        // Another initiator changes the word before the first two steps.
        let (old, n) = run(b, &mut mem, vec![0x10, 0x20]);
        assert_eq!((old, mem, n), (0x36, 0x37, 3));
        // A failing compare ends the loop once it read the word.
        let b = Built::plan(&amo(AtomicOp::Cswap, AtomicValue::U64(9), 5, 0), caps, &k)
            .unwrap()
            .unwrap();
        let mut mem = 7;
        assert_eq!(run(b, &mut mem, vec![]), (7, 1));
        assert_eq!(mem, 7);
    }

    #[test]
    fn what_a_lane_needs_and_the_range() {
        let a = amo(AtomicOp::Add, AtomicValue::U64(1), 0, 8);
        let k = key(0, 16);
        let fadd = Built::plan(&a, AtomicCaps::FADD64, &k).unwrap().unwrap();
        assert_eq!(fadd.step().op, AtomicOp::Add);
        assert!(Built::plan(&a, AtomicCaps::CSWAP64, &k).unwrap().is_none());
        let o = amo(AtomicOp::Or, AtomicValue::U32(1), 0, 4);
        assert!(Built::plan(&o, AtomicCaps::FADD64, &k).unwrap().is_none());
        // The 8-byte word of a 32-bit operand outside the key's range.
        let msg = match Built::plan(&o, AtomicCaps::CSWAP64, &key(4, 12)) {
            Err(Error::Unsupported(m)) => m,
            r => panic!("{r:?}"),
        };
        assert!(msg.contains("for32") && msg.contains("0x0"), "{msg}");
    }
}
