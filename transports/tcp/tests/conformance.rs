//! The transport conformance suite on TCP over the loopback device.

use rucx_uct::testing::ComponentFixture;

rucx_uct::conformance_tests!(ComponentFixture::new(&rucx_tcp::COMPONENT, "lo"));
