//! The transport conformance suite: one body of checks, run for every
//! transport (compiled with the `testing` feature).
//!
//! A transport crate enables the feature in its dev-dependencies and
//! instantiates the suite in an integration test:
//!
//! ```ignore
//! use rucx_uct::testing::ComponentFixture;
//! rucx_uct::conformance_tests!(ComponentFixture::new(&my_transport::COMPONENT, "lo"));
//! ```
//!
//! That generates one `#[test]` per check, named after it. Each check opens
//! a fresh pair of ifaces from the fixture, checks only what the iface's
//! [`Caps`](crate::Caps) advertise, and drives both ifaces with a deadline
//! ([`TIMEOUT`]), so that a broken transport fails a check instead of
//! hanging it.
//!
//! * [`Fixture`], [`ComponentFixture`]: where the ifaces come from;
//! * [`TestSink`]: records everything an iface reports;
//! * [`Pair`]: two ifaces with their sinks and drive loops;
//! * [`checks`]: the checks themselves.

pub mod checks;
mod fixture;
mod pair;
mod sink;

pub use fixture::{ComponentFixture, Fixture};
pub use pair::{Pair, TIMEOUT};
pub use sink::{Am, Event, TestSink};

/// Generates one `#[test]` per conformance check, each on the fixture that
/// `$fixture` (an expression of a type implementing
/// [`testing::Fixture`](crate::testing::Fixture)) builds afresh.
#[macro_export]
macro_rules! conformance_tests {
    (@each $fixture:expr; $($check:ident)*) => {
        $(
            #[test]
            fn $check() {
                $crate::testing::checks::$check(&$fixture);
            }
        )*
    };
    ($fixture:expr) => {
        $crate::conformance_tests!(@each $fixture;
            caps_consistent reachability am_short am_bcopy am_zcopy limits ordering
            pending flush many_endpoints event_fd peer_failure ep_destroy_in_flight
            rma_caps rma_put rma_get rma_iov rma_access rma_bounds rma_bad_endpoint rma_dereg
            rma_forged_keys);
    };
}

/// The ranges of `iov` as destinations of `get_zcopy`, for tests whose
/// helpers name writable buffers with one kind of range for both
/// directions.
pub fn writable(iov: &[crate::Iov]) -> Vec<crate::IovMut> {
    iov.iter()
        .map(|v| crate::IovMut {
            ptr: v.ptr.cast_mut(),
            len: v.len,
        })
        .collect()
}
