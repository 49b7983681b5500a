//! Hosts for the tests that run processes apart from each other: network
//! namespaces (one, or two joined by a veth pair), processes started in
//! them with their output in a scratch folder. Used by the iWARP wire
//! tests (`iwarp_wire.rs`, `iwarp_netns.rs`) and `netns_link_down.rs`.

// Each test binary uses a part of it.
#![allow(dead_code)]

pub(crate) mod netns;
pub(crate) mod procs;
