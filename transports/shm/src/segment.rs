//! Shared-memory segments: memory that one process creates and its peers
//! on the same host map (Linux only).
//!
//! What it does:
//!
//! * [`Segment::create`] makes a segment of a given size on the owner's
//!   side, from one of two backends ([`Backend`], `RUCX_POSIX_BACKEND`):
//!   - **memfd** (`memfd_create`): anonymous memory with no name in any
//!     file system, so nothing can be left behind after an exit, a crash or
//!     `kill -9`; the memory is freed when the last descriptor and mapping
//!     are gone. Its size is sealed, so no one who opens it can shrink it
//!     under the mappings.
//!   - **file**: a file `rucx-<pid>-<start_time>-<counter>` in
//!     `RUCX_POSIX_DIR` (default `/dev/shm`), created `O_EXCL` with mode
//!     0600 and unlinked at once. A process killed between `open` and
//!     `unlink` leaves the file; the next create in that directory (by any
//!     process) removes the files of processes that are gone (see
//!     `reap.rs`).
//!
//!   `auto` (the default) uses memfd and falls back to the file if
//!   `memfd_create` fails. Either way every page is reserved at create time
//!   (`posix_fallocate`), so a full tmpfs is an [`Error::NoMemory`] naming
//!   the place and the sizes, not a `SIGBUS` on first touch later.
//! * [`Segment::attach`] maps a peer's segment, given the owner's
//!   [`ProcessId`] and descriptor number: peers find a segment through
//!   `/proc/<pid>/fd/<fd>`, never by name. It checks that the owner is
//!   still the same process after opening (a recycled pid must not hand out
//!   another process's file), that the descriptor is a regular file, and
//!   that the file is at least as long as the mapping (mapping beyond the
//!   end is what would raise `SIGBUS`). The attached side keeps no
//!   descriptor: the mapping holds the memory.
//!
//! What it does not do: decide what lives in a segment, carry addresses
//! between processes, or keep a peer from scribbling over shared bytes (a
//! segment is shared read-write by design; readers of shared state check
//! it, as [`Fifo`](crate::Fifo) does). A peer that has the file open could
//! still shrink a file-backend segment (tmpfs files cannot be sealed);
//! such a peer runs as the same user and could do worse anyway.
//!
//! Map: `config` ([`PosixConfig`], [`Backend`]), `create` (the backends
//! and the space reservation), `attach` (opening a peer's segment), `reap`
//! (file names and stale-file removal).

use std::fmt;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};
use std::ptr::NonNull;

use uct::ucs::{Error, Result};

use crate::proc_id::ProcessId;

mod attach;
mod config;
mod create;
mod reap;
#[cfg(test)]
mod tests;

pub use config::{Backend, PosixConfig, POSIX_TABLE};

/// A read-write `MAP_SHARED` mapping of a shared-memory file: a segment
/// this process created (the owner, which keeps the descriptor peers open)
/// or a peer's segment it attached to.
///
/// The segment hands out only a raw pointer: other processes may change
/// the bytes at any time, so no reference to them would be sound. Dropping
/// it unmaps the memory and closes the descriptor; the memory itself lives
/// on while any other process still maps it.
pub struct Segment {
    ptr: NonNull<u8>,
    len: usize,
    /// The owner's descriptor; `None` on the attached side.
    fd: Option<OwnedFd>,
}

// SAFETY: a Segment is an address range plus a descriptor. The range stays
// mapped until drop whichever thread holds the Segment, munmap and close
// may be called from any thread, and the Segment never reads or writes the
// bytes itself: all access goes through the raw pointer, whose users are
// responsible for synchronising (the memory is shared with other processes
// anyway, so it must be accessed as concurrently modified memory).
unsafe impl Send for Segment {}
// SAFETY: `&Segment` only gives out the pointer, length and descriptor
// number, all immutable; see the Send argument for the bytes themselves.
unsafe impl Sync for Segment {}

impl Segment {
    /// Creates a segment of `len` bytes (zero-filled, every page reserved)
    /// with the backend and directory of `config`.
    ///
    /// Errors: `len` of 0 or beyond `isize::MAX` is [`Error::InvalidParam`];
    /// not enough shared memory is [`Error::NoMemory`]; with the file
    /// backend a missing directory is [`Error::Unsupported`].
    pub fn create(len: usize, config: &PosixConfig) -> Result<Segment> {
        Segment::create_with_hole(len, 0..0, config)
    }

    /// Like [`Segment::create`], but the pages wholly inside `hole` are
    /// not reserved: they cost nothing until touched, and whoever touches
    /// one first reserves it ([`Reserver::reserve`]), or risks SIGBUS when
    /// shared memory runs out.
    pub fn create_with_hole(
        len: usize,
        hole: std::ops::Range<usize>,
        config: &PosixConfig,
    ) -> Result<Segment> {
        check_len(len)?;
        let page = page_size();
        let hole = hole.start.div_ceil(page) * page..hole.end / page * page;
        let fd = create::open_reserved(len, hole, config)?;
        let ptr = map(fd.as_fd(), len)?;
        Ok(Segment {
            ptr,
            len,
            fd: Some(fd),
        })
    }

