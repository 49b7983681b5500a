//! Who moves a threaded context's connections: the worker, while it
//! progresses, or the engine thread, while the worker computes or sleeps
//! (`engine_thread.rs`).
//!
//! The worker counts its progress calls and says when it goes to sleep;
//! the thread, each time the context's sockets wake it, progresses unless
//! the worker progressed since its last look and is not asleep. Both
//! flags are hints, written only by the worker and read with relaxed
//! loads: what makes them safe is that a worker going to sleep sets
//! `asleep` before it kicks the thread's event fd, so the look that kick
//! causes sees it, and that outputs and the worker's event fd are handled
//! under the context's lock.
//!
//! The loom models below run the worker, the thread and a peer's message
//! through these with the lock and both event fds, and check that a
//! sleeping worker is always woken by the completion the message makes:
//! once with the thread's back-off timer (liveness then holds whatever
//! the hints say: the thread's second look progresses), and once without
//! it, where the hand-over rests on `asleep` being set before the kick
//! (setting it after, or a thread that ignores it, deadlocks there).

#[cfg(all(loom, test))]
use loom::sync::atomic::{AtomicBool, AtomicU64, Ordering};
#[cfg(not(all(loom, test)))]
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

/// The worker's hints to the engine thread.
#[derive(Debug, Default)]
pub(crate) struct Duty {
    /// The worker's progress calls, counted.
    activity: AtomicU64,
    /// The worker armed its event fd and may sleep on it.
    asleep: AtomicBool,
}

impl Duty {
    /// The worker progresses (only the worker calls this): a plain
    /// store, no read-modify-write on every progress call.
    pub(crate) fn worker_moves(&self) {
        let n = self.activity.load(Ordering::Relaxed).wrapping_add(1);
        self.activity.store(n, Ordering::Relaxed);
        if self.asleep.load(Ordering::Relaxed) {
            self.asleep.store(false, Ordering::Relaxed);
        }
    }

    /// The worker armed its event fd and will sleep; it kicks the thread
    /// after this.
    pub(crate) fn worker_sleeps(&self) {
        self.asleep.store(true, Ordering::Relaxed);
    }

    /// The worker's progress calls so far: where the thread starts.
    pub(crate) fn seen(&self) -> u64 {
        self.activity.load(Ordering::Relaxed)
    }

    /// The thread looks: `true` if it should progress the context, `false`
    /// if the worker progressed since `seen` and is awake (the thread
    /// leaves the work to it and looks again later).
    pub(crate) fn thread_takes(&self, seen: &mut u64) -> bool {
        let now = self.activity.load(Ordering::Relaxed);
        if now != *seen && !self.asleep.load(Ordering::Relaxed) {
            *seen = now;
            return false;
        }
        true
    }
}

#[cfg(all(loom, test))]
mod loom_model {
    use super::Duty;
    use loom::sync::atomic::{AtomicBool, Ordering};
    use loom::sync::{Arc, Condvar, Mutex};

    /// An eventfd: a counter that wakes its waiters.
    #[derive(Default)]
    struct EventFd {
        n: Mutex<u64>,
        cv: Condvar,
    }

    impl EventFd {
        fn signal(&self) {
            *self.n.lock().unwrap() += 1;
            self.cv.notify_all();
        }

        fn drain(&self) {
            *self.n.lock().unwrap() = 0;
        }

        fn wait(&self) {
            let mut n = self.n.lock().unwrap();
            while *n == 0 {
                n = self.cv.wait(n).unwrap();
            }
        }
    }

    /// The context: a peer's message not taken from the socket yet, and
    /// completions waiting for the worker.
    #[derive(Default)]
    struct Ctx {
        inbound: u32,
        outputs: u32,
    }

    /// What the three threads share. The thread's epoll set (the
    /// context's sockets, level-triggered, and the kick eventfd) is
    /// `ready`: a counter bumped by the peer's message and by kicks,
    /// where the thread also looks at the context before it waits.
    #[derive(Default)]
    struct Shared {
        ctx: Mutex<Ctx>,
        duty: Duty,
        kick: EventFd,
        notify: EventFd,
        stop: AtomicBool,
    }

