//! An endpoint whose peer went away fails with `Error::EndpointFailed`,
//! whose source chain holds the transport's error and its cause.

mod common;

use common::*;
use rucx::cause::EndpointCause;
use rucx::ucp::ucs;
use rucx::Error;
use std::error::Error as _;

#[test]
fn a_dead_peer_fails_the_endpoint_with_the_transports_error_as_source() {
    let ctx = context("tcp");
    let mut a = ctx.create_worker().expect("worker a");
    let mut b = ctx.create_worker().expect("worker b");
    let ab = a.connect(&b.address()).expect("a->b");
    let _ba = b.connect(&a.address()).expect("b->a");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while a.tag_send_blocking(ab, b"hello", 1).is_err() {
        assert!(std::time::Instant::now() < deadline, "no first send");
        a.progress();
        b.progress();
    }
    drop(b);
    let mut failure = None;
    progress_until(&mut a, 30, |a| match a.tag_send_blocking(ab, b"x", 1) {
        Err(e) => {
            failure = Some(e);
            true
        }
        Ok(_) => false,
    });
    let e = failure.expect("the send failed");
    let Error::EndpointFailed { cause } = &e else {
        panic!("expected EndpointFailed: {e:?}");
    };
    assert_eq!(e.status(), rucx::ucp::ucs::Status::ConnectionReset, "{e}");
    // The source is the transport's error itself.
    let src = e.source().and_then(|s| s.downcast_ref::<ucs::Error>());
    assert!(std::ptr::eq(src.unwrap(), &**cause));
    // tcp says which peer; what happened to the connection is its cause.
    match &**cause {
        ucs::Error::EndpointFailed { transport, cause } => {
            assert!(transport.starts_with("tcp "), "{transport}");
            assert!(
                matches!(
                    cause,
                    EndpointCause::Earlier(_) | EndpointCause::ConnectionLost
                ),
                "{cause:?}"
            );
        }
        // The OS error of the connection, one step further down.
        ucs::Error::Io { .. } => {
            let os = src.unwrap().source().unwrap();
            assert!(os.downcast_ref::<std::io::Error>().is_some(), "{os:?}");
        }
        ucs::Error::ConnectionLost { .. } => {}
        other => panic!("unexpected transport error {other:?}"),
    }
}
