//! The handshake between a thread that sleeps on the worker's event fd
//! and the threads that post: a post after the sleeper's last look at the
//! worker must wake it, and a post it saw must not.
//!
//! The sleeper marks itself ([`SleepGate::closing`]) under the worker's
//! lock before it arms the worker; a poster, after releasing the lock,
//! signals the fd if the mark is set ([`SleepGate::must_signal`]). Either
//! the post came first (the sleeper's arm sees its work, under the same
//! lock) or the poster sees the mark: no post is slept through. The loom
//! model below checks exactly this with the real gate.

#[cfg(all(loom, test))]
use loom::sync::atomic::{AtomicBool, Ordering};
#[cfg(not(all(loom, test)))]
use std::sync::atomic::{AtomicBool, Ordering};

/// Whether a thread sleeps (or is about to) on the event fd.
#[derive(Debug, Default)]
pub(crate) struct SleepGate {
    sleeping: AtomicBool,
}

impl SleepGate {
    /// The sleeper, under the worker's lock, before it arms the worker.
    pub(crate) fn closing(&self) {
        self.sleeping.store(true, Ordering::SeqCst);
    }

    /// The sleeper, once it does not sleep (any more).
    pub(crate) fn open(&self) {
        self.sleeping.store(false, Ordering::SeqCst);
    }

    /// A poster, after releasing the lock: whether to signal the fd.
    pub(crate) fn must_signal(&self) -> bool {
        self.sleeping.load(Ordering::SeqCst)
    }
}

#[cfg(all(loom, test))]
mod loom_model {
    use super::SleepGate;
    use loom::sync::atomic::{AtomicBool, Ordering};
    use loom::sync::{Arc, Mutex};

    /// One post against one decision to sleep, in every interleaving: if
    /// the sleeper found no work and slept, the poster signalled.
    #[test]
    fn loom_no_post_is_slept_through() {
        loom::model(|| {
            let work = Arc::new(Mutex::new(false));
            let gate = Arc::new(SleepGate::default());
            let signal = Arc::new(AtomicBool::new(false));
            let poster = {
                let (work, gate, signal) = (work.clone(), gate.clone(), signal.clone());
                loom::thread::spawn(move || {
                    *work.lock().unwrap() = true;
                    if gate.must_signal() {
                        signal.store(true, Ordering::SeqCst);
                    }
                })
            };
            let slept = {
                let w = work.lock().unwrap();
                gate.closing();
                let found = *w;
                drop(w);
                if found {
                    gate.open();
                }
                !found
            };
            poster.join().unwrap();
            if slept {
                assert!(signal.load(Ordering::SeqCst), "a post was slept through");
            }
        });
    }

    /// Two posters against two rounds of the sleeper, each of which
    /// drains the signal under the lock (as arming does) before it looks:
    /// if the last round saw no new work while a post is unseen, a signal
    /// came after that drain.
    #[test]
    fn loom_two_posters_two_rounds() {
        loom::model(|| {
            let work = Arc::new(Mutex::new(0u32));
            let gate = Arc::new(SleepGate::default());
            let signal = Arc::new(AtomicBool::new(false));
            let posters: Vec<_> = (0..2)
                .map(|_| {
                    let (work, gate, signal) = (work.clone(), gate.clone(), signal.clone());
                    loom::thread::spawn(move || {
                        *work.lock().unwrap() += 1;
                        if gate.must_signal() {
                            signal.store(true, Ordering::SeqCst);
                        }
                    })
                })
                .collect();
            let mut seen = 0;
            let mut slept_last = false;
            for round in 0..2 {
                let w = work.lock().unwrap();
                signal.store(false, Ordering::SeqCst);
                gate.closing();
                let now = *w;
                drop(w);
                let slept = now == seen;
                seen = now;
                if round == 1 && slept {
                    // The last sleep has not ended: the gate stays closed.
                    slept_last = true;
                } else {
                    // Awake again (work, or a timeout ended the sleep).
                    gate.open();
                }
            }
            for p in posters {
                p.join().unwrap();
            }
            if slept_last && seen < 2 {
                assert!(signal.load(Ordering::SeqCst), "a post was slept through");
            }
        });
    }
}
