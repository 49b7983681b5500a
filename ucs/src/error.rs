//! The error type shared by ucs, uct and the transports.

use crate::status::Status;
use std::io;

/// A protocol violation by a peer: the bytes it sent cannot be valid.
///
/// A transport or protocol that sees one fails the endpoint or connection the
/// bytes came from, logs it, and goes on serving everyone else.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum PeerMisbehaved {
    /// A frame declared a length beyond the transport's limit.
    #[error("frame of {len} bytes exceeds the limit of {max}")]
    FrameTooLong {
        /// Declared length.
        len: usize,
        /// Largest allowed.
        max: usize,
    },
    /// A frame used an unknown or reserved message id.
    #[error("unknown message id {0}")]
    UnknownId(u8),
    /// A header was shorter than its fixed layout.
    #[error("{what}: {len} bytes, expected at least {min}")]
    Truncated {
        /// What was being decoded.
        what: &'static str,
        /// Bytes present.
        len: usize,
        /// Bytes needed.
        min: usize,
    },
    /// A connection did not start with the expected magic number.
    #[error("bad connection magic {0:#018x}")]
    BadMagic(u64),
    /// A field had a value that cannot be valid.
    #[error("invalid {what}: {detail}")]
    Invalid {
        /// Which field.
        what: &'static str,
        /// Why it is invalid.
        detail: String,
    },
}

/// A failure in rucx's lower layers.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A system call failed.
    #[error("{op}: {source}")]
    Io {
        /// The operation that failed (e.g. `"connect 10.0.0.1:4000"`).
        op: String,
        /// The OS error.
        #[source]
        source: io::Error,
    },
    /// The peer closed or reset the connection.
    #[error("connection to {peer} lost: {reason}")]
    ConnectionLost {
        /// Who the peer was.
        peer: String,
        /// What was seen (EOF, ECONNRESET, ...).
        reason: String,
    },
    /// The peer sent bytes that break the protocol.
    #[error("peer {peer} misbehaved: {what}")]
    PeerMisbehaved {
        /// Who the peer was.
        peer: String,
        /// What it did.
        #[source]
        what: PeerMisbehaved,
    },
    /// The destination is not reachable by this transport.
    #[error("unreachable: {0}")]
    Unreachable(String),
    /// The address bytes cannot be decoded.
    #[error("invalid address: {0}")]
    InvalidAddr(String),
    /// An argument is out of its documented range.
    #[error("invalid parameter: {0}")]
    InvalidParam(String),
    /// The operation is not offered here.
    #[error("unsupported: {0}")]
    Unsupported(String),
    /// A peer's memory refused the access: outside the registration,
    /// without the right, or deregistered (a forged or stale key).
    #[error("remote access denied: {0}")]
    RemoteAccess(String),
    /// The endpoint failed earlier; operations on it fail with this.
    #[error("endpoint failed: {0}")]
    EndpointFailed(String),
    /// The operation was canceled.
    #[error("canceled")]
    Canceled,
    /// The operation did not complete in time.
    #[error("timed out: {0}")]
    TimedOut(String),
    /// Memory could not be allocated.
    #[error("out of memory: {0}")]
    NoMemory(String),
    /// A configuration value could not be parsed.
    #[error(transparent)]
    Config(#[from] crate::config::ConfigError),
}

impl Error {
    /// Wraps an OS error with the operation that produced it.
    pub fn io(op: impl Into<String>, source: io::Error) -> Error {
        Error::Io {
            op: op.into(),
            source,
        }
    }

    /// The last OS error (`errno`) with the operation that produced it.
    pub fn last_os(op: impl Into<String>) -> Error {
        Error::io(op, io::Error::last_os_error())
    }

    /// The UCX status code that best describes this error.
    pub fn status(&self) -> Status {
        match self {
            Error::Io { source, .. } => match source.kind() {
                io::ErrorKind::ConnectionReset
                | io::ErrorKind::ConnectionAborted
                | io::ErrorKind::BrokenPipe => Status::ConnectionReset,
                io::ErrorKind::ConnectionRefused => Status::Unreachable,
                io::ErrorKind::TimedOut => Status::TimedOut,
                io::ErrorKind::OutOfMemory => Status::NoMemory,
                _ => Status::IoError,
            },
            Error::ConnectionLost { .. } => Status::ConnectionReset,
            Error::PeerMisbehaved { .. } => Status::IoError,
            Error::Unreachable(_) => Status::Unreachable,
            Error::InvalidAddr(_) => Status::InvalidAddr,
            Error::InvalidParam(_) => Status::InvalidParam,
            Error::Unsupported(_) => Status::Unsupported,
            Error::RemoteAccess(_) => Status::Rejected,
            Error::EndpointFailed(_) => Status::ConnectionReset,
            Error::Canceled => Status::Canceled,
            Error::TimedOut(_) => Status::TimedOut,
            Error::NoMemory(_) => Status::NoMemory,
            Error::Config(_) => Status::InvalidParam,
        }
    }

    /// A copy for fanning one failure out to many requests.
    ///
    /// `io::Error` is not `Clone`; the copy keeps its kind and message.
    pub fn duplicate(&self) -> Error {
        match self {
            Error::Io { op, source } => Error::Io {
                op: op.clone(),
                source: io::Error::new(source.kind(), source.to_string()),
            },
            Error::ConnectionLost { peer, reason } => Error::ConnectionLost {
                peer: peer.clone(),
                reason: reason.clone(),
            },
            Error::PeerMisbehaved { peer, what } => Error::PeerMisbehaved {
                peer: peer.clone(),
                what: what.clone(),
            },
            Error::Unreachable(s) => Error::Unreachable(s.clone()),
            Error::InvalidAddr(s) => Error::InvalidAddr(s.clone()),
            Error::InvalidParam(s) => Error::InvalidParam(s.clone()),
            Error::Unsupported(s) => Error::Unsupported(s.clone()),
            Error::RemoteAccess(s) => Error::RemoteAccess(s.clone()),
            Error::EndpointFailed(s) => Error::EndpointFailed(s.clone()),
            Error::Canceled => Error::Canceled,
            Error::TimedOut(s) => Error::TimedOut(s.clone()),
            Error::NoMemory(s) => Error::NoMemory(s.clone()),
            Error::Config(c) => Error::Config(c.clone()),
        }
    }
}

/// Result with [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;
