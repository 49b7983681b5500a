//! The copy loop over `process_vm_readv` / `process_vm_writev`.
//!
//! One operation is a list of local ranges and one remote range of the
//! same total length. Each system call moves at most one segment: a prefix
//! of what is left, of at most `seg_size` bytes, described by as many local
//! iovecs as it spans and one remote iovec. A call may move fewer bytes
//! than asked (the kernel stops at the first page it cannot reach, after
//! moving what came before); the loop continues from where it stopped, so
//! a call that fails after a partial one reports the fault, with the count
//! of bytes already moved.

use std::ffi::c_void;

use uct::Iov;

/// Which way the bytes go.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Dir {
    /// From the peer into the local ranges (`get_zcopy`).
    Read,
    /// From the local ranges into the peer (`put_zcopy`).
    Write,
}

/// Reusable storage for the local iovecs of one system call; empty
/// between operations.
#[derive(Debug, Default)]
pub(crate) struct Scratch(Vec<libc::iovec>);

// SAFETY: the iovecs are plain address ranges, filled and used only
// within one call of `copy` and cleared before it returns; between calls
// the vector holds none.
unsafe impl Send for Scratch {}

/// A system call failed: its errno, and the bytes moved before it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Stopped {
    /// The error number (`EFAULT` if a call moved nothing without one).
    pub(crate) errno: i32,
    /// Bytes moved by earlier calls.
    pub(crate) moved: usize,
}

/// Moves `total` bytes between `local` (whose lengths add up to `total`)
/// and `[remote, remote + total)` in process `pid`.
///
/// # Safety
///
/// Every range of `local` must be valid for reads (`Dir::Write`) or writes
/// (`Dir::Read`, and then not accessed by anyone else) during the call.
/// The remote range is not dereferenced here: the kernel checks it against
/// the peer's mappings.
pub(crate) unsafe fn copy(
    pid: libc::pid_t,
    dir: Dir,
    local: &[Iov],
    remote: u64,
    total: usize,
    seg_size: usize,
    scratch: &mut Scratch,
) -> Result<(), Stopped> {
    let out = copy_loop(pid, dir, local, remote, total, seg_size.max(1), scratch);
    scratch.0.clear();
    out
}

