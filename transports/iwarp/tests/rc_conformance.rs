//! The transport conformance suite on the RC transport over the userspace
//! iWARP engine, on the loopback device: active messages, flow control,
//! failure, and the one-sided checks for put (RDMA WRITE) and get (RDMA
//! READ).

use uct::testing::ComponentFixture;

uct::conformance_tests!(ComponentFixture::new(&rucx_iwarp::COMPONENT, "iwarp_lo"));
