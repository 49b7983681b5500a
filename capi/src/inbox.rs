//! [`Inbox`]: what the Rust worker's handlers queue for C (active
//! messages, connection requests, endpoint failures), with a flag that
//! lets `ucp_worker_progress` see that nothing came without taking a lock.

use parking_lot::Mutex;
use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

/// A queue shared between a Rust handler (which pushes, inside the Rust
/// progress) and the C layer (which pops after it). Cloning shares it.
#[derive(Debug)]
pub(crate) struct Inbox<T>(Arc<Shared<T>>);

#[derive(Debug)]
struct Shared<T> {
    /// Set by every push; cleared only by a pop that found it empty.
    news: AtomicBool,
    /// Set by every push too, and shared with other inboxes (a worker's
    /// one flag for all of them); cleared by its owner.
    bell: Option<Arc<AtomicBool>>,
    q: Mutex<VecDeque<T>>,
}

impl<T> Default for Inbox<T> {
    fn default() -> Self {
        Inbox::with_bell(None)
    }
}

impl<T> Clone for Inbox<T> {
    fn clone(&self) -> Self {
        Inbox(Arc::clone(&self.0))
    }
}

impl<T> Inbox<T> {
    /// An empty inbox whose pushes also set `bell`, if any.
    pub(crate) fn with_bell(bell: Option<Arc<AtomicBool>>) -> Self {
        Inbox(Arc::new(Shared {
            news: AtomicBool::new(false),
            bell,
            q: Mutex::new(VecDeque::new()),
        }))
    }

    /// Queues `v`.
    pub(crate) fn push(&self, v: T) {
        self.0.q.lock().push_back(v);
        self.0.news.store(true, Ordering::Release);
        if let Some(b) = &self.0.bell {
            b.store(true, Ordering::Release);
        }
    }

    /// Whether something may be queued: `false` means empty, at the cost
    /// of one load.
    #[inline]
    pub(crate) fn has_news(&self) -> bool {
        self.0.news.load(Ordering::Acquire)
    }

    /// The oldest entry.
    #[inline]
    pub(crate) fn pop(&self) -> Option<T> {
        if !self.has_news() {
            return None;
        }
        self.pop_locked()
    }

    #[cold]
    fn pop_locked(&self) -> Option<T> {
        let mut q = self.0.q.lock();
        let v = q.pop_front();
        if q.is_empty() {
            // Under the lock: a push after this sets it again.
            self.0.news.store(false, Ordering::Release);
        }
        v
    }

    /// Every entry, oldest first.
    pub(crate) fn take_all(&self) -> VecDeque<T> {
        if !self.has_news() {
            return VecDeque::new();
        }
        let mut q = self.0.q.lock();
        self.0.news.store(false, Ordering::Release);
        std::mem::take(&mut *q)
    }

    /// Whether nothing is queued.
    pub(crate) fn is_empty(&self) -> bool {
        !self.has_news() || self.0.q.lock().is_empty()
    }

    /// Takes out the entries for which `gone` holds, oldest first.
    pub(crate) fn remove_where(&self, mut gone: impl FnMut(&T) -> bool) -> VecDeque<T> {
        let mut q = self.0.q.lock();
        let (out, keep) = q.drain(..).partition(|v| gone(v));
        *q = keep;
        if q.is_empty() {
            self.0.news.store(false, Ordering::Release);
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_come_out_in_order_and_the_flag_follows_the_queue() {
        let a = Inbox::default();
        assert!(a.is_empty() && !a.has_news() && a.pop().is_none());
        let b = a.clone();
        b.push(1);
        b.push(2);
        assert!(a.has_news() && !a.is_empty());
        assert_eq!(a.pop(), Some(1));
        assert!(a.has_news());
        assert_eq!(a.pop(), Some(2));
        assert!(!a.has_news());
        b.push(3);
        b.push(4);
        b.push(5);
        assert_eq!(a.remove_where(|v| v % 2 == 0), [4]);
        assert_eq!(a.take_all(), [3, 5]);
        assert!(!a.has_news() && a.pop().is_none());
        b.push(6);
        assert_eq!(a.remove_where(|_| true), [6]);
        assert!(!a.has_news());
    }

    #[test]
    fn a_push_rings_the_shared_bell() {
        let bell = Arc::new(AtomicBool::new(false));
        let a = Inbox::with_bell(Some(bell.clone()));
        let b: Inbox<u8> = Inbox::with_bell(Some(bell.clone()));
        a.push(1);
        assert!(bell.swap(false, Ordering::AcqRel));
        b.push(2);
        assert!(bell.load(Ordering::Acquire));
        assert_eq!((a.pop(), b.pop()), (Some(1), Some(2)));
    }

    #[test]
    fn a_push_from_another_thread_is_seen() {
        let a = Inbox::default();
        let b = a.clone();
        std::thread::spawn(move || (0..1000).for_each(|i| b.push(i)))
            .join()
            .unwrap();
        let got: Vec<i32> = std::iter::from_fn(|| a.pop()).collect();
        assert_eq!(got, (0..1000).collect::<Vec<_>>());
    }
}