    /// Maps `len` bytes of the segment that process `owner` holds open as
    /// descriptor `fd`.
    ///
    /// Errors: [`Error::Unreachable`] if the owner is gone (or its pid now
    /// belongs to another process), has no such descriptor, or may not be
    /// inspected by this process (another user, or ptrace restrictions);
    /// [`Error::InvalidAddr`] if the descriptor is not a regular file or is
    /// shorter than `len`; [`Error::InvalidParam`] for a `len` of 0 or
    /// beyond `isize::MAX`.
    pub fn attach(owner: ProcessId, fd: u32, len: usize) -> Result<Segment> {
        Segment::attach_with(owner, fd, len, |_, _| Ok(())).map(|(s, ())| s)
    }

    /// Like [`Segment::attach`], then runs `f` on the mapping while the
    /// descriptor is still open, so that it can reserve pages of a hole
    /// ([`Segment::create_with_hole`]) before touching them.
    pub fn attach_with<T>(
        owner: ProcessId,
        fd: u32,
        len: usize,
        f: impl FnOnce(&Segment, &Reserver<'_>) -> Result<T>,
    ) -> Result<(Segment, T)> {
        check_len(len)?;
        let file = attach::open_peer(owner, fd, len)?;
        let ptr = map(file.as_fd(), len)?;
        let seg = Segment { ptr, len, fd: None };
        let t = f(&seg, &Reserver(file.as_fd()))?;
        // The mapping keeps the memory; the descriptor is not needed.
        drop(file);
        Ok((seg, t))
    }

    /// The first byte; page aligned.
    pub fn as_ptr(&self) -> NonNull<u8> {
        self.ptr
    }

    /// Bytes mapped.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Always false: a segment has at least one byte.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The descriptor number peers pass to [`Segment::attach`], with this
    /// process's [`ProcessId`]; `None` for a segment attached from a peer.
    pub fn fd(&self) -> Option<u32> {
        self.fd.as_ref().map(|fd| fd.as_raw_fd() as u32)
    }
}

/// Reserves pages of an attached segment (see [`Segment::attach_with`]).
#[derive(Debug)]
pub struct Reserver<'a>(BorrowedFd<'a>);

impl Reserver<'_> {
    /// Allocates the pages holding bytes `off..off + len` of the segment, so
    /// that touching them cannot fail; [`Error::NoMemory`] when shared
    /// memory is exhausted.
    pub fn reserve(&self, off: usize, len: usize) -> Result<()> {
        create::allocate(self.0, off, len).map_err(|e| {
            Error::NoMemory(format!(
                "reserving {len} bytes at {off} of a shared segment: {e}"
            ))
        })
    }
}

fn page_size() -> usize {
    // SAFETY: sysconf has no memory effects.
    let n = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    usize::try_from(n).ok().filter(|&n| n > 0).unwrap_or(4096)
}

impl Drop for Segment {
    fn drop(&mut self) {
        // SAFETY: ptr..ptr+len is the mapping this Segment created and
        // nothing else unmaps; the Segment is going away, and users of the
        // pointer were told it is valid only while the Segment lives.
        let rc = unsafe { libc::munmap(self.ptr.as_ptr().cast(), self.len) };
        if rc != 0 {
            let e = std::io::Error::last_os_error();
            tracing::warn!(error = %e, len = self.len, "posix: munmap of a segment failed");
        }
        // The descriptor, if any, is closed when `fd` drops.
    }
}

impl fmt::Debug for Segment {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Segment")
            .field("ptr", &self.ptr)
            .field("len", &self.len)
            .field("fd", &self.fd())
            .finish()
    }
}

fn check_len(len: usize) -> Result<()> {
    if len == 0 || len > isize::MAX as usize {
        return Err(Error::InvalidParam(format!(
            "segment length {len}: expected 1 to {} bytes",
            isize::MAX
        )));
    }
    Ok(())
}

/// Maps `len` bytes of `fd` read-write and shared.
fn map(fd: BorrowedFd<'_>, len: usize) -> Result<NonNull<u8>> {
    // SAFETY: a new mapping at an address the kernel picks, so no existing
    // memory is affected; fd is open for reading and writing, and the
    // callers checked that the file covers `len` bytes.
    let p = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            len,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_SHARED,
            fd.as_raw_fd(),
            0,
        )
    };
    if p == libc::MAP_FAILED {
        let e = std::io::Error::last_os_error();
        return Err(if e.raw_os_error() == Some(libc::ENOMEM) {
            Error::NoMemory(format!("mapping a shared segment of {len} bytes: {e}"))
        } else {
            Error::io(format!("mapping a shared segment of {len} bytes"), e)
        });
    }
    NonNull::new(p.cast())
        .ok_or_else(|| Error::NoMemory("mmap of a shared segment returned null".to_string()))
}
