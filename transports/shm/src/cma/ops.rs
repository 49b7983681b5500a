//! `put_zcopy` and `get_zcopy`: the checks at the initiator, then the copy.
//!
//! Order of the checks, all before any byte moves: the endpoint (live, not
//! failed), the iov (at most `max_iov` entries, total at most
//! [`MAX_RMA`]), the key ([`check_key`]: memory domain, form, owner =
//! the endpoint's peer, right, range), and the peer's liveness if it was
//! last seen more than [`LIVENESS_PERIOD`] ago. For a key of this very
//! process the live registration is checked too, and held (under the
//! table's read lock) while the copy runs.
//!
//! Errors of the copy: `ESRCH` (the peer exited) fails the endpoint;
//! `EFAULT` (a range not mapped: the peer's, or a local one) and `EPERM`
//! (the kernel refuses to attach) are `RemoteAccess`; others are `Io`. A
//! fault may come after earlier segments moved: bytes before the fault
//! are then written (the error says how many).

use std::time::Instant;

use uct::ucs::{AccessDenied, Error, Result};
use uct::{Access, EpId, Iov, KeyFields, Posted, RemoteKey};

use super::iface::{exited, CmaIface, LIVENESS_PERIOD, MAX_RMA};
use super::sys::{copy, Dir, Stopped};
use crate::md_keys;
use crate::proc_id::ProcessId;

/// The right a direction needs on the remote side.
fn right(dir: Dir) -> Access {
    match dir {
        Dir::Read => Access::REMOTE_READ,
        Dir::Write => Access::REMOTE_WRITE,
    }
}

fn op_name(dir: Dir) -> &'static str {
    match dir {
        Dir::Read => "get_zcopy",
        Dir::Write => "put_zcopy",
    }
}

/// Checks at the initiator that `rkey` allows `need` on `[remote_addr,
/// remote_addr + len)` of process `peer`, from the key's packed bytes:
/// `InvalidParam` for a key of another memory domain or a malformed one,
/// `RemoteAccess` for a key of another process, a missing right, or a
/// range outside the declared one. Returns the key's fields.
pub(super) fn check_key(
    rkey: &RemoteKey,
    peer: &ProcessId,
    remote_addr: u64,
    len: usize,
    need: Access,
) -> Result<KeyFields> {
    let (owner, f) = md_keys::key_owner(rkey)?;
    if owner != *peer {
        return Err(Error::remote_access(
            "cma",
            AccessDenied::InvalidKey(
                format!(
                    "it belongs to process {} (start {}), not to the endpoint's peer {} \
                     (start {})",
                    owner.pid, owner.start_time, peer.pid, peer.start_time
                )
                .into(),
            ),
        ));
    }
    if !f.access.contains(need) {
        return Err(Error::remote_access(
            "cma",
            AccessDenied::Rights {
                granted: format!("{:?}", f.access),
                needed: format!("{need:?}"),
            },
        ));
    }
    // The key's range does not wrap (checked when decoding).
    let key_end = f.addr.saturating_add(f.len);
    let inside = remote_addr >= f.addr
        && remote_addr
            .checked_add(len as u64)
            .is_some_and(|end| end <= key_end);
    if !inside {
        return Err(Error::remote_access(
            "cma",
            AccessDenied::OutOfRange {
                addr: remote_addr,
                len,
                reg_addr: f.addr,
                reg_len: f.len as usize,
            },
        ));
    }
    Ok(f)
}

impl CmaIface {
    /// A put or get, whole; see the module doc.
    ///
    /// # Safety
    ///
    /// The ranges of `iov` are valid for reads (`Write`) or for writes and
    /// untouched by anyone else (`Read`) during the call.
    pub(super) unsafe fn rma(
        &mut self,
        ep: EpId,
        dir: Dir,
        iov: &[Iov],
        remote_addr: u64,
        rkey: &RemoteKey,
    ) -> Result<Posted> {
        let max_iov = self.limits.max_iov;
        let e = self.ep_mut(ep)?;
        let (peer, pid, seen) = (e.peer, e.pid, e.seen);
        let name = op_name(dir);
        let total = uct::limits::check_iov(name, iov, max_iov, MAX_RMA)?;
        let need = right(dir);
        let fields = check_key(rkey, &peer, remote_addr, total, need)?;
        let now = Instant::now();
        if now.duration_since(seen) >= LIVENESS_PERIOD {
            if !peer.is_alive() {
                return Err(self.fail_ep(ep, exited(peer.pid)));
            }
            self.ep_mut(ep)?.seen = now;
        }
        let seg = self.limits.seg_size;
        let scratch = &mut self.scratch;
        let run = |scratch: &mut _| {
            if total == 0 {
                return Ok(());
            }
            // SAFETY: the caller's contract on `iov`, whose lengths add up
            // to `total`; the remote range was checked against the key.
            unsafe { copy(pid, dir, iov, remote_addr, total, seg, scratch) }
        };
        let copied = if peer == self.me {
            // The registration table is at hand: check the live
            // registration and keep it while copying.
            md_keys::REGS.with_range(&fields, remote_addr, total, need, |_| run(scratch))?
        } else {
            run(scratch)
        };
        match copied {
            Ok(()) => Ok(Posted::Done),
            Err(s) => Err(self.copy_error(ep, dir, peer.pid, remote_addr, total, s)),
        }
    }

    /// The error of a failed copy; fails the endpoint if the peer exited.
    fn copy_error(
        &mut self,
        ep: EpId,
        dir: Dir,
        pid: u32,
        remote_addr: u64,
        total: usize,
        s: Stopped,
    ) -> Error {
        let name = op_name(dir);
        let detail = format!(
            "{name} of {total} bytes at {remote_addr:#x} in process {pid} \
             (after {} bytes moved)",
            s.moved
        );
        let what = format!("cma: {detail}");
        match s.errno {
            libc::ESRCH => self.fail_ep(ep, exited(pid)),
            libc::EFAULT => Error::remote_access(
                "cma",
                AccessDenied::Refused(
                    format!(
                        "{detail}: bad address (the range is not mapped in the peer, or a \
                         local range is not)"
                    )
                    .into(),
                ),
            ),
            libc::EPERM => Error::remote_access(
                "cma",
                AccessDenied::Refused(
                    format!(
                        "{detail}: the kernel refused to attach (EPERM: another user, the \
                         Yama ptrace policy, or a peer that is not dumpable)"
                    )
                    .into(),
                ),
            ),
            libc::ENOMEM => Error::NoMemory(what),
            errno => Error::io(what, std::io::Error::from_raw_os_error(errno)),
        }
    }
}
