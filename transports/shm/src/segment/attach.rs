//! The peer's side: opening another process's segment through
//! `/proc/<pid>/fd/<fd>`, with the checks that make mapping it safe.

use std::fs::{File, OpenOptions};
use std::io;
use std::os::unix::fs::OpenOptionsExt;

use uct::ucs::{Error, Result};

use crate::proc_id::ProcessId;

/// Opens descriptor `fd` of `owner` read-write, once it is known to be a
/// regular file of at least `len` bytes held by that very process.
pub(super) fn open_peer(owner: ProcessId, fd: u32, len: usize) -> Result<File> {
    let path = format!("/proc/{}/fd/{fd}", owner.pid);
    // Look before opening: opening a device or a terminal could have
    // effects of its own. (The descriptor may change between the two; the
    // open flags keep that harmless and the file is checked again below.)
    let meta = std::fs::metadata(&path).map_err(|e| open_error(owner, fd, &path, e))?;
    if !meta.is_file() {
        return Err(not_a_segment(owner, fd));
    }
    let file = OpenOptions::new()
        .read(true)
        .write(true)
        .custom_flags(libc::O_NOCTTY | libc::O_NONBLOCK)
        .open(&path)
        .map_err(|e| open_error(owner, fd, &path, e))?;
    // If the process is alive now, it was alive when the file was opened
    // (a pid is not reused while its process lives), so the descriptor
    // table was its own and not that of a process that inherited the pid.
    if !owner.is_alive() {
        return Err(gone(owner));
    }
    let meta = file
        .metadata()
        .map_err(|e| Error::io(format!("fstat of {path}"), e))?;
    if !meta.is_file() {
        return Err(not_a_segment(owner, fd));
    }
    if meta.len() < len as u64 {
        return Err(Error::InvalidAddr(format!(
            "segment of process {} (descriptor {fd}) has {} bytes, {len} were expected; \
             it is not the segment the address names",
            owner.pid,
            meta.len()
        )));
    }
    Ok(file)
}

fn gone(owner: ProcessId) -> Error {
    Error::Unreachable(format!(
        "process {} (start time {}) is gone (its pid is free or now names another \
         process); its segments cannot be attached",
        owner.pid, owner.start_time
    ))
}

fn not_a_segment(owner: ProcessId, fd: u32) -> Error {
    Error::InvalidAddr(format!(
        "descriptor {fd} of process {} is not a shared-memory segment (not a regular file)",
        owner.pid
    ))
}

fn open_error(owner: ProcessId, fd: u32, path: &str, e: io::Error) -> Error {
    match e.raw_os_error() {
        Some(libc::ENOENT) | Some(libc::ESRCH) => {
            if owner.is_alive() {
                Error::Unreachable(format!(
                    "process {} has no descriptor {fd}: it closed the segment",
                    owner.pid
                ))
            } else {
                gone(owner)
            }
        }
        Some(libc::EACCES) | Some(libc::EPERM) => Error::Unreachable(format!(
            "{path}: {e}; mapping a peer's segment needs permission to inspect the peer \
             (the same user, a dumpable peer, and no ptrace restriction such as \
             kernel.yama.ptrace_scope=3 or a security module forbidding it)"
        )),
        Some(libc::ENXIO) => not_a_segment(owner, fd),
        _ => Error::io(format!("opening {path}"), e),
    }
}
