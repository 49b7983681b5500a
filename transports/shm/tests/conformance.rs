//! The transport conformance suite on the `posix` transport (the first
//! resource of the shm component). The `cma` transport, which has no
//! active messages, runs the suite's RMA checks in its own unit tests.

use uct::testing::ComponentFixture;

uct::conformance_tests!(ComponentFixture::new(&rucx_shm::COMPONENT, "memory"));
