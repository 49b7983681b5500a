//! Host identity and small system queries.
//!
//! [`host_id`] tells whether two processes share a host for the purposes of
//! shared memory and loopback: it hashes the kernel's boot id together with
//! the network namespace, so two containers with their own network
//! namespaces on one machine count as two hosts.

use std::os::unix::fs::MetadataExt;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::OnceLock;

/// 64-bit FNV-1a, a small stable hash (the same value on every platform and
/// release, unlike `std`'s `DefaultHasher`).
#[derive(Debug, Clone, Copy)]
pub struct Fnv1a(u64);

impl Fnv1a {
    const OFFSET: u64 = 0xcbf2_9ce4_8422_2325;
    const PRIME: u64 = 0x0000_0100_0000_01b3;

    /// A hasher with nothing written yet.
    pub fn new() -> Fnv1a {
        Fnv1a(Self::OFFSET)
    }

    /// Adds `data` to the hash.
    pub fn write(&mut self, data: &[u8]) {
        for &b in data {
            self.0 ^= u64::from(b);
            self.0 = self.0.wrapping_mul(Self::PRIME);
        }
    }

    /// The hash of everything written.
    pub fn finish(&self) -> u64 {
        self.0
    }
}

impl Default for Fnv1a {
    fn default() -> Fnv1a {
        Fnv1a::new()
    }
}

/// FNV-1a of `data`.
pub fn fnv1a64(data: &[u8]) -> u64 {
    let mut h = Fnv1a::new();
    h.write(data);
    h.finish()
}

/// An id that is equal for processes on the same host (same boot of the
/// same kernel, same network namespace) and, with high probability,
/// different otherwise. Never 0. Computed once per process.
pub fn host_id() -> u64 {
    static ID: OnceLock<u64> = OnceLock::new();
    *ID.get_or_init(|| {
        let boot_id = std::fs::read("/proc/sys/kernel/random/boot_id").ok();
        let netns = std::fs::metadata("/proc/self/ns/net").ok().map(|m| m.ino());
        host_id_from(boot_id.as_deref(), netns, &hostname())
    })
}

/// [`host_id`] from its inputs: the boot id (falling back to the host name
/// when absent) and the inode of the network namespace, if known.
pub fn host_id_from(boot_id: Option<&[u8]>, netns_inode: Option<u64>, hostname: &str) -> u64 {
    let mut h = Fnv1a::new();
    match boot_id.map(<[u8]>::trim_ascii) {
        Some(id) if !id.is_empty() => {
            h.write(b"boot:");
            h.write(id);
        }
        _ => {
            h.write(b"host:");
            h.write(hostname.as_bytes());
        }
    }
    if let Some(ino) = netns_inode {
        h.write(b"netns:");
        h.write(&ino.to_le_bytes());
    }
    h.finish().max(1)
}

/// The host name (`gethostname`), or `"localhost"` if it cannot be read.
/// Under Miri, which has no `gethostname`, the kernel's file of it.
#[cfg(miri)]
pub fn hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|h| h.trim().to_string())
        .unwrap_or_else(|_| "localhost".to_string())
}

/// The host name (`gethostname`), or `"localhost"` if it cannot be read.
#[cfg(not(miri))]
pub fn hostname() -> String {
    let mut buf = [0u8; 256];
    // SAFETY: `buf` is valid for writes of `buf.len()` bytes; gethostname
    // writes at most that many and does not keep the pointer.
    let rc = unsafe { libc::gethostname(buf.as_mut_ptr().cast(), buf.len()) };
    if rc != 0 {
        return "localhost".to_string();
    }
    // A name that fills the buffer may lack its terminator; take it all.
    let len = buf.iter().position(|&b| b == 0).unwrap_or(buf.len());
    String::from_utf8_lossy(&buf[..len]).into_owned()
}

/// The size of a memory page in bytes (4096 if the system does not say).
pub fn page_size() -> usize {
    static SIZE: OnceLock<usize> = OnceLock::new();
    *SIZE.get_or_init(|| {
        // SAFETY: sysconf has no memory-safety preconditions.
        let v = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
        usize::try_from(v).ok().filter(|&s| s > 0).unwrap_or(4096)
    })
}

/// Nanoseconds of `CLOCK_MONOTONIC`: a clock that never goes back, with an
/// arbitrary start, comparable between processes of one host (unlike
/// `Instant`, whose value cannot be sent).
pub fn monotonic_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec; CLOCK_MONOTONIC always
    // exists on Linux, so the call cannot fail.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    (ts.tv_sec as u64)
        .saturating_mul(1_000_000_000)
        .saturating_add(ts.tv_nsec as u64)
}

