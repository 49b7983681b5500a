//! Test parameters and the block the client sends to the server.
//!
//! # Parameter block, version 2 (all fields little-endian)
//!
//! | offset | size | field |
//! |---|---|---|
//! | 0 | 4 | magic `"RXPT"` |
//! | 4 | 2 | version (1) |
//! | 6 | 2 | test wire id ([`TestInfo::wire_id`]) |
//! | 8 | 4 | flags: bit 0 = validate data, bit 1 = endpoints with error handling, bit 2 = endpoints through the server's listener, bit 3 = sent messages as iovecs, bit 4 = received ones as iovecs (`-D`), bit 5 = busy target (`--busy-target`), bit 6 = a worker per thread (`--worker-per-thread`); other bits must be 0 |
//! | 12 | 8 | iterations (0 = no limit) |
//! | 20 | 8 | warm-up iterations |
//! | 28 | 4 | most uncompleted operations in flight (1..=65536) |
//! | 32 | 8 | percentile rank, `f64` in 0..=100 |
//! | 40 | 4 | number of message size entries `n` (1..=256) |
//! | 44 | 8·n | message size entries; the message is their sum |
//! | 44 + 8·n | 4 | threads (`-T`, 1..=[`MAX_THREADS`]) |
//!
//! The block must be exactly `48 + 8·n` bytes long. A server rejects a
//! block that breaks any rule above, asks for more memory than
//! [`MAX_MESSAGE_SIZE`] and [`MAX_BUFFER_BYTES`] allow, gives a one-sided
//! test an empty message or an atomic test a message of other than 4 or 8
//! bytes, more than one thread for a test that cannot have them
//! ([`TestParams::check`]) or a busy target for a two-sided test.
//!
//! [`TestInfo::wire_id`]: super::catalog::TestInfo::wire_id

use super::catalog::{Command, TestKind, TestType};
use super::error::{PerfError, Result};
use super::wire::Reader;

/// First bytes of a parameter block.
pub const MAGIC: [u8; 4] = *b"RXPT";
/// Version of the parameter block this code writes and reads.
pub const VERSION: u16 = 2;
/// Largest message (sum of the size entries).
pub const MAX_MESSAGE_SIZE: u64 = 1 << 34;
/// Most bytes of buffers one side allocates (validation keeps one buffer
/// per operation in flight).
pub const MAX_BUFFER_BYTES: u64 = 1 << 35;
/// Most operations in flight (`-O`).
pub const MAX_OUTSTANDING: u32 = 65536;
/// Most message size entries (`-s a,b,c`).
pub const MAX_SIZE_ENTRIES: usize = 256;
/// Most threads (`-T`).
pub const MAX_THREADS: u32 = 64;

const FLAG_VALIDATE: u32 = 1 << 0;
const FLAG_ERR_HANDLING: u32 = 1 << 1;
const FLAG_SOCKADDR: u32 = 1 << 2;
const FLAG_SEND_IOV: u32 = 1 << 3;
const FLAG_RECV_IOV: u32 = 1 << 4;
const FLAG_BUSY_TARGET: u32 = 1 << 5;
const FLAG_WORKER_PER_THREAD: u32 = 1 << 6;
const KNOWN_FLAGS: u32 = FLAG_VALIDATE
    | FLAG_ERR_HANDLING
    | FLAG_SOCKADDR
    | FLAG_SEND_IOV
    | FLAG_RECV_IOV
    | FLAG_BUSY_TARGET
    | FLAG_WORKER_PER_THREAD;
/// The fixed fields before the size entries.
const HEADER_LEN: usize = 44;
/// The fields after the size entries (threads).
const TRAILER_LEN: usize = 4;

/// What both sides need to run one test. The client sends it; the server
/// takes it as is.
#[derive(Debug, Clone, PartialEq)]
pub struct TestParams {
    /// The test.
    pub test: TestKind,
    /// Message size entries; a message is their sum (contiguous layout).
    pub msg_sizes: Vec<usize>,
    /// Measured iterations; 0 runs until interrupted.
    pub iters: u64,
    /// Warm-up iterations before measuring (capped at a tenth of `iters`).
    pub warmup: u64,
    /// Most uncompleted operations in flight.
    pub outstanding: u32,
    /// Percentile rank of the latency column, 0..=100.
    pub percentile: f64,
    /// Fill send buffers with a pattern and check every received byte.
    pub validate: bool,
    /// Create the endpoints in peer error mode with an error handler
    /// (`-e`): a failure reported on the endpoint ends the run.
    pub err_handling: bool,
    /// Create the endpoints through a listener of the server
    /// (`--sockaddr`) rather than from worker addresses.
    pub sockaddr: bool,
    /// The data layouts of the sender and the receiver (`-D`): iovecs
    /// whose entries are the size entries, or contiguous (`false`).
    pub iov: (bool, bool),
    /// Threads of each side (`-T`), each running the test on its own
    /// share of one worker shared by all of them.
    pub threads: u32,
    /// Each thread of `-T` runs on a worker of its own, all on one
    /// context, as UCX's perftest runs them (`--worker-per-thread`).
    pub worker_per_thread: bool,
    /// The server's side of a one-sided test computes without ever
    /// progressing its worker, which a progress thread drives
    /// (`--busy-target`).
    pub busy_target: bool,
}

