//! A Terminate reaches the user: an RC endpoint over the iWARP engine that
//! writes through a stale key fails, and the peer's Terminate (layer, type,
//! code) is on the failure's source chain. So does a broken connection: the
//! socket error that ended it, not only the error completion that follows.

use std::error::Error as _;

use rucx_rdma::{QpFatal, TerminateCause, WcStatus};
use uct::testing::{ComponentFixture, Event, Fixture, Pair};
use uct::ucs::{EndpointCause, Error, Status};
use uct::{Access, EpId, Iov, IovMut, Posted, Token};

/// The Terminate on `e`'s source chain, if there is one.
fn terminate_of(e: &Error) -> Option<TerminateCause> {
    let mut next = e.source();
    while let Some(s) = next {
        if let Some(t) = s.downcast_ref::<TerminateCause>() {
            return Some(*t);
        }
        next = s.source();
    }
    None
}

/// The first failure `ep` of `p`'s iface a reported.
fn failure_of(p: &Pair, ep: EpId) -> Error {
    p.sink_a
        .events
        .iter()
        .find_map(|e| match e {
            Event::EpFailed { ep: x, error } if *x == ep => Some(error.duplicate()),
            _ => None,
        })
        .expect("an endpoint failure")
}

#[test]
fn write_through_a_stale_key_fails_the_endpoint_with_the_peers_terminate() {
    let f = ComponentFixture::new(&rucx_iwarp::COMPONENT, "iwarp_lo");
    let md = f.memory_domain().expect("iwarp has a memory domain");
    let mut target = vec![0u8; 64];
    let rw = Access::REMOTE_READ | Access::REMOTE_WRITE;
    // SAFETY: `target` outlives the registration and is not touched while
    // it is registered.
    let memh = unsafe { md.mem_reg(target.as_mut_ptr(), target.len(), rw) }.unwrap();
    let rkey = md.rkey_unpack(&md.mkey_pack(&memh).unwrap()).unwrap();
    md.mem_dereg(&memh).unwrap();

    let mut p = Pair::open(&f);
    let ep = p.ep_ab();
    let src = vec![7u8; 64];
    let iov = [Iov::from_slice(&src)];
    let addr = target.as_ptr() as u64;
    let posted = p
        .retry(
            "put_zcopy",
            // SAFETY: `src` outlives the pair, which is driven until the
            // endpoint failed and drops before `src`.
            |a| unsafe {
                a.put()
                    .expect("rc writes")
                    .put_zcopy(ep, &iov, addr, &rkey, Token(1))
            },
            |r| *r == Posted::NoResource,
        )
        .unwrap();
    assert_ne!(
        posted,
        Posted::Done,
        "a write to a dead key completed at once"
    );
    p.drive_until("the endpoint failure", |p| p.sink_a.ep_failures(ep) > 0);
    let error = failure_of(&p, ep);
    assert_eq!(error.status(), Status::ConnectionReset, "{error}");
    match &error {
        Error::EndpointFailed {
            cause: EndpointCause::Transport(_),
            ..
        } => {}
        other => panic!("expected a transport cause: {other:?}"),
    }
    let t = terminate_of(&error).unwrap_or_else(|| panic!("no Terminate in {error:?}"));
    assert!(t.from_peer, "{t}");
    // DDP tagged buffer error, invalid STag (RFC 5041 §7).
    assert_eq!((t.layer, t.etype, t.code), (1, 1, 0x00), "{t}");
    assert!(error.to_string().contains("peer sent Terminate"), "{error}");
    assert!(target.iter().all(|&b| b == 0));
    drop(p);
}

/// The fatal event on `e`'s source chain, if there is one.
fn fatal_of(e: &Error) -> Option<QpFatal> {
    let mut next = e.source();
    while let Some(s) = next {
        if let Some(f) = s.downcast_ref::<QpFatal>() {
            return Some(f.clone());
        }
        next = s.source();
    }
    None
}

/// Connects a pair over loopback, leaves something unread in b's socket
/// (a READ request from a when `read`, else a message), and drops b: its
/// socket is reset. Returns a's endpoint failure.
fn reset_by_the_peer(read: bool) -> Error {
    let f = ComponentFixture::new(&rucx_iwarp::COMPONENT, "iwarp_lo");
    let md = f.memory_domain().expect("iwarp has a memory domain");
    let mut source = vec![3u8; 1 << 20];
    // SAFETY: `source` outlives the registration and is only read.
    let memh =
        unsafe { md.mem_reg(source.as_mut_ptr(), source.len(), Access::REMOTE_READ) }.unwrap();
    let rkey = md.rkey_unpack(&md.mkey_pack(&memh).unwrap()).unwrap();
    let mut dest = vec![0u8; source.len()];

    let mut p = Pair::open(&f);
    let ep = p.ep_ab();
    // Connected: b has taken a message.
    assert_ne!(p.short(ep, 1, 0, b"hi"), Posted::NoResource);
    p.drive_until("the message", |p| !p.sink_b.ams.is_empty());
    if read {
        let iov = [IovMut::from_slice(&mut dest)];
        let addr = source.as_ptr() as u64;
        // SAFETY: `dest` outlives the pair, which drops before it.
        let posted = unsafe {
            p.a()
                .get()
                .expect("rc reads")
                .get_zcopy(ep, &iov, addr, &rkey, Token(1))
        };
        assert_eq!(posted.unwrap(), Posted::InFlight);
    } else {
        assert_ne!(p.short(ep, 1, 0, b"unread"), Posted::NoResource);
    }
    for _ in 0..100 {
        p.progress_a();
    }
    std::thread::sleep(std::time::Duration::from_millis(50));
    p.drop_b();
    p.drive_until("the endpoint failure", |p| p.sink_a.ep_failures(ep) > 0);
    let error = failure_of(&p, ep);
    drop(p);
    md.mem_dereg(&memh).unwrap();
    error
}

#[test]
fn a_connection_reset_under_a_read_fails_the_endpoint_with_the_socket_error() {
    let error = reset_by_the_peer(true);
    assert_eq!(error.status(), Status::ConnectionReset, "{error}");
    let fatal = fatal_of(&error).unwrap_or_else(|| panic!("no fatal event in {error:?}"));
    assert!(fatal.detail.contains("connection lost"), "{fatal:?}");
    assert!(error.to_string().contains(&fatal.detail), "{error}");
    // The READ's error completion, which the event explains.
    assert_eq!(fatal.status, Some(WcStatus::FatalErr), "{fatal:?}");
}

#[test]
fn a_connection_reset_with_nothing_outstanding_fails_the_endpoint_with_the_socket_error() {
    let error = reset_by_the_peer(false);
    assert_eq!(error.status(), Status::ConnectionReset, "{error}");
    let fatal = fatal_of(&error).unwrap_or_else(|| panic!("no fatal event in {error:?}"));
    assert!(fatal.detail.contains("connection lost"), "{fatal:?}");
    assert!(error.to_string().contains(&fatal.detail), "{error}");
    // No error completion: the disconnection reported it.
    assert_eq!(fatal.status, None, "{fatal:?}");
}
