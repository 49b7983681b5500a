//! Names of segment files, and removal of the files that dead processes
//! left behind.
//!
//! A segment file is named `rucx-<pid>-<start_time>-<counter>` after the
//! process that creates it, and unlinked right after it is opened. Only a
//! process that dies between `open` and `unlink` leaves one; since the
//! name says which process that was, anyone creating a segment in the same
//! directory can tell the file is stale (its process is gone) and unlink
//! it. Files of live processes, and names of any other form, are left
//! alone.
//!
//! A name read from a shared directory may come from another pid namespace
//! that shares the directory, where the pid means a different process; a
//! live file taken for stale and unlinked does no harm, as its creator
//! already holds the descriptor (it tolerates its own unlink finding the
//! name gone) and peers attach through the descriptor, never by name.

use std::path::Path;

use crate::proc_id::ProcessId;

/// The file name of segment `counter` of process `owner`.
pub(super) fn file_name(owner: ProcessId, counter: u64) -> String {
    format!("rucx-{}-{}-{counter}", owner.pid, owner.start_time)
}

/// The process that created a file named by [`file_name`]; `None` for any
/// other name.
pub(super) fn parse_name(name: &str) -> Option<ProcessId> {
    let mut parts = name.strip_prefix("rucx-")?.split('-');
    let pid = number(parts.next()?)?;
    let start_time = number(parts.next()?)?;
    number(parts.next()?)?;
    if parts.next().is_some() {
        return None;
    }
    Some(ProcessId {
        pid: u32::try_from(pid).ok()?,
        start_time,
    })
}

/// Only plain decimal digits: no sign, no spaces.
fn number(s: &str) -> Option<u64> {
    if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    s.parse().ok()
}

/// Unlinks the segment files in `dir` whose process is no longer alive;
/// returns how many it removed. Failures (a file of another user in a
/// sticky directory, a file someone else just removed) are logged at debug
/// level and skipped: reaping is best effort and never fails a create.
pub(super) fn reap_stale(dir: &Path) -> usize {
    let entries = match std::fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(e) => {
            tracing::debug!(dir = %dir.display(), error = %e, "posix: cannot scan for stale segment files");
            return 0;
        }
    };
    let mut reaped = 0;
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(owner) = name.to_str().and_then(parse_name) else {
            continue;
        };
        if owner.is_alive() {
            continue;
        }
        let path = entry.path();
        match std::fs::remove_file(&path) {
            Ok(()) => {
                reaped += 1;
                tracing::debug!(
                    path = %path.display(),
                    pid = owner.pid,
                    "posix: removed the segment file of a process that is gone"
                );
            }
            Err(e) => {
                tracing::debug!(path = %path.display(), error = %e, "posix: cannot remove a stale segment file");
            }
        }
    }
    reaped
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        let id = ProcessId {
            pid: 4242,
            start_time: 987_654_321,
        };
        let name = file_name(id, 7);
        assert_eq!(name, "rucx-4242-987654321-7");
        assert_eq!(parse_name(&name), Some(id));
    }

    #[test]
    fn other_names_are_not_ours() {
        for name in [
            "rucx-1-2",
            "rucx-1-2-3-4",
            "rucx-1-2-x",
            "rucx--2-3",
            "rucx-+1-2-3",
            "rucx-1- 2-3",
            "rucx-99999999999-2-3",
            "rucx-1-99999999999999999999999-3",
            "xrucx-1-2-3",
            "rucx_test_dir",
            "sem.rucx-1-2-3",
        ] {
            assert_eq!(parse_name(name), None, "{name:?}");
        }
    }
}
