//! What the iWARP wire tests share (`iwarp_wire.rs`, `iwarp_netns.rs`):
//! capturing with tshark, checking a capture against the iWARP rules, and
//! running `rucx-perftest` servers and clients on a host or in a network
//! namespace (the hosts and processes themselves are `tests/hosts`).

// Each test binary uses a part of it.
#![allow(dead_code)]

pub(crate) mod capture;
pub(crate) mod check;
pub(crate) mod perftest;
pub(crate) mod raw;
pub(crate) mod rules;
