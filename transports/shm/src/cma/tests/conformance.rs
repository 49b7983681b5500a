//! The one-sided checks of the transport conformance suite, on two `cma`
//! ifaces of this process from the `shm` component (its memory domain
//! registers through `md_keys`).
//!
//! Both ifaces are this process, so keys are checked against the live
//! registration as well (see `ops.rs`); that is what makes `rma_dereg` and
//! the forged-key part of `rma_forged_keys` pass, which between two
//! processes CMA cannot do. The checks of active messages, and
//! `caps_consistent`, `reachability` and `peer_failure` (which send active
//! messages), do not apply to a transport without them.

use uct::testing::{checks, ComponentFixture};

use super::super::TL_NAME;
use super::available;

fn fixture() -> ComponentFixture {
    ComponentFixture::with_filter(&crate::COMPONENT, "shm/cma", |r| r.tl_name == TL_NAME)
}

macro_rules! rma_checks {
    ($($check:ident)*) => {$(
        #[test]
        fn $check() {
            if available() {
                checks::$check(&fixture());
            }
        }
    )*};
}

rma_checks!(rma_caps rma_put rma_get rma_iov rma_access rma_bounds rma_bad_endpoint rma_dereg
    rma_forged_keys);
