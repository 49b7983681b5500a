//! The mailbox of one `self` iface, shared with every iface that sends to
//! it, and the process-wide table of mailboxes.
//!
//! Sending and receiving are lock-free: a bounded MPMC queue of messages, a
//! byte counter, and a free list of message buffers that the receiver fills
//! and senders take from, so that steady traffic of small messages does not
//! allocate. Locks guard only the slow paths: registering a sender, waiting
//! for room, closing.
//!
//! Wakeups pair a flag with a `SeqCst` fence on both sides (the sender
//! publishes, fences, reads the flag; the sleeper sets the flag, fences,
//! re-checks), so that at least one of them sees the other.

use super::SelfConfig;
use crate::ucs::progress::EventFd;
use crate::{AmId, Error, Posted, Result};
use crossbeam_queue::ArrayQueue;
use parking_lot::Mutex;
use std::collections::BTreeMap;
use std::os::fd::AsRawFd;
use std::sync::atomic::{fence, AtomicBool, AtomicU32, AtomicUsize, Ordering};
use std::sync::{Arc, Weak};

/// Buffers up to this capacity go back to the free list after delivery;
/// larger ones are freed, so that a burst of big messages does not pin
/// memory.
const RECYCLE_MAX_CAPACITY: usize = 16 << 10;
/// Most buffers kept on one free list.
const FREE_LIST_MAX: usize = 256;

/// One queued active message.
#[derive(Debug)]
pub(super) struct Msg {
    /// Sender's source id, as assigned by this mailbox.
    pub(super) src: u32,
    /// Active message id.
    pub(super) id: AmId,
    /// Header and payload, as delivered.
    pub(super) buf: Vec<u8>,
}

/// What an iface shares with its senders.
pub(super) struct Shared {
    /// The iface id (its address).
    pub(super) id: u64,
    queue: ArrayQueue<Msg>,
    free: ArrayQueue<Vec<u8>>,
    /// Payload bytes in `queue`.
    bytes: AtomicUsize,
    limit_bytes: usize,
    /// The iface was dropped: sends fail, senders are told.
    closed: AtomicBool,
    /// The owner sleeps on `event`: the next message signals it.
    armed: AtomicBool,
    /// A target of one of the owner's endpoints closed.
    pub(super) peer_closed: AtomicBool,
    next_src: AtomicU32,
    /// Ifaces with endpoints to this one, told when it closes.
    senders: Mutex<Vec<Weak<Shared>>>,
    /// Ifaces waiting for room here, signalled when it drains.
    waiters: Mutex<Vec<Weak<Shared>>>,
    has_waiters: AtomicBool,
    event: EventFd,
}

impl std::fmt::Debug for Shared {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Shared")
            .field("id", &format_args!("{:#018x}", self.id))
            .field("queued", &self.queue.len())
            .field("bytes", &self.bytes.load(Ordering::Relaxed))
            .field("closed", &self.closed.load(Ordering::Relaxed))
            .finish_non_exhaustive()
    }
}

impl Shared {
    pub(super) fn new(id: u64, cfg: &SelfConfig) -> Result<Shared> {
        Ok(Shared {
            id,
            queue: ArrayQueue::new(cfg.mailbox_msgs),
            free: ArrayQueue::new(cfg.mailbox_msgs.min(FREE_LIST_MAX)),
            bytes: AtomicUsize::new(0),
            limit_bytes: cfg.mailbox_bytes,
            closed: AtomicBool::new(false),
            armed: AtomicBool::new(false),
            peer_closed: AtomicBool::new(false),
            next_src: AtomicU32::new(0),
            senders: Mutex::new(Vec::new()),
            waiters: Mutex::new(Vec::new()),
            has_waiters: AtomicBool::new(false),
            event: EventFd::new()?,
        })
    }

    pub(super) fn event_fd(&self) -> std::os::fd::RawFd {
        self.event.as_raw_fd()
    }

    pub(super) fn is_closed(&self) -> bool {
        self.closed.load(Ordering::Acquire)
    }

