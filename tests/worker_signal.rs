//! Waking a worker from another thread (`Worker::waker`, as UCX's
//! `ucp_worker_signal`).

mod common;

use common::*;
use rucx::ucp::{Armed, MAX_SLEEP};
use rucx::{Waker, Worker};
use std::time::{Duration, Instant};

fn worker() -> Worker {
    context("self").create_worker().expect("worker")
}

/// Sleeps in `wait_event` on another thread until woken; returns the
/// worker and how long the wait took.
fn sleeper(mut w: Worker) -> std::thread::JoinHandle<(Worker, Duration)> {
    std::thread::spawn(move || {
        // Nothing is pending: the worker really sleeps.
        assert_eq!(w.arm().expect("arm"), Armed::Sleep);
        let start = Instant::now();
        w.wait_event(Some(Duration::from_secs(30))).expect("wait");
        (w, start.elapsed())
    })
}

/// A wake ends the sleep: without it `wait_event` sleeps its whole
/// `MAX_SLEEP`. Tried three times, so that one stall of this thread
/// does not count as a miss.
fn wakes_a_sleeping_worker(mut w: Worker, waker: Waker) {
    let mut slept = Vec::new();
    for _ in 0..3 {
        let t = sleeper(w);
        std::thread::sleep(Duration::from_millis(20));
        waker.wake().expect("wake");
        let (back, d) = t.join().expect("sleeper");
        w = back;
        if d < MAX_SLEEP {
            return;
        }
        slept.push(d);
    }
    panic!("the wake did not end the sleep: {slept:?}");
}

#[test]
fn a_waker_wakes_a_worker_sleeping_on_another_thread() {
    let mut w = worker();
    let waker = w.waker().expect("waker");
    wakes_a_sleeping_worker(w, waker);
}

#[test]
fn a_waker_made_after_the_event_fd_is_watched_too() {
    let mut w = worker();
    w.event_fd().expect("event fd");
    let waker = w.waker().expect("waker");
    assert!(w.waker().is_ok(), "a second waker shares the first's fd");
    wakes_a_sleeping_worker(w, waker);
}

#[test]
fn a_wake_before_arm_makes_arm_busy_once() {
    let mut w = worker();
    let waker = w.waker().expect("waker");
    assert_eq!(w.arm().expect("arm"), Armed::Sleep);
    // Several wakes before the worker looks are one.
    let other = waker.clone();
    std::thread::spawn(move || other.wake().expect("wake"))
        .join()
        .expect("thread");
    waker.wake().expect("wake");
    assert_eq!(w.arm().expect("arm"), Armed::Busy);
    assert_eq!(w.arm().expect("arm"), Armed::Sleep);
}

#[test]
fn a_wake_makes_the_event_fd_readable() {
    let mut w = worker();
    let fd = w.event_fd().expect("event fd");
    let waker = w.waker().expect("waker");
    let readable = |fd| {
        let mut p = libc::pollfd {
            fd,
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: one pollfd, valid for the call.
        unsafe { libc::poll(&mut p, 1, 0) == 1 }
    };
    assert_eq!(w.arm().expect("arm"), Armed::Sleep);
    assert!(!readable(fd), "nothing to do yet");
    waker.wake().expect("wake");
    assert!(readable(fd), "a wake shows on the event fd");
    assert_eq!(w.arm().expect("arm"), Armed::Busy);
    assert!(!readable(fd), "and is consumed by the worker");
}

#[test]
fn a_waker_outlives_its_worker() {
    let mut w = worker();
    let waker = w.waker().expect("waker");
    drop(w);
    waker.wake().expect("a wake of a gone worker is harmless");
}

#[test]
fn waker_is_send_and_sync() {
    fn both<T: Send + Sync>() {}
    both::<Waker>();
}
