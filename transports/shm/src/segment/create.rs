//! The owner's side: a descriptor of a new, fully reserved shared-memory
//! file from the configured backend.

use std::fs::OpenOptions;
use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd};
use std::os::unix::fs::OpenOptionsExt;
use std::ops::Range;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};

use uct::ucs::{Error, Result};

use super::config::{Backend, PosixConfig};
use super::reap;
use crate::proc_id::ProcessId;

/// Segment files this process has created: the last part of their names.
static COUNTER: AtomicU64 = AtomicU64::new(0);

/// Names tried before giving up when they are taken (only possible with a
/// persistent directory holding files from before a reboot).
const NAME_ATTEMPTS: usize = 16;

/// A new file of `len` bytes, every page outside `hole` reserved, from
/// `config`'s backend.
pub(super) fn open_reserved(
    len: usize,
    hole: Range<usize>,
    config: &PosixConfig,
) -> Result<OwnedFd> {
    let dir = Path::new(&config.dir);
    let hole = &hole;
    match config.backend {
        Backend::Memfd => memfd(len, hole),
        Backend::File => file(dir, len, hole),
        Backend::Auto => match open_memfd() {
            Ok(fd) => reserve_memfd(fd, len, hole),
            Err(memfd_err) => {
                tracing::debug!(error = %memfd_err, dir = %dir.display(),
                    "posix: memfd_create failed, using a file");
                file(dir, len, hole).map_err(|e| match e {
                    Error::Unsupported(msg) => {
                        Error::Unsupported(format!("{msg} (and memfd_create failed: {memfd_err})"))
                    }
                    other => other,
                })
            }
        },
    }
}

fn memfd(len: usize, hole: &Range<usize>) -> Result<OwnedFd> {
    let fd = open_memfd().map_err(|e| match e.raw_os_error() {
        Some(libc::ENOSYS) | Some(libc::EPERM) | Some(libc::EACCES) => Error::Unsupported(format!(
            "memfd_create: {e} (set RUCX_POSIX_BACKEND=file or auto to use a file instead)"
        )),
        Some(libc::EMFILE) | Some(libc::ENFILE) | Some(libc::ENOMEM) => {
            Error::NoMemory(format!("memfd_create: {e}"))
        }
        _ => Error::io("memfd_create", e),
    })?;
    reserve_memfd(fd, len, hole)
}

fn open_memfd() -> io::Result<OwnedFd> {
    // The syscall rather than the libc wrapper, which old C libraries lack:
    // an old kernel then answers ENOSYS, which `auto` handles.
    // SAFETY: the name is a NUL-terminated string that outlives the call,
    // the flags are valid, and the result is checked below.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_memfd_create,
            c"rucx-segment".as_ptr(),
            libc::MFD_CLOEXEC | libc::MFD_ALLOW_SEALING,
        )
    };
    if rc < 0 {
        return Err(io::Error::last_os_error());
    }
    let raw = i32::try_from(rc).map_err(|_| io::Error::other("memfd_create: bad descriptor"))?;
    // SAFETY: memfd_create returned a new descriptor that nothing else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(raw) })
}

/// Sizes the memfd, then seals its size: no one who opens it through
/// `/proc` can shrink it under the mappings (which would raise SIGBUS).
fn reserve_memfd(fd: OwnedFd, len: usize, hole: &Range<usize>) -> Result<OwnedFd> {
    reserve(
        fd.as_fd(),
        len,
        hole,
        "memfd (anonymous shared memory)",
        None,
    )?;
    let seals = libc::F_SEAL_SHRINK | libc::F_SEAL_GROW | libc::F_SEAL_SEAL;
    // SAFETY: F_ADD_SEALS on a descriptor this function owns; it only
    // changes what later ftruncate/fallocate calls may do.
    if unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_ADD_SEALS, seals) } != 0 {
        let e = io::Error::last_os_error();
        tracing::debug!(error = %e, "posix: cannot seal the size of a memfd segment");
    }
    Ok(fd)
}

/// A file in `dir`, unlinked at once, then sized.
fn file(dir: &Path, len: usize, hole: &Range<usize>) -> Result<OwnedFd> {
    match std::fs::metadata(dir) {
        Ok(m) if m.is_dir() => {}
        Ok(_) => {
            return Err(Error::Unsupported(format!(
                "{}: not a directory; set RUCX_POSIX_DIR to a tmpfs directory \
                 or RUCX_POSIX_BACKEND=memfd",
                dir.display()
            )))
        }
        Err(e) => {
            return Err(Error::Unsupported(format!(
                "{} missing: {e}; set RUCX_POSIX_DIR to a tmpfs directory \
                 or RUCX_POSIX_BACKEND=memfd",
                dir.display()
            )))
        }
    }
    let me = ProcessId::current()?;
    reap::reap_stale(dir);
    let fd = open_unlinked(dir, me)?;
    reserve(fd.as_fd(), len, hole, &dir.display().to_string(), Some(dir))?;
    Ok(fd)
}

