//! An endpoint's failure: reported once, and only in peer mode.

use crate::proto::testing::{virt_attr, Node};
use crate::uct::{AmSink, EpId};
use crate::Error;

fn fail(n: &mut Node) {
    n.core
        .ep_failed(EpId(0), crate::error::peer_failed("gone".into()));
    n.run();
}

#[test]
fn a_peer_mode_endpoint_reports_its_failure_once() {
    let mut a = Node::new(virt_attr(|_| {}));
    if let Some(st) = a.core.eps.get_mut(a.ep) {
        st.report_failure = true;
    }
    fail(&mut a);
    fail(&mut a);
    let f = &a.core.done.ep_failures;
    assert_eq!(f.len(), 1, "{f:?}");
    assert_eq!(f[0].0, a.ep);
    assert!(matches!(f[0].1, Error::EndpointFailed { .. }));
    assert!(f[0].2.is_none(), "no handler was given");
}

#[test]
fn an_endpoint_not_in_peer_mode_reports_nothing() {
    let mut a = Node::new(virt_attr(|_| {}));
    fail(&mut a);
    assert!(a.core.done.ep_failures.is_empty());
    assert!(a.core.eps.get(a.ep).is_some_and(|e| e.failed.is_some()));
}
