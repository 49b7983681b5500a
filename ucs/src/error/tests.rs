use super::*;
use std::error::Error as _;

#[derive(Debug, thiserror::Error)]
#[error("layer 1, type 2, code 0x02")]
struct Report;

#[test]
fn limit_says_what_and_maps_to_invalid_param() {
    let e = Error::limit("am_short payload", 300, 256);
    assert_eq!(
        e.to_string(),
        "am_short payload: 300 exceeds the maximum of 256"
    );
    assert_eq!(e.status(), Status::InvalidParam);
    assert!(matches!(
        e.duplicate(),
        Error::Limit {
            op: "am_short payload",
            len: 300,
            max: 256
        }
    ));
}

#[test]
fn io_errors_map_as_ucx_s() {
    let io = |kind| Error::io("listen on 127.0.0.1:1", io::Error::from(kind)).status();
    assert_eq!(io(io::ErrorKind::AddrInUse), Status::Busy);
    assert_eq!(io(io::ErrorKind::ConnectionRefused), Status::Unreachable);
    assert_eq!(io(io::ErrorKind::PermissionDenied), Status::IoError);
}

#[test]
fn op_unsupported_names_transport_and_op() {
    let e = Error::op_unsupported("posix", "am_zcopy");
    assert_eq!(e.to_string(), "posix: am_zcopy is not supported");
    assert_eq!(e.status(), Status::Unsupported);
    let e = Error::UnknownEndpoint {
        transport: "tcp".into(),
        ep: 7,
    };
    assert_eq!(e.to_string(), "tcp: no endpoint 7");
    assert_eq!(e.status(), Status::InvalidParam);
}

#[test]
fn remote_access_reason_is_the_source() {
    let reason = AccessDenied::OutOfRange {
        addr: 0x1010,
        len: 32,
        reg_addr: 0x1000,
        reg_len: 16,
    };
    let e = Error::remote_access("cma", reason.clone());
    assert_eq!(e.status(), Status::Rejected);
    let text = e.to_string();
    assert!(
        text.starts_with("cma: remote access denied: 32 bytes at 0x1010"),
        "{text}"
    );
    let src = e.source().and_then(|s| s.downcast_ref::<AccessDenied>());
    assert_eq!(src, Some(&reason));
    match e.duplicate() {
        Error::RemoteAccess { reason: r, .. } => assert_eq!(r, reason),
        other => panic!("{other:?}"),
    }
}

#[test]
fn endpoint_cause_chain_reaches_the_transport_report() {
    let e = Error::endpoint_failed("rc", EndpointCause::transport(Report));
    assert_eq!(e.status(), Status::ConnectionReset);
    assert_eq!(
        e.to_string(),
        "rc: endpoint failed: layer 1, type 2, code 0x02"
    );
    let cause = e.source().unwrap();
    assert!(cause.downcast_ref::<EndpointCause>().is_some());
    assert!(cause.source().unwrap().downcast_ref::<Report>().is_some());
    // The copy shares the report.
    let dup = e.duplicate();
    assert!(dup.source().unwrap().source().unwrap().is::<Report>());
}

#[test]
fn endpoint_cause_earlier_reaches_the_errno() {
    let first = Error::io("send", io::Error::from_raw_os_error(libc::ECONNRESET));
    let e = Error::endpoint_failed("tcp 10.0.0.1:4000", EndpointCause::Earlier(first.into()));
    let text = e.to_string();
    assert!(
        text.starts_with("tcp 10.0.0.1:4000: endpoint failed: send: "),
        "{text}"
    );
    let earlier = e.source().unwrap().source().unwrap();
    assert!(matches!(
        earlier.downcast_ref::<Error>(),
        Some(Error::Io { .. })
    ));
    let os = earlier
        .source()
        .unwrap()
        .downcast_ref::<io::Error>()
        .unwrap();
    assert_eq!(os.raw_os_error(), Some(libc::ECONNRESET));
    let gone = Error::endpoint_failed("self", EndpointCause::PeerGone);
    assert_eq!(gone.to_string(), "self: endpoint failed: the peer is gone");
    assert!(gone.source().unwrap().source().is_none());
}
