//! rucx.
