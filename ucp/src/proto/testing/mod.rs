//! Protocol-level test harness: a [`Core`](super::core::Core) with one
//! recorded lane, and a way to carry what one core posted to another,
//! without a worker or a transport.
//!
//! [`Rec`](rec::Rec) implements [`Lanes`](super::lanes::Lanes): it
//! records every operation as a [`Sent`], answers `NoResource` while
//! `full` is set (or once it took `room_for` more operations) and fails
//! every operation while `fail` is set; zero-copy reads and writes move
//! their bytes between the two nodes' buffers (both in this process),
//! checked against the key's range. A zero-copy operation is `InFlight`
//! until the test completes its token ([`Node::complete`],
//! [`Node::complete_all`]). [`Node`] (`node.rs`) pairs a core with its
//! recorder and one endpoint; [`deliver`] (`flow.rs`) feeds the active
//! messages one node sent to the other as arrivals, then carries out the
//! commands they produced, and [`exchange`] and [`settle`] repeat that
//! until the nodes are quiet.

mod flow;
mod node;
mod rec;

pub(crate) use flow::*;
pub(crate) use node::{context_on, virt_attr, Node};
pub(crate) use rec::Sent;