    /// Queues a message of `len` bytes written by `fill`. `NoResource` when
    /// the mailbox is full, `EndpointFailed` when its iface is gone.
    pub(super) fn push(
        &self,
        src: u32,
        id: AmId,
        len: usize,
        fill: impl FnOnce(&mut Vec<u8>),
    ) -> Result<Posted> {
        if self.closed.load(Ordering::Relaxed) {
            return Err(Error::endpoint_failed(
                "self",
                crate::ucs::EndpointCause::PeerGone,
            ));
        }
        if self.queue.is_full() {
            return Ok(Posted::NoResource);
        }
        let prev = self.bytes.fetch_add(len, Ordering::AcqRel);
        if prev != 0 && prev + len > self.limit_bytes {
            self.bytes.fetch_sub(len, Ordering::AcqRel);
            return Ok(Posted::NoResource);
        }
        let mut buf = self.free.pop().unwrap_or_default();
        buf.clear();
        fill(&mut buf);
        debug_assert_eq!(buf.len(), len);
        if let Err(msg) = self.queue.push(Msg { src, id, buf }) {
            self.bytes.fetch_sub(len, Ordering::AcqRel);
            self.recycle(msg.buf);
            return Ok(Posted::NoResource);
        }
        // A message pushed while the owner closes stays in the queue until
        // the last endpoint lets go of it: lost with its receiver, as on
        // any transport.
        fence(Ordering::SeqCst);
        if self.armed.load(Ordering::Relaxed) && self.armed.swap(false, Ordering::AcqRel) {
            // A failed write leaves the counter as it was (readable when
            // full), so there is nothing to do about an error.
            let _ = self.event.signal();
        }
        Ok(Posted::Done)
    }

    /// Whether no message is queued (two loads).
    #[inline]
    pub(super) fn is_empty(&self) -> bool {
        self.queue.is_empty()
    }

    /// Takes the oldest message (owner only).
    #[inline]
    pub(super) fn pop(&self) -> Option<Msg> {
        // Two loads, where the queue's own pop of an empty queue also
        // issues a full fence: this runs on every progress call.
        if self.queue.is_empty() {
            return None;
        }
        let msg = self.queue.pop()?;
        self.bytes.fetch_sub(msg.buf.len(), Ordering::AcqRel);
        Some(msg)
    }

    /// Returns a delivered message's buffer for reuse.
    pub(super) fn recycle(&self, buf: Vec<u8>) {
        if buf.capacity() <= RECYCLE_MAX_CAPACITY {
            let _ = self.free.push(buf);
        }
    }

    /// Whether the mailbox has drained to half of both limits, so that a
    /// waiting sender can post any message.
    pub(super) fn has_room(&self) -> bool {
        self.queue.len() <= self.queue.capacity() / 2
            && self.bytes.load(Ordering::Acquire) <= self.limit_bytes / 2
    }

    /// Source id for a new endpoint to this mailbox. Ids are not reused
    /// (they wrap after 2^32 endpoints).
    pub(super) fn next_src(&self) -> u32 {
        self.next_src.fetch_add(1, Ordering::Relaxed)
    }

    /// Remembers `sender` to tell it when this iface closes; fails if it has
    /// closed already.
    pub(super) fn add_sender(&self, sender: &Arc<Shared>) -> Result<()> {
        let mut s = self.senders.lock();
        if self.closed.load(Ordering::Acquire) {
            return Err(Error::Unreachable("self: iface closed".into()));
        }
        s.retain(|w| w.strong_count() > 0);
        if !s.iter().any(|w| w.as_ptr() == Arc::as_ptr(sender)) {
            s.push(Arc::downgrade(sender));
        }
        Ok(())
    }

    /// Asks to have `waiter`'s event fd signalled once this mailbox has
    /// room. The caller re-checks [`Shared::has_room`] afterwards.
    pub(super) fn add_waiter(&self, waiter: &Arc<Shared>) {
        {
            let mut w = self.waiters.lock();
            if !w.iter().any(|x| x.as_ptr() == Arc::as_ptr(waiter)) {
                w.push(Arc::downgrade(waiter));
            }
            self.has_waiters.store(true, Ordering::Relaxed);
        }
        fence(Ordering::SeqCst);
    }

    /// After draining: signals the waiters if there is room now.
    pub(super) fn wake_waiters(&self) {
        fence(Ordering::SeqCst);
        if !self.has_waiters.load(Ordering::Relaxed) || !self.has_room() {
            return;
        }
        let list = {
            let mut w = self.waiters.lock();
            self.has_waiters.store(false, Ordering::Relaxed);
            std::mem::take(&mut *w)
        };
        for w in list.iter().filter_map(Weak::upgrade) {
            let _ = w.event.signal();
        }
    }

    /// Prepares the owner to sleep; returns whether the mailbox is idle
    /// (nothing queued, no closed peer to report). If not, it stays
    /// disarmed, so that senders do not signal an owner that is not going
    /// to sleep.
    pub(super) fn arm(&self) -> bool {
        let _ = self.event.drain();
        self.armed.store(true, Ordering::SeqCst);
        fence(Ordering::SeqCst);
        let idle = self.queue.is_empty() && !self.peer_closed.load(Ordering::Acquire);
        if !idle {
            self.disarm();
        }
        idle
    }

    /// The owner will not sleep after all.
    pub(super) fn disarm(&self) {
        self.armed.store(false, Ordering::Relaxed);
    }

