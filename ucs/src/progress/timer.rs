//! [`TimerQueue`]: deadlines, earliest first, with cancellation.
//!
//! A binary heap of `(deadline, sequence, slot, generation)` with lazy
//! cancellation: cancelling bumps the slot's generation, and stale heap
//! entries are skipped when they reach the top (or swept out when they
//! outnumber the live ones). The queue never reads a clock; callers pass
//! `now`, which keeps it deterministic under test.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::time::{Duration, Instant};

/// Names a timer, for cancellation. A stale id (fired or cancelled) names
/// nothing, even after its slot is reused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct TimerId {
    slot: u32,
    gen: u32,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
struct HeapEntry {
    deadline: Instant,
    /// Insertion order, so equal deadlines fire first-in first-out.
    seq: u64,
    slot: u32,
    gen: u32,
}

#[derive(Debug)]
struct Slot {
    gen: u32,
    /// The token while the timer is armed.
    token: Option<u64>,
}

/// Timers carrying a `u64` token, fired in deadline order.
#[derive(Debug, Default)]
pub struct TimerQueue {
    heap: BinaryHeap<Reverse<HeapEntry>>,
    slots: Vec<Slot>,
    free_slots: Vec<u32>,
    live: usize,
    seq: u64,
}

impl TimerQueue {
    /// An empty queue.
    pub fn new() -> TimerQueue {
        TimerQueue::default()
    }

    /// Arms a timer that fires `token` at `deadline`.
    pub fn add(&mut self, deadline: Instant, token: u64) -> TimerId {
        let slot = match self.free_slots.pop() {
            Some(s) => s,
            None => {
                self.slots.push(Slot {
                    gen: 0,
                    token: None,
                });
                (self.slots.len() - 1) as u32
            }
        };
        let s = &mut self.slots[slot as usize];
        s.token = Some(token);
        let gen = s.gen;
        self.heap.push(Reverse(HeapEntry {
            deadline,
            seq: self.seq,
            slot,
            gen,
        }));
        self.seq += 1;
        self.live += 1;
        TimerId { slot, gen }
    }

    /// Disarms timer `id`; `false` if it already fired or was cancelled.
    pub fn cancel(&mut self, id: TimerId) -> bool {
        match self.slots.get_mut(id.slot as usize) {
            Some(s) if s.gen == id.gen && s.token.is_some() => {
                self.retire(id.slot);
                self.sweep_if_stale();
                true
            }
            _ => false,
        }
    }

    /// Frees a slot whose timer fired or was cancelled.
    fn retire(&mut self, slot: u32) {
        let s = &mut self.slots[slot as usize];
        s.token = None;
        s.gen = s.gen.wrapping_add(1);
        self.free_slots.push(slot);
        self.live -= 1;
    }

    fn is_live(&self, e: &HeapEntry) -> bool {
        let s = &self.slots[e.slot as usize];
        s.gen == e.gen && s.token.is_some()
    }

    /// Drops cancelled entries once they are most of the heap, so a
    /// cancel-heavy pattern does not grow it without bound.
    fn sweep_if_stale(&mut self) {
        let stale = self.heap.len() - self.live;
        if stale > 64 && stale > self.live * 2 {
            let slots = &self.slots;
            self.heap.retain(|Reverse(e)| {
                let s = &slots[e.slot as usize];
                s.gen == e.gen && s.token.is_some()
            });
        }
    }

    /// Pops stale entries off the top.
    fn skip_stale(&mut self) {
        while let Some(Reverse(top)) = self.heap.peek() {
            if self.is_live(top) {
                break;
            }
            self.heap.pop();
        }
    }

    /// Cancels every armed timer whose token `keep` refuses, and returns
    /// how many it cancelled: for a caller that learns only lazily that
    /// what a timer guards is gone (the connection is up, the request was
    /// read) and would rather not track each timer's id.
    pub fn retain(&mut self, mut keep: impl FnMut(u64) -> bool) -> usize {
        let mut cancelled = 0;
        for slot in 0..self.slots.len() {
            if let Some(token) = self.slots[slot].token {
                if !keep(token) {
                    self.retire(slot as u32);
                    cancelled += 1;
                }
            }
        }
        if self.live == 0 {
            self.heap.clear();
        } else {
            self.sweep_if_stale();
        }
        cancelled
    }

    /// The earliest armed deadline.
    pub fn next_deadline(&mut self) -> Option<Instant> {
        self.skip_stale();
        self.heap.peek().map(|Reverse(e)| e.deadline)
    }

    /// Time from `now` to the earliest deadline (zero if it has passed);
    /// `None` if no timer is armed. Suits [`EventSet::wait`](super::EventSet::wait).
    pub fn time_until_next(&mut self, now: Instant) -> Option<Duration> {
        self.next_deadline()
            .map(|d| d.saturating_duration_since(now))
    }

