//! The transport conformance suite on TCP over the loopback device. The
//! one-sided checks (`rma_*`) run for `put_zcopy` (the memory domain
//! registers); those of `get_zcopy` say `skipped`.

use uct::testing::ComponentFixture;

uct::conformance_tests!(ComponentFixture::new(&rucx_tcp::COMPONENT, "lo"));