fn copy_loop(
    pid: libc::pid_t,
    dir: Dir,
    local: &[Iov],
    remote: u64,
    total: usize,
    seg_size: usize,
    scratch: &mut Scratch,
) -> Result<(), Stopped> {
    let limit = super::config::iov_max();
    // Cursor into `local`: entry and offset in it.
    let (mut entry, mut off) = (0usize, 0usize);
    let mut done = 0usize;
    while done < total {
        let want = seg_size.min(total - done);
        scratch.0.clear();
        let (mut i, mut o, mut n) = (entry, off, 0usize);
        while n < want && scratch.0.len() < limit {
            let Some(v) = local.get(i) else { break };
            let take = v.len.saturating_sub(o).min(want - n);
            if take > 0 {
                scratch.0.push(libc::iovec {
                    iov_base: v.ptr.wrapping_add(o).cast_mut().cast::<c_void>(),
                    iov_len: take,
                });
                n += take;
                o += take;
            }
            if o >= v.len {
                i += 1;
                o = 0;
            }
        }
        if n == 0 {
            // The local lengths add up to less than `total`.
            return Err(Stopped {
                errno: libc::EINVAL,
                moved: done,
            });
        }
        let Some(at) = remote
            .checked_add(done as u64)
            .and_then(|a| usize::try_from(a).ok())
        else {
            return Err(Stopped {
                errno: libc::EFAULT,
                moved: done,
            });
        };
        let rv = libc::iovec {
            iov_base: std::ptr::without_provenance_mut::<c_void>(at),
            iov_len: n,
        };
        let (lp, lc) = (scratch.0.as_ptr(), scratch.0.len() as libc::c_ulong);
        // SAFETY: `lp` points to `lc` initialized iovecs naming parts of
        // `local`, which the caller guarantees valid for this direction;
        // `rv` is one iovec on the stack. The kernel dereferences the
        // remote address in the peer only, checking it.
        let r = unsafe {
            match dir {
                Dir::Read => libc::process_vm_readv(pid, lp, lc, &rv, 1, 0),
                Dir::Write => libc::process_vm_writev(pid, lp, lc, &rv, 1, 0),
            }
        };
        if r < 0 {
            let errno = std::io::Error::last_os_error()
                .raw_os_error()
                .unwrap_or(libc::EIO);
            if errno == libc::EINTR {
                continue;
            }
            return Err(Stopped { errno, moved: done });
        }
        let moved = r.unsigned_abs().min(n);
        if moved == 0 {
            return Err(Stopped {
                errno: libc::EFAULT,
                moved: done,
            });
        }
        done += moved;
        // Advance the cursor by `moved` bytes.
        let mut left = moved;
        while left > 0 {
            let Some(v) = local.get(entry) else { break };
            let take = (v.len - off.min(v.len)).min(left);
            left -= take;
            off += take;
            if off >= v.len {
                entry += 1;
                off = 0;
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pattern(seed: u8, len: usize) -> Vec<u8> {
        (0..len)
            .map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed))
            .collect()
    }

    fn me() -> libc::pid_t {
        std::process::id() as libc::pid_t
    }

    /// Reads and writes this process's own memory in odd segment sizes,
    /// through iovs with empty and uneven entries.
    #[test]
    fn segments_and_iov_cursor() {
        if !super::super::tests::available() {
            return;
        }
        let lens = [0usize, 1, 4095, 0, 7, 4096 * 3 + 5];
        let total: usize = lens.iter().sum();
        let src = pattern(3, total);
        for seg in [1usize, 3, 4096, 5000, total - 1, total, usize::MAX] {
            // Get: scatter `src` into pieces of `dst`.
            let mut dst = vec![0u8; total + lens.len()];
            let mut iov = Vec::new();
            let mut at = 0;
            for &l in &lens {
                iov.push(Iov {
                    ptr: dst.as_mut_ptr().wrapping_add(at),
                    len: l,
                });
                at += l + 1;
            }
            let mut s = Scratch::default();
            let remote = src.as_ptr().expose_provenance() as u64;
            // SAFETY: `iov` names disjoint parts of `dst`, unused meanwhile.
            unsafe { copy(me(), Dir::Read, &iov, remote, total, seg, &mut s) }.unwrap();
            assert!(s.0.is_empty());
            let mut got = Vec::new();
            let mut at = 0;
            for &l in &lens {
                got.extend_from_slice(&dst[at..at + l]);
                assert_eq!(dst[at + l], 0, "gap after an entry, seg {seg}");
                at += l + 1;
            }
            assert_eq!(got, src, "seg {seg}");

            // Put: gather the pieces back into a fresh buffer.
            let mut back = vec![0u8; total];
            let remote = back.as_mut_ptr().expose_provenance() as u64;
            // SAFETY: `iov` is read only; `back` is written by the kernel
            // while no reference to it is used.
            unsafe { copy(me(), Dir::Write, &iov, remote, total, seg, &mut s) }.unwrap();
            assert_eq!(back, src, "seg {seg}");
        }
    }

    #[test]
    fn faults_report_what_moved() {
        if !super::super::tests::available() {
            return;
        }
        let mut dst = [0u8; 16];
        let iov = [Iov {
            ptr: dst.as_mut_ptr(),
            len: 16,
        }];
        let mut s = Scratch::default();
        // Page 0 is never mapped.
        // SAFETY: `dst` is valid and unused during the call.
        let e = unsafe { copy(me(), Dir::Read, &iov, 64, 16, 4, &mut s) }.unwrap_err();
        assert_eq!(
            e,
            Stopped {
                errno: libc::EFAULT,
                moved: 0
            }
        );
        assert_eq!(dst, [0u8; 16]);
        // More bytes asked than the iov holds: what fits moves, then stops.
        let src = [7u8; 17];
        let remote = src.as_ptr().expose_provenance() as u64;
        // SAFETY: as above.
        let e = unsafe { copy(me(), Dir::Read, &iov, remote, 17, 4, &mut s) }.unwrap_err();
        assert_eq!(
            e,
            Stopped {
                errno: libc::EINVAL,
                moved: 16
            }
        );
        assert!(s.0.is_empty());
        assert_eq!(dst, [7u8; 16]);
    }

    /// A remote range whose second page is unmapped: the first call moves
    /// the first page, the next one fails; both are reported.
    #[test]
    fn partial_transfer_then_fault() {
        if !super::super::tests::available() {
            return;
        }
        // SAFETY: sysconf has no preconditions.
        let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) } as usize;
        // SAFETY: an anonymous private mapping of two pages, ours alone.
        let map = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                2 * page,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        assert_ne!(map, libc::MAP_FAILED);
        let first = map.cast::<u8>();
        // SAFETY: the first page is mapped read-write; the second is
        // unmapped and never touched from Rust.
        unsafe {
            first.write_bytes(0x5c, page);
            assert_eq!(libc::munmap(first.add(page).cast(), page), 0);
        }
        let mut dst = vec![0u8; 2 * page];
        let iov = [Iov {
            ptr: dst.as_mut_ptr(),
            len: 2 * page,
        }];
        let remote = first.expose_provenance() as u64;
        let mut s = Scratch::default();
        // SAFETY: `dst` is valid and unused during the call.
        let e = unsafe { copy(me(), Dir::Read, &iov, remote, 2 * page, 2 * page, &mut s) };
        assert_eq!(
            e.unwrap_err(),
            Stopped {
                errno: libc::EFAULT,
                moved: page
            }
        );
        assert!(dst[..page].iter().all(|&b| b == 0x5c));
        assert!(dst[page..].iter().all(|&b| b == 0));
        // SAFETY: unmaps the page mapped above.
        assert_eq!(unsafe { libc::munmap(map, page) }, 0);
    }
}