impl TestParams {
    /// Parameters with UCX's defaults for `test`.
    pub fn new(test: TestKind) -> TestParams {
        TestParams {
            test,
            msg_sizes: vec![8],
            iters: 1_000_000,
            warmup: 10_000,
            outstanding: test.info().window,
            percentile: 50.0,
            validate: false,
            err_handling: false,
            sockaddr: false,
            iov: (false, false),
            threads: 1,
            busy_target: false,
            worker_per_thread: false,
        }
    }

    /// Message length in bytes: the sum of the size entries.
    ///
    /// Only meaningful after [`TestParams::check`] succeeded; saturates
    /// otherwise.
    pub fn message_size(&self) -> usize {
        self.msg_sizes
            .iter()
            .fold(0usize, |acc, &s| acc.saturating_add(s))
    }

    /// Warm-up iterations actually run: at most a tenth of the measured
    /// iterations, rounded up (none when `iters` is 0), as UCX does.
    pub fn warmup_iters(&self) -> u64 {
        self.warmup.min(self.iters.div_ceil(10))
    }

    /// Number of local buffers: one per operation in flight when
    /// validating (each holds a different pattern), for gets and fetching
    /// atomics (each writes into its own) and for put ping-pong (each
    /// carries its own sequence number); else one shared.
    pub fn buffer_slots(&self) -> usize {
        let info = self.test.info();
        let own = info.command.fetches()
            || (info.command == Command::Put && info.test_type == TestType::PingPong);
        if self.validate || own {
            self.outstanding as usize
        } else {
            1
        }
    }

    /// Checks every rule of the parameter block.
    pub fn check(&self) -> Result<()> {
        let bad = |msg: String| Err(PerfError::Params(msg));
        if self.msg_sizes.is_empty() || self.msg_sizes.len() > MAX_SIZE_ENTRIES {
            return bad(format!(
                "{} message size entries (1 to {MAX_SIZE_ENTRIES} allowed)",
                self.msg_sizes.len()
            ));
        }
        let mut total: u64 = 0;
        for &s in &self.msg_sizes {
            total = total.saturating_add(s as u64);
        }
        if total > MAX_MESSAGE_SIZE {
            return bad(format!(
                "message size {total} exceeds the limit of {MAX_MESSAGE_SIZE}"
            ));
        }
        let command = self.test.info().command;
        if command.is_atomic() && total != 4 && total != 8 {
            return bad(format!(
                "Atomic size should be either 32 or 64 bit: -s 4 or -s 8, not {total} bytes"
            ));
        }
        if command.is_one_sided() && total < 1 {
            return bad(format!(
                "Message size too small, need to be at least 1 for {}",
                self.test.info().name
            ));
        }
        if (self.iov.0 || self.iov.1) && command.is_one_sided() {
            return bad(format!(
                "the iov datatype (-D iov) is for tag, stream and active message tests, not {}",
                self.test.info().name
            ));
        }
        self.check_threads()?;
        if self.outstanding == 0 || self.outstanding > MAX_OUTSTANDING {
            return bad(format!(
                "{} operations in flight (1 to {MAX_OUTSTANDING} allowed)",
                self.outstanding
            ));
        }
        if !self.percentile.is_finite() || !(0.0..=100.0).contains(&self.percentile) {
            return bad(format!(
                "percentile rank {} is not within 0..100",
                self.percentile
            ));
        }
        let slots = self.buffer_slots() as u64;
        // Send and receive sides each hold `slots` buffers; the 2 covers both.
        let need = total.max(1).saturating_mul(slots).saturating_mul(2);
        if need > MAX_BUFFER_BYTES {
            return bad(format!(
                "{need} bytes of buffers (message size {total} x {slots} slots x 2) \
                 exceed the limit of {MAX_BUFFER_BYTES}"
            ));
        }
        Ok(())
    }

