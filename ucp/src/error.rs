//! Errors of the protocol layer, as users see them.

use std::sync::Arc;
use ucs::config::ConfigError;
use ucs::Status;

use crate::ucs;

/// A failure of a rucx operation.
///
/// Cheap to clone, so that one endpoint failure can complete many requests.
#[derive(Debug, Clone, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The request was canceled before it completed.
    #[error("request canceled")]
    Canceled,
    /// The message was longer than the receive buffer; the buffer holds its
    /// first `capacity` bytes.
    #[error("message truncated: {length} bytes sent, receive buffer holds {capacity}")]
    Truncated {
        /// Length the sender sent.
        length: usize,
        /// Size of the receive buffer.
        capacity: usize,
    },
    /// The endpoint failed (peer died, connection reset, protocol error).
    #[error("{}", endpoint_text(.0))]
    Endpoint(Arc<ucs::Error>),
    /// A handle (endpoint, request) that is not, or no longer, valid.
    #[error("invalid handle")]
    InvalidHandle,
    /// No transport reaches the peer.
    #[error("destination is unreachable: {0}")]
    Unreachable(String),
    /// A worker address could not be decoded.
    #[error("invalid worker address: {0}")]
    InvalidAddress(String),
    /// An argument is out of range.
    #[error("invalid parameter: {0}")]
    InvalidParam(String),
    /// No usable transport, or an operation the lanes cannot do.
    #[error("unsupported: {0}")]
    Unsupported(String),
    /// A `RUCX_*` variable could not be parsed.
    #[error(transparent)]
    Config(Arc<ConfigError>),
    /// A transport failed outside any endpoint (e.g. opening an iface).
    #[error("transport error: {0}")]
    Transport(Arc<ucs::Error>),
    /// The operation did not complete in time.
    #[error("timed out")]
    TimedOut,
    /// A one-sided access was refused: outside the remote registration,
    /// without the right, misaligned, or through a forged or stale key.
    /// The remote memory was not touched.
    #[error("remote access denied: {0}")]
    RemoteAccess(String),
}

impl Error {
    /// The UCX status code for this error.
    pub fn status(&self) -> Status {
        match self {
            Error::Canceled => Status::Canceled,
            Error::Truncated { .. } => Status::MessageTruncated,
            Error::Endpoint(e) => match e.status() {
                Status::TimedOut => Status::EndpointTimeout,
                Status::Canceled => Status::Canceled,
                _ => Status::ConnectionReset,
            },
            Error::InvalidHandle => Status::InvalidParam,
            Error::Unreachable(_) => Status::Unreachable,
            Error::InvalidAddress(_) => Status::InvalidAddr,
            Error::InvalidParam(_) => Status::InvalidParam,
            Error::Unsupported(_) => Status::Unsupported,
            Error::Config(_) => Status::InvalidParam,
            Error::Transport(e) => e.status(),
            Error::TimedOut => Status::TimedOut,
            Error::RemoteAccess(_) => Status::Rejected,
        }
    }

    pub(crate) fn transport(e: ucs::Error) -> Error {
        Error::Transport(Arc::new(e))
    }

    pub(crate) fn endpoint(e: ucs::Error) -> Error {
        Error::Endpoint(Arc::new(e))
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
        ucs::Error::EndpointFailed(why) => format!("endpoint failed: {why}"),
        other => format!("endpoint failed: {other}"),
    }
}
