use super::*;
use std::error::Error as _;

#[test]
fn endpoint_failure_keeps_the_transport_error_as_source() {
    let inner = ucs::Error::endpoint_failed("tcp 10.0.0.1:4000", EndpointCause::ConnectionLost);
    let e = Error::endpoint(inner);
    // Said once, not "endpoint failed: ... endpoint failed".
    assert_eq!(
        e.to_string(),
        "tcp 10.0.0.1:4000: endpoint failed: connection lost"
    );
    assert_eq!(e.status(), Status::ConnectionReset);
    let src = e.source().and_then(|s| s.downcast_ref::<ucs::Error>());
    assert!(matches!(
        src,
        Some(ucs::Error::EndpointFailed {
            cause: EndpointCause::ConnectionLost,
            ..
        })
    ));
    let timed_out = Error::endpoint(ucs::Error::TimedOut("tcp: connect".into()));
    assert_eq!(
        timed_out.to_string(),
        "endpoint failed: timed out: tcp: connect"
    );
    assert_eq!(timed_out.status(), Status::EndpointTimeout);
}

#[test]
fn transport_error_is_the_source() {
    let e = Error::transport(ucs::Error::op_unsupported("posix", "am_zcopy"));
    assert_eq!(
        e.to_string(),
        "transport error: posix: am_zcopy is not supported"
    );
    assert_eq!(e.status(), Status::Unsupported);
    assert!(e.source().unwrap().is::<ucs::Error>());
}

#[test]
fn limit_and_remote_access_are_structured() {
    let e = Error::Limit {
        op: "put iov entries",
        len: 20,
        max: 16,
    };
    assert_eq!(
        e.to_string(),
        "put iov entries: 20 exceeds the maximum of 16"
    );
    assert_eq!(e.status(), Status::InvalidParam);
    let reason = AccessDenied::Rights {
        granted: "REMOTE_READ".into(),
        needed: "REMOTE_WRITE".into(),
    };
    let e = Error::remote_access(reason.clone());
    assert_eq!(
        e.to_string(),
        "remote access denied: the registration grants REMOTE_READ, not REMOTE_WRITE"
    );
    assert_eq!(e.status(), Status::Rejected);
    assert_eq!(
        e.source().unwrap().downcast_ref::<AccessDenied>(),
        Some(&reason)
    );
}

#[test]
fn peer_failed_is_an_endpoint_failure_of_ucp() {
    let e = Error::endpoint(peer_failed("no endpoint back to the sender".into()));
    assert_eq!(
        e.to_string(),
        "ucp: endpoint failed: no endpoint back to the sender"
    );
    assert_eq!(e.status(), Status::ConnectionReset);
}
