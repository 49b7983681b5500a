//! `rc_verbs` between processes: what the NIC does on its own, in one
//! process's memory, for another.
//!
//! * `peer_death`: a peer killed (`kill -9`) in the middle of a get, a put
//!   and a tag rendezvous (either way); the survivor's request ends with
//!   an error, no hang, nothing is written into its buffers afterwards,
//!   and its endpoint to another worker still works.
//! * `keys`: forged keys (rights and range widened, another key byte,
//!   another region index) and a stale key (the region unmapped) get a
//!   remote access error from the target's device; the target finds its
//!   memory untouched. The error ends the connection, so every endpoint
//!   between the two workers fails, and a new endpoint works.
//! * `one_sided`: puts, gets and device atomics (`RUCX_ATOMIC_MODE=device`)
//!   from several processes on memory of a process that does not call
//!   `progress` meanwhile; the results are exact.
//!
//! Built with the `verbs` feature only; without an RDMA device each test
//! says `skipped: no RDMA device` (fails with `RUCX_REQUIRE_ALL=1`). Run in
//! `tests/verbs_guest/suite.sh`. The test binary starts itself again as
//! the other processes (see `common`), and talks to them over their
//! standard input and output, not over the connections the tests break.
#![cfg(feature = "verbs")]

mod common;
#[path = "verbs_processes/ctl.rs"]
mod ctl;
#[path = "verbs_processes/keys.rs"]
mod keys;
#[path = "verbs_processes/one_sided.rs"]
mod one_sided;
#[path = "verbs_processes/peer_death.rs"]
mod peer_death;
