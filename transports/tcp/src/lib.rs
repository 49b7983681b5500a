//! TCP transport for rucx.
