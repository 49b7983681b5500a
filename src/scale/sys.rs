//! What the scale benchmark reads of its own process: resident memory,
//! its peak, open file descriptors, and the descriptor limit.

/// A value in kB from `/proc/self/status` (`VmRSS`, `VmHWM`), or 0.
fn status_kb(field: &str) -> u64 {
    let Ok(s) = std::fs::read_to_string("/proc/self/status") else {
        return 0;
    };
    s.lines()
        .find_map(|l| l.strip_prefix(field)?.strip_prefix(':'))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .unwrap_or(0)
}

/// Resident memory now, in kB.
pub(crate) fn rss_kb() -> u64 {
    status_kb("VmRSS")
}

/// Peak resident memory of the process so far, in kB.
pub(crate) fn hwm_kb() -> u64 {
    status_kb("VmHWM")
}

/// Open file descriptors.
pub(crate) fn fds() -> u64 {
    std::fs::read_dir("/proc/self/fd").map_or(0, |d| d.count() as u64)
}

/// Raises the soft descriptor limit to the hard one; returns the limit.
pub(crate) fn raise_nofile() -> u64 {
    let mut r = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: `r` is a valid rlimit for the kernel to fill in and read.
    unsafe {
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut r) != 0 {
            return 0;
        }
        r.rlim_cur = r.rlim_max;
        if libc::setrlimit(libc::RLIMIT_NOFILE, &r) != 0 {
            return 0;
        }
    }
    r.rlim_cur
}

/// Makes standard input non-blocking, so a serving loop can poll it.
pub(crate) fn stdin_nonblocking() -> std::io::Result<()> {
    // SAFETY: fcntl on descriptor 0 with integer arguments.
    unsafe {
        let fl = libc::fcntl(0, libc::F_GETFL);
        if fl < 0 || libc::fcntl(0, libc::F_SETFL, fl | libc::O_NONBLOCK) < 0 {
            return Err(std::io::Error::last_os_error());
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_its_own_process() {
        assert!(rss_kb() > 0);
        assert!(hwm_kb() >= rss_kb());
        assert!(fds() >= 3);
    }
}
