//! The error type of the perftest library.

use std::io;

/// Everything that can stop a perftest run.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum PerfError {
    /// The test parameters are out of range or inconsistent.
    #[error("invalid test parameters: {0}")]
    Params(String),
    /// A socket operation of the bootstrap connection failed.
    #[error("{op}: {source}")]
    Bootstrap {
        /// What was being done, e.g. `"connect to host:13337"`.
        op: String,
        /// The OS error.
        #[source]
        source: io::Error,
    },
    /// The peer sent something that breaks the protocol (a malformed
    /// bootstrap frame, a wrong acknowledgement).
    #[error("protocol violation by the peer: {0}")]
    Protocol(String),
    /// The peer closed the bootstrap connection or its endpoint failed.
    #[error("peer vanished: {0}")]
    PeerGone(String),
    /// The peer stopped the test and said why.
    #[error("peer aborted the test: {0}")]
    PeerAborted(String),
    /// A bootstrap step did not finish in time.
    #[error("timed out: {0}")]
    Timeout(String),
    /// A communication operation failed.
    #[error("{op} failed: {source}")]
    Transport {
        /// The operation, e.g. `"tag send"`.
        op: &'static str,
        /// The error reported by the communication layer.
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    /// A received message did not hold the expected bytes (`-V`).
    #[error(
        "data validation failed in iteration {iter}: byte {offset} is {actual:#04x}, \
         expected {expected:#04x}"
    )]
    Validation {
        /// Iteration (message sequence number) counted from 0.
        iter: u64,
        /// Offset of the first wrong byte.
        offset: usize,
        /// The byte that should be there.
        expected: u8,
        /// The byte that arrived.
        actual: u8,
    },
    /// A received message had the wrong length.
    #[error("iteration {iter}: received {actual} bytes, expected {expected}")]
    Length {
        /// Iteration (message sequence number) counted from 0.
        iter: u64,
        /// Bytes expected.
        expected: usize,
        /// Bytes received.
        actual: usize,
    },
    /// The communication layer (or this mode of the program) cannot run
    /// what the test needs.
    #[error("not supported: {0}")]
    Unsupported(String),
    /// Memory for the test buffers could not be allocated.
    #[error("cannot allocate {0} bytes for test buffers")]
    NoMemory(usize),
}

impl PerfError {
    /// Wraps an error of the communication layer.
    pub fn transport<E>(op: &'static str, source: E) -> PerfError
    where
        E: std::error::Error + Send + Sync + 'static,
    {
        PerfError::Transport {
            op,
            source: Box::new(source),
        }
    }

    /// Wraps an OS error of the bootstrap connection.
    pub fn bootstrap(op: impl Into<String>, source: io::Error) -> PerfError {
        PerfError::Bootstrap {
            op: op.into(),
            source,
        }
    }
}

/// Result with [`PerfError`].
pub type Result<T, E = PerfError> = std::result::Result<T, E>;
