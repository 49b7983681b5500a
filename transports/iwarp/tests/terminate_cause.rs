//! A Terminate reaches the user: an RC endpoint over the iWARP engine that
//! writes through a stale key fails, and the peer's Terminate (layer, type,
//! code) is on the failure's source chain.

use std::error::Error as _;

use rucx_rdma::TerminateCause;
use uct::testing::{ComponentFixture, Event, Fixture, Pair};
use uct::ucs::{EndpointCause, Error, Status};
use uct::{Access, Iov, Posted, Token};

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
    let error = p
        .sink_a
        .events
        .iter()
        .find_map(|e| match e {
            Event::EpFailed { ep: x, error } if *x == ep => Some(error.duplicate()),
            _ => None,
        })
        .unwrap();
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
