//! A peer that scribbles over a shared-memory FIFO region between this
//! process's pushes and polls: no panic or hang, every message within
//! `max_payload`, every error the one the operation may report, results
//! and region bytes exactly as the model of the documented layout
//! predicts, nothing outside the region touched, and while no scribble
//! changed a byte the protocol reads, every message out intact and in
//! order.
//!
//! Input: a shape byte (one of four FIFO shapes), then operations: a kind
//! byte and its fields (see `op`); the last one may be cut anywhere
//! (missing bytes read as zero).
#![no_main]

#[path = "../../transports/shm/tests/decoder_robustness/fifo_region.rs"]
mod fifo_region;

use fifo_region::fifo_model::ARMED;
use fifo_region::{Op, Value, WordAt};
use rucx_fuzz::Input;

/// Most operations one input runs (before the final drain).
const MAX_OPS: usize = 128;

fn word_at(input: &mut Input<'_>) -> WordAt {
    let s = input.u8();
    match s % 4 {
        0 => WordAt::Head,
        1 => WordAt::Tail,
        2 => WordAt::Ctl(s >> 2),
        _ => WordAt::Header(s & 4 != 0),
    }
}

fn value(input: &mut Input<'_>) -> Value {
    let v = input.u8();
    match v % 4 {
        0 => Value::Set(match (v >> 2) % 4 {
            0 => input.u64(),
            1 => u64::from(input.u8()),
            2 => u64::MAX,
            _ => ARMED,
        }),
        1 => Value::Add(i16::from(input.u8() as i8)),
        2 => Value::Xor(input.u64()),
        _ => Value::Ctl(
            input.u8(),
            input.u8(),
            u16::from_le_bytes([input.u8(), input.u8()]),
            u32::from_le_bytes([input.u8(), input.u8(), input.u8(), input.u8()]),
        ),
    }
}

fn op(input: &mut Input<'_>) -> Op {
    let kind = input.u8();
    match kind % 16 {
        0..=3 => Op::Push {
            producer: kind >> 4,
            am: input.u8(),
            src: u16::from(input.u8()),
            len: u16::from_le_bytes([input.u8(), input.u8()]),
            split: input.u8(),
        },
        4..=6 => Op::Poll,
        7 => Op::Scribble {
            at: u32::from(u16::from_le_bytes([input.u8(), input.u8()])),
            bytes: input.bytes(usize::from(kind >> 4) + 1).to_vec(),
        },
        8 | 9 => Op::Word {
            at: word_at(input),
            value: value(input),
        },
        10 => Op::NewConsumer {
            drop_first: kind & 0x10 != 0,
        },
        11 => Op::Arm,
        12 => Op::SkipStuck,
        13 => Op::Attach,
        14 => Op::NewProducer,
        _ => Op::HasRoom(kind >> 4),
    }
}

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    let mut input = Input::new(data);
    let shape = input.u8();
    let mut ops = Vec::new();
    while !input.is_empty() && ops.len() < MAX_OPS {
        ops.push(op(&mut input));
    }
    fifo_region::run(shape, &ops);
});
