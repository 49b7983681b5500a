//! Who a process is and where it runs: the identity that shared-memory
//! addresses carry.
//!
//! * [`ProcessId`]: a pid plus the process's start time (field 22 of
//!   `/proc/<pid>/stat`, in clock ticks since boot). A pid alone is reused
//!   after the process exits; the pair names one process for the life of
//!   the host, so a peer is alive iff `/proc/<pid>/stat` still shows the
//!   same start time.
//! * [`HostId`]: what two processes must share to map each other's memory
//!   and use cross-memory attach: the same boot (kernel boot id), the same
//!   pid namespace (pids in addresses must mean the same process), the same
//!   network namespace (the wake-up sockets are abstract Unix sockets, which
//!   live in one) and the same effective user (`/proc/<pid>/fd` links and
//!   `process_vm_*` are refused across users).

use uct::ucs::{Error, Result};

/// One process on this host: pid and start time.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ProcessId {
    /// Process id in this pid namespace.
    pub pid: u32,
    /// Start time in clock ticks since boot.
    pub start_time: u64,
}

/// Bytes of an encoded [`ProcessId`].
pub const PROCESS_ID_LEN: usize = 12;

impl ProcessId {
    /// This process.
    pub fn current() -> Result<ProcessId> {
        ProcessId::of(std::process::id())
    }

    /// The process that now has `pid`; an error if there is none.
    pub fn of(pid: u32) -> Result<ProcessId> {
        let stat = std::fs::read(format!("/proc/{pid}/stat"))
            .map_err(|e| Error::Unreachable(format!("process {pid}: {e}")))?;
        let start_time = parse_start_time(&stat)
            .ok_or_else(|| Error::InvalidAddr(format!("/proc/{pid}/stat: unexpected format")))?;
        Ok(ProcessId { pid, start_time })
    }

    /// Whether this process still runs (a zombie counts as gone: it will
    /// never read or write again).
    pub fn is_alive(&self) -> bool {
        match std::fs::read(format!("/proc/{}/stat", self.pid)) {
            Ok(stat) => parse_start_time(&stat) == Some(self.start_time) && !is_zombie(&stat),
            Err(_) => false,
        }
    }

    /// Little-endian pid then start time.
    pub fn encode(&self) -> [u8; PROCESS_ID_LEN] {
        let mut out = [0u8; PROCESS_ID_LEN];
        out[..4].copy_from_slice(&self.pid.to_le_bytes());
        out[4..].copy_from_slice(&self.start_time.to_le_bytes());
        out
    }

    /// Reads an encoded id from the start of `b`; `None` if too short or
    /// the pid is 0.
    pub fn decode(b: &[u8]) -> Option<ProcessId> {
        let pid = u32::from_le_bytes(b.get(..4)?.try_into().ok()?);
        let start_time = u64::from_le_bytes(b.get(4..PROCESS_ID_LEN)?.try_into().ok()?);
        (pid != 0).then_some(ProcessId { pid, start_time })
    }
}

/// The fields after the command name, which is in parentheses and may
/// itself contain spaces and parentheses: split after the last `)`.
fn fields_after_comm(stat: &[u8]) -> Option<impl Iterator<Item = &[u8]>> {
    let close = stat.iter().rposition(|&b| b == b')')?;
    Some(
        stat[close + 1..]
            .split(|&b| b == b' ')
            .filter(|f| !f.is_empty()),
    )
}

/// Field 22 (starttime); field 3 (state) is the first after the name.
fn parse_start_time(stat: &[u8]) -> Option<u64> {
    let field = fields_after_comm(stat)?.nth(22 - 3)?;
    std::str::from_utf8(field).ok()?.trim().parse().ok()
}

fn is_zombie(stat: &[u8]) -> bool {
    fields_after_comm(stat)
        .and_then(|mut f| f.next())
        .is_some_and(|s| s == b"Z" || s == b"X")
}

/// Bytes of an encoded [`HostId`].
pub const HOST_ID_LEN: usize = 32;

/// What two processes must share to use shared memory and CMA.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HostId([u8; HOST_ID_LEN]);

impl HostId {
    /// This process's: boot id (16 bytes), pid-namespace inode (8 bytes),
    /// network-namespace inode (low 4 bytes), effective uid (4 bytes).
    pub fn current() -> Result<HostId> {
        let boot = std::fs::read_to_string("/proc/sys/kernel/random/boot_id")
            .map_err(|e| Error::io("reading the boot id", e))?;
        let hex: String = boot.trim().chars().filter(|c| *c != '-').collect();
        if hex.len() != 32 {
            return Err(Error::InvalidAddr(format!(
                "boot id {boot:?}: unexpected format"
            )));
        }
        let mut out = [0u8; HOST_ID_LEN];
        for (i, byte) in out[..16].iter_mut().enumerate() {
            *byte = u8::from_str_radix(&hex[2 * i..2 * i + 2], 16)
                .map_err(|_| Error::InvalidAddr(format!("boot id {boot:?}: not hex")))?;
        }
        use std::os::unix::fs::MetadataExt;
        let ns = |name: &str| {
            std::fs::metadata(format!("/proc/self/ns/{name}"))
                .map(|m| m.ino())
                .map_err(|e| Error::io(format!("reading /proc/self/ns/{name}"), e))
        };
        out[16..24].copy_from_slice(&ns("pid")?.to_le_bytes());
        out[24..28].copy_from_slice(&(ns("net")? as u32).to_le_bytes());
        // SAFETY: geteuid has no preconditions and cannot fail.
        let uid = unsafe { libc::geteuid() };
        out[28..32].copy_from_slice(&uid.to_le_bytes());
        Ok(HostId(out))
    }

    /// The encoded id.
    pub fn as_bytes(&self) -> &[u8; HOST_ID_LEN] {
        &self.0
    }

    /// Reads an encoded id; `None` unless `b` is exactly one.
    pub fn decode(b: &[u8]) -> Option<HostId> {
        Some(HostId(b.try_into().ok()?))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn current_process_is_alive_and_round_trips() {
        let me = ProcessId::current().unwrap();
        assert_eq!(me.pid, std::process::id());
        assert!(me.is_alive());
        assert_eq!(ProcessId::decode(&me.encode()), Some(me));
        let older = ProcessId {
            start_time: me.start_time.wrapping_add(1),
            ..me
        };
        assert!(!older.is_alive(), "a reused pid is another process");
        assert_eq!(ProcessId::decode(&[1, 2, 3]), None);
        assert_eq!(ProcessId::decode(&[0; PROCESS_ID_LEN]), None);
    }

    #[test]
    fn exited_child_is_dead() {
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let id = ProcessId::of(child.id()).unwrap();
        child.wait().unwrap();
        assert!(!id.is_alive());
    }

    #[test]
    fn stat_with_odd_command_names() {
        let mut s = b"42 (a) b) (c) S".to_vec();
        for i in 4..=22 {
            s.extend_from_slice(format!(" {i}").as_bytes());
        }
        assert_eq!(parse_start_time(&s), Some(22));
        assert!(!is_zombie(&s));
        assert!(is_zombie(b"42 (x) Z 1 2"));
        assert_eq!(parse_start_time(b"garbage"), None);
    }

    #[test]
    fn host_id_is_stable() {
        let a = HostId::current().unwrap();
        assert_eq!(a, HostId::current().unwrap());
        assert_eq!(HostId::decode(a.as_bytes()), Some(a));
        assert_eq!(HostId::decode(&[0; 5]), None);
    }
}
