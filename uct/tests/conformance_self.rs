//! The transport conformance suite on the `self` transport, with the
//! default mailbox and with one of 4 messages (back-pressure everywhere).

use rucx_uct::self_tl::{SelfComponent, SelfConfig, COMPONENT};
use rucx_uct::testing::ComponentFixture;

rucx_uct::conformance_tests!(ComponentFixture::new(&COMPONENT, "memory"));

mod tiny_mailbox {
    use super::*;

    static TINY: SelfComponent = SelfComponent::with_config(SelfConfig {
        mailbox_bytes: SelfConfig::MIN_MAILBOX_BYTES,
        mailbox_msgs: 4,
    });

    rucx_uct::conformance_tests!(ComponentFixture::new(&TINY, "memory"));
}