    impl Shared {
        /// A progress call of the context: takes the message, makes its
        /// completion; `true` if it moved something.
        fn progress(ctx: &mut Ctx) -> bool {
            let moved = ctx.inbound > 0;
            ctx.outputs += ctx.inbound;
            ctx.inbound = 0;
            moved
        }

        /// The worker's progress: the completion, if there is one.
        fn worker_progress(&self) -> bool {
            self.duty.worker_moves();
            let mut ctx = self.ctx.lock().unwrap();
            Shared::progress(&mut ctx);
            let got = ctx.outputs > 0;
            ctx.outputs = 0;
            got
        }

        /// The worker arms its event fd, as `Threaded::arm`: `true` if it
        /// may sleep.
        fn worker_arm(&self) -> bool {
            let ctx = self.ctx.lock().unwrap();
            self.notify.drain();
            let busy = ctx.inbound > 0 || ctx.outputs > 0;
            drop(ctx);
            if busy {
                return false;
            }
            self.duty.worker_sleeps();
            self.kick.signal();
            true
        }
    }

    /// The engine thread, as `engine_thread::run`: waits for readiness
    /// (the context's sockets or a kick), then progresses unless the
    /// worker does. A look left to the worker is followed by another
    /// after the back-off, a wait for a kick with a timeout: modeled as a
    /// timeout at once if `timer`, and as a wait for a kick alone (a
    /// timer that never fires) if not.
    fn engine(s: &Shared, timer: bool) {
        let mut seen = s.duty.seen();
        loop {
            {
                let mut k = s.kick.n.lock().unwrap();
                while *k == 0 && s.ctx.lock().unwrap().inbound == 0 {
                    k = s.kick.cv.wait(k).unwrap();
                }
                *k = 0;
            }
            if s.stop.load(Ordering::SeqCst) {
                return;
            }
            if s.duty.thread_takes(&mut seen) {
                let mut ctx = s.ctx.lock().unwrap();
                Shared::progress(&mut ctx);
                if ctx.outputs > 0 {
                    s.notify.signal();
                }
            } else if timer {
                loom::thread::yield_now();
            } else {
                s.kick.wait();
            }
        }
    }

    /// A peer's message arrives while the worker progresses, arms and
    /// sleeps: whichever order the three take, the worker gets the
    /// completion, woken by the thread if it slept (a lost wake-up is a
    /// deadlock loom reports).
    fn model(timer: bool) {
        let mut builder = loom::model::Builder::new();
        builder.preemption_bound = Some(3);
        builder.check(move || {
            let s = Arc::new(Shared::default());
            let t = {
                let s = Arc::clone(&s);
                loom::thread::spawn(move || engine(&s, timer))
            };
            let peer = {
                let s = Arc::clone(&s);
                loom::thread::spawn(move || {
                    s.ctx.lock().unwrap().inbound += 1;
                    // The socket's readiness wakes the thread's epoll.
                    let _k = s.kick.n.lock().unwrap();
                    s.kick.cv.notify_all();
                })
            };
            // The worker: progress, then arm and sleep until it has the
            // completion (an armed worker that is woken progresses).
            let mut got = s.worker_progress();
            while !got {
                if s.worker_arm() {
                    s.notify.wait();
                }
                got = s.worker_progress();
            }
            peer.join().unwrap();
            s.stop.store(true, Ordering::SeqCst);
            s.kick.signal();
            t.join().unwrap();
        });
    }

    /// With the back-off's timer: the thread's second look progresses
    /// whatever the flags said (they are hints).
    #[test]
    fn loom_a_sleeping_worker_is_woken_by_its_completion() {
        model(true);
    }

    /// Without it: the worker's `asleep`, set before its kick, alone
    /// makes the kicked thread progress (relaxed flags, ordered by the
    /// kick).
    #[test]
    fn loom_the_kick_of_a_worker_going_to_sleep_hands_the_work_over() {
        model(false);
    }
}
