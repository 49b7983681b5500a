//! The processes of `netns_link_down.rs`.

pub(crate) mod peer;
