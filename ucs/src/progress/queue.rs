//! [`ProgressQueue`]: the ordered list of progress callbacks of a worker.

use std::fmt;

/// Names a callback in a [`ProgressQueue`], for removal.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ProgressId(u64);

type Callback<C> = Box<dyn FnMut(&mut C) -> usize + Send>;
type Oneshot<C> = Box<dyn FnOnce(&mut C) -> usize + Send>;

/// Progress callbacks called in the order they were added.
///
/// Each callback gets the context `C` the dispatcher passes in (a worker
/// passes the protocol state its ifaces deliver into; `()` when there is
/// nothing to share) and returns how much work it did; a dispatch returns
/// the sum, which is what `progress()` reports. One-shot callbacks run once,
/// after the regular ones, at the next dispatch.
pub struct ProgressQueue<C = ()> {
    entries: Vec<(ProgressId, Callback<C>)>,
    oneshots: Vec<Oneshot<C>>,
    /// Spare buffer swapped with `oneshots` during dispatch, to keep both
    /// allocations.
    running: Vec<Oneshot<C>>,
    next_id: u64,
}

impl<C> ProgressQueue<C> {
    /// An empty queue.
    pub fn new() -> ProgressQueue<C> {
        ProgressQueue {
            entries: Vec::new(),
            oneshots: Vec::new(),
            running: Vec::new(),
            next_id: 0,
        }
    }

    /// Adds `f` after the callbacks already present.
    pub fn add(&mut self, f: impl FnMut(&mut C) -> usize + Send + 'static) -> ProgressId {
        let id = ProgressId(self.next_id);
        self.next_id += 1;
        self.entries.push((id, Box::new(f)));
        id
    }

    /// Adds `f` to run once, at the next dispatch.
    pub fn add_oneshot(&mut self, f: impl FnOnce(&mut C) -> usize + Send + 'static) {
        self.oneshots.push(Box::new(f));
    }

    /// Removes callback `id`; `false` if it is not (or no longer) present.
    /// The others keep their order.
    pub fn remove(&mut self, id: ProgressId) -> bool {
        match self.entries.iter().position(|(i, _)| *i == id) {
            Some(pos) => {
                drop(self.entries.remove(pos));
                true
            }
            None => false,
        }
    }

    /// Calls every callback once, in order, then the pending one-shots;
    /// returns the sum of their results.
    pub fn dispatch_with(&mut self, ctx: &mut C) -> usize {
        let mut work = 0usize;
        for (_, f) in &mut self.entries {
            work = work.saturating_add(f(ctx));
        }
        if !self.oneshots.is_empty() {
            // Run them from the spare buffer; both keep their allocation.
            std::mem::swap(&mut self.oneshots, &mut self.running);
            for f in self.running.drain(..) {
                work = work.saturating_add(f(ctx));
            }
        }
        work
    }

    /// Regular callbacks present.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether there is no regular callback and no pending one-shot.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty() && self.oneshots.is_empty()
    }
}

impl ProgressQueue<()> {
    /// [`ProgressQueue::dispatch_with`] without a context.
    pub fn dispatch(&mut self) -> usize {
        self.dispatch_with(&mut ())
    }
}

impl<C> Default for ProgressQueue<C> {
    fn default() -> Self {
        ProgressQueue::new()
    }
}

impl<C> fmt::Debug for ProgressQueue<C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ProgressQueue")
            .field(
                "ids",
                &self.entries.iter().map(|(i, _)| i).collect::<Vec<_>>(),
            )
            .field("oneshots", &self.oneshots.len())
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::{Arc, Mutex};

    #[test]
    fn calls_in_order_and_sums() {
        let mut q = ProgressQueue::<Vec<&'static str>>::new();
        q.add(|log| {
            log.push("a");
            1
        });
        let b = q.add(|log| {
            log.push("b");
            2
        });
        q.add(|log| {
            log.push("c");
            4
        });
        let mut log = Vec::new();
        assert_eq!(q.dispatch_with(&mut log), 7);
        assert_eq!(log, ["a", "b", "c"]);
        assert!(q.remove(b));
        assert!(!q.remove(b));
        log.clear();
        assert_eq!(q.dispatch_with(&mut log), 5);
        assert_eq!(log, ["a", "c"]);
        assert_eq!(q.len(), 2);
    }

    #[test]
    fn oneshots_run_once_after_regular() {
        let mut q = ProgressQueue::<Vec<u32>>::new();
        q.add(|v| {
            v.push(0);
            0
        });
        q.add_oneshot(|v| {
            v.push(1);
            1
        });
        q.add_oneshot(|v| {
            v.push(2);
            1
        });
        let mut v = Vec::new();
        assert_eq!(q.dispatch_with(&mut v), 2);
        assert_eq!(q.dispatch_with(&mut v), 0);
        assert_eq!(v, [0, 1, 2, 0]);
    }

    #[test]
    fn unit_context() {
        let hits = Arc::new(Mutex::new(0));
        let h = hits.clone();
        let mut q = ProgressQueue::new();
        assert!(q.is_empty());
        let id = q.add(move |_| {
            *h.lock().unwrap() += 1;
            1
        });
        assert_eq!(q.dispatch(), 1);
        assert_eq!(q.dispatch(), 1);
        assert_eq!(*hits.lock().unwrap(), 2);
        q.remove(id);
        assert_eq!(q.dispatch(), 0);
        assert!(format!("{q:?}").contains("ProgressQueue"));
    }
}
