//! The structured reasons inside [`Error`](super::Error): why an endpoint
//! failed and why a remote access was refused.

use std::borrow::Cow;
use std::fmt;
use std::sync::Arc;

/// Why an endpoint failed.
///
/// An OS error is an [`Earlier`](EndpointCause::Earlier) error of the
/// connection: [`Error::Io`](super::Error::Io) with its `errno`.
///
/// A transport with its own typed report of the failure (an iWARP
/// Terminate, an RDMA completion status) puts it in [`Transport`]; a
/// program finds it with `downcast_ref` on the source chain.
///
/// [`Transport`]: EndpointCause::Transport
#[derive(Debug, Clone)]
#[non_exhaustive]
pub enum EndpointCause {
    /// The peer, or the iface the endpoint sends to, is gone; the
    /// transport knows no more than that.
    PeerGone,
    /// The connection under the endpoint ended.
    ConnectionLost,
    /// The transport's own report of the failure.
    Transport(Arc<dyn std::error::Error + Send + Sync>),
    /// An earlier failure of the connection, which all its endpoints share.
    Earlier(Arc<super::Error>),
    /// A failure the transport describes only in words.
    Other(Cow<'static, str>),
}

impl EndpointCause {
    /// A transport's typed cause.
    pub fn transport(e: impl std::error::Error + Send + Sync + 'static) -> EndpointCause {
        EndpointCause::Transport(Arc::new(e))
    }
}

impl fmt::Display for EndpointCause {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            EndpointCause::PeerGone => f.write_str("the peer is gone"),
            EndpointCause::ConnectionLost => f.write_str("connection lost"),
            EndpointCause::Transport(e) => write!(f, "{e}"),
            EndpointCause::Earlier(e) => write!(f, "{e}"),
            EndpointCause::Other(s) => f.write_str(s),
        }
    }
}

impl std::error::Error for EndpointCause {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            EndpointCause::Transport(e) => Some(&**e),
            EndpointCause::Earlier(e) => Some(&**e),
            _ => None,
        }
    }
}

/// Why a peer's memory refused a one-sided access.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum AccessDenied {
    /// The range reaches outside the registration the key names.
    #[error(
        "{len} bytes at {addr:#x} are outside the registration of \
         {reg_len} bytes at {reg_addr:#x}"
    )]
    OutOfRange {
        /// Start of the access.
        addr: u64,
        /// Length of the access.
        len: usize,
        /// Start of the registration.
        reg_addr: u64,
        /// Length of the registration.
        reg_len: usize,
    },
    /// The registration does not grant the access.
    #[error("the registration grants {granted}, not {needed}")]
    Rights {
        /// The rights it grants.
        granted: String,
        /// The rights the access needs.
        needed: String,
    },
    /// The key names no live registration of the target: forged, stale,
    /// or packed by another process or memory domain.
    #[error("the key is not valid at the target: {0}")]
    InvalidKey(Cow<'static, str>),
    /// The target or the kernel refused without a more precise reason.
    #[error("refused: {0}")]
    Refused(Cow<'static, str>),
}
