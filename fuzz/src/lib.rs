//! Helpers shared by the fuzz targets in `fuzz_targets/`.
//!
//! The properties each target checks live beside the tests of the crate
//! whose decoder it covers (`*/tests/decoder_robustness/`), so that the
//! proptest suites and the fuzzers share one oracle; the targets include
//! those files with `#[path]`.

#![forbid(unsafe_op_in_unsafe_fn)]
#![warn(missing_docs)]

use std::sync::Once;

/// Largest input the socket-based targets write: far below the kernel's
/// loopback buffers, so that a write never waits for a reader.
pub const MAX_STREAM: usize = 32 << 10;

/// Process set-up for targets that write to sockets: a peer that closed
/// makes `write` fail with `EPIPE` instead of killing the fuzzer with
/// `SIGPIPE` (libFuzzer's `main` does not ignore it as Rust's does).
pub fn init() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        // SAFETY: setting a signal's disposition to SIG_IGN installs no
        // handler code; it runs before the target starts any thread.
        unsafe {
            libc::signal(libc::SIGPIPE, libc::SIG_IGN);
        }
    });
}

/// Reads fuzz input as a sequence of small fields; missing bytes read as
/// zero, so every input is usable.
#[derive(Debug)]
pub struct Input<'a> {
    data: &'a [u8],
}

impl<'a> Input<'a> {
    /// Wraps `data`.
    pub fn new(data: &'a [u8]) -> Input<'a> {
        Input { data }
    }

    /// Whether all bytes were read.
    pub fn is_empty(&self) -> bool {
        self.data.is_empty()
    }

    /// The next byte.
    pub fn u8(&mut self) -> u8 {
        match self.data.split_first() {
            Some((&b, rest)) => {
                self.data = rest;
                b
            }
            None => 0,
        }
    }

    /// The next 8 bytes, little-endian.
    pub fn u64(&mut self) -> u64 {
        let mut a = [0u8; 8];
        for b in &mut a {
            *b = self.u8();
        }
        u64::from_le_bytes(a)
    }

    /// Up to `n` next bytes.
    pub fn bytes(&mut self, n: usize) -> &'a [u8] {
        let (head, rest) = self.data.split_at(n.min(self.data.len()));
        self.data = rest;
        head
    }

    /// Everything left.
    pub fn rest(&mut self) -> &'a [u8] {
        self.bytes(self.data.len())
    }
}
