//! UCX-compatible numeric status codes.
//!
//! The values are those of UCX's `ucs_status_t` (`src/ucs/type/status.h`), so
//! that a C API on top of rucx can hand them to programs written for UCX.

/// A status code with UCX's numeric value.
///
/// `Ok` and `InProgress` are not failures; every other value is.
#[repr(i8)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Status {
    /// Success.
    Ok = 0,
    /// The operation was accepted and completes later.
    InProgress = 1,
    /// No message is available.
    NoMessage = -1,
    /// Out of transport resources; retry later.
    NoResource = -2,
    /// Input/output error.
    IoError = -3,
    /// Out of memory.
    NoMemory = -4,
    /// An argument is invalid.
    InvalidParam = -5,
    /// The destination cannot be reached.
    Unreachable = -6,
    /// An address is invalid.
    InvalidAddr = -7,
    /// The function is not implemented.
    NotImplemented = -8,
    /// The message did not fit the receive buffer.
    MessageTruncated = -9,
    /// No progress was made.
    NoProgress = -10,
    /// A buffer is too small.
    BufferTooSmall = -11,
    /// No such element.
    NoElem = -12,
    /// Some of the requested connections failed.
    SomeConnectsFailed = -13,
    /// No device is available.
    NoDevice = -14,
    /// The resource is busy.
    Busy = -15,
    /// The operation was canceled.
    Canceled = -16,
    /// A shared memory segment failed.
    ShmemSegment = -17,
    /// The element already exists.
    AlreadyExists = -18,
    /// A value is out of range.
    OutOfRange = -19,
    /// The operation timed out.
    TimedOut = -20,
    /// A limit was exceeded.
    ExceedsLimit = -21,
    /// The operation is not supported.
    Unsupported = -22,
    /// The peer rejected the request.
    Rejected = -23,
    /// The endpoint is not connected.
    NotConnected = -24,
    /// The connection was reset by the peer.
    ConnectionReset = -25,
    /// The endpoint timed out (peer failure detected).
    EndpointTimeout = -80,
}

impl Status {
    /// All statuses, for tables and tests.
    pub const ALL: [Status; 28] = [
        Status::Ok,
        Status::InProgress,
        Status::NoMessage,
        Status::NoResource,
        Status::IoError,
        Status::NoMemory,
        Status::InvalidParam,
        Status::Unreachable,
        Status::InvalidAddr,
        Status::NotImplemented,
        Status::MessageTruncated,
        Status::NoProgress,
        Status::BufferTooSmall,
        Status::NoElem,
        Status::SomeConnectsFailed,
        Status::NoDevice,
        Status::Busy,
        Status::Canceled,
        Status::ShmemSegment,
        Status::AlreadyExists,
        Status::OutOfRange,
        Status::TimedOut,
        Status::ExceedsLimit,
        Status::Unsupported,
        Status::Rejected,
        Status::NotConnected,
        Status::ConnectionReset,
        Status::EndpointTimeout,
    ];

    /// The numeric value, as UCX's `ucs_status_t`.
    pub fn code(self) -> i8 {
        self as i8
    }

    /// The status with this numeric value, if rucx knows it.
    pub fn from_code(code: i8) -> Option<Status> {
        Status::ALL.iter().copied().find(|s| s.code() == code)
    }

    /// UCX's message for this status (`ucs_status_string`).
    pub fn as_str(self) -> &'static str {
        match self {
            Status::Ok => "Success",
            Status::InProgress => "Operation in progress",
            Status::NoMessage => "No pending message",
            Status::NoResource => "No resources are available to initiate the operation",
            Status::IoError => "Input/output error",
            Status::NoMemory => "Out of memory",
            Status::InvalidParam => "Invalid parameter",
            Status::Unreachable => "Destination is unreachable",
            Status::InvalidAddr => "Address not valid",
            Status::NotImplemented => "Function not implemented",
            Status::MessageTruncated => "Message truncated",
            Status::NoProgress => "No progress",
            Status::BufferTooSmall => "Provided buffer is too small",
            Status::NoElem => "No such element",
            Status::SomeConnectsFailed => "Failed to connect some of the requested endpoints",
            Status::NoDevice => "No such device",
            Status::Busy => "Device is busy",
            Status::Canceled => "Request canceled",
            Status::ShmemSegment => "Shared memory error",
            Status::AlreadyExists => "Element already exists",
            Status::OutOfRange => "Index out of range",
            Status::TimedOut => "Timeout expired",
            Status::ExceedsLimit => "User-defined limit was reached",
            Status::Unsupported => "Unsupported operation",
            Status::Rejected => "Operation rejected by remote peer",
            Status::NotConnected => "Endpoint is not connected",
            Status::ConnectionReset => "Connection reset by remote peer",
            Status::EndpointTimeout => "Endpoint timeout",
        }
    }
}

impl std::fmt::Display for Status {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_round_trip_and_match_ucx() {
        for s in Status::ALL {
            assert_eq!(Status::from_code(s.code()), Some(s));
        }
        // Spot checks against UCX's status.h.
        assert_eq!(Status::NoResource.code(), -2);
        assert_eq!(Status::MessageTruncated.code(), -9);
        assert_eq!(Status::Canceled.code(), -16);
        assert_eq!(Status::ConnectionReset.code(), -25);
        assert_eq!(Status::EndpointTimeout.code(), -80);
        assert_eq!(Status::SomeConnectsFailed.code(), -13);
        assert_eq!(Status::ShmemSegment.code(), -17);
        // UCX's range markers (first/last link and endpoint failure, last)
        // are no statuses of their own.
        for code in [-40, -59, -60, -89, -100, 2] {
            assert_eq!(Status::from_code(code), None);
        }
    }
}
