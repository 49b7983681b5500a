//! Wireup: worker addresses and lane selection.

pub mod address;
pub mod lanes;