    /// The parameter block (see the module doc).
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(HEADER_LEN + 8 * self.msg_sizes.len() + TRAILER_LEN);
        out.extend_from_slice(&MAGIC);
        out.extend_from_slice(&VERSION.to_le_bytes());
        out.extend_from_slice(&self.test.info().wire_id.to_le_bytes());
        let mut flags = 0;
        if self.validate {
            flags |= FLAG_VALIDATE;
        }
        if self.err_handling {
            flags |= FLAG_ERR_HANDLING;
        }
        if self.sockaddr {
            flags |= FLAG_SOCKADDR;
        }
        if self.iov.0 {
            flags |= FLAG_SEND_IOV;
        }
        if self.iov.1 {
            flags |= FLAG_RECV_IOV;
        }
        if self.busy_target {
            flags |= FLAG_BUSY_TARGET;
        }
        if self.worker_per_thread {
            flags |= FLAG_WORKER_PER_THREAD;
        }
        out.extend_from_slice(&flags.to_le_bytes());
        out.extend_from_slice(&self.iters.to_le_bytes());
        out.extend_from_slice(&self.warmup.to_le_bytes());
        out.extend_from_slice(&self.outstanding.to_le_bytes());
        out.extend_from_slice(&self.percentile.to_bits().to_le_bytes());
        out.extend_from_slice(&(self.msg_sizes.len() as u32).to_le_bytes());
        for &s in &self.msg_sizes {
            out.extend_from_slice(&(s as u64).to_le_bytes());
        }
        out.extend_from_slice(&self.threads.to_le_bytes());
        out
    }

    /// Parses and checks a parameter block from the peer.
    pub fn decode(block: &[u8]) -> Result<TestParams> {
        let mut r = Reader::new(block, "parameter block");
        let magic = r.bytes(4)?;
        if magic != MAGIC {
            return Err(PerfError::Protocol(format!(
                "parameter block starts with {magic:02x?}, not {MAGIC:02x?}"
            )));
        }
        let version = r.u16()?;
        if version != VERSION {
            return Err(PerfError::Protocol(format!(
                "parameter block version {version}, this program speaks {VERSION}"
            )));
        }
        let wire_id = r.u16()?;
        let test = TestKind::from_wire_id(wire_id)
            .ok_or_else(|| PerfError::Protocol(format!("unknown test id {wire_id}")))?;
        let flags = r.u32()?;
        if flags & !KNOWN_FLAGS != 0 {
            return Err(PerfError::Protocol(format!(
                "unknown flags {:#x}",
                flags & !KNOWN_FLAGS
            )));
        }
        let iters = r.u64()?;
        let warmup = r.u64()?;
        let outstanding = r.u32()?;
        let percentile = r.f64()?;
        let count = r.u32()? as usize;
        if count == 0 || count > MAX_SIZE_ENTRIES {
            return Err(PerfError::Protocol(format!(
                "{count} message size entries (1 to {MAX_SIZE_ENTRIES} allowed)"
            )));
        }
        let mut msg_sizes = Vec::with_capacity(count);
        for _ in 0..count {
            let s = r.u64()?;
            let s = usize::try_from(s)
                .ok()
                .filter(|&s| s as u64 <= MAX_MESSAGE_SIZE)
                .ok_or_else(|| PerfError::Protocol(format!("message size entry {s}")))?;
            msg_sizes.push(s);
        }
        let threads = r.u32()?;
        r.finish()?;
        let params = TestParams {
            test,
            msg_sizes,
            iters,
            warmup,
            outstanding,
            percentile,
            validate: flags & FLAG_VALIDATE != 0,
            err_handling: flags & FLAG_ERR_HANDLING != 0,
            sockaddr: flags & FLAG_SOCKADDR != 0,
            iov: (flags & FLAG_SEND_IOV != 0, flags & FLAG_RECV_IOV != 0),
            threads,
            busy_target: flags & FLAG_BUSY_TARGET != 0,
            worker_per_thread: flags & FLAG_WORKER_PER_THREAD != 0,
        };
        params
            .check()
            .map_err(|e| PerfError::Protocol(e.to_string()))?;
        Ok(params)
    }
}

impl TestParams {
    /// The rules of `-T` and `--busy-target`.
    fn check_threads(&self) -> Result<()> {
        let bad = |msg: String| Err(PerfError::Params(msg));
        let info = self.test.info();
        if self.threads == 0 || self.threads > MAX_THREADS {
            return bad(format!(
                "{} threads (-T): 1 to {MAX_THREADS} allowed",
                self.threads
            ));
        }
        if self.threads > 1 {
            // The threads share one worker and its one endpoint to the
            // peer: a stream or the active message handler cannot be
            // split between them as tags can.
            if matches!(info.command, Command::Stream | Command::Am) {
                return bad(format!(
                    "{} cannot run with more than one thread (-T): the threads share one \
                     endpoint, whose byte stream and active messages they cannot tell apart",
                    info.name
                ));
            }
            if self.iov.0 || self.iov.1 {
                return bad("the iov datatype (-D iov) runs with one thread (-T 1) only".into());
            }
        }
        if self.worker_per_thread && self.threads < 2 {
            return bad(
                "--worker-per-thread is for runs with more than one thread (-T 2 or more)".into(),
            );
        }
        if self.busy_target && !info.command.is_one_sided() {
            return bad(format!(
                "--busy-target is for one-sided tests (ucp_put_lat, ucp_put_bw, ucp_get and \
                 the atomics), not {}",
                info.name
            ));
        }
        Ok(())
    }
}

#[cfg(test)]
#[path = "params_tests.rs"]
mod tests;