/// Creates `rucx-<pid>-<start_time>-<counter>` in `dir` and unlinks it.
fn open_unlinked(dir: &Path, me: ProcessId) -> Result<OwnedFd> {
    for _ in 0..NAME_ATTEMPTS {
        let path = dir.join(reap::file_name(me, COUNTER.fetch_add(1, Ordering::Relaxed)));
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create_new(true)
            .mode(0o600)
            .custom_flags(libc::O_NOFOLLOW)
            .open(&path);
        let file = match file {
            Ok(file) => file,
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => continue,
            Err(e) if e.raw_os_error() == Some(libc::ENOSPC) => {
                return Err(Error::NoMemory(format!(
                    "creating a segment file {}: {e}",
                    path.display()
                )))
            }
            Err(e) => {
                return Err(Error::io(
                    format!("creating a segment file {}", path.display()),
                    e,
                ))
            }
        };
        match std::fs::remove_file(&path) {
            Ok(()) => {}
            // Someone took it for stale and removed it: it is gone either
            // way, and the descriptor is what matters.
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            Err(e) => {
                return Err(Error::io(
                    format!("unlinking the segment file {}", path.display()),
                    e,
                ))
            }
        }
        return Ok(file.into());
    }
    Err(Error::Unsupported(format!(
        "{}: {NAME_ATTEMPTS} segment file names of this process were taken",
        dir.display()
    )))
}

/// Sets the size of `fd` to `len` and allocates every page outside `hole`,
/// so that touching that memory later cannot fail. `place` names where the
/// memory comes from; `dir`, if any, is asked for its free space on failure.
fn reserve(
    fd: BorrowedFd<'_>,
    len: usize,
    hole: &Range<usize>,
    place: &str,
    dir: Option<&Path>,
) -> Result<()> {
    let size = libc::off_t::try_from(len)
        .map_err(|_| Error::InvalidParam(format!("segment length {len}: too large")))?;
    let no_space = |e: io::Error| {
        let free = dir
            .and_then(free_space)
            .map_or(String::new(), |(free, total)| {
                format!(", {free} of {total} bytes free")
            });
        Error::NoMemory(format!(
            "cannot reserve {len} bytes of shared memory in {place}: {e}{free}"
        ))
    };
    loop {
        // SAFETY: ftruncate on a descriptor the caller owns; no memory is
        // involved.
        if unsafe { libc::ftruncate(fd.as_raw_fd(), size) } == 0 {
            break;
        }
        let e = io::Error::last_os_error();
        match e.raw_os_error() {
            Some(libc::EINTR) => continue,
            Some(libc::EFBIG) | Some(libc::ENOSPC) => return Err(no_space(e)),
            _ => return Err(Error::io(format!("sizing a segment in {place}"), e)),
        }
    }
    let hole = hole.start.min(len)..hole.end.clamp(hole.start.min(len), len);
    for (off, n) in [(0, hole.start), (hole.end, len - hole.end)] {
        allocate(fd, off, n).map_err(|e| match e.raw_os_error() {
            Some(libc::ENOSPC) | Some(libc::EFBIG) | Some(libc::ENOMEM) => no_space(e),
            _ => Error::io(
                format!("reserving {len} bytes of shared memory in {place}"),
                e,
            ),
        })?;
    }
    Ok(())
}

/// Allocates the pages of `fd` holding bytes `off..off + len` (nothing for
/// an empty range), so that touching them cannot fail later.
pub(super) fn allocate(fd: BorrowedFd<'_>, off: usize, len: usize) -> io::Result<()> {
    if len == 0 {
        return Ok(());
    }
    let (Ok(o), Ok(n)) = (libc::off_t::try_from(off), libc::off_t::try_from(len)) else {
        return Err(io::Error::from_raw_os_error(libc::EFBIG));
    };
    loop {
        // SAFETY: posix_fallocate on a descriptor the caller holds; it
        // returns the error number instead of setting errno.
        match unsafe { libc::posix_fallocate(fd.as_raw_fd(), o, n) } {
            0 => return Ok(()),
            libc::EINTR => continue,
            rc => return Err(io::Error::from_raw_os_error(rc)),
        }
    }
}

/// Free and total bytes of the file system holding `dir`.
// The statvfs field types differ between targets (u32 or u64).
#[allow(clippy::unnecessary_cast)]
pub(super) fn free_space(dir: &Path) -> Option<(u64, u64)> {
    use std::os::unix::ffi::OsStrExt;
    let path = std::ffi::CString::new(dir.as_os_str().as_bytes()).ok()?;
    let mut st = std::mem::MaybeUninit::<libc::statvfs>::uninit();
    // SAFETY: path is NUL-terminated and st points to writable space for
    // one statvfs, which the call fills when it returns 0.
    if unsafe { libc::statvfs(path.as_ptr(), st.as_mut_ptr()) } != 0 {
        return None;
    }
    // SAFETY: statvfs returned 0, so it filled st.
    let st = unsafe { st.assume_init() };
    let frsize = st.f_frsize as u64;
    Some((
        (st.f_bavail as u64).saturating_mul(frsize),
        (st.f_blocks as u64).saturating_mul(frsize),
    ))
}