/// The number of CPUs this process may run on (at least 1).
pub fn cpu_count() -> usize {
    std::thread::available_parallelism().map_or(1, usize::from)
}

/// The cached pid; 0 until asked for, and again in the child of a `fork`.
static PID: AtomicU32 = AtomicU32::new(0);

extern "C" fn forget_pid() {
    PID.store(0, Ordering::Relaxed);
}

/// This process's id, without a system call after the first (glibc no
/// longer caches it, and `getpid` costs a kernel entry). A child made by
/// `fork` (through libc, which runs the `pthread_atfork` handlers) asks the
/// kernel again; a child made by a raw `clone` system call is not seen,
/// as with any library that caches the pid.
pub fn pid() -> u32 {
    let p = PID.load(Ordering::Relaxed);
    if p != 0 {
        return p;
    }
    static HANDLER: OnceLock<()> = OnceLock::new();
    HANDLER.get_or_init(|| {
        // SAFETY: `forget_pid` is a plain function that only stores to an
        // atomic, which is allowed in a forked child.
        unsafe { libc::pthread_atfork(None, None, Some(forget_pid)) };
    });
    let p = std::process::id();
    PID.store(p, Ordering::Relaxed);
    p
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pid_is_the_process_id_and_a_fork_child_gets_its_own() {
        assert_eq!(pid(), std::process::id());
        assert_eq!(pid(), std::process::id());
        let mut fds = [0i32; 2];
        // SAFETY: `fds` has room for the two descriptors.
        assert_eq!(unsafe { libc::pipe(fds.as_mut_ptr()) }, 0);
        // SAFETY: the child only calls async-signal-safe functions
        // (getpid through `pid`'s slow path after the atfork handler reset
        // the cache, write, _exit) before exiting.
        let child = unsafe { libc::fork() };
        assert!(child >= 0);
        if child == 0 {
            let ok = pid() == unsafe { libc::getpid() } as u32;
            let b = [u8::from(ok)];
            unsafe {
                libc::write(fds[1], b.as_ptr().cast(), 1);
                libc::_exit(0);
            }
        }
        let mut b = [0u8; 1];
        // SAFETY: reading one byte into `b`; then reaping the child.
        let n = unsafe { libc::read(fds[0], b.as_mut_ptr().cast(), 1) };
        unsafe {
            libc::waitpid(child, std::ptr::null_mut(), 0);
            libc::close(fds[0]);
            libc::close(fds[1]);
        }
        assert_eq!((n, b[0]), (1, 1), "the child saw its own pid");
        assert_eq!(pid(), std::process::id());
    }

    #[test]
    fn fnv1a_test_vectors() {
        assert_eq!(fnv1a64(b""), 0xcbf2_9ce4_8422_2325);
        assert_eq!(fnv1a64(b"a"), 0xaf63_dc4c_8601_ec8c);
        assert_eq!(fnv1a64(b"foobar"), 0x8594_4171_f739_67e8);
        let mut h = Fnv1a::default();
        h.write(b"foo");
        h.write(b"bar");
        assert_eq!(h.finish(), fnv1a64(b"foobar"));
    }

    #[test]
    fn host_id_inputs() {
        let boot = b"0f3c1d2e-aaaa-bbbb-cccc-000000000001\n";
        let a = host_id_from(Some(boot), Some(4026531992), "n1");
        // Same boot and namespace: same id, whatever the host name.
        assert_eq!(a, host_id_from(Some(boot), Some(4026531992), "n2"));
        // The trailing newline of the proc file does not matter.
        assert_eq!(
            a,
            host_id_from(Some(&boot[..boot.len() - 1]), Some(4026531992), "n1")
        );
        // Another network namespace is another host.
        assert_ne!(a, host_id_from(Some(boot), Some(4026532000), "n1"));
        // Another boot is another host.
        let other = b"0f3c1d2e-aaaa-bbbb-cccc-000000000002";
        assert_ne!(a, host_id_from(Some(other), Some(4026531992), "n1"));
        // Without a boot id the host name decides.
        assert_ne!(
            host_id_from(None, None, "n1"),
            host_id_from(None, None, "n2")
        );
        assert_eq!(
            host_id_from(Some(b""), None, "n1"),
            host_id_from(None, None, "n1")
        );
    }

    #[test]
    fn host_id_is_stable() {
        let id = host_id();
        assert_ne!(id, 0);
        assert_eq!(id, host_id());
    }

    #[test]
    fn small_queries() {
        assert!(!hostname().is_empty());
        let p = page_size();
        assert!(p >= 4096 && p.is_power_of_two());
        let a = monotonic_ns();
        let b = monotonic_ns();
        assert!(b >= a && a > 0);
        assert!(cpu_count() >= 1);
    }
}
