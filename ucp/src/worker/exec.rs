//! The executor: carries out the protocols' [`Command`]s with the ifaces.

use super::ifaces::Ifaces;
use crate::proto::command::Command;
use crate::proto::core::Core;

impl Core {
    /// Whether commands wait to be carried out.
    #[inline]
    pub(crate) fn has_commands(&self) -> bool {
        !self.commands.is_empty()
    }

    /// Carries out every queued command, in order, including those queued
    /// meanwhile. Returns how many it carried out.
    ///
    /// Wireup needs the ifaces themselves (it may create transport
    /// endpoints), and waiting for room is this executor's alone (no
    /// protocol calls `pending_add`); every other command goes to the
    /// protocols, which reach the transports through the
    /// [`crate::proto::lanes::Lanes`] of the ifaces.
    pub(crate) fn run_commands(&mut self, ifaces: &mut Ifaces) -> usize {
        let mut n = 0;
        while let Some(c) = self.commands.pop_front() {
            n += 1;
            match c {
                Command::Wireup { iface, src, addr } => match self.wireup_peer(ifaces, &addr) {
                    Ok(ep) => {
                        self.src_eps.insert((iface, src), ep);
                        self.stream_adopt(iface, src, ep);
                    }
                    Err(e) => tracing::warn!("no endpoint back to worker {:#x}: {e}", addr.uuid),
                },
                Command::AwaitRoom { iface, uct_ep } => {
                    if let Err(e) = ifaces.pending_add(iface, uct_ep) {
                        self.room_refused(iface, uct_ep, e);
                    }
                }
                c => self.execute(ifaces, c),
            }
        }
        n
    }
}