    /// The owner is gone: fails later sends, tells every sender, frees the
    /// queued messages.
    pub(super) fn close(&self) {
        let senders = {
            let mut s = self.senders.lock();
            self.closed.store(true, Ordering::Release);
            std::mem::take(&mut *s)
        };
        for s in senders.iter().filter_map(Weak::upgrade) {
            s.peer_closed.store(true, Ordering::Release);
            let _ = s.event.signal();
        }
        while self.pop().is_some() {}
        while self.free.pop().is_some() {}
        self.waiters.lock().clear();
    }
}

/// Live mailboxes of this process by iface id.
static REGISTRY: Mutex<BTreeMap<u64, Weak<Shared>>> = parking_lot::const_mutex(BTreeMap::new());

/// Makes `shared` reachable by its id.
pub(super) fn register(shared: &Arc<Shared>) {
    REGISTRY.lock().insert(shared.id, Arc::downgrade(shared));
}

/// Makes the id unreachable.
pub(super) fn unregister(id: u64) {
    REGISTRY.lock().remove(&id);
}

/// The live, open mailbox with this id.
pub(super) fn lookup(id: u64) -> Option<Arc<Shared>> {
    let s = REGISTRY.lock().get(&id)?.upgrade()?;
    (!s.is_closed()).then_some(s)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn small() -> Shared {
        let cfg = SelfConfig {
            mailbox_bytes: SelfConfig::MIN_MAILBOX_BYTES,
            mailbox_msgs: 4,
        };
        Shared::new(1, &cfg).unwrap()
    }

    fn fill(n: usize) -> impl FnOnce(&mut Vec<u8>) {
        move |b: &mut Vec<u8>| b.resize(n, 7)
    }

    #[test]
    fn bounded_by_message_count() {
        let s = small();
        for _ in 0..4 {
            assert_eq!(s.push(0, 1, 3, fill(3)).unwrap(), Posted::Done);
        }
        assert_eq!(s.push(0, 1, 3, fill(3)).unwrap(), Posted::NoResource);
        assert!(!s.has_room());
        s.pop().unwrap();
        assert!(!s.has_room());
        s.pop().unwrap();
        assert!(s.has_room());
    }

    #[test]
    fn bounded_by_bytes_but_takes_one_big_message() {
        let s = small();
        let big = SelfConfig::MIN_MAILBOX_BYTES + 1;
        assert_eq!(s.push(0, 1, big, fill(big)).unwrap(), Posted::Done);
        assert_eq!(s.push(0, 1, 1, fill(1)).unwrap(), Posted::NoResource);
        let m = s.pop().unwrap();
        assert_eq!(m.buf.len(), big);
        s.recycle(m.buf);
        assert!(s.free.is_empty(), "big buffers are not kept");
        assert_eq!(s.push(0, 1, 1, fill(1)).unwrap(), Posted::Done);
    }

    #[test]
    fn closed_mailbox_fails_sends_and_tells_senders() {
        let target = Arc::new(small());
        let sender = Arc::new(small());
        target.add_sender(&sender).unwrap();
        target.add_sender(&sender).unwrap();
        assert_eq!(target.senders.lock().len(), 1);
        assert_eq!(target.push(0, 1, 1, fill(1)).unwrap(), Posted::Done);
        target.close();
        assert!(sender.peer_closed.load(Ordering::Acquire));
        assert!(target.queue.is_empty());
        assert!(target.push(0, 1, 1, fill(1)).is_err());
        assert!(target.add_sender(&sender).is_err());
    }

    #[test]
    fn waiters_wake_when_room_returns() {
        let target = small();
        let waiter = Arc::new(small());
        for _ in 0..4 {
            let _ = target.push(0, 1, 1, fill(1)).unwrap();
        }
        target.add_waiter(&waiter);
        assert!(waiter.arm());
        target.pop().unwrap();
        target.wake_waiters();
        assert!(target.has_waiters.load(Ordering::Relaxed), "no room yet");
        target.pop().unwrap();
        target.wake_waiters();
        assert!(!target.has_waiters.load(Ordering::Relaxed));
        let mut p = libc::pollfd {
            fd: waiter.event_fd(),
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: one valid pollfd, zero timeout.
        assert_eq!(unsafe { libc::poll(&mut p, 1, 0) }, 1);
    }

    #[test]
    fn registry_finds_only_open_mailboxes() {
        let s = Arc::new(
            Shared::new(super::super::addr::next_iface_id(), &SelfConfig::DEFAULT).unwrap(),
        );
        register(&s);
        assert!(lookup(s.id).is_some());
        s.close();
        assert!(lookup(s.id).is_none());
        unregister(s.id);
        assert!(REGISTRY.lock().get(&s.id).is_none());
    }
}