    /// Fires every timer whose deadline is at or before `now`: `out` is
    /// cleared and gets their tokens, earliest first (equal deadlines in the
    /// order they were added). Returns how many fired.
    pub fn expire(&mut self, now: Instant, out: &mut Vec<u64>) -> usize {
        out.clear();
        while let Some(Reverse(top)) = self.heap.peek() {
            if top.deadline > now {
                break;
            }
            let e = *top;
            self.heap.pop();
            if !self.is_live(&e) {
                continue;
            }
            if let Some(token) = self.slots[e.slot as usize].token {
                out.push(token);
            }
            self.retire(e.slot);
        }
        out.len()
    }

    /// Timers armed.
    pub fn len(&self) -> usize {
        self.live
    }

    /// Whether no timer is armed.
    pub fn is_empty(&self) -> bool {
        self.live == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    #[test]
    fn fire_in_deadline_order() {
        let t0 = Instant::now();
        let mut q = TimerQueue::new();
        q.add(t0 + ms(30), 3);
        q.add(t0 + ms(10), 1);
        q.add(t0 + ms(20), 2);
        q.add(t0 + ms(10), 11);
        assert_eq!(q.len(), 4);
        assert_eq!(q.next_deadline(), Some(t0 + ms(10)));
        assert_eq!(q.time_until_next(t0 + ms(4)), Some(ms(6)));
        assert_eq!(q.time_until_next(t0 + ms(40)), Some(Duration::ZERO));
        let mut out = vec![99];
        assert_eq!(q.expire(t0 + ms(5), &mut out), 0);
        assert!(out.is_empty(), "cleared");
        assert_eq!(q.expire(t0 + ms(20), &mut out), 3);
        assert_eq!(out, [1, 11, 2]);
        assert_eq!(q.expire(t0 + ms(100), &mut out), 1);
        assert_eq!(out, [3]);
        assert!(q.is_empty());
        assert_eq!(q.next_deadline(), None);
        assert_eq!(q.time_until_next(t0), None);
    }

    #[test]
    fn cancel_works_and_stale_ids_name_nothing() {
        let t0 = Instant::now();
        let mut q = TimerQueue::new();
        let a = q.add(t0 + ms(1), 1);
        let b = q.add(t0 + ms(2), 2);
        assert!(q.cancel(a));
        assert!(!q.cancel(a), "cancelled twice");
        assert_eq!(q.next_deadline(), Some(t0 + ms(2)));
        // a's slot is reused; the old id must not cancel the new timer.
        let c = q.add(t0 + ms(3), 3);
        assert_ne!(a, c);
        assert!(!q.cancel(a));
        let mut out = Vec::new();
        q.expire(t0 + ms(10), &mut out);
        assert_eq!(out, [2, 3]);
        assert!(!q.cancel(b), "already fired");
        assert!(!q.cancel(TimerId { slot: 999, gen: 0 }));
    }

    #[test]
    fn retain_cancels_what_it_refuses() {
        let t0 = Instant::now();
        let mut q = TimerQueue::new();
        let a = q.add(t0 + ms(1), 1);
        q.add(t0 + ms(2), 2);
        let c = q.add(t0 + ms(3), 3);
        assert_eq!(q.retain(|t| t != 2), 1);
        assert_eq!(q.len(), 2);
        assert!(q.cancel(a), "kept timers stay armed");
        assert_eq!(q.next_deadline(), Some(t0 + ms(3)));
        assert_eq!(q.retain(|_| false), 1);
        assert!(q.is_empty());
        assert!(q.heap.is_empty(), "nothing armed, nothing kept");
        assert!(!q.cancel(c), "retained away");
        assert_eq!(q.retain(|_| true), 0);
        let mut out = Vec::new();
        assert_eq!(q.expire(t0 + ms(10), &mut out), 0);
        // Slots freed by retain are reused.
        q.add(t0 + ms(4), 4);
        assert_eq!(q.expire(t0 + ms(10), &mut out), 1);
        assert_eq!(out, [4]);
    }

    #[test]
    fn many_cancels_do_not_grow_the_heap() {
        let t0 = Instant::now();
        let mut q = TimerQueue::new();
        let keep = q.add(t0 + ms(1_000_000), 7);
        for i in 0..10_000 {
            let id = q.add(t0 + ms(i + 1), i);
            assert!(q.cancel(id));
        }
        assert!(q.heap.len() < 200, "heap has {}", q.heap.len());
        assert_eq!(q.len(), 1);
        let mut out = Vec::new();
        q.expire(t0 + ms(2_000_000), &mut out);
        assert_eq!(out, [7]);
        assert!(!q.cancel(keep));
    }
}
