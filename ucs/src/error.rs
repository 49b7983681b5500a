//! The error type shared by ucs, uct and the transports.

use crate::status::Status;
use std::borrow::Cow;
use std::io;

mod cause;
#[cfg(test)]
mod tests;

pub use cause::{AccessDenied, EndpointCause};

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
///
/// Clone-free by design (`io::Error` is not `Clone`); [`Error::duplicate`]
/// copies one for fanning a failure out.
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
    /// An argument is out of its documented range, in words (a
    /// configuration value, a handle of the wrong owner, ...).
    #[error("invalid parameter: {0}")]
    InvalidParam(String),
    /// A length or count is larger than the operation allows.
    #[error("{op}: {len} exceeds the maximum of {max}")]
    Limit {
        /// What was too large, e.g. `"am_short payload"`.
        op: &'static str,
        /// The length or count given.
        len: usize,
        /// The largest allowed.
        max: usize,
    },
    /// An endpoint id that names no endpoint of the iface.
    #[error("{transport}: no endpoint {ep}")]
    UnknownEndpoint {
        /// The transport.
        transport: Cow<'static, str>,
        /// The id given.
        ep: u64,
    },
    /// Something the operation needs is not available here, in words
    /// (e.g. a shared memory directory that is missing).
    #[error("unsupported: {0}")]
    Unsupported(String),
    /// The transport does not offer the operation.
    #[error("{transport}: {op} is not supported")]
    OpUnsupported {
        /// The transport or memory domain.
        transport: Cow<'static, str>,
        /// The operation, e.g. `"am_zcopy"`.
        op: &'static str,
    },
    /// A peer's memory refused the access: outside the registration,
    /// without the right, or deregistered (a forged or stale key).
    #[error("{transport}: remote access denied: {reason}")]
    RemoteAccess {
        /// The transport or memory domain that refused.
        transport: Cow<'static, str>,
        /// Why.
        #[source]
        reason: AccessDenied,
    },
    /// The endpoint failed earlier; operations on it fail with this.
    #[error("{transport}: endpoint failed: {cause}")]
    EndpointFailed {
        /// The transport (with the peer, where it knows one).
        transport: Cow<'static, str>,
        /// Why; a transport's typed cause is on its source chain.
        #[source]
        cause: EndpointCause,
    },
    /// The operation was canceled.
    #[error("canceled")]
    Canceled,
    /// The operation did not complete in time.
    #[error("timed out: {0}")]
    TimedOut(String),
    /// The peer refused the connection (a listener rejected it).
    #[error("rejected: {0}")]
    Rejected(String),
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

    /// `len` is over `max` for `op`.
    pub fn limit(op: &'static str, len: usize, max: usize) -> Error {
        Error::Limit { op, len, max }
    }

    /// `transport` does not offer `op`.
    pub fn op_unsupported(transport: impl Into<Cow<'static, str>>, op: &'static str) -> Error {
        Error::OpUnsupported {
            transport: transport.into(),
            op,
        }
    }

    /// `transport` refused a remote access for `reason`.
    pub fn remote_access(transport: impl Into<Cow<'static, str>>, reason: AccessDenied) -> Error {
        Error::RemoteAccess {
            transport: transport.into(),
            reason,
        }
    }

    /// An endpoint of `transport` failed with `cause`.
    pub fn endpoint_failed(transport: impl Into<Cow<'static, str>>, cause: EndpointCause) -> Error {
        Error::EndpointFailed {
            transport: transport.into(),
            cause,
        }
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
                // UCX 1.13 says UCS_ERR_BUSY when a listener's address is
                // in use (bound, listened on, or held by TIME_WAIT).
                io::ErrorKind::AddrInUse => Status::Busy,
                _ => Status::IoError,
            },
            Error::ConnectionLost { .. } => Status::ConnectionReset,
            Error::PeerMisbehaved { .. } => Status::IoError,
            Error::Unreachable(_) => Status::Unreachable,
            Error::InvalidAddr(_) => Status::InvalidAddr,
            Error::InvalidParam(_) => Status::InvalidParam,
            Error::Limit { .. } => Status::InvalidParam,
            Error::UnknownEndpoint { .. } => Status::InvalidParam,
            Error::Unsupported(_) => Status::Unsupported,
            Error::OpUnsupported { .. } => Status::Unsupported,
            Error::RemoteAccess { .. } => Status::Rejected,
            Error::EndpointFailed { .. } => Status::ConnectionReset,
            Error::Canceled => Status::Canceled,
            Error::TimedOut(_) => Status::TimedOut,
            Error::Rejected(_) => Status::Rejected,
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
            Error::Limit { op, len, max } => Error::limit(op, *len, *max),
            Error::UnknownEndpoint { transport, ep } => Error::UnknownEndpoint {
                transport: transport.clone(),
                ep: *ep,
            },
            Error::Unsupported(s) => Error::Unsupported(s.clone()),
            Error::OpUnsupported { transport, op } => Error::op_unsupported(transport.clone(), op),
            Error::RemoteAccess { transport, reason } => {
                Error::remote_access(transport.clone(), reason.clone())
            }
            Error::EndpointFailed { transport, cause } => {
                Error::endpoint_failed(transport.clone(), cause.clone())
            }
            Error::Canceled => Error::Canceled,
            Error::TimedOut(s) => Error::TimedOut(s.clone()),
            Error::Rejected(s) => Error::Rejected(s.clone()),
            Error::NoMemory(s) => Error::NoMemory(s.clone()),
            Error::Config(c) => Error::Config(c.clone()),
        }
    }
}

/// Result with [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;
