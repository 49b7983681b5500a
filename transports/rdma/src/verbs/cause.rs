//! Typed causes of failures that a provider reports: a work completion's
//! status, an iWARP Terminate, and a queue pair's fatal event. All are
//! `std::error::Error`s, found on the source chain of the endpoint error
//! they cause.

use std::fmt;

use super::WcStatus;

impl WcStatus {
    /// What the status means, in words.
    pub fn describe(self) -> &'static str {
        match self {
            WcStatus::Success => "success",
            WcStatus::LocLenErr => "local length error",
            WcStatus::LocProtErr => "local protection error",
            WcStatus::WrFlushErr => "flushed",
            WcStatus::RemAccessErr => "remote access error",
            WcStatus::RemInvReqErr => "remote invalid request error",
            WcStatus::RemOpErr => "remote operation error",
            WcStatus::FatalErr => "fatal error",
        }
    }
}

impl fmt::Display for WcStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "work completion status: {}", self.describe())
    }
}

impl std::error::Error for WcStatus {}

/// The layer, error type and code an iWARP Terminate reports (RFC 5040
/// §4.8), and which side sent it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct TerminateCause {
    /// The layer that found the error: 0 RDMAP, 1 DDP, 2 the lower layer
    /// (MPA).
    pub layer: u8,
    /// Error type within the layer (4 bits).
    pub etype: u8,
    /// Error code within the type.
    pub code: u8,
    /// Whether the peer sent the Terminate (else this side did, having
    /// found the peer at fault).
    pub from_peer: bool,
}

impl TerminateCause {
    /// The layer's name.
    pub fn layer_name(&self) -> &'static str {
        match self.layer {
            0 => "RDMAP",
            1 => "DDP",
            2 => "MPA",
            _ => "unknown layer",
        }
    }
}

impl fmt::Display for TerminateCause {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let who = if self.from_peer { "peer sent" } else { "sent" };
        write!(
            f,
            "{who} Terminate: {} error (layer {}, type {}, code {:#04x})",
            self.layer_name(),
            self.layer,
            self.etype,
            self.code
        )
    }
}

impl std::error::Error for TerminateCause {}

/// A queue pair's fatal asynchronous event that no Terminate explains
/// (`IBV_EVENT_QP_FATAL`): the provider's words for why the queue pair
/// failed (over TCP, the socket error that ended the connection: a
/// timeout, a reset), and the completion status it explains when an error
/// completion failed the endpoint, which is its source.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QpFatal {
    /// What the event says.
    pub detail: String,
    /// The error completion that failed the endpoint, if one did.
    pub status: Option<WcStatus>,
}

impl fmt::Display for QpFatal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.detail)
    }
}

impl std::error::Error for QpFatal {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.status.as_ref().map(|s| s as _)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::error::Error as _;
    use uct::ucs::{EndpointCause, Error, Status};

    #[test]
    fn terminate_cause_says_layer_type_and_code() {
        let t = TerminateCause {
            layer: 1,
            etype: 2,
            code: 0x02,
            from_peer: true,
        };
        assert_eq!(
            t.to_string(),
            "peer sent Terminate: DDP error (layer 1, type 2, code 0x02)"
        );
        let ours = TerminateCause {
            layer: 0,
            etype: 1,
            code: 0,
            from_peer: false,
        };
        assert!(ours.to_string().starts_with("sent Terminate: RDMAP"));
    }

    #[test]
    fn fatal_completion_is_an_endpoint_failure_with_the_status_as_source() {
        let e = WcStatus::FatalErr.to_error("rc_iwarp").unwrap();
        assert_eq!(e.status(), Status::ConnectionReset);
        assert_eq!(
            e.to_string(),
            "rc_iwarp: endpoint failed: work completion status: fatal error"
        );
        let cause = e.source().unwrap();
        assert!(matches!(
            cause.downcast_ref::<EndpointCause>(),
            Some(EndpointCause::Transport(_))
        ));
        assert_eq!(
            cause.source().unwrap().downcast_ref::<WcStatus>(),
            Some(&WcStatus::FatalErr)
        );
        assert!(matches!(
            WcStatus::RemAccessErr.to_error("rc"),
            Some(Error::RemoteAccess { .. })
        ));
        assert!(matches!(
            WcStatus::WrFlushErr.to_error("rc"),
            Some(Error::Canceled)
        ));
        assert!(WcStatus::Success.to_error("rc").is_none());
    }
}
