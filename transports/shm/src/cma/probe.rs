//! Whether cross-memory attach works in this process, tested once.
//!
//! Like UCX's `cma` component: the Yama ptrace policy
//! (`/proc/sys/kernel/yama/ptrace_scope`, absent without Yama) must let
//! peers attach. Scope 0 (classic ptrace rules) is fine; scope 1 (only
//! ancestors may attach) is fine once this process declares every process
//! of its user a permitted tracer with `prctl(PR_SET_PTRACER,
//! PR_SET_PTRACER_ANY)` (so its peers may read and write it; that is what
//! CMA needs); scopes 2 and 3 (admin only, or no attach at all) rule CMA
//! out. Then a real `process_vm_readv` of a few bytes of this process's own
//! memory, through its own pid, shows whether the kernel has the call
//! (ENOSYS) and whether a seccomp filter or security module refuses it
//! (EPERM).
//!
//! It does not test access to other processes: that depends on them (same
//! user, their own Yama declaration, dumpable), and fails per operation.

use std::sync::OnceLock;

const PTRACE_SCOPE: &str = "/proc/sys/kernel/yama/ptrace_scope";

/// `Ok` if CMA works in this process, else why not. Tested on the first
/// call (which may call `prctl`, see the module doc); later calls return
/// the same answer.
pub fn probe() -> Result<(), String> {
    static RESULT: OnceLock<Result<(), String>> = OnceLock::new();
    RESULT.get_or_init(run).clone()
}

fn run() -> Result<(), String> {
    match std::fs::read_to_string(PTRACE_SCOPE) {
        Ok(text) => check_scope(&text, allow_any_tracer)?,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(format!("cma: cannot read {PTRACE_SCOPE}: {e}")),
    }
    read_self()
}

/// Judges the Yama scope in `text`; `allow` declares any tracer (scope 1).
fn check_scope(text: &str, allow: impl FnOnce() -> Result<(), String>) -> Result<(), String> {
    match text.trim().parse::<u32>() {
        Ok(0) => Ok(()),
        Ok(1) => allow(),
        Ok(n) => Err(format!(
            "cma: {PTRACE_SCOPE} is {n}: the Yama policy forbids attaching to peers"
        )),
        Err(_) => Err(format!(
            "cma: {PTRACE_SCOPE}: unexpected contents {:?}",
            text.trim()
        )),
    }
}

fn allow_any_tracer() -> Result<(), String> {
    // SAFETY: PR_SET_PTRACER takes one integer argument and touches no
    // memory of this process.
    let rc = unsafe {
        libc::prctl(
            libc::PR_SET_PTRACER,
            libc::PR_SET_PTRACER_ANY,
            0 as libc::c_ulong,
            0 as libc::c_ulong,
            0 as libc::c_ulong,
        )
    };
    if rc != 0 {
        let e = std::io::Error::last_os_error();
        return Err(format!(
            "cma: {PTRACE_SCOPE} is 1 and prctl(PR_SET_PTRACER, ANY) failed: {e}"
        ));
    }
    Ok(())
}

/// Reads 8 bytes of this process through its own pid.
fn read_self() -> Result<(), String> {
    let src: [u8; 8] = *b"cmaprobe";
    let mut dst = [0u8; 8];
    let local = libc::iovec {
        iov_base: dst.as_mut_ptr().cast(),
        iov_len: dst.len(),
    };
    let remote = libc::iovec {
        iov_base: src.as_ptr().cast_mut().cast(),
        iov_len: src.len(),
    };
    // SAFETY: both iovecs name live stack arrays of 8 bytes; the kernel
    // writes only `dst`, which nothing else references during the call.
    let n = unsafe { libc::process_vm_readv(libc::getpid(), &local, 1, &remote, 1, 0) };
    if n < 0 {
        let e = std::io::Error::last_os_error();
        let why = match e.raw_os_error() {
            Some(libc::ENOSYS) => "the kernel does not provide it",
            Some(libc::EPERM) => "refused by the security policy",
            _ => "failed",
        };
        return Err(format!("cma: process_vm_readv of this process: {why}: {e}"));
    }
    if n != 8 || dst != src {
        return Err(format!(
            "cma: process_vm_readv of this process read {n} bytes, not the 8 expected"
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scopes() {
        let ok = || Ok(());
        assert!(check_scope("0\n", || panic!("not asked")).is_ok());
        assert!(check_scope("1\n", ok).is_ok());
        let e = check_scope("1", || Err("no".into())).unwrap_err();
        assert_eq!(e, "no");
        for s in ["2\n", "3"] {
            assert!(check_scope(s, ok).unwrap_err().contains("forbids"), "{s}");
        }
        assert!(check_scope("x", ok).unwrap_err().contains("unexpected"));
    }

    #[test]
    fn answer_is_cached_and_consistent() {
        let first = probe();
        assert_eq!(probe(), first);
        match first {
            Ok(()) => assert_eq!(read_self(), Ok(())),
            Err(why) => eprintln!("CMA is not available on this host: {why}"),
        }
    }
}
