//! Wake-up of a sleeping receiver: a Unix datagram socket in the abstract
//! namespace (nothing in the file system, gone when the process is), named
//! after the receiving process and iface. A producer that finds the
//! receiver armed sends one empty datagram; the receiver's socket is the
//! iface's event fd.

use std::os::fd::{AsRawFd, RawFd};
use std::os::linux::net::SocketAddrExt;
use std::os::unix::net::{SocketAddr, UnixDatagram};

use uct::ucs::{Error, Result};

use crate::proc_id::ProcessId;

fn name(owner: ProcessId, iface_id: u32) -> Vec<u8> {
    format!("rucx-posix-{}-{}-{}", owner.pid, owner.start_time, iface_id).into_bytes()
}

/// The receiving end, owned by the iface.
#[derive(Debug)]
pub(crate) struct WakeRx {
    sock: UnixDatagram,
}

impl WakeRx {
    pub(crate) fn bind(owner: ProcessId, iface_id: u32) -> Result<WakeRx> {
        let addr = SocketAddr::from_abstract_name(name(owner, iface_id))
            .map_err(|e| Error::io("posix: wake-up socket name", e))?;
        let sock = UnixDatagram::bind_addr(&addr)
            .map_err(|e| Error::io("posix: binding the wake-up socket", e))?;
        sock.set_nonblocking(true)
            .map_err(|e| Error::io("posix: wake-up socket", e))?;
        Ok(WakeRx { sock })
    }

    pub(crate) fn fd(&self) -> RawFd {
        self.sock.as_raw_fd()
    }

    /// Reads every pending wake-up datagram.
    pub(crate) fn drain(&self) {
        let mut b = [0u8; 8];
        while self.sock.recv(&mut b).is_ok() {}
    }
}

/// The sending end: one unbound socket per iface, used for every peer.
#[derive(Debug)]
pub(crate) struct WakeTx {
    sock: UnixDatagram,
}

impl WakeTx {
    pub(crate) fn new() -> Result<WakeTx> {
        let sock = UnixDatagram::unbound().map_err(|e| Error::io("posix: wake-up socket", e))?;
        sock.set_nonblocking(true)
            .map_err(|e| Error::io("posix: wake-up socket", e))?;
        Ok(WakeTx { sock })
    }

    /// Address of a peer's wake-up socket.
    pub(crate) fn target(owner: ProcessId, iface_id: u32) -> Result<SocketAddr> {
        SocketAddr::from_abstract_name(name(owner, iface_id))
            .map_err(|e| Error::io("posix: wake-up socket name", e))
    }

    /// Sends a wake-up. A full socket buffer means wake-ups are already
    /// pending; a missing socket means the receiver is gone (its death is
    /// detected separately): both are ignored.
    pub(crate) fn wake(&self, to: &SocketAddr) {
        if let Err(e) = self.sock.send_to_addr(&[], to) {
            tracing::trace!("posix: wake-up not sent: {e}");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wake_reaches_the_bound_socket() {
        let me = ProcessId::current().unwrap();
        let rx = WakeRx::bind(me, 7001).unwrap();
        assert!(WakeRx::bind(me, 7001).is_err(), "names are unique");
        let tx = WakeTx::new().unwrap();
        let to = WakeTx::target(me, 7001).unwrap();
        tx.wake(&to);
        tx.wake(&to);
        let mut pfd = libc::pollfd {
            fd: rx.fd(),
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: one valid pollfd.
        assert_eq!(unsafe { libc::poll(&mut pfd, 1, 1000) }, 1);
        rx.drain();
        // SAFETY: as above.
        assert_eq!(unsafe { libc::poll(&mut pfd, 1, 0) }, 0, "drained");
        // A receiver that is gone: ignored.
        tx.wake(&WakeTx::target(me, 7002).unwrap());
    }
}
