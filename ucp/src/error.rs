//! Errors of the protocol layer, as users see them.

use std::fmt;
use std::sync::Arc;
use ucs::config::ConfigError;
use ucs::{AccessDenied, EndpointCause, Status};

use crate::ucs;

/// A failure of a rucx operation.
///
/// Cheap to clone, so that one endpoint failure can complete many requests.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub enum Error {
    /// The request was canceled before it completed.
    Canceled,
    /// The message was longer than the receive buffer; the buffer holds its
    /// first `capacity` bytes.
    Truncated {
        /// Length the sender sent.
        length: usize,
        /// Size of the receive buffer.
        capacity: usize,
    },
    /// The endpoint failed (peer died, connection reset, protocol error);
    /// the transport's error, and its typed cause, are on the source chain.
    EndpointFailed {
        /// The transport's error.
        cause: Arc<ucs::Error>,
    },
    /// A handle (endpoint, request) that is not, or no longer, valid.
    InvalidHandle,
    /// No transport reaches the peer.
    Unreachable(String),
    /// A worker address could not be decoded.
    InvalidAddress(String),
    /// An argument is out of range, in words.
    InvalidParam(String),
    /// A length or count is larger than the operation allows.
    Limit {
        /// What was too large, e.g. `"atomic iov entries"`.
        op: &'static str,
        /// The length or count given.
        len: usize,
        /// The largest allowed.
        max: usize,
    },
    /// No usable transport, or an operation the lanes cannot do.
    Unsupported(String),
    /// A `RUCX_*` variable could not be parsed.
    Config(Arc<ConfigError>),
    /// A transport failed outside any endpoint (e.g. opening an iface).
    Transport {
        /// The transport's error.
        cause: Arc<ucs::Error>,
    },
    /// The operation did not complete in time.
    TimedOut,
    /// The operation could not complete while it was posted, and an
    /// [`Op::immediate`](crate::Op::immediate) operation must: nothing was
    /// posted (UCX's `UCS_ERR_NO_RESOURCE` for
    /// `UCP_OP_ATTR_FLAG_FORCE_IMM_CMPL`).
    NoResource,
    /// A one-sided access was refused: outside the remote registration,
    /// without the right, or through a forged or stale key. The remote
    /// memory was not touched.
    RemoteAccess {
        /// Why.
        reason: AccessDenied,
    },
}

impl Error {
    /// The UCX status code for this error.
    pub fn status(&self) -> Status {
        match self {
            Error::Canceled => Status::Canceled,
            Error::Truncated { .. } => Status::MessageTruncated,
            Error::EndpointFailed { cause } => match cause.status() {
                Status::TimedOut => Status::EndpointTimeout,
                Status::Canceled => Status::Canceled,
                _ => Status::ConnectionReset,
            },
            Error::InvalidHandle => Status::InvalidParam,
            Error::Unreachable(_) => Status::Unreachable,
            Error::InvalidAddress(_) => Status::InvalidAddr,
            Error::InvalidParam(_) => Status::InvalidParam,
            Error::Limit { .. } => Status::InvalidParam,
            Error::Unsupported(_) => Status::Unsupported,
            Error::Config(_) => Status::InvalidParam,
            Error::Transport { cause } => cause.status(),
            Error::TimedOut => Status::TimedOut,
            Error::NoResource => Status::NoResource,
            Error::RemoteAccess { .. } => Status::Rejected,
        }
    }

    pub(crate) fn transport(e: ucs::Error) -> Error {
        Error::Transport { cause: Arc::new(e) }
    }

    pub(crate) fn endpoint(e: ucs::Error) -> Error {
        Error::EndpointFailed { cause: Arc::new(e) }
    }

    pub(crate) fn remote_access(reason: AccessDenied) -> Error {
        Error::RemoteAccess { reason }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Canceled => f.write_str("request canceled"),
            Error::Truncated { length, capacity } => write!(
                f,
                "message truncated: {length} bytes sent, receive buffer holds {capacity}"
            ),
            Error::EndpointFailed { cause } => f.write_str(&endpoint_text(cause)),
            Error::InvalidHandle => f.write_str("invalid handle"),
            Error::Unreachable(s) => write!(f, "destination is unreachable: {s}"),
            Error::InvalidAddress(s) => write!(f, "invalid worker address: {s}"),
            Error::InvalidParam(s) => write!(f, "invalid parameter: {s}"),
            Error::Limit { op, len, max } => {
                write!(f, "{op}: {len} exceeds the maximum of {max}")
            }
            Error::Unsupported(s) => write!(f, "unsupported: {s}"),
            Error::Config(c) => write!(f, "{c}"),
            Error::Transport { cause } => write!(f, "transport error: {cause}"),
            Error::TimedOut => f.write_str("timed out"),
            Error::NoResource => {
                f.write_str("the operation could not complete at once; nothing was posted")
            }
            Error::RemoteAccess { reason } => write!(f, "remote access denied: {reason}"),
        }
    }
}

/// The source is the transport's error itself (not the `Arc` around it),
/// so that `downcast_ref::<ucs::Error>` finds it.
impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Error::EndpointFailed { cause } | Error::Transport { cause } => Some(&**cause),
            Error::RemoteAccess { reason } => Some(reason),
            Error::Config(c) => c.source(),
            _ => None,
        }
    }
}

impl From<ConfigError> for Error {
    fn from(e: ConfigError) -> Error {
        Error::Config(Arc::new(e))
    }
}

/// Result with [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// "endpoint failed: <why>", without saying it twice when the transport's
/// error already is an endpoint failure.
fn endpoint_text(e: &ucs::Error) -> String {
    match e {
        ucs::Error::EndpointFailed { .. } => e.to_string(),
        other => format!("endpoint failed: {other}"),
    }
}

/// The transport-level error of an endpoint that a peer's protocol
/// message (or its absence) failed, for `why`.
pub(crate) fn peer_failed(why: String) -> ucs::Error {
    ucs::Error::endpoint_failed("ucp", EndpointCause::Other(why.into()))
}

#[cfg(test)]
mod tests;
