//! rucx protocols (ucp).
