//! Waiting for transport resources: the one way a protocol asks to be
//! told when a lane has room again.
//!
//! A protocol whose lane answered `NoResource` calls
//! [`Core::await_room`] and stops. That records one
//! [`Command::AwaitRoom`] per lane (a lane already awaited is not asked
//! again); the executor registers it with the transport (`pending_add`)
//! and, if the transport refuses, fails the lane ([`Core::room_refused`]).
//! When the transport reports room (`pending_ready`), `Command::Resume`
//! clears the mark ([`Core::room_again`]) and resumes what waits on the
//! endpoint: its queued sends, its reads, parked one-sided operations.
//!
//! Protocol modules never call `pending_add` themselves.

use super::command::Command;
use super::core::Core;
use crate::ucs;
use crate::ucs::slab::SlabId;
use crate::uct::EpId;

// One bit per lane in `EpState::awaiting`.
const _: () = assert!(super::select::MAX_LANES <= 64);

impl Core {
    /// Asks to be told when lane `(iface, uct_ep)` of endpoint `ep` has
    /// room; once per lane until it has.
    pub(crate) fn await_room(&mut self, ep: SlabId, iface: usize, uct_ep: EpId) {
        let Some(st) = self.eps.get_mut(ep) else {
            return;
        };
        if let Some(i) = st.lanes.iter().position(|&l| l == (iface, uct_ep)) {
            let bit = 1u64 << i;
            if st.awaiting & bit != 0 {
                return;
            }
            st.awaiting |= bit;
        }
        self.commands
            .push_back(Command::AwaitRoom { iface, uct_ep });
    }

    /// Lane `(iface, uct_ep)` has room again: it is no longer awaited.
    /// Returns the endpoint it serves.
    pub(crate) fn room_again(&mut self, iface: usize, uct_ep: EpId) -> Option<SlabId> {
        let ep = self.lane_ep(iface, uct_ep)?;
        if let Some(st) = self.eps.get_mut(ep) {
            if let Some(i) = st.lanes.iter().position(|&l| l == (iface, uct_ep)) {
                st.awaiting &= !(1u64 << i);
            }
        }
        Some(ep)
    }

    /// The transport refused to wait on lane `(iface, uct_ep)` (it
    /// failed): fail the lane, as if the transport had reported it.
    pub(crate) fn room_refused(&mut self, iface: usize, uct_ep: EpId, error: ucs::Error) {
        self.room_again(iface, uct_ep);
        self.commands.push_back(Command::FailLane {
            iface,
            uct_ep,
            error,
        });
    }
}
